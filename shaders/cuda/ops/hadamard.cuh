// Fast Hadamard transform of rows of n = M * P elements (P = 2^k, M in
// {1, 12, 20, 28}), one pass over memory: every row is read once into
// registers and written once.
//
// A row is M subrows of P (x[r] viewed [M, P] row-major). Each subrow gets
// S = P / c threads, c = min(P, kC) elements each; a block holds R whole rows
// (R * M * S threads). Index j of a subrow splits into v bits (low, the pack
// lane), s bits (the thread) and i bits (the pack number):
// j = V * (s + S * i) + v, so every warp load is one contiguous span.
//  1. Each thread loads its c elements (16-byte packs where aligned) and runs
//     the butterflies of the v and i bits in registers.
//  2. If S > 1 or M > 1: the values go to shared memory as an [M*S][c] matrix
//     (row pitch c + 1: rows and columns are both read without bank
//     conflicts). H_M mixes the M subrows column by column (signs of
//     core/hadamard.h, folded at compile time); the s bits are done in
//     passes of up to kC elements gathered down a column.
//  3. Each thread reads its own elements back, scales, and stores them as it
//     loaded them.
// The 2^k butterflies and H_M act on different axes, so their order does not
// matter. In place is safe: a block reads all of its rows before its first
// barrier and writes after its last; blocks own disjoint rows.
#pragma once
#include <cstdint>

#include "core/hadamard.h"
#include "cuda/common/dtype.cuh"
#include "cuda/common/vec.cuh"

namespace braze::cuda::ops {

constexpr int kHadLogC = 6;
constexpr int kHadC = 1 << kHadLogC;  // elements a thread holds (f32 registers)
constexpr int kHadMaxThreads = 512;

struct HadamardParams {
  const void* x;
  void* y;
  int64_t x_stride, y_stride;  // elements
  int64_t rows;
  float scale;
  int P, logS, logc;  // subrow length, log2 threads per subrow, log2 elements per thread
  int R;              // rows per block
};

// Row i of H_M as a mask of its -1 entries (M > 1).
template <int M> __device__ __forceinline__ float hm_sign(int i, int j) {
  if constexpr (M == 12) {
    constexpr uint32_t rows[12] = BRAZE_HADAMARD_12;
    return braze::ops::hadamard_sign(rows, i, j);
  } else if constexpr (M == 20) {
    constexpr uint32_t rows[20] = BRAZE_HADAMARD_20;
    return braze::ops::hadamard_sign(rows, i, j);
  } else {
    constexpr uint32_t rows[28] = BRAZE_HADAMARD_28;
    return braze::ops::hadamard_sign(rows, i, j);
  }
}

// Butterflies over the low B index bits of d[0, 2^B).
template <int B> __device__ __forceinline__ void butterflies(float (&d)[kHadC]) {
#pragma unroll
  for (int h = 0; h < B; ++h)
#pragma unroll
    for (int e = 0; e < (1 << B); ++e) {
      if ((e >> h) & 1) continue;
      const float a = d[e], b = d[e + (1 << h)];
      d[e] = a + b;
      d[e + (1 << h)] = a - b;
    }
}

// The same for a run-time `bits` <= kHadLogC: one compile-time form per case,
// since guarding each butterfly would turn into selects that keep two copies
// of every value alive.
__device__ __forceinline__ void butterflies(float (&d)[kHadC], int bits) {
  switch (bits) {
    case 1: return butterflies<1>(d);
    case 2: return butterflies<2>(d);
    case 3: return butterflies<3>(d);
    case 4: return butterflies<4>(d);
    case 5: return butterflies<5>(d);
    case 6: return butterflies<6>(d);
    default: return;
  }
}
static_assert(kHadLogC == 6, "butterflies(d, bits) lists the cases up to kHadLogC");

// One pass over s bits [lo, lo + w) of the [M*S][kHadC] matrix: each group of 2^w
// elements is read down a column, transformed in registers
// and written back. Consecutive threads take consecutive columns, so every
// access of a warp is conflict-free. The first pass (lo = 0, the only one
// for P <= 4096) has a compile-time step: its addresses are immediate
// offsets of one base, not a register each.
template <bool kFirst>
__device__ __forceinline__ void s_pass(float* sm, float (&d)[kHadC], int logS, int lo, int nt, int t) {
  constexpr int pitch = kHadC + 1;
  const int w = min(kHadLogC, logS - lo), n = 1 << w;
  const int groups = nt * kHadC >> w, logo = logS - w, S = 1 << logS;
  const int step = kFirst ? pitch : pitch << lo;
  for (int g = t; g < groups; g += nt) {
    const int col = g & (kHadC - 1), rest = g >> kHadLogC;
    const int so = rest & ((1 << logo) - 1), qq = rest >> logo;
    const int s0 = (so & ((1 << lo) - 1)) | ((so >> lo) << (lo + w));
    float* base = sm + (qq * S + s0) * pitch + col;
#pragma unroll
    for (int e = 0; e < kHadC; ++e)
      if (e < n) d[e] = base[e * step];
    butterflies(d, w);
#pragma unroll
    for (int e = 0; e < kHadC; ++e)
      if (e < n) base[e * step] = d[e];
  }
}

// kFull: c == kHadC (P >= kHadC, every row that needs the s passes), which
// makes every register loop bound a compile-time constant.
template <class T, int M, int V, bool kFull>
__global__ void __launch_bounds__(kHadMaxThreads) hadamard_kernel(HadamardParams p) {
  extern __shared__ float sm[];
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const int S = 1 << p.logS, c = kFull ? kHadC : 1 << p.logc, I = c / V, pitch = c + 1;
  const int nt = p.R * M * S;
  const int t = threadIdx.x;
  const int s = t & (S - 1), q = t >> p.logS;  // q: subrow of the block
  const int rb = q / M, a = q - rb * M;
  const int64_t r = int64_t(blockIdx.x) * p.R + rb;
  const bool valid = r < p.rows;
  const int64_t sub = int64_t(a) * p.P;

  float d[kHadC] = {};
  if (valid) {
    const T* xr = x + r * p.x_stride + sub;
    Pack<T, V> k[kHadC / V];
#pragma unroll
    for (int i = 0; i < kHadC / V; ++i)
      if (i < I) k[i] = load_pack<T, V>(xr, V * (s + S * i), V);
#pragma unroll
    for (int i = 0; i < kHadC / V; ++i)
#pragma unroll
      for (int v = 0; v < V; ++v) d[i * V + v] = i < I ? to_f32(k[i].v[v]) : 0.f;
  }
  if constexpr (kFull) butterflies<kHadLogC>(d);
  else butterflies(d, p.logc);

  const bool staged = M > 1 || S > 1;
  if (staged) {
    float* row = sm + (q * S + s) * pitch;
#pragma unroll
    for (int e = 0; e < kHadC; ++e)
      if (e < c) row[e] = d[e];
    __syncthreads();

    if constexpr (M > 1) {
      // one column (block row, s, col) of the M subrows per step
      const int cols = p.R * S * c, sub_pitch = S * pitch;
      for (int g = t; g < cols; g += nt) {
        const int col = g & (c - 1), rest = g >> p.logc;
        const int ss = rest & (S - 1), b = rest >> p.logS;
        float* base = sm + (b * M * S + ss) * pitch + col;
        float u[M];
#pragma unroll
        for (int i = 0; i < M; ++i) u[i] = base[i * sub_pitch];
#pragma unroll
        for (int i = 0; i < M; ++i) {
          float acc = 0.f;
#pragma unroll
          for (int j = 0; j < M; ++j) acc += hm_sign<M>(i, j) * u[j];
          base[i * sub_pitch] = acc;
        }
      }
      __syncthreads();
    }

    // the s bits, kHadLogC of them per pass (S > 1 means c == kHadC)
    if constexpr (kFull)
      for (int lo = 0; lo < p.logS; lo += kHadLogC) {
        if (lo == 0) s_pass<true>(sm, d, p.logS, 0, nt, t);
        else s_pass<false>(sm, d, p.logS, lo, nt, t);
        __syncthreads();
      }
#pragma unroll
    for (int e = 0; e < kHadC; ++e)
      d[e] = e < c ? row[e] : 0.f;
  }

  if (valid) {
    T* yr = y + r * p.y_stride + sub;
#pragma unroll
    for (int i = 0; i < kHadC / V; ++i) {
      if (i >= I) break;
      Pack<T, V> o;
#pragma unroll
      for (int v = 0; v < V; ++v) o.v[v] = from_f32<T>(d[i * V + v] * p.scale);
      store_pack<T, V>(yr, V * (s + S * i), V, o);
    }
  }
}

}  // namespace braze::cuda::ops
