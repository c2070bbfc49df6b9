// Vector helpers of the quant family's CPU dequantize kernels (quant.cpp and
// quant_mx.cpp), their output side above all: W-lane vectors rounded to the output dtype in registers and
// written either normally or, for outputs larger than stream_min_bytes(),
// around the cache. A streamed write needs no read of the line first, which
// is a third of a dequantize's traffic with f32 out; the copy ceiling's memcpy
// streams too. Rounding is store<D>'s: only the instructions differ.
#pragma once
#include <type_traits>

#include "cpu/hw_bf16.h"
#include "cpu/runtime.h"
#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA {

#if defined(__AVX2__) && !defined(__AVX512F__)
// bf16 of 8 lanes (round to nearest even, NaN kept quiet) in AVX2
// instructions: the generic vector-extension store lowers its u32 -> u16
// narrowing lane by lane, which cost as much as decoding a block.
// The bf16 bits of each lane in its low half (the high half zero).
inline __m256i bf16_lanes(vf v) {
  const __m256i u = (__m256i)v, one = _mm256_set1_epi32(1);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40)), nan);
}
inline __m128i bf16_bits(vf v) {
  const __m256i r = bf16_lanes(v);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}
// The output bits of one vector as two (f32) or one (f16, bf16) 16-byte parts.
template <class D> inline void out_parts(vf v, __m128i* part) {
  if constexpr (std::is_same_v<D, F32>) {
    part[0] = _mm_castps_si128(_mm256_castps256_ps128((__m256)v));
    part[1] = _mm_castps_si128(_mm256_extractf128_ps((__m256)v, 1));
  } else if constexpr (std::is_same_v<D, BF16>) {
    part[0] = bf16_bits(v);
  } else {
    part[0] = _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
}
#endif

#if defined(__AVX512F__)
// bf16 of 16 lanes, as bf16_lanes below (round to nearest even, NaN kept quiet),
// narrowed with vpmovdw: the generic store<BF16> narrows lane by lane.
inline __m256i bf16_bits16(vf v) {
  const __m512i u = (__m512i)v;
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_cvtepi32_epi16(
      _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40))));
}

// bfloat16 outputs narrowed by AVX-512 BF16 (hw_bf16(): the kernels pick this storage
// tag at run time). The build's flags lack the extension, so the instructions are
// inline assembly: vcvtneps2bf16 / vcvtne2ps2bf16 round to nearest even and quiet
// NaNs as bf16_bits16 does, but read denormal inputs as zero, so a vector holding
// a denormal (vfpclassps) takes bf16_bits16 instead. Loads and the generic stores
// (row tails) are BF16's.
struct BF16N { using T = uint16_t; };
template <> inline vf load<BF16N>(const uint16_t* p) { return load<BF16>(p); }
template <> inline void store<BF16N>(uint16_t* p, vf v) { store<BF16>(p, v); }
inline bool has_denormal(vf v) { return _mm512_fpclass_ps_mask((__m512)v, 0x20) != 0; }
inline __m256i bf16_hw(vf v) {
  __m256i r;
  asm("vcvtneps2bf16 %1, %0" : "=v"(r) : "v"((__m512)v));
  return r;
}
// lo's 16 lanes, then hi's, as 32 bf16.
inline __m512i bf16_hw2(vf lo, vf hi) {
  __m512i r;
  asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(r) : "v"((__m512)hi), "v"((__m512)lo));
  return r;
}
#endif

// Calls body(N{}) with N = BF16N where D is BF16 and the run-time choice is on, else D.
template <class D, class F> inline void with_narrowing(F body) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<D, BF16>) {
    if (hw_bf16()) return body(BF16N{});
  }
#endif
  body(D{});
}

// One vector of output at p; Stream: a non-temporal store, p 16-byte aligned.
template <class D, bool Stream> inline void put(typename D::T* p, vf v) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<D, BF16> || std::is_same_v<D, BF16N>) {
    __m256i h;
    if constexpr (std::is_same_v<D, BF16N>) h = __builtin_expect(has_denormal(v), 0) ? bf16_bits16(v) : bf16_hw(v);
    else h = bf16_bits16(v);
    if constexpr (Stream) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(h));
      _mm_stream_si128(reinterpret_cast<__m128i*>(p) + 1, _mm256_extracti128_si256(h, 1));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
    }
    return;
  }
#endif
#if defined(__AVX2__) && !defined(__AVX512F__)
  if constexpr (!Stream && std::is_same_v<D, F32>) {
    _mm256_storeu_ps(p, (__m256)v);
    return;
  }
  constexpr int n = int(sizeof(typename D::T)) * W / 16;
  __m128i part[2];
  out_parts<D>(v, part);
  for (int k = 0; k < n; ++k) {
    auto* q = reinterpret_cast<__m128i*>(p) + k;
    if constexpr (Stream) _mm_stream_si128(q, part[k]); else _mm_storeu_si128(q, part[k]);
  }
#elif defined(__SSE2__)
  if constexpr (Stream && sizeof(typename D::T) * W % 16 == 0) {
    alignas(64) typename D::T tmp[W];
    store<D>(tmp, v);
    for (size_t k = 0; k < sizeof tmp / 16; ++k)
      _mm_stream_si128(reinterpret_cast<__m128i*>(p) + k, _mm_load_si128(reinterpret_cast<const __m128i*>(tmp) + k));
  } else {
    store<D>(p, v);
  }
#else
  store<D>(p, v);
#endif
}

// W levels (int8) -> W floats, in registers (intrinsics: once the codec is
// inlined, GCC turns the vector-extension conversion into W scalar ones).
inline vf levels_to_float(const int8_t* q) {
#if defined(__AVX512F__)
  return (vf)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
#elif defined(__AVX2__)
  return (vf)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
#else
  typedef int8_t vq __attribute__((vector_size(W)));
  vq v;
  memcpy(&v, q, sizeof v);
  return __builtin_convertvector(v, vf);
#endif
}

// a in every lane, -0.0 included (splat adds it to +0.0, which would drop the sign
// and break bit-exactness where GGML's reference computes 0 - (-0)).
inline vf broadcast(float a) {
#if defined(__AVX512F__)
  return (vf)_mm512_set1_ps(a);
#elif defined(__AVX__)
  return (vf)_mm256_set1_ps(a);
#else
  vf v;
  for (int i = 0; i < W; ++i) v[i] = a;
  return v;
#endif
}

// a + b with a's NaN when both are NaN, as x86's scalar add (and so the
// numpy references) gives: the compiler may swap the operands of a vector
// add, which keeps the value but takes the other NaN.
// The AVX-512 build writes the add as one vaddps whose first source is a (inline
// assembly, which the compiler cannot reorder), NaN-safe with no select.
inline vf add_keep_nan(vf a, vf b) {
#if defined(__AVX512F__)
  __m512 r;
  asm("vaddps %2, %1, %0" : "=v"(r) : "v"((__m512)a), "v"((__m512)b));
  return (vf)r;
#else
  return select(a != a, a, a + b);
#endif
}

// Two vectors of output at p (2 W elements): bf16 packs both in one pass.
template <class D, bool Stream> inline void put2(typename D::T* p, vf v0, vf v1) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<D, BF16N>) {
    if (__builtin_expect(has_denormal(v0) || has_denormal(v1), 0)) {
      put<BF16, Stream>(p, v0);
      put<BF16, Stream>(p + W, v1);
      return;
    }
    const __m512i h = bf16_hw2(v0, v1);
    if constexpr (Stream) {
      // p is 16-byte aligned: as few stores as its place in a 64-byte line allows
      auto* q = reinterpret_cast<__m128i*>(p);
      switch (uintptr_t(p) % 64) {
        case 0: _mm512_stream_si512(reinterpret_cast<__m512i*>(p), h); break;
        case 32:
          _mm256_stream_si256(reinterpret_cast<__m256i*>(q), _mm512_castsi512_si256(h));
          _mm256_stream_si256(reinterpret_cast<__m256i*>(q + 2), _mm512_extracti64x4_epi64(h, 1));
          break;
        default:  // 16 or 48: bytes 16-47 are a 32-byte-aligned half line
          _mm_stream_si128(q, _mm512_castsi512_si128(h));
          _mm256_stream_si256(reinterpret_cast<__m256i*>(q + 1), _mm512_castsi512_si256(_mm512_alignr_epi64(h, h, 2)));
          _mm_stream_si128(q + 3, _mm512_extracti32x4_epi32(h, 3));
      }
    } else {
      _mm512_storeu_si512(p, h);
    }
    return;
  }
#endif
#if defined(__AVX2__) && !defined(__AVX512F__)
  if constexpr (std::is_same_v<D, BF16>) {
    const __m256i r = _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_lanes(v0), bf16_lanes(v1)), 0xd8);
    if constexpr (Stream) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(r));
      _mm_stream_si128(reinterpret_cast<__m128i*>(p) + 1, _mm256_extracti128_si256(r, 1));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), r);
    }
    return;
  }
#endif
  put<D, Stream>(p, v0);
  put<D, Stream>(p + W, v1);
}

// Whether a dequantize into `rows` rows of `row_elems` elements at `out` (rows
// `stride` elements apart) streams: a large output whose vectors all start on
// 16-byte boundaries.
template <class D>
inline bool stream_out(const void* out, int64_t rows, int64_t row_elems, int64_t stride) {
  constexpr int64_t S = sizeof(typename D::T);
  return S * W % 16 == 0 && rows * row_elems * S > stream_min_bytes() && uintptr_t(out) % 16 == 0 &&
         stride * S % 16 == 0;
}

// Runs body(std::bool_constant<Stream>{}) for the streaming choice, fencing
// the streamed stores before the pool's task returns.
template <class F> inline void with_stream(bool on, F body) {
  if (on) {
    body(std::true_type{});
    stream_fence();
  } else {
    body(std::false_type{});
  }
}

}  // namespace braze::cpu::BRAZE_ISA
