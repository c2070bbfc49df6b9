// softmax, log_softmax and logsumexp of logits / temperature, from one
// template normalize_kernel<T, OP> (OP: 0 softmax, 1 log_softmax,
// 2 logsumexp). One threadgroup per row; f32 math, float outputs.
//
// Pass 1: the raw row max m (NaN excluded; m_safe = 0 for a row of -inf, so
// its sum is 0 and its softmax 0/0 = NaN, as the reference). Pass 2:
// s = sum exp((x - m_safe) / T) in f32 (a NaN or +inf in the row makes s
// NaN, so every output of that row is NaN). Pass 3 writes.
#include "sampling_common.h"

#define NORM_SOFTMAX 0
#define NORM_LOG_SOFTMAX 1
#define NORM_LOGSUMEXP 2

template <typename T, int OP>
[[kernel]] void normalize_kernel(SAMPLING_KERNEL_ARGS(T, float)) {
  threadgroup float2 red2[32];
  threadgroup float red[32];
  const Lanes L = {tid, nt, lane, sg, nsg};
  const uint n = P.cols;
  device const T* xr = x + ulong(row) * P.x_stride;
  const float inv_t = 1.0f / row_temperature(P, temp_arr, row);
  const float2 mn = row_max_nan(xr, n, red2, L);
  const float m = mn.x == -SAMPLING_INF ? 0.0f : mn.x;
  float s = 0.0f;
  for (uint i = tid; i < n; i += nt) s += exp((float(xr[i]) - m) * inv_t);
  s = tg_sum(s, red, L);
  if (OP == NORM_LOGSUMEXP) {
    if (tid == 0) y[row] = m * inv_t + log(s);
    return;
  }
  device float* yr = y + ulong(row) * P.y_stride;
  if (OP == NORM_SOFTMAX) {
    for (uint i = tid; i < n; i += nt) yr[i] = exp((float(xr[i]) - m) * inv_t) / s;
  } else {
    const float log_s = log(s);
    for (uint i = tid; i < n; i += nt) yr[i] = (float(xr[i]) - m) * inv_t - log_s;
  }
}

#define NORMALIZE_INST(NAME, OP, T, SUF)                                               \
  template [[host_name(#NAME "_" #SUF)]] [[kernel]] decltype(normalize_kernel<T, OP>) \
      normalize_kernel<T, OP>;
#define NORMALIZE_ALL(NAME, OP) \
  NORMALIZE_INST(NAME, OP, float, f32) NORMALIZE_INST(NAME, OP, half, f16) NORMALIZE_INST(NAME, OP, bfloat, bf16)

NORMALIZE_ALL(softmax, NORM_SOFTMAX)
NORMALIZE_ALL(log_softmax, NORM_LOG_SOFTMAX)
NORMALIZE_ALL(logsumexp, NORM_LOGSUMEXP)
