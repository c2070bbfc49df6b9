// Portable SIMD for CPU kernels: GCC/Clang vector extensions W floats wide,
// W the native width of the translation unit's ISA (each family is compiled
// once per ISA): 16 with AVX-512, 8 with AVX, 4 otherwise. Wider-than-native
// vector types would be split by the compiler, and GCC then lowers their
// comparisons lane by lane. Loads and stores convert float16 / bfloat16 in
// registers.
#pragma once
#include <cstdint>
#include <cstring>

#include <string>

#include "core/dtype.h"
#include "core/error.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace braze::cpu::BRAZE_ISA {

#if defined(__AVX512F__)
constexpr int W = 16;
#elif defined(__AVX__)
constexpr int W = 8;
#else
constexpr int W = 4;
#endif
typedef float vf __attribute__((vector_size(4 * W)));
typedef uint32_t vu __attribute__((vector_size(4 * W)));
typedef int32_t vi __attribute__((vector_size(4 * W)));
typedef uint16_t vh __attribute__((vector_size(2 * W)));

// Storage types: the element each dtype is stored as.
struct F32 { using T = float; };
struct F16 { using T = uint16_t; };
struct BF16 { using T = uint16_t; };

inline vf splat(float a) { return vf{} + a; }

inline float hsum(vf v) {
  float s = 0.f;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}
inline float hmax(vf v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
// (v0, v1, v2, v3, ...) -> (v1, v0, v3, v2, ...)
inline vf swap_pairs(vf v) {
#if defined(__AVX512F__)
  return __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
#elif defined(__AVX__)
  return __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
#else
  return __builtin_shufflevector(v, v, 1, 0, 3, 2);
#endif
}

inline vf select(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); }
inline vf vmax(vf a, vf b) { return select(a > b, a, b); }
inline vf vmin(vf a, vf b) { return select(a < b, a, b); }

template <class D> inline vf load(const typename D::T* p);
template <class D> inline void store(typename D::T* p, vf v);

template <> inline vf load<F32>(const float* p) {
  vf v;
  memcpy(&v, p, sizeof v);
  return v;
}
template <> inline void store<F32>(float* p, vf v) { memcpy(p, &v, sizeof v); }

template <> inline vf load<BF16>(const uint16_t* p) {
  vh h;
  memcpy(&h, p, sizeof h);
  return (vf)(__builtin_convertvector(h, vu) << 16);
}
template <> inline void store<BF16>(uint16_t* p, vf v) {
  vu u = (vu)v;
  vu nan = (vu)((u & 0x7fffffffu) > 0x7f800000u);
  vu rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  vu quiet = (u >> 16) | 0x40u;
  vh h = __builtin_convertvector((quiet & nan) | (rounded & ~nan), vh);
  memcpy(p, &h, sizeof h);
}

template <> inline vf load<F16>(const uint16_t* p) {
  vf v;
#if defined(__AVX512F__)
  __m512 r = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
  memcpy(&v, &r, sizeof v);
#elif defined(__F16C__) && defined(__AVX__)
  __m256 r = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
  memcpy(&v, &r, sizeof v);
#else
  for (int i = 0; i < W; ++i) v[i] = f16_to_f32(p[i]);
#endif
  return v;
}
template <> inline void store<F16>(uint16_t* p, vf v) {
#if defined(__AVX512F__)
  __m512 r;
  memcpy(&r, &v, sizeof v);
  _mm256_storeu_si256((__m256i*)p, _mm512_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__) && defined(__AVX__)
  __m256 r;
  memcpy(&r, &v, sizeof v);
  _mm_storeu_si128((__m128i*)p, _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  for (int i = 0; i < W; ++i) p[i] = f32_to_f16(v[i]);
#endif
}

// The last, partial vector of a row: n < W elements, the other lanes read as `fill`.
template <class D> inline vf load_n(const typename D::T* p, int64_t n, float fill = 0.f) {
  typename D::T tmp[W];
  store<D>(tmp, splat(fill));
  memcpy(tmp, p, size_t(n) * sizeof(typename D::T));
  return load<D>(tmp);
}
template <class D> inline void store_n(typename D::T* p, vf v, int64_t n) {
  typename D::T tmp[W];
  store<D>(tmp, v);
  memcpy(p, tmp, size_t(n) * sizeof(typename D::T));
}

// Walks [0, n) in W-lane steps; body(i, count) with count == W except the tail.
template <class F> inline void lanes(int64_t n, F body) {
  int64_t i = 0;
  for (; i + W <= n; i += W) body(i, int64_t(W));
  if (i < n) body(i, n - i);
}
// Load / store `c` lanes at p + i (c == W, or the tail with `fill` beyond it).
template <class D> inline vf ld(const typename D::T* p, int64_t i, int64_t c, float fill = 0.f) {
  return c == W ? load<D>(p + i) : load_n<D>(p + i, c, fill);
}
template <class D> inline void st(typename D::T* p, int64_t i, int64_t c, vf v) {
  if (c == W) store<D>(p + i, v); else store_n<D>(p + i, v, c);
}

// Calls f(D{}) with D the storage type of a float dtype.
template <class F> inline void with_float_dtype(DType t, F f) {
  switch (t) {
    case DType::f32: return f(F32{});
    case DType::f16: return f(F16{});
    case DType::bf16: return f(BF16{});
    default: throw TypeError(std::string("unsupported dtype ") + dtype_name(t));
  }
}

// Rounds to the storage dtype and back, in registers.
template <class D> inline vf round_to(vf v) {
  if constexpr (sizeof(typename D::T) == 4) {
    return v;
  } else {
    typename D::T tmp[W];
    store<D>(tmp, v);
    return load<D>(tmp);
  }
}


// exp(x) for float lanes: x = k ln2 + r, |r| <= ln2/2, a degree-7 polynomial
// for e^r (relative error ~2e-7), then p * 2^k. exp(-inf) = 0, exp(+inf) = inf,
// overflow -> inf, denormal results kept, NaN stays NaN.
inline vf exp_poly(vf r) {
  vf p = splat(1.9875691500E-4f);
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  return p * r * r + r + 1.0f;
}

#if defined(__AVX512F__)
// vscalefps applies 2^k with IEEE overflow / underflow / denormal handling, so
// only the reduction range needs clamping.
inline vf vexp(vf x) {
  __m512 v;
  memcpy(&v, &x, sizeof v);
  __m512 xc = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-104.f)), _mm512_set1_ps(89.f));
  __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  vf rv, out;
  memcpy(&rv, &r, sizeof r);
  vf p = exp_poly(rv);
  __m512 pm, res;
  memcpy(&pm, &p, sizeof pm);
  res = _mm512_scalef_ps(pm, k);
  res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
  memcpy(&out, &res, sizeof out);
  return out;
}
#else
// 2^k applied in two halves so that denormal results and results near FLT_MAX are right.
inline vf vexp(vf x) {
  const float hi = 88.72283935546875f, lo = -103.972076416f;
  vi over = x > hi, under = x < lo, nan = x != x;
  vf xc = select(over, splat(hi), select(under | nan, splat(lo), x));
  vf y = xc * 1.44269504088896341f + 0.5f;
  vf t = __builtin_convertvector(__builtin_convertvector(y, vi), vf);
  vf kr = t - select(t > y, splat(1.f), splat(0.f));  // floor
  vf r = xc - kr * 0.693359375f + kr * 2.12194440e-4f;
  vf p = exp_poly(r);
  vi k = __builtin_convertvector(kr, vi), k1 = k >> 1, k2 = k - k1;
  vf res = p * (vf)((k1 + 127) << 23) * (vf)((k2 + 127) << 23);
  res = select(over, splat(__builtin_inff()), select(under, splat(0.f), res));
  return select(nan, x, res);
}
#endif

}  // namespace braze::cpu::BRAZE_ISA
