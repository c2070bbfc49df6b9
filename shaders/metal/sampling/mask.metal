// top_k_mask, top_p_mask and min_p_mask from one template mask_kernel<T, OP>
// (OP: 0 top_k, 1 top_p, 2 min_p). One threadgroup per row; kept logits are
// copied bit for bit, the others become -inf. A row that is not samplable
// (a NaN, or no finite max) and a row whose filter keeps everything are
// copied unchanged (nothing is written in place).
//
// Thresholds keep ties, found by radix_select (sampling_common.h) over the
// order-preserving keys of the logits, as the CPU backend does:
//   top_k: the k-th largest value (weights 1); keep x >= it.
//   top_p: the largest value t whose logits >= t hold p of the mass
//          e = exp((x - max) / T) (weights e); keep x >= t.
//   min_p: keep e >= p (no select).
// In place (y == x) is safe: every read of the row happens before the
// barriers that end the last reduction, and each element is written by the
// thread that read it.
#include "sampling_common.h"

#define MASK_TOP_K 0
#define MASK_TOP_P 1
#define MASK_MIN_P 2

template <typename T>
inline void copy_row(device const T* xr, device T* yr, uint n, constant SamplingParams& P, Lanes L) {
  if ((P.flags & SAMPLING_IN_PLACE) != 0u) return;
  for (uint i = L.tid; i < n; i += L.nt) yr[i] = xr[i];
}

template <typename T, int OP>
[[kernel]] void mask_kernel(SAMPLING_KERNEL_ARGS(T, T)) {
  threadgroup float2 red2[32];
  threadgroup float red[32];
  threadgroup float4 red4[32];
  const Lanes L = {tid, nt, lane, sg, nsg};
  const uint n = P.cols;
  device const T* xr = x + ulong(row) * P.x_stride;
  device T* yr = y + ulong(row) * P.y_stride;
  const float2 mn = row_max_nan(xr, n, red2, L);
  if (!samplable(mn)) {
    copy_row(xr, yr, n, P, L);
    return;
  }
  const float m = mn.x;
  const T neg = T(-SAMPLING_INF);
  if (OP == MASK_TOP_K) {
    const int k = (P.flags & SAMPLING_ROW_K) != 0u ? k_arr[row] : P.top_k;
    if (k <= 0 || uint(k) >= n) {
      copy_row(xr, yr, n, P, L);
      return;
    }
    const float cut = sampling_float(radix_select(xr, n, float(k), false, -SAMPLING_INF, 0.0f, m, 1.0f, red4, L));
    for (uint i = tid; i < n; i += nt) {
      const T v = xr[i];
      yr[i] = float(v) >= cut ? v : neg;
    }
    return;
  }
  const float inv_t = 1.0f / row_temperature(P, temp_arr, row);
  const float p = (P.flags & SAMPLING_ROW_P) != 0u ? p_arr[row] : P.p;
  if (OP == MASK_MIN_P) {
    if (p <= 0.0f) {
      copy_row(xr, yr, n, P, L);
      return;
    }
    for (uint i = tid; i < n; i += nt) {
      const T v = xr[i];
      yr[i] = exp((float(v) - m) * inv_t) >= p ? v : neg;
    }
    return;
  }
  if (p >= 1.0f) {
    copy_row(xr, yr, n, P, L);
    return;
  }
  float total = 0.0f;
  for (uint i = tid; i < n; i += nt) total += exp((float(xr[i]) - m) * inv_t);
  total = tg_sum(total, red, L);
  const float cut = sampling_float(radix_select(xr, n, p * total, true, -SAMPLING_INF, 0.0f, m, inv_t, red4, L));
  for (uint i = tid; i < n; i += nt) {
    const T v = xr[i];
    yr[i] = float(v) >= cut ? v : neg;
  }
}

#define MASK_INST(NAME, OP, T, SUF) \
  template [[host_name(#NAME "_" #SUF)]] [[kernel]] decltype(mask_kernel<T, OP>) mask_kernel<T, OP>;
#define MASK_ALL(NAME, OP) MASK_INST(NAME, OP, float, f32) MASK_INST(NAME, OP, half, f16) MASK_INST(NAME, OP, bfloat, bf16)

MASK_ALL(top_k_mask, MASK_TOP_K)
MASK_ALL(top_p_mask, MASK_TOP_P)
MASK_ALL(min_p_mask, MASK_MIN_P)
