// Whole-block decoders of the CPU dequantize for the AVX-512 build (quant.cpp):
// q8_0, q4_0, q4_K, q5_K and q6_K. Codes are widened to int32 lanes
// (vpmovzxbd / vpmovsxbd), nibbles and high bits taken apart with constant
// shifts and masks, and each value made with the codec's float32 operations in
// its order (csrc/core/quant/ggml.h, kquants.h): d * float(q), then - m for the
// K-quants with mins; scales and mins are the codec's scalar products, once a
// sub-block. Same bits as the codec's `levels` path; pairs of vectors go to put2.
#pragma once
#include "core/quant/ggml.h"
#include "core/quant/kquants.h"
#include "cpu/quant_store.h"

namespace braze::cpu::BRAZE_ISA {

#if defined(__AVX512F__)
namespace unpack {
using quant::QFormat;

// 16 bytes at p as 16 int32 lanes, unsigned or signed.
inline __m512i u8x16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512i s8x16(const uint8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512i set1(int v) { return _mm512_set1_epi32(v); }
// v >> S for S >= 0, v << -S otherwise (S a constant).
template <int S> inline __m512i shift(__m512i v) {
  if constexpr (S > 0) return _mm512_srli_epi32(v, S);
  else if constexpr (S < 0) return _mm512_slli_epi32(v, -S);
  else return v;
}
// a | (b & m): one vpternlogd.
inline __m512i or_masked(__m512i a, __m512i b, __m512i m) { return _mm512_ternarylogic_epi32(a, b, m, 0xf8); }
// d * float(q), the codec's order of operands.
inline vf scaled(vf d, __m512i q) { return (vf)_mm512_mul_ps((__m512)d, _mm512_cvtepi32_ps(q)); }
// d * float(q) - m.
inline vf scaled_sub(vf d, __m512i q, vf m) { return (vf)_mm512_sub_ps((__m512)scaled(d, q), (__m512)m); }

template <class D, bool S> __attribute__((always_inline)) inline void q8_0(const uint8_t* b, typename D::T* dst) {
  const vf d = broadcast(quant::load_f16(b));
  put2<D, S>(dst, scaled(d, s8x16(b + 2)), scaled(d, s8x16(b + 18)));
}

template <class D, bool S> __attribute__((always_inline)) inline void q4_0(const uint8_t* b, typename D::T* dst) {
  const vf d = broadcast(quant::load_f16(b));
  const __m512i c = u8x16(b + 2), eight = set1(8);
  put2<D, S>(dst, scaled(d, _mm512_sub_epi32(_mm512_and_si512(c, set1(15)), eight)),
             scaled(d, _mm512_sub_epi32(_mm512_srli_epi32(c, 4), eight)));
}

// Lane i of v in every lane.
template <int I> inline vf lane(__m512 v) { return (vf)_mm512_permutexvar_ps(_mm512_set1_epi32(I), v); }

// The 8 scales (lanes 0-7, times d) and 8 mins (lanes 8-15, times dmin) of a q4_K / q5_K
// block b, as kq_detail::scale_min_k4 unpacks them from the 12 bytes at b + 4 and the codec
// multiplies them: per lane a "low" byte (sub-blocks 0-3: six bits; 4-7: four bits, the
// mins' the high nibble) and, for sub-blocks 4-7, the top two bits of another byte as bits 4-5.
inline __m512 k4_scales(const uint8_t* b) {
  const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4));  // bytes 4..19 of 144 / 176
  const __m512i lo = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(s, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)));
  const __m512i hi = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(s, _mm_setr_epi8(0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 4, 5, 6, 7)));
  const __m512i low = _mm512_and_si512(_mm512_srlv_epi32(lo, _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4)),
                                       _mm512_setr_epi32(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
  const __m512i top = _mm512_setr_epi32(0, 0, 0, 0, 0x30, 0x30, 0x30, 0x30, 0, 0, 0, 0, 0x30, 0x30, 0x30, 0x30);
  const __m512i q = or_masked(low, _mm512_srli_epi32(hi, 2), top);
  const __m512 dm = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(quant::load_f16(b)), _mm512_set1_ps(quant::load_f16(b + 2)));
  return _mm512_mul_ps(dm, _mm512_cvtepi32_ps(q));
}

// Sub-blocks 2P and 2P + 1 of a q4_K (Q5 false) or q5_K block: 32 bytes of nibbles
// (low: sub-block 2P, high: 2P + 1); q5_K's fifth bit j of element i is bit j of qh[i].
template <class D, bool S, bool Q5, int P>
__attribute__((always_inline)) inline void k4_pair(const uint8_t* b, __m512 sm, typename D::T* dst) {
  const vf d0 = lane<2 * P>(sm), m0 = lane<8 + 2 * P>(sm), d1 = lane<2 * P + 1>(sm), m1 = lane<9 + 2 * P>(sm);
  const uint8_t* qs = b + (Q5 ? 48 : 16) + 32 * P;
  const __m512i low4 = set1(15), bit4 = set1(16);
  vf lo[2], hi[2];
  for (int h = 0; h < 2; ++h) {
    const __m512i c = u8x16(qs + 16 * h);
    __m512i ql = _mm512_and_si512(c, low4), qh = _mm512_srli_epi32(c, 4);
    if constexpr (Q5) {
      const __m512i hb = u8x16(b + 16 + 16 * h);
      ql = or_masked(ql, shift<2 * P - 4>(hb), bit4);
      qh = or_masked(qh, shift<2 * P + 1 - 4>(hb), bit4);
    }
    lo[h] = scaled_sub(d0, ql, m0);
    hi[h] = scaled_sub(d1, qh, m1);
  }
  put2<D, S>(dst + 64 * P, lo[0], lo[1]);
  put2<D, S>(dst + 64 * P + 32, hi[0], hi[1]);
}

template <class D, bool S, bool Q5> __attribute__((always_inline)) inline void k4(const uint8_t* b, typename D::T* dst) {
  const __m512 sm = k4_scales(b);
  k4_pair<D, S, Q5, 0>(b, sm, dst);
  k4_pair<D, S, Q5, 1>(b, sm, dst);
  k4_pair<D, S, Q5, 2>(b, sm, dst);
  k4_pair<D, S, Q5, 3>(b, sm, dst);
}

// q6_K chunk C (16 elements) of half H: low four bits from ql (nibble C / 4 of
// bytes 16 (C % 4)), high two from qh (bits 2 (C / 2) of bytes 16 (C % 2)), minus 32.
template <int H, int C> inline vf q6_chunk(const uint8_t* b, __m512 ds) {
  const __m512i l = u8x16(b + 64 * H + 16 * (C % 4)), h = u8x16(b + 128 + 32 * H + 16 * (C % 2));
  __m512i lo = shift<4 * (C / 4)>(l);
  if constexpr (C / 4 == 0) lo = _mm512_and_si512(lo, set1(15));
  const __m512i q = _mm512_sub_epi32(or_masked(lo, shift<2 * (C / 2) - 4>(h), set1(0x30)), set1(32));
  return scaled(lane<8 * H + C>(ds), q);
}
template <class D, bool S, int H, int C>
__attribute__((always_inline)) inline void q6_pair(const uint8_t* b, __m512 ds, typename D::T* dst) {
  put2<D, S>(dst + 128 * H + 16 * C, q6_chunk<H, C>(b, ds), q6_chunk<H, C + 1>(b, ds));
}
// The 16 scales of a q6_K block times d (the codec's d * float(int8 scale)).
inline __m512 q6_scales(const uint8_t* b) {
  return _mm512_mul_ps(_mm512_set1_ps(quant::load_f16(b + 208)), _mm512_cvtepi32_ps(s8x16(b + 192)));
}
template <class D, bool S, int H>
__attribute__((always_inline)) inline void q6_half(const uint8_t* b, __m512 ds, typename D::T* dst) {
  q6_pair<D, S, H, 0>(b, ds, dst);
  q6_pair<D, S, H, 2>(b, ds, dst);
  q6_pair<D, S, H, 4>(b, ds, dst);
  q6_pair<D, S, H, 6>(b, ds, dst);
}
}  // namespace unpack

// Whether a format has a whole-block decoder here.
template <quant::QFormat F> constexpr bool kBlockUnpack =
    F == quant::QFormat::q8_0 || F == quant::QFormat::q4_0 || F == quant::QFormat::q4_K ||
    F == quant::QFormat::q5_K || F == quant::QFormat::q6_K;

// One block of F at b into dst (kBlockUnpack<F>).
template <quant::QFormat F, class D, bool S>
__attribute__((always_inline)) inline void unpack_block(const uint8_t* b, typename D::T* dst) {
  using quant::QFormat;
  if constexpr (F == QFormat::q8_0) unpack::q8_0<D, S>(b, dst);
  else if constexpr (F == QFormat::q4_0) unpack::q4_0<D, S>(b, dst);
  else if constexpr (F == QFormat::q4_K) unpack::k4<D, S, false>(b, dst);
  else if constexpr (F == QFormat::q5_K) unpack::k4<D, S, true>(b, dst);
  else {
    static_assert(F == QFormat::q6_K, "no block decoder");
    const __m512 ds = unpack::q6_scales(b);
    unpack::q6_half<D, S, 0>(b, ds, dst);
    unpack::q6_half<D, S, 1>(b, ds, dst);
  }
}
#else
template <quant::QFormat F> constexpr bool kBlockUnpack = false;
template <quant::QFormat F, class D, bool S> void unpack_block(const uint8_t* b, typename D::T* dst);  // never called
#endif

}  // namespace braze::cpu::BRAZE_ISA
