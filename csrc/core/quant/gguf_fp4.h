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

template <> struct Codec<QFormat::mxfp4_gguf> {
  static constexpr int kChunk = 16;  // the low (or the high) nibbles of one block
  BRAZE_HD static void decode(const uint8_t* row, int64_t k0, float* out) {
    int j;
    const uint8_t* b = block_of<QFormat::mxfp4_gguf>(row, k0, j);
    const uint32_t e = b[0];
    const float half = bits_f32(e < 2 ? 0x00200000u << e : (e - 1u) << 23);  // 2^(e - 128)
    const int shift = j >= 16 ? 4 : 0;
    for (int i = 0; i < kChunk; ++i) out[i] = half * (2.f * e2m1_gguf((b[1 + i] >> shift) & 15u));
  }
};

template <> struct Codec<QFormat::nvfp4_gguf> {
  static constexpr int kChunk = 16;  // one sub-block
  BRAZE_HD static void decode(const uint8_t* row, int64_t k0, float* out) {
    nvfp4_gguf_decode8(row, k0, out);
    nvfp4_gguf_decode8(row, k0 + 8, out + 8);
  }
};

}  // namespace braze::quant
