// GGUF's two fp4 block types, byte for byte as GGUF stores them (blocks layout):
//   mxfp4_gguf (GGML MXFP4): 32 elements in 17 bytes: e8m0 e | u8 qs[16];
//                element j in the low nibble of qs[j], element j + 16 in its high one;
//                x = 2^(e - 128) * (2 * e2m1(q)), as the gguf package computes it (e = 255
//                reads as 2^127, not NaN: there is no NaN in these blocks).
//   nvfp4_gguf (GGML NVFP4): 64 elements in 36 bytes, nvfp4.h (four unsigned e4m3
//                sub-scales, then 8 bytes per 16 elements).
// GGML's tables give the code -0 the value +0, so it decodes to +0 here too.
// Both products are exact in f32 (or overflow alike), so results match gguf.quants bit for bit.
#pragma once
#include "core/quant/codec.h"
#include "core/quant/mx.h"
#include "core/quant/nvfp4.h"

#define BRAZE_QUANT_GGUF_FP4_FORMATS(X) X(mxfp4_gguf) X(nvfp4_gguf)

namespace braze::quant {

namespace gguf_fp4_detail {
// e2m1 doubled, as GGML's tables hold it (kvalues_mxfp4): integers, and the code -0 is 0.
// Arithmetic rather than a table, so that loops over it vectorize: 2 e2m1 of
// exponent e, mantissa bit b is b (e = 0) or (2 + b) << (e - 1).
BRAZE_HD constexpr int8_t kvalue(uint32_t q) {
  const int e = int(q >> 1) & 3, b = int(q & 1u);
  const int mag = e ? (2 + b) << (e - 1) : b;
  return int8_t(q & 8u ? -mag : mag);
}
}  // namespace gguf_fp4_detail

template <> struct Codec<QFormat::mxfp4_gguf> {
  static constexpr int kChunk = 16;  // the low (or the high) nibbles of one block
  static constexpr Affine kAffine = Affine::mul;
  // The block's factor 2^(e - 128), from its first byte (e = 255 reads 2^127).
  BRAZE_HD static float scale(const uint8_t* b) {
    const uint32_t e = b[0];
    return bits_f32(e < 2 ? 0x00200000u << e : (e - 1u) << 23);
  }
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    int j;
    const uint8_t* b = block_of<QFormat::mxfp4_gguf>(row, k0, j);
    d = scale(b);  // x = d * (2 e2m1(q)), q the doubled value
    m = 0.f;
    const int shift = j >= 16 ? 4 : 0;
    for (int i = 0; i < kChunk; ++i) q[i] = gguf_fp4_detail::kvalue((b[1 + i] >> shift) & 15u);
  }
};

template <> struct Codec<QFormat::nvfp4_gguf> {
  static constexpr int kChunk = 16;  // one sub-block
  static constexpr Affine kAffine = Affine::mul;
  // x = ue4m3(d_s) * e2m1(q) = (ue4m3(d_s) / 2) * (2 e2m1(q)), both exact.
  BRAZE_HD static float scale(const uint8_t* blk, int sub) { return 0.5f * ue4m3_to_f32(blk[sub]); }
  BRAZE_HD static void levels(const uint8_t* row, int64_t k0, int8_t* q, float& d, float& m) {
    const uint8_t* blk = row + k0 / kNvfp4GgufBlock * kNvfp4GgufBytes;
    const int sub = int(k0 % kNvfp4GgufBlock) / 16;
    d = scale(blk, sub);
    m = 0.f;
    const uint8_t* p = blk + 4 + 8 * sub;
    for (int i = 0; i < 8; ++i) {
      q[i] = gguf_fp4_detail::kvalue(p[i] & 15u);
      q[i + 8] = gguf_fp4_detail::kvalue(p[i] >> 4);
    }
  }
};

}  // namespace braze::quant
