// NVIDIA nvfp4, and GGUF's NVFP4 block type.
//
// nvfp4: blocks of 16 e2m1 elements (mx.h's code), each block with an e4m3fn
// scale, and one f32 scale for the whole tensor (NVIDIA's two-level recipe):
//   t  = amax(tensor) / (448 * 6), or 1 when that is 0;
//   sb = e4m3(amax(block) / (6 * t))            (round to nearest even, saturating);
//   d  = value(sb) * t;  q = e2m1(x / d), or 0 where d is 0;
//   x' = (e2m1(q) * value(sb)) * t              (the first product is exact).
// Data: e2m1 codes, element 2i in the low nibble of byte i; scales: one byte a block.
//
// GGUF NVFP4 (ggml type NVFP4): blocks of 64 elements in 36 bytes, no tensor
// scale: four unsigned e4m3 sub-scales (bias 7; the sign bit is ignored; the
// byte 0x7F decodes to 0, as the gguf package does), then 32 bytes of codes in
// which sub-block s (16 elements) takes bytes 4 + 8s .. 4 + 8s + 7: element
// 16s + j in the low nibble of byte j, element 16s + 8 + j in its high nibble.
//   x' = e2m1(q) * ue4m3(d_s).
#pragma once
#include "core/quant/mx.h"

namespace braze::quant {

constexpr int kNvfp4Block = 16;
constexpr int kNvfp4GgufBlock = 64, kNvfp4GgufBytes = 36;

// The tensor scale from the tensor's amax bits (abs_bits, NaN-propagating).
BRAZE_HD float nvfp4_tensor_scale(uint32_t amax) {
  const float t = bits_f32(amax) / (448.f * 6.f);
  return t == 0.f ? 1.f : t;
}

// Encode API: one block of 16 floats -> 8 bytes of codes at `out` and the
// block's e4m3 scale code (returned).
BRAZE_HD uint32_t nvfp4_encode_block(const float* x, float t, uint8_t* out) {
  uint32_t amax = 0;
  for (int j = 0; j < kNvfp4Block; ++j) {
    const uint32_t a = abs_bits(x[j]);
    amax = a > amax ? a : amax;
  }
  const uint32_t sb = encode_elem<Elem::e4m3>(bits_f32(amax) / (6.f * t));
  const float d = decode_elem<Elem::e4m3>(sb) * t;
  for (int j = 0; j < kNvfp4Block; j += 2) {
    const uint32_t lo = d == 0.f ? 0u : encode_elem<Elem::e2m1>(x[j] / d);
    const uint32_t hi = d == 0.f ? 0u : encode_elem<Elem::e2m1>(x[j + 1] / d);
    out[j / 2] = uint8_t(lo | (hi << 4));
  }
  return sb;
}

// Decode API: elements k0 .. k0 + 7 (k0 a multiple of 8) of one row.
BRAZE_HD void nvfp4_decode8(const uint8_t* row, const uint8_t* scales, float t, int64_t k0, float out[8]) {
  const float s = decode_elem<Elem::e4m3>(scales[k0 / kNvfp4Block]);
  const uint8_t* p = row + k0 / 2;
  for (int j = 0; j < 4; ++j) {
    out[2 * j] = decode_elem<Elem::e2m1>(p[j] & 0xfu) * s * t;
    out[2 * j + 1] = decode_elem<Elem::e2m1>(p[j] >> 4) * s * t;
  }
}

// GGUF's unsigned e4m3 sub-scale: bits 6..3 exponent (bias 7), bits 2..0
// mantissa, bit 7 ignored; no NaN, so 0xFF reads as 480 while 0x7F reads as 0
// (the gguf package's decoding, kept for bit-exact parity).
BRAZE_HD float ue4m3_to_f32(uint32_t b) {
  if (b == 0x7fu) return 0.f;
  const uint32_t exp = (b >> 3) & 0xfu, man = b & 7u;
  if (exp == 0) return float(man) * bits_f32(uint32_t(-9 + 127) << 23);
  return bits_f32(((exp - 7u + 127u) << 23) | (man << 20));
}

// e2m1 as GGML's value tables hold it: the code -0 (8) reads as +0 (adding
// +0 turns -0 into +0 and leaves every other value alone).
BRAZE_HD float e2m1_gguf(uint32_t q) { return decode_elem<Elem::e2m1>(q) + 0.f; }

// Decode API: elements k0 .. k0 + 7 (k0 a multiple of 8) of one row of GGUF NVFP4 blocks.
BRAZE_HD void nvfp4_gguf_decode8(const uint8_t* row, int64_t k0, float out[8]) {
  const uint8_t* blk = row + k0 / kNvfp4GgufBlock * kNvfp4GgufBytes;
  const int sub = int(k0 % kNvfp4GgufBlock) / 16, high = int(k0 % 16) / 8;
  const float d = ue4m3_to_f32(blk[sub]);
  const uint8_t* q = blk + 4 + 8 * sub;
  for (int j = 0; j < 8; ++j) out[j] = e2m1_gguf((q[j] >> (4 * high)) & 0xfu) * d;
}

}  // namespace braze::quant
