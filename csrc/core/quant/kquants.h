// GGML's K-quants: 256-element super-blocks with packed sub-block scales, as GGUF stores them.
//   q2_K  u8 scales[16] (lo: scale, hi: min) | u8 qs[64] (2-bit) | f16 d, dmin     x = (d sc) q - (dmin m)
//   q3_K  u8 hmask[32] | u8 qs[64] (2-bit) | u8 scales[12] (6-bit, -32) | f16 d     x = (d sc) (q - 4 [hbit == 0])
//   q4_K  f16 d, dmin | u8 scales[12] (6-bit scale + min pairs) | u8 qs[128]      x = (d sc) q - (dmin m)
//   q5_K  f16 d, dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]                    x = (d sc) q - (dmin m)
//   q6_K  u8 ql[128] | u8 qh[64] | int8 scales[16] | f16 d                        x = (d sc) (q - 32)
//   q8_K  f32 d | int8 q[256] | int16 bsums[16] (sums of 16, for dot products)    x = d q
// Every chunk of 16 lies in one sub-block of 16 or 32, so it has one scale.
#pragma once
#include "core/quant/codec.h"

// The formats of this header, for the kernels' dispatch.
#define BRAZE_QUANT_KQUANTS_FORMATS(X) X(q2_K) X(q3_K) X(q4_K) X(q5_K) X(q6_K) X(q8_K)

namespace braze::quant {

namespace kq_detail {
// Scale and min j (0..7) of q4_K / q5_K: six bits each, the high two of 4..7 kept in bytes 0..7.
BRAZE_HD void scale_min_k4(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
// Scale i (0..15) of q3_K: low four bits in bytes 0..7, high two in bytes 8..11, offset by 32.
BRAZE_HD int scale_q3(const uint8_t* s, int i) {
  const int lo = (s[i & 7] >> ((i >> 3) << 2)) & 15;
  const int hi = (s[8 + (i & 3)] >> ((i >> 2) << 1)) & 3;
  return (lo | (hi << 4)) - 32;
}
}  // namespace kq_detail

template <> struct Codec<QFormat::q2_K> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul_sub;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int e;
    const uint8_t* b = block_of<QFormat::q2_K>(row, k0, e);
    const int sc = b[e >> 4];
    d = load_f16(b + 80) * float(sc & 15);
    m = load_f16(b + 82) * float(sc >> 4);
    const uint8_t* p = b + 16 + ((e >> 7) << 5) + (e & 31);
    const int sh = ((e & 127) >> 5) << 1;
    bits16(p, sh, 3, 0, q);
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b);
};

template <> struct Codec<QFormat::q3_K> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int e;
    const uint8_t* b = block_of<QFormat::q3_K>(row, k0, e);
    d = load_f16(b + 108) * float(kq_detail::scale_q3(b + 96, e >> 4));
    m = 0.f;
    const uint8_t* p = b + 32 + ((e >> 7) << 5) + (e & 31);
    const uint8_t* h = b + (e & 31);
    const int sh = ((e & 127) >> 5) << 1, hb = e >> 5;
    bits16(p, sh, 3, -4, q);
    add_bits16(h, hb, 1, 2, q);
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b);
};

template <> struct Codec<QFormat::q4_K> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul_sub;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int e;
    const uint8_t* b = block_of<QFormat::q4_K>(row, k0, e);
    int sc, mn;
    kq_detail::scale_min_k4(b + 4, e >> 5, sc, mn);
    d = load_f16(b) * float(sc);
    m = load_f16(b + 2) * float(mn);
    const uint8_t* p = b + 16 + ((e >> 6) << 5) + (e & 31);
    const int sh = ((e >> 5) & 1) << 2;
    bits16(p, sh, 15, 0, q);
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b);
};

template <> struct Codec<QFormat::q5_K> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul_sub;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int e;
    const uint8_t* b = block_of<QFormat::q5_K>(row, k0, e);
    int sc, mn;
    kq_detail::scale_min_k4(b + 4, e >> 5, sc, mn);
    d = load_f16(b) * float(sc);
    m = load_f16(b + 2) * float(mn);
    const uint8_t* p = b + 48 + ((e >> 6) << 5) + (e & 31);
    const uint8_t* h = b + 16 + (e & 31);
    const int sh = ((e >> 5) & 1) << 2, hb = e >> 5;
    bits16(p, sh, 15, 0, q);
    add_bits16(h, hb, 1, 4, q);
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b);
};

template <> struct Codec<QFormat::q6_K> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int e;
    const uint8_t* b = block_of<QFormat::q6_K>(row, k0, e);
    d = load_f16(b + 208) * float(int8_t(b[192 + (e >> 4)]));
    m = 0.f;
    const int r = e & 127;
    const uint8_t* ql = b + ((e >> 7) << 6) + (r & 63);
    const uint8_t* qh = b + 128 + ((e >> 7) << 5) + (r & 31);
    const int shl = (r >> 6) << 2, shh = (r >> 5) << 1;
    bits16(ql, shl, 15, -32, q);
    add_bits16(qh, shh, 3, 4, q);
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b);
};

template <> struct Codec<QFormat::q8_K> {
  static constexpr int kChunk = 16;
  static constexpr Affine kAffine = Affine::mul;
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int e;
    const uint8_t* b = block_of<QFormat::q8_K>(row, k0, e);
    d = load_f32(b);
    m = 0.f;
    for (int i = 0; i < kChunk; ++i) q[i] = int8_t(b[4 + e + i]);
  }
  BRAZE_HD static void encode(const float* x, uint8_t* b);
};

}  // namespace braze::quant
