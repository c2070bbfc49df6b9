// What every format's codec provides, and byte helpers the codecs share.
//
// Codec<F> (specialized in the group headers, csrc/core/quant/<group>.h):
//   kChunk                      elements one decode call produces (a divisor of the block);
//   decode(row, k0, out)        elements [k0, k0 + kChunk) of one row (k0 a multiple of kChunk)
//                               from that row's bytes, as float32: a GPU thread can own one chunk
//                               and write coalesced, a CPU loop walks the chunks;
//   encode(x, block)            (where the format quantizes here) one block from block floats.
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

}  // namespace braze::quant
