// GGML's 4-bit non-linear formats: a 16-entry int8 codebook scaled per block.
//   iq4_nl  f16 d | u8 qs[16]                                   x = d kv[q]     (32-element blocks, q4_0's nibble order)
//   iq4_xs  f16 d | u16 scales_h | u8 scales_l[4] | u8 qs[128]  x = (d (ls - 32)) kv[q]
//           (256-element blocks of eight sub-blocks of 32; ls: 4 low bits in scales_l, 2 high in scales_h)
#pragma once
#include "core/quant/codec.h"

// The formats of this header, for the kernels' dispatch.
#define BRAZE_QUANT_IQUANTS_FORMATS(X) X(iq4_nl) X(iq4_xs)

namespace braze::quant {

// The codebook (GGML's kvalues_iq4nl).
#define BRAZE_IQ4_VALUES {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

BRAZE_HD int iq4_value(int q) {
  const int8_t kv[16] = BRAZE_IQ4_VALUES;
  return kv[q];
}

template <> struct Codec<QFormat::iq4_nl> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    const int8_t kv[16] = BRAZE_IQ4_VALUES;
    int j;
    const uint8_t* b = block_of<QFormat::iq4_nl>(row, k0, j);
    d = load_f16(b);
    m = 0.f;
    const int sh = (j >> 4) << 2;
    bits16(b + 2, sh, 15, 0, q);
    for (int i = 0; i < kChunk; ++i) q[i] = kv[q[i]];
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b);
};

template <> struct Codec<QFormat::iq4_xs> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    const int8_t kv[16] = BRAZE_IQ4_VALUES;
    int e;
    const uint8_t* b = block_of<QFormat::iq4_xs>(row, k0, e);
    const int ib = e >> 5;
    const int ls = ((b[4 + (ib >> 1)] >> ((ib & 1) << 2)) & 15) | (((load_u16(b + 2) >> (2 * ib)) & 3) << 4);
    d = load_f16(b) * float(ls - 32);
    m = 0.f;
    const uint8_t* p = b + 8 + (ib << 4);
    const int sh = ((e >> 4) & 1) << 2;
    bits16(p, sh, 15, 0, q);
    for (int i = 0; i < kChunk; ++i) q[i] = kv[q[i]];
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b);
};

// ---------------------------------------------------------------- encoders
// llama.cpp's reference search without an importance matrix, from its
// description: per sub-block of 32, weights x^2; start from d = max / kv[0]
// (the signed extreme onto the codebook's end), take the weighted
// least-squares scale of the nearest codes, then try 15 more starting scales
// (kv[0] + t) / max, t = -7..7, keeping the scale of the best weighted fit.
// iq4_nl stores that scale; iq4_xs quantizes the eight sub-block scales to
// 6 bits against the largest (d = -max_scale / 32) and re-picks the codes.
namespace iq_detail {
constexpr int kTries = 7;

// The codebook index nearest to v (the upper one on exact midpoints).
BRAZE_HD int nearest_code(float v) {
  const int8_t kv[16] = BRAZE_IQ4_VALUES;
  if (v <= kv[0]) return 0;
  if (v >= kv[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < kv[mid]) hi = mid; else lo = mid;
  }
  return v - kv[hi - 1] < kv[hi] - v ? hi - 1 : hi;
}

// The best scale of one sub-block of 32 (0 for an all-but-zero one).
BRAZE_HD float fit_codebook(const float* x) {
  const int8_t kv[16] = BRAZE_IQ4_VALUES;
  float amax = 0, mx = 0;
  for (int j = 0; j < 32; ++j) {
    const float a = fabs_(x[j]);
    if (a > amax) { amax = a; mx = x[j]; }
  }
  if (amax < 1e-15f) return 0.f;
  float id = 1 / (-mx / kv[0]);
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const float q = kv[nearest_code(id * x[j])], w = x[j] * x[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  float d = sumqx / sumq2, best = d * sumqx;
  for (int t = -kTries; t <= kTries; ++t) {
    id = (t + kv[0]) / mx;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = kv[nearest_code(id * x[j])], w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Codes of 32 values with inverse scale id, packed in q4_0's nibble order.
BRAZE_HD void pack_codes(const float* x, float id, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(nearest_code(id * x[j]) | (nearest_code(id * x[j + 16]) << 4));
}
}  // namespace iq_detail

BRAZE_HD void Codec<QFormat::iq4_nl>::encode(const float* x, uint8_t* b) {
  const float d = iq_detail::fit_codebook(x);
  store_f16(b, d);
  iq_detail::pack_codes(x, d != 0.f ? 1 / d : 0.f, b + 2);
}

BRAZE_HD void Codec<QFormat::iq4_xs>::encode(const float* x, uint8_t* b) {
  float scales[8], amax = 0, max_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    scales[ib] = iq_detail::fit_codebook(x + 32 * ib);
    const float a = fabs_(scales[ib]);
    if (a > amax) { amax = a; max_scale = scales[ib]; }
  }
  const float d = -max_scale / 32, id = d != 0.f ? 1 / d : 0.f;
  store_f16(b, d);
  uint16_t sh = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const int l = clamp_int(nearest_int(id * scales[ib]), -32, 31);
    const float dl = d * l, idl = dl != 0.f ? 1 / dl : 0.f;
    iq_detail::pack_codes(x + 32 * ib, idl, b + 8 + 16 * ib);
    const int u = l + 32;
    if (ib % 2 == 0) b[4 + ib / 2] = uint8_t(u & 15);
    else b[4 + ib / 2] |= uint8_t((u & 15) << 4);
    sh |= uint16_t((u >> 4) << (2 * ib));
  }
  memcpy(b + 2, &sh, 2);
}

}  // namespace braze::quant
