// sample: one token per row, the same rules and draw as the CPU backend
// (csrc/cpu/sampling.cpp) and the reference. One threadgroup per row:
//   * a row that is not samplable -> -1; temperature 0 or top_k == 1 -> the
//     first index of the max (greedy);
//   * cut_k: the k-th largest logit (radix select with weights 1) when
//     1 < k < V; min_p keeps e = exp((x - max) / T) >= min_p;
//   * cut_p (top_p < 1): radix select with weights e over the tokens top_k and
//     min_p keep, target top_p times their mass;
//   * the draw: u = the row's Philox uniform (seed, offset, row); the first
//     kept token, in index order, whose running mass exceeds u * total. The
//     running mass is an inclusive scan over tiles of nt consecutive tokens
//     (simd_shuffle_up within a simdgroup, simdgroup totals in threadgroup
//     memory, a carry between tiles). If rounding leaves no token past the
//     target, the last kept token.
// All sums are f32 in a fixed order (the CPU sums in double, so a draw whose
// target lies within a few f32 roundings of a running sum may differ).
#include "../common/philox.h"
#include "sampling_common.h"

template <typename T>
[[kernel]] void sample_kernel(SAMPLING_KERNEL_ARGS(T, int)) {
  threadgroup float2 red2[32];
  threadgroup float red[32];
  threadgroup float4 red4[32];
  threadgroup uint redu[32];
  threadgroup float part[32];
  const Lanes L = {tid, nt, lane, sg, nsg};
  const uint n = P.cols;
  device const T* xr = x + ulong(row) * P.x_stride;
  const float2 mn = row_max_nan(xr, n, red2, L);
  if (!samplable(mn)) {
    if (tid == 0) y[row] = -1;
    return;
  }
  const float m = mn.x;
  const float t = row_temperature(P, temp_arr, row);
  const int k = (P.flags & SAMPLING_ROW_K) != 0u ? k_arr[row] : P.top_k;
  if (!(t > 0.0f) || k == 1) {
    const uint first = first_equal(xr, n, m, redu, L);
    if (tid == 0) y[row] = int(first);
    return;
  }
  const float inv_t = 1.0f / t;
  const float mp = (P.flags & SAMPLING_ROW_MIN_P) != 0u ? min_p_arr[row] : P.min_p;
  const float p = (P.flags & SAMPLING_ROW_P) != 0u ? p_arr[row] : P.p;
  const float cut_k = (k > 1 && uint(k) < n)
                          ? sampling_float(radix_select(xr, n, float(k), false, -SAMPLING_INF, 0.0f, m, 1.0f, red4, L))
                          : -SAMPLING_INF;
  float cut_p = -SAMPLING_INF;
  if (p < 1.0f) {
    float mass = 0.0f;
    for (uint i = tid; i < n; i += nt) mass += select_weight(float(xr[i]), true, cut_k, mp, m, inv_t);
    mass = tg_sum(mass, red, L);
    cut_p = sampling_float(radix_select(xr, n, p * mass, true, cut_k, mp, m, inv_t, red4, L));
  }
  const float lo = max(cut_k, cut_p);
  float total = 0.0f;
  for (uint i = tid; i < n; i += nt) total += select_weight(float(xr[i]), true, lo, mp, m, inv_t);
  total = tg_sum(total, red, L);
  const float u = philox_row_uniform(P.seed_lo, P.seed_hi, P.offset_lo, P.offset_hi, row, 0u);
  const float target = u * total;

  float carry = 0.0f;
  uint last = SAMPLING_NONE;  // 0xfffffffe - (this thread's last kept index): the min is the last
  uint found = SAMPLING_NONE;
  for (uint base = 0; base < n; base += nt) {
    const uint i = base + tid;
    float w = 0.0f;
    if (i < n) {
      const float v = float(xr[i]);
      const float e = exp((v - m) * inv_t);
      if (v >= lo && e >= mp) {
        w = e;
        last = 0xfffffffeu - i;
      }
    }
    float s = w;  // inclusive scan within the simdgroup
    for (ushort d = 1; d < 32; d *= 2) {
      const float o = simd_shuffle_up(s, d);
      if (lane >= d) s += o;
    }
    if (lane == 31) part[sg] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float before = carry, tile = carry;
    for (uint j = 0; j < nsg; ++j) {
      if (j < sg) before += part[j];
      tile += part[j];
    }
    const uint cand = (w > 0.0f && before + s > target) ? i : SAMPLING_NONE;
    found = tg_min_u(cand, redu, L);  // ends with a barrier: part is free again
    if (found != SAMPLING_NONE) break;
    carry = tile;
  }
  if (found == SAMPLING_NONE) {
    const uint l = tg_min_u(last, redu, L);
    found = l == SAMPLING_NONE ? SAMPLING_NONE : 0xfffffffeu - l;
  }
  if (tid == 0) y[row] = found == SAMPLING_NONE ? -1 : int(found);
}

template [[host_name("sample_f32")]] [[kernel]] decltype(sample_kernel<float>) sample_kernel<float>;
template [[host_name("sample_f16")]] [[kernel]] decltype(sample_kernel<half>) sample_kernel<half>;
template [[host_name("sample_bf16")]] [[kernel]] decltype(sample_kernel<bfloat>) sample_kernel<bfloat>;

// philox_uniform: y[r] = the uniform row r of sample draws, one thread per
// row (SAMPLING_PHILOX_THREADS per threadgroup). Float32 output whatever the
// logits' dtype: one kernel, philox_uniform_f32.
kernel void philox_uniform_f32(SAMPLING_KERNEL_ARGS(float, float)) {
  const uint r = row * nt + tid;
  if (r < P.rows) y[r] = philox_row_uniform(P.seed_lo, P.seed_hi, P.offset_lo, P.offset_hi, r, 0u);
}
