// MLX affine quantization (mlx.core.quantize, mode "affine"): bits 2, 3, 4, 5,
// 6, 8; groups of 32, 64 or 128 elements along a row, each with a scale and a
// bias stored in the weight's dtype. Elements are unsigned codes packed LSB
// first as one little-endian bit stream in uint32 words (K * bits / 32 words a
// row; for bits 3, 5, 6 a code may straddle two words), exactly as MLX stores them.
//
// Quantize, per group, in f32 (MLX's algorithm, which tests check bit for bit):
//   n = 2^bits - 1; lo, hi = min, max of the group;
//   s = max((hi - lo) / n, 1e-7), negated unless |lo| > |hi|;
//   edge = lo if |lo| > |hi| else hi;  q0 = round_half_even(edge / s);
//   if q0 != 0: s = edge / q0, bias = edge, else bias = 0
//   (so the edge, and 0 with it, decode exactly);
//   q = clamp(round_half_even((x - bias) / s), 0, n), with s and bias in f32;
//   the stored scale and bias are s and bias rounded to the weight dtype.
// Dequantize: x' = s * q + bias in f32 from the stored scale and bias, one
// rounding to the output (no fused multiply-add).
#pragma once
#include "core/quant/int8.h"
#include "core/quant/mx.h"

namespace braze::quant {

// Decode API: elements k0 .. k0 + 7 (k0 a multiple of 8) of a row of packed
// words; s and bias of their group, as f32.
template <int Bits> BRAZE_HD void affine_decode8(const uint8_t* row, float s, float bias, int64_t k0, float out[8]) {
  uint32_t c[8];
  unpack8<Bits>(row, k0, c);
  for (int j = 0; j < 8; ++j) {
    const float p = s * float(c[j]);
    out[j] = p + bias;
  }
}

// The f32 scale and bias of a group whose min and max are lo, hi.
template <int Bits> BRAZE_HD void affine_group_params(float lo, float hi, float& s, float& bias) {
  const float n = float((1 << Bits) - 1);
  const bool low_edge = fabs_f(lo) > fabs_f(hi);
  float d = (hi - lo) / n;
  d = d > 1e-7f ? d : 1e-7f;
  s = low_edge ? d : -d;
  const float edge = low_edge ? lo : hi;
  const float q0 = rint_any(edge / s);
  bias = 0.f;
  if (q0 != 0.f) {
    s = edge / q0;
    bias = edge;
  }
}

template <int Bits> BRAZE_HD uint32_t affine_code(float x, float s, float bias) {
  const float n = float((1 << Bits) - 1);
  float v = (x - bias) / s;
  v = v > 0.f ? v : 0.f;  // also NaN -> 0
  v = v < n ? v : n;
  return uint32_t(rint_small(v));
}

// Encode API: one group of g floats -> codes written at element k0 of the row
// (k0 and g multiples of 8); s and bias returned in f32.
template <int Bits> BRAZE_HD void affine_encode_group(const float* x, int g, uint8_t* row, int64_t k0, float& s,
                                                      float& bias) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < g; ++j) {
    lo = x[j] < lo ? x[j] : lo;
    hi = x[j] > hi ? x[j] : hi;
  }
  affine_group_params<Bits>(lo, hi, s, bias);
  for (int j0 = 0; j0 < g; j0 += 8) {
    uint32_t c[8];
    for (int j = 0; j < 8; ++j) c[j] = affine_code<Bits>(x[j0 + j], s, bias);
    pack8<Bits>(c, row, k0 + j0);
  }
}

}  // namespace braze::quant
