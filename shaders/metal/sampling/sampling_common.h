// Helpers of the sampling kernels: one threadgroup per row, threads own
// elements tid, tid + nt, ... (coalesced); f32 math on upcast loads.
#pragma once
#include <metal_stdlib>

#include "../common/reduce.h"
#include "sampling_params.h"

using namespace metal;

#define SAMPLING_INF as_type<float>(0x7f800000u)
#define SAMPLING_NONE 0xffffffffu  // "no index" of the index reductions

// Where a thread sits in its threadgroup.
struct Lanes {
  uint tid, nt, lane, sg, nsg;
};

// The common buffer list of every sampling kernel (sampling_params.h).
#define SAMPLING_KERNEL_ARGS(T, Y)                                                              \
  device const T* x [[buffer(0)]], device Y* y [[buffer(1)]],                                   \
      device const float* temp_arr [[buffer(2)]], device const int* k_arr [[buffer(3)]],        \
      device const float* p_arr [[buffer(4)]], device const float* min_p_arr [[buffer(5)]],     \
      device const int* ids [[buffer(6)]], constant SamplingParams& P [[buffer(7)]],            \
      uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],      \
      uint nt [[threads_per_threadgroup]], uint lane [[thread_index_in_simdgroup]],             \
      uint sg [[simdgroup_index_in_threadgroup]], uint nsg [[simdgroups_per_threadgroup]]

// Order-preserving map float -> uint (-0.0 and +0.0 share a key), as the CPU.
inline uint sampling_key(float f) {
  uint u = as_type<uint>(f);
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}
inline float sampling_float(uint k) {
  const uint u = (k & 0x80000000u) != 0u ? (k & 0x7fffffffu) : ~k;
  return as_type<float>(u);
}

// Element-wise max of `v` over the threadgroup (NaN-free inputs), to all
// threads. `scratch` holds one float2 per simdgroup; ends with a barrier.
inline float2 tg_max2(float2 v, threadgroup float2* scratch, Lanes L) {
  v = simd_max(v);
  if (L.lane == 0) scratch[L.sg] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float2 t = L.lane < L.nsg ? scratch[L.lane] : float2(-SAMPLING_INF, -SAMPLING_INF);
  t = simd_max(t);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return t;
}

// Minimum of `v` over the threadgroup, to all threads; ends with a barrier.
inline uint tg_min_u(uint v, threadgroup uint* scratch, Lanes L) {
  v = simd_min(v);
  if (L.lane == 0) scratch[L.sg] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  uint t = L.lane < L.nsg ? scratch[L.lane] : SAMPLING_NONE;
  t = simd_min(t);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return t;
}

inline float tg_sum(float v, threadgroup float* scratch, Lanes L) {
  return threadgroup_sum(v, scratch, L.lane, L.sg, L.nsg);
}

// The row's largest non-NaN value (-inf when none) in .x, and 1 in .y when
// the row holds a NaN. NaN never wins a comparison, so simd_max sees none.
template <typename T>
inline float2 row_max_nan(device const T* x, uint n, threadgroup float2* scratch, Lanes L) {
  float m = -SAMPLING_INF, nan = 0.0f;
  for (uint i = L.tid; i < n; i += L.nt) {
    const float v = float(x[i]);
    if (isnan(v)) nan = 1.0f;
    else if (v > m) m = v;
  }
  return tg_max2(float2(m, nan), scratch, L);
}

// A row is samplable when it holds no NaN and its largest logit is finite.
inline bool samplable(float2 mn) { return mn.y == 0.0f && !isinf(mn.x); }

// The first index i < n with float(x[i]) == m (SAMPLING_NONE if none).
template <typename T>
inline uint first_equal(device const T* x, uint n, float m, threadgroup uint* scratch, Lanes L) {
  uint first = SAMPLING_NONE;
  for (uint i = L.tid; i < n; i += L.nt) {
    if (float(x[i]) == m) {
      first = i;
      break;
    }
  }
  return tg_min_u(first, scratch, L);
}

// The weight an element gets in a radix select: 0 unless v >= lo and
// e >= emin (e = exp((v - m) * inv_t)), then e (mass) or 1 (count).
inline float select_weight(float v, bool mass, float lo, float emin, float m, float inv_t) {
  bool keep = v >= lo;
  float e = 1.0f;
  if (mass || emin > 0.0f) {
    e = exp((v - m) * inv_t);
    keep = keep && e >= emin;
  }
  return keep ? (mass ? e : 1.0f) : 0.0f;
}

// Radix select over the order-preserving keys (4-bit digits, most
// significant first, no sort): the largest key v such that the weight of the
// row's elements with key >= v is >= target (target > 0). Each digit's 16
// bins are summed per thread, then over the threadgroup in a fixed order, so
// every thread takes the same path. Rounding may leave the target above the
// total: the smallest non-empty bin is taken (as the CPU does); 0 when the
// row has no weight at all.
template <typename T>
inline uint radix_select(device const T* x, uint n, float target, bool mass, float lo, float emin,
                         float m, float inv_t, threadgroup float4* scratch, Lanes L) {
  uint prefix = 0u;
  float above = 0.0f;  // weight of the elements in higher bins of earlier digits
  for (int level = 0; level < 8; ++level) {
    const uint shift = 28u - 4u * uint(level);
    const uint high = level == 0 ? 0u : (0xffffffffu << (shift + 4u));
    float bins[16];
    for (int b = 0; b < 16; ++b) bins[b] = 0.0f;
    for (uint i = L.tid; i < n; i += L.nt) {
      const float v = float(x[i]);
      const uint k = sampling_key(v);
      if ((k & high) != prefix) continue;
      bins[(k >> shift) & 15u] += select_weight(v, mass, lo, emin, m, inv_t);
    }
    float tot[16];
    for (int q = 0; q < 4; ++q) {
      const float4 s = threadgroup_sum(float4(bins[4 * q], bins[4 * q + 1], bins[4 * q + 2], bins[4 * q + 3]),
                                       scratch, L.lane, L.sg, L.nsg);
      tot[4 * q] = s.x;
      tot[4 * q + 1] = s.y;
      tot[4 * q + 2] = s.z;
      tot[4 * q + 3] = s.w;
    }
    int b = 15, lowest = -1;
    for (; b >= 0; --b) {
      if (tot[b] == 0.0f) continue;
      lowest = b;
      if (above + tot[b] >= target) break;
      above += tot[b];
    }
    if (b < 0) b = lowest;
    if (b < 0) return 0u;
    prefix |= uint(b) << shift;
  }
  return prefix;
}

inline float row_temperature(constant SamplingParams& P, device const float* arr, uint row) {
  return (P.flags & SAMPLING_ROW_TEMPERATURE) != 0u ? arr[row] : P.temperature;
}
