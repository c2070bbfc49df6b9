// What every format's codec provides, and byte helpers the codecs share.
//
// Codec<F> (specialized in the group headers, csrc/core/quant/<group>.h):
//   kChunk                      elements one call decodes (a divisor of the block);
//   levels(row, k0, q, d, m)    elements [k0, k0 + kChunk) of one row (k0 a multiple of kChunk)
//                               from that row's bytes, as int8 levels q and the chunk's scale d
//                               and offset m; the values are affine<kAffine>(d, m, q[i]);
//   decode(row, k0, out)        the same as float32 (decode<F> below): a GPU thread can own one
//                               chunk and write coalesced, a CPU loop converts levels in vectors;
//   encode(x, block)            one block from block floats.
// Everything is BRAZE_HD: no std library calls CUDA lacks, no heap, no exceptions.
//
// Arithmetic follows the GGML maintainers' reference (gguf.quants) operation by
// operation in float32, without fused multiply-adds, so results are bit-exact:
// host code is compiled with -ffp-contract=off, CUDA ports use __fmul_rn / __fadd_rn.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/quant/formats.h"

#if defined(__F16C__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

namespace braze::quant {

template <QFormat F> struct Codec;

// How a chunk's levels become values, each a separate float32 rounding as GGML's
// reference does: d q (mul), d q + m (mul_add), d q - m (mul_sub).
enum class Affine : uint8_t { mul, mul_add, mul_sub };
template <Affine A> BRAZE_HD float affine(float d, float m, float q) {
  if (A == Affine::mul) return d * q;
  if (A == Affine::mul_add) return d * q + m;
  return d * q - m;
}

BRAZE_HD float load_f16(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
#if defined(__F16C__) && !defined(__CUDACC__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}
BRAZE_HD void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  memcpy(p, &h, 2);
}
BRAZE_HD float load_f32(const uint8_t* p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}
BRAZE_HD uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
BRAZE_HD uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

// The block holding element k of a row, and k's index inside it.
template <QFormat F> BRAZE_HD const uint8_t* block_of(const uint8_t* row, int64_t k, int& j) {
  constexpr int B = info(F).blocks.block;
  j = int(k % B);
  return row + (k / B) * info(F).blocks.block_bytes;
}

// C's roundf (halves away from zero) and trunc without <cmath>, for |v| < 2^23 (callers clamp first).
BRAZE_HD float trunc_small(float v) { return float(int32_t(v)); }
BRAZE_HD int round_away(float v) {
  const float a = v < 0 ? -v : v;
  const int i = int(a);
  const int r = i + (a - float(i) >= 0.5f ? 1 : 0);  // exact: no a + 0.5 rounding up 0.49999997
  return v < 0 ? -r : r;
}
BRAZE_HD float fabs_(float v) { return v < 0 ? -v : v; }

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the
// rounded integer in the low mantissa bits (GGML's nearest_int does the same).
BRAZE_HD int nearest_int(float v) {
  const float big = v + 12582912.f;
  int32_t i;
  memcpy(&i, &big, 4);
  return (i & 0x007fffff) - 0x00400000;
}
BRAZE_HD int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
BRAZE_HD float sqrt_(float v) {
#if defined(__CUDACC__)
  return sqrtf(v);
#else
  return __builtin_sqrtf(v);
#endif
}

// q[i] = ((p[i] >> s) & mask) + bias for 16 bytes; q[i] += ((p[i] >> s) & mask) << lsh.
// The shift is a template argument in each case so that compilers vectorize
// the loops (x86 has no byte shift by a lane-uniform variable).
template <int S> BRAZE_HD void bits16_at(const uint8_t* p, int mask, int bias, int8_t* q) {
  for (int i = 0; i < 16; ++i) q[i] = int8_t(((p[i] >> S) & mask) + bias);
}
template <int S> BRAZE_HD void add_bits16_at(const uint8_t* p, int mask, int lsh, int8_t* q) {
  for (int i = 0; i < 16; ++i) q[i] = int8_t(q[i] + (((p[i] >> S) & mask) << lsh));
}
BRAZE_HD void bits16(const uint8_t* p, int s, int mask, int bias, int8_t* q) {
  switch (s) {
    case 0: return bits16_at<0>(p, mask, bias, q);
    case 2: return bits16_at<2>(p, mask, bias, q);
    case 4: return bits16_at<4>(p, mask, bias, q);
    default: return bits16_at<6>(p, mask, bias, q);
  }
}
BRAZE_HD void add_bits16(const uint8_t* p, int s, int mask, int lsh, int8_t* q) {
  switch (s) {
    case 0: return add_bits16_at<0>(p, mask, lsh, q);
    case 1: return add_bits16_at<1>(p, mask, lsh, q);
    case 2: return add_bits16_at<2>(p, mask, lsh, q);
    case 3: return add_bits16_at<3>(p, mask, lsh, q);
    case 4: return add_bits16_at<4>(p, mask, lsh, q);
    case 5: return add_bits16_at<5>(p, mask, lsh, q);
    case 6: return add_bits16_at<6>(p, mask, lsh, q);
    default: return add_bits16_at<7>(p, mask, lsh, q);
  }
}

// Elements [k0, k0 + kChunk) of a row as float32.
template <QFormat F> BRAZE_HD void decode(const uint8_t* row, int64_t k0, float* out) {
  int8_t q[Codec<F>::kChunk];
  float d, m;
  Codec<F>::levels(row, k0, q, d, m);
  for (int i = 0; i < Codec<F>::kChunk; ++i) out[i] = affine<Codec<F>::kAffine>(d, m, float(q[i]));
}

}  // namespace braze::quant
