// GGML's legacy formats (32-element blocks, scales inline), byte for byte as GGUF stores them:
//   q8_0  f16 d | int8 q[32]                   x = d * q
//   q4_0  f16 d | u8 qs[16]                    x = d * (q - 8)       q[j] = low nibble of qs[j], q[j+16] the high one
//   q4_1  f16 d, f16 m | u8 qs[16]             x = d * q + m
//   q5_0  f16 d | u32 qh | u8 qs[16]           x = d * (q - 16)      q's 5th bit j is bit j of qh
//   q5_1  f16 d, f16 m | u32 qh | u8 qs[16]    x = d * q + m
// Encoders follow the GGML reference rounding (gguf.quants.quantize) step by step.
#pragma once
#include "core/quant/codec.h"

// The formats of this header, for the kernels' dispatch.
#define BRAZE_QUANT_GGML_FORMATS(X) X(q8_0) X(q4_0) X(q4_1) X(q5_0) X(q5_1)

namespace braze::quant {

namespace ggml_detail {
// The nibble (or 5-bit value) of element j (0..31) of a q4 / q5 block.
BRAZE_HD int nib(const uint8_t* qs, int j) { return (qs[j & 15] >> ((j >> 4) << 2)) & 15; }

// Element of largest magnitude (first on ties), as signed value.
BRAZE_HD float signed_absmax(const float* x) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < 32; ++j) {
    const float a = fabs_(x[j]);
    if (a > amax) { amax = a; max = x[j]; }
  }
  return max;
}
BRAZE_HD void min_max(const float* x, float& mn, float& mx) {
  mn = x[0]; mx = x[0];
  for (int j = 1; j < 32; ++j) {
    mn = x[j] < mn ? x[j] : mn;
    mx = x[j] > mx ? x[j] : mx;
  }
}
// numpy's trunc(v).astype(uint8).clip(0, hi) for the values these encoders produce (v >= 0).
BRAZE_HD int to_level(float v, int hi) {
  if (!(v >= 0.f)) return 0;
  if (v >= float(hi)) return hi;
  return int(v);
}
BRAZE_HD void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t((q[j] & 15) | ((q[j + 16] & 15) << 4));
}
BRAZE_HD uint32_t high_bits(const int* q) {
  uint32_t h = 0;
  for (int j = 0; j < 32; ++j) h |= uint32_t((q[j] >> 4) & 1) << j;
  return h;
}
}  // namespace ggml_detail

template <> struct Codec<QFormat::q8_0> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int j;
    const uint8_t* b = block_of<QFormat::q8_0>(row, k0, j);
    d = load_f16(b);
    m = 0.f;
    for (int i = 0; i < kChunk; ++i) q[i] = int8_t(b[2 + j + i]);
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b) {
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) amax = fabs_(x[j]) > amax ? fabs_(x[j]) : amax;
    const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
    store_f16(b, d);
    for (int j = 0; j < 32; ++j) b[2 + j] = uint8_t(int8_t(round_away(x[j] * id)));
  }
};

template <> struct Codec<QFormat::q4_0> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int j;
    const uint8_t* b = block_of<QFormat::q4_0>(row, k0, j);
    d = load_f16(b);
    m = 0.f;
    const int sh = (j >> 4) << 2;
    bits16(b + 2, sh, 15, -8, q);
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b) {
    const float d = ggml_detail::signed_absmax(x) / -8.f, id = d != 0.f ? 1.f / d : 0.f;
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = ggml_detail::to_level(x[j] * id + 8.5f, 15);
    store_f16(b, d);
    ggml_detail::pack_nibbles(q, b + 2);
  }
};

template <> struct Codec<QFormat::q4_1> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul_add;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int j;
    const uint8_t* b = block_of<QFormat::q4_1>(row, k0, j);
    d = load_f16(b);
    m = load_f16(b + 2);
    const int sh = (j >> 4) << 2;
    bits16(b + 4, sh, 15, 0, q);
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b) {
    float mn, mx;
    ggml_detail::min_max(x, mn, mx);
    const float d = (mx - mn) / 15.f, id = d != 0.f ? 1.f / d : 0.f;
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = ggml_detail::to_level((x[j] - mn) * id + 0.5f, 15);
    store_f16(b, d);
    store_f16(b + 2, mn);
    ggml_detail::pack_nibbles(q, b + 4);
  }
};

template <> struct Codec<QFormat::q5_0> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int j;
    const uint8_t* b = block_of<QFormat::q5_0>(row, k0, j);
    d = load_f16(b);
    m = 0.f;
    const uint32_t qh = load_u32(b + 2) >> j;
    const int sh = (j >> 4) << 2;
    bits16(b + 6, sh, 15, -16, q);
    for (int i = 0; i < kChunk; ++i) q[i] = int8_t(q[i] + int(((qh >> i) & 1u) << 4));
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b) {
    const float d = ggml_detail::signed_absmax(x) / -16.f, id = d != 0.f ? 1.f / d : 0.f;
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = ggml_detail::to_level(x[j] * id + 16.5f, 31);
    store_f16(b, d);
    const uint32_t qh = ggml_detail::high_bits(q);
    memcpy(b + 2, &qh, 4);
    ggml_detail::pack_nibbles(q, b + 6);
  }
};

template <> struct Codec<QFormat::q5_1> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul_add;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int j;
    const uint8_t* b = block_of<QFormat::q5_1>(row, k0, j);
    d = load_f16(b);
    m = load_f16(b + 2);
    const uint32_t qh = load_u32(b + 4) >> j;
    const int sh = (j >> 4) << 2;
    bits16(b + 8, sh, 15, 0, q);
    for (int i = 0; i < kChunk; ++i) q[i] = int8_t(q[i] + int(((qh >> i) & 1u) << 4));
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b) {
    float mn, mx;
    ggml_detail::min_max(x, mn, mx);
    const float d = (mx - mn) / 31.f, id = d != 0.f ? 1.f / d : 0.f;
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = ggml_detail::to_level((x[j] - mn) * id + 0.5f, 31);
    store_f16(b, d);
    store_f16(b + 2, mn);
    const uint32_t qh = ggml_detail::high_bits(q);
    memcpy(b + 4, &qh, 4);
    ggml_detail::pack_nibbles(q, b + 8);
  }
};

}  // namespace braze::quant
