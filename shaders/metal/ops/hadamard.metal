// The Hadamard transform y = scale * (H_m (x) H_{2^k}) x over rows of
// n = m * 2^k elements, from one template hadamard_kernel<T, M, E>.
//
// One threadgroup per row, viewed as [M, 2^k]. Thread (simdgroup s, lane l)
// owns the columns c = l + 32 * (r + E * s), r < E, of all M sub-rows: M * E
// values in registers (ops_params.h). The Sylvester transform along the
// columns runs over the bits of c from low to high: lane bits by
// simd_shuffle_xor, register bits inside the thread, simdgroup bits through
// threadgroup memory (HAD_CHUNK registers of every thread at a time,
// barriered butterflies). Then H_M along the sub-rows, inside the thread
// (the sign masks of hadamard_tables.h, unrolled for each M). f32 math, one
// cast per store. In place (y == x) works: each element is read and written
// only by its owner thread, reads first.
#include <metal_stdlib>

#include "../common/dtype.h"
#include "hadamard_tables.h"
#include "ops_params.h"

using namespace metal;

#define HAD_CHUNK 8  // registers per thread staged in threadgroup memory at once

constant uint ops_had12[12] = OPS_HADAMARD_12;
constant uint ops_had20[20] = OPS_HADAMARD_20;
constant uint ops_had28[28] = OPS_HADAMARD_28;

// Row i of H_M as a mask of its -1 entries.
template <int M>
inline uint ops_had_mask(int i) {
  return M == 12 ? ops_had12[i] : (M == 20 ? ops_had20[i] : ops_had28[i]);
}

template <typename T, int M, int E>
[[kernel]] void hadamard_kernel(device const T* x [[buffer(0)]],
                                device T* y [[buffer(1)]],
                                constant HadamardParams& p [[buffer(2)]],
                                uint row [[threadgroup_position_in_grid]],
                                uint tid [[thread_index_in_threadgroup]],
                                uint nt [[threads_per_threadgroup]],
                                uint lane [[thread_index_in_simdgroup]],
                                uint sg [[simdgroup_index_in_threadgroup]]) {
  static_assert(M * E <= HAD_MAX_REGS, "too many registers per thread");
  static_assert(HAD_CHUNK * 1024 <= HAD_TG_FLOATS, "the staging buffer must hold a chunk of 1024 threads");
  threadgroup float buf[HAD_TG_FLOATS];
  const uint cols = p.n / uint(M);
  const uint lanes = 1u << p.lane_bits;  // below 32 only when 2^k < 32 (then E = 1, one simdgroup)
  const bool live = lane < lanes;
  device const T* xr = x + ulong(row) * p.x_stride;
  device T* yr = y + ulong(row) * p.y_stride;

  float v[M * E];
  for (int j = 0; j < M; ++j) {
    for (int r = 0; r < E; ++r) {
      const uint c = lane + 32u * (uint(r) + uint(E) * sg);
      v[j * E + r] = live ? load_f32(xr, uint(j) * cols + c) : 0.0f;
    }
  }

  // Lane bits of c: every lane takes part in the shuffles (idle lanes hold 0
  // and only pair with idle lanes). The lower lane of a pair keeps v + o, the
  // upper o - v: fma with a sign of +-1 (exact) keeps the lanes branch-free.
  for (uint b = 0; b < p.lane_bits; ++b) {
    const float sign = 1.0f - 2.0f * float((lane >> b) & 1u);
    for (int i = 0; i < M * E; ++i) {
      const float o = simd_shuffle_xor(v[i], ushort(1u << b));
      v[i] = fma(sign, v[i], o);
    }
  }
  // Register bits.
  for (int h = 1; h < E; h <<= 1) {
    for (int j = 0; j < M; ++j) {
      for (int r = 0; r < E; ++r) {
        if (r & h) continue;
        const float a = v[j * E + r];
        const float b = v[j * E + r + h];
        v[j * E + r] = a + b;
        v[j * E + r + h] = a - b;
      }
    }
  }
  // Simdgroup bits: staged as buf[q * nt + tid], where simdgroup bit b of c
  // is bit 5 + b of the flat index; each stage pairs flat indices differing
  // in that bit.
  if (p.simd_bits > 0) {
    for (int q0 = 0; q0 < M * E; q0 += HAD_CHUNK) {
      const int cn = min(HAD_CHUNK, M * E - q0);
      for (int q = 0; q < cn; ++q) buf[uint(q) * nt + tid] = v[q0 + q];
      threadgroup_barrier(mem_flags::mem_threadgroup);
      const uint pairs = uint(cn) * nt / 2u;
      for (uint b = 5u; b < 5u + p.simd_bits; ++b) {
        for (uint i = tid; i < pairs; i += nt) {
          const uint i0 = ((i >> b) << (b + 1u)) | (i & ((1u << b) - 1u));
          const uint i1 = i0 | (1u << b);
          const float a = buf[i0];
          const float c = buf[i1];
          buf[i0] = a + c;
          buf[i1] = a - c;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
      }
      for (int q = 0; q < cn; ++q) v[q0 + q] = buf[uint(q) * nt + tid];
      threadgroup_barrier(mem_flags::mem_threadgroup);  // the next chunk overwrites buf
    }
  }
  // H_M along the sub-rows, one column at a time.
  if (M > 1) {
    for (int r = 0; r < E; ++r) {
      float z[M];
      for (int j = 0; j < M; ++j) z[j] = v[j * E + r];
      for (int i = 0; i < M; ++i) {
        const uint mask = ops_had_mask<M>(i);
        float acc = 0.0f;
        for (int j = 0; j < M; ++j) acc += ((mask >> j) & 1u) ? -z[j] : z[j];
        v[i * E + r] = acc;
      }
    }
  }
  if (!live) return;
  for (int j = 0; j < M; ++j) {
    for (int r = 0; r < E; ++r) {
      const uint c = lane + 32u * (uint(r) + uint(E) * sg);
      store_f32(yr, uint(j) * cols + c, v[j * E + r] * p.scale);
    }
  }
}

// Host names: hadamard_<dtype> is m = 1 with 8 registers; the other register
// counts of m = 1 are hadamard_e<E>_<dtype>, and m = 12, 20, 28 are
// hadamard_m<M>_e<E>_<dtype> (launch plan: csrc/metal/plans/ops.cpp).
#define HAD_INSTANCE(name, T, M, E) \
  template [[host_name(name)]] [[kernel]] decltype(hadamard_kernel<T, M, E>) hadamard_kernel<T, M, E>;
#define HAD_DTYPE(T, suffix)                            \
  HAD_INSTANCE("hadamard_" suffix, T, 1, 8)             \
  HAD_INSTANCE("hadamard_e1_" suffix, T, 1, 1)          \
  HAD_INSTANCE("hadamard_e2_" suffix, T, 1, 2)          \
  HAD_INSTANCE("hadamard_e4_" suffix, T, 1, 4)          \
  HAD_INSTANCE("hadamard_e16_" suffix, T, 1, 16)        \
  HAD_INSTANCE("hadamard_e32_" suffix, T, 1, 32)        \
  HAD_INSTANCE("hadamard_m12_e1_" suffix, T, 12, 1)     \
  HAD_INSTANCE("hadamard_m12_e2_" suffix, T, 12, 2)     \
  HAD_INSTANCE("hadamard_m20_e1_" suffix, T, 20, 1)     \
  HAD_INSTANCE("hadamard_m28_e1_" suffix, T, 28, 1)

HAD_DTYPE(float, "f32")
HAD_DTYPE(half, "f16")
HAD_DTYPE(bfloat, "bf16")
