// Per-row symmetric int8 (W8A8 weights, per-token activations):
//   scale = amax / 127 over the row (f32);
//   q = clamp(round_half_even(x / scale), -127, 127), or 0 where scale is 0;
//   x' = q * scale.
// A row holding an inf or NaN has a non-finite scale and decodes to NaN
// (its NaN elements encode as 0).
#pragma once
#include "core/quant/mx.h"

namespace braze::quant {

BRAZE_HD float int8_scale(uint32_t amax) { return bits_f32(amax) / 127.f; }

// Round half to even for |v| < 2^22 (adding and removing 1.5 * 2^23 leaves
// the integer part rounded in the current, round-to-nearest-even, mode).
BRAZE_HD float rint_small(float v) {
  const float big = 12582912.f;
  const float t = v + big;  // not an identity in IEEE arithmetic, so not folded (no fast-math here)
  return t - big;
}

// Round half to even for any finite |v| (beyond 2^23 every float is an integer already).
BRAZE_HD float rint_any(float v) {
  const float a = v < 0.f ? -v : v;
  if (!(a < 8388608.f)) return v;
  const float t = a + 8388608.f;  // ulp 1 over [2^23, 2^24): rounds a to an integer, ties to even
  const float r = t - 8388608.f;
  return v < 0.f ? -r : r;
}
BRAZE_HD float fabs_f(float v) { return v < 0.f ? -v : v; }

BRAZE_HD int8_t int8_encode(float x, float scale) {
  if (scale == 0.f) return 0;
  float v = x / scale;
  if (!(v == v)) return 0;
  v = v > 127.f ? 127.f : (v < -127.f ? -127.f : v);
  return int8_t(rint_small(v));
}

// Decode API: elements k0 .. k0 + 7 of one row.
BRAZE_HD void int8_decode8(const int8_t* row, float scale, int64_t k0, float out[8]) {
  for (int j = 0; j < 8; ++j) out[j] = float(row[k0 + j]) * scale;
}

}  // namespace braze::quant
