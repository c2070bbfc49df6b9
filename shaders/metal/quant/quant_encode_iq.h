// The MSL twin of the i-quant encoders (csrc/core/quant/iquants.h:
// iq_detail::nearest_code, fit_codebook, pack_codes, iq4_nl and iq4_xs
// encode): one block (iq4_nl 32 floats, iq4_xs 256) in thread memory -> its
// bytes in device memory, operation by operation in f32 with no contractible
// multiply-add (see quant_fit.h).
#pragma once
#include <metal_stdlib>

#include "quant_fit.h"

using namespace metal;

// iq_detail::nearest_code: the codebook index nearest to v (the upper one on exact midpoints).
inline int qiq4_nearest_code(float v) {
  if (v <= float(qiq4_value(0u))) return 0;
  if (v >= float(qiq4_value(15u))) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < float(qiq4_value(uint(mid)))) hi = mid;
    else lo = mid;
  }
  return v - float(qiq4_value(uint(hi - 1))) < float(qiq4_value(uint(hi))) - v ? hi - 1 : hi;
}

// iq_detail::fit_codebook's weighted sums (w = x^2) of the nearest codes for inverse scale id.
inline void qiq4_sums(thread const float* x, float id, thread float& sumqx, thread float& sumq2) {
  sumqx = 0.0f;
  sumq2 = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float q = float(qiq4_value(uint(qiq4_nearest_code(id * x[j])))), w = x[j] * x[j];
    const float wqx = w * q * x[j];
    sumqx += wqx;
    const float wqq = w * q * q;
    sumq2 += wqq;
  }
}

// iq_detail::fit_codebook: the best scale of one sub-block of 32 (0 for an all-but-zero one).
inline float qiq4_fit_codebook(thread const float* x) {
  float amax;
  const float mx = qk_signed_max(32, x, amax);
  if (amax < 1e-15f) return 0.0f;
  const float kv0 = float(qiq4_value(0u));
  float sumqx, sumq2;
  qiq4_sums(x, 1.0f / (-mx / kv0), sumqx, sumq2);
  float d = sumqx / sumq2, best = d * sumqx;
  for (int t = -7; t <= 7; ++t) {
    qiq4_sums(x, float(t + qiq4_value(0u)) / mx, sumqx, sumq2);
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// iq_detail::pack_codes: codes of 32 values with inverse scale id, q4_0's nibble order.
inline void qiq4_pack_codes(thread const float* x, float id, device uchar* qs) {
  for (int j = 0; j < 16; ++j)
    qs[j] = uchar(qiq4_nearest_code(id * x[j]) | (qiq4_nearest_code(id * x[j + 16]) << 4));
}

inline void qencode_iq4_nl(thread const float* x, device uchar* b) {
  const float d = qiq4_fit_codebook(x);
  qstore_f16(b, d);
  qiq4_pack_codes(x, d != 0.0f ? 1.0f / d : 0.0f, b + 2);
}

inline void qencode_iq4_xs(thread const float* x, device uchar* b) {
  float scales[8], amax = 0.0f, max_scale = 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    scales[ib] = qiq4_fit_codebook(x + 32 * ib);
    const float a = qfabs(scales[ib]);
    if (a > amax) {
      amax = a;
      max_scale = scales[ib];
    }
  }
  const float d = -max_scale / 32.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  qstore_f16(b, d);
  uint sh = 0u;
  for (int ib = 0; ib < 8; ++ib) {
    const int l = qclamp_int(qnearest_int(id * scales[ib]), -32, 31);
    const float dl = d * float(l), idl = dl != 0.0f ? 1.0f / dl : 0.0f;
    qiq4_pack_codes(x + 32 * ib, idl, b + 8 + 16 * ib);
    const uint u = uint(l + 32);
    if (ib % 2 == 0) b[4 + ib / 2] = uchar(u & 15u);
    else b[4 + ib / 2] |= uchar((u & 15u) << 4);
    sh |= (u >> 4) << uint(2 * ib);
  }
  b[2] = uchar(sh & 0xffu);
  b[3] = uchar((sh >> 8) & 0xffu);
}
