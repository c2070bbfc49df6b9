// Scaled fp8 (e4m3fn / e5m2) weights and activations: one f32 scale per tensor,
// per row, or per 128 x 128 block (DeepSeek-V3's weight blocks), and per token
// for activations. The element codes are mx.h's (round to nearest even,
// saturating to +-448 / +-57344, NaN kept, -0 kept).
//   scale = amax / fmax over the scale's group (f32, one division);
//   q = code(x / scale), or 0 where scale is 0 (an all-zero group);
//   x' = value(q) * scale.
// The division (not a multiply by a reciprocal) matches torch's composition
// `(x / scale).clamp(-fmax, fmax).to(float8)` bit for bit. A group holding an
// inf or NaN has a non-finite scale and decodes to NaN.
#pragma once
#include "core/quant/mx.h"

namespace braze::quant {

template <Elem E> struct Fp8Max;
template <> struct Fp8Max<Elem::e4m3> { static constexpr float value = 448.f; };
template <> struct Fp8Max<Elem::e5m2> { static constexpr float value = 57344.f; };

// The scale of a group whose largest |x| has bits amax (abs_bits, NaN-propagating).
template <Elem E> BRAZE_HD float fp8_scale(uint32_t amax) { return bits_f32(amax) / Fp8Max<E>::value; }

template <Elem E> BRAZE_HD uint8_t fp8_encode(float x, float scale) {
  return scale == 0.f ? uint8_t(0) : uint8_t(encode_elem<E>(x / scale));
}

// A 256-entry decode table (fp8 code -> f32), for kernels that look codes up.
template <Elem E> BRAZE_HD void fp8_table(float t[256]) {
  for (uint32_t c = 0; c < 256; ++c) t[c] = decode_elem<E>(c);
}

// Granularity of the scales of an fp8 weight [N, K].
enum class Fp8Scaling : uint8_t { tensor = 0, row = 1, block = 2 };
constexpr int kFp8Block = 128;

// The index into the scales array of element (n, k).
BRAZE_HD int64_t fp8_scale_index(Fp8Scaling g, int64_t n, int64_t k, int64_t K) {
  if (g == Fp8Scaling::tensor) return 0;
  if (g == Fp8Scaling::row) return n;
  return n / kFp8Block * ((K + kFp8Block - 1) / kFp8Block) + k / kFp8Block;
}

// Decode API: elements k0 .. k0 + 7 of one row (all under `scale`: k0 a
// multiple of 8, so 8 never straddle a 128 block).
template <Elem E> BRAZE_HD void fp8_decode8(const uint8_t* row, float scale, int64_t k0, float out[8]) {
  for (int j = 0; j < 8; ++j) out[j] = decode_elem<E>(row[k0 + j]) * scale;
}

}  // namespace braze::quant
