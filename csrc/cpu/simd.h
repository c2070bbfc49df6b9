// Portable SIMD for CPU kernels: GCC/Clang vector extensions W floats wide,
// W the native width of the translation unit's ISA (each family is compiled
// once per ISA): 16 with AVX-512, 8 with AVX, 4 otherwise. Wider-than-native
// vector types would be split by the compiler, and GCC then lowers their
// comparisons lane by lane. Loads and stores convert float16 / bfloat16 in
// registers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include <string>
#include <type_traits>

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
// max / min as the instructions define them: b when either is NaN or both are zero.
#if defined(__AVX512F__)
inline vf vmax(vf a, vf b) { return (vf)_mm512_max_ps((__m512)a, (__m512)b); }
inline vf vmin(vf a, vf b) { return (vf)_mm512_min_ps((__m512)a, (__m512)b); }
#elif defined(__AVX__)
inline vf vmax(vf a, vf b) { return (vf)_mm256_max_ps((__m256)a, (__m256)b); }
inline vf vmin(vf a, vf b) { return (vf)_mm256_min_ps((__m256)a, (__m256)b); }
#else
inline vf vmax(vf a, vf b) { return select(a > b, a, b); }
inline vf vmin(vf a, vf b) { return select(a < b, a, b); }
#endif

// Whether any lane of a comparison result is set; any_greater(a, b): any a > b.
inline bool any(vi m) {
  for (int i = 0; i < W; ++i)
    if (m[i]) return true;
  return false;
}
inline bool any_greater(vf a, vf b) {
#if defined(__AVX512F__)
  return _mm512_cmp_ps_mask((__m512)a, (__m512)b, _CMP_GT_OQ) != 0;
#elif defined(__AVX__)
  return _mm256_movemask_ps(_mm256_cmp_ps((__m256)a, (__m256)b, _CMP_GT_OQ)) != 0;
#else
  return any(a > b);
#endif
}

// One bit per lane of a comparison result, lane 0 the lowest.
inline uint32_t mask_bits(vi m) {
#if defined(__AVX512F__)
  __m512i v;
  memcpy(&v, &m, sizeof v);
  return _mm512_cmpneq_epi32_mask(v, _mm512_setzero_si512());
#elif defined(__AVX__)
  return uint32_t(_mm256_movemask_ps((__m256)m));
#else
  uint32_t b = 0;
  for (int i = 0; i < W; ++i) b |= uint32_t(m[i] != 0) << i;
  return b;
#endif
}

// Sums of many floats kept in double, as sequential double sums would be,
// without a dependency chain per element: W doubles in two native vectors
// (a single W-double vector type is spilled to the stack by GCC).
typedef double vdh __attribute__((vector_size(4 * W)));
struct DoubleSum {
  vdh lo{}, hi{};
  void add(vf v) {
#if defined(__AVX512F__)
    lo += __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7), vdh);
    hi += __builtin_convertvector(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15), vdh);
#elif defined(__AVX__)
    lo += __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), vdh);
    hi += __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), vdh);
#else
    lo += __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1), vdh);
    hi += __builtin_convertvector(__builtin_shufflevector(v, v, 2, 3), vdh);
#endif
  }
  double sum() const {
    const vdh t = lo + hi;
    double s = 0;
    for (int i = 0; i < W / 2; ++i) s += t[i];
    return s;
  }
};

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
// One element of dtype D to / from f32 (round to nearest even).
template <class D> inline float to_f32(typename D::T v) {
  if constexpr (std::is_same_v<D, F32>) return v;
  else if constexpr (std::is_same_v<D, F16>) return f16_to_f32(v);
  else return bf16_to_f32(v);
}
template <class D> inline typename D::T from_f32(float v) {
  if constexpr (std::is_same_v<D, F32>) return v;
  else if constexpr (std::is_same_v<D, F16>) return f32_to_f16(v);
  else return f32_to_bf16(v);
}
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

// Walks [0, n) as f(i, count): first `head` elements (if any), then W-lane
// steps, then the tail. A head that brings p + i to a vector boundary lets
// the steps use aligned stores (stream_store).
template <class F> inline void segments(int64_t n, int64_t head, F f) {
  int64_t i = 0;
  if (head > 0) {
    f(int64_t(0), std::min(head, n));
    i = head;
  }
  for (; i + W <= n; i += W) f(i, int64_t(W));
  if (i < n) f(i, n - i);
}
// Walks [0, n) in W-lane steps; body(i, count) with count == W except the tail.
template <class F> inline void lanes(int64_t n, F body) { segments(n, 0, body); }

// Load / store `c` lanes at p + i (c == W, or the tail with `fill` beyond it).
template <class D> inline vf ld(const typename D::T* p, int64_t i, int64_t c, float fill = 0.f) {
  return c == W ? load<D>(p + i) : load_n<D>(p + i, c, fill);
}
template <class D> inline void st(typename D::T* p, int64_t i, int64_t c, vf v) {
  if (c == W) store<D>(p + i, v); else store_n<D>(p + i, v, c);
}

// Elements from p to its next vector boundary; -1 when p is not float-aligned.
inline int64_t to_vector_boundary(const float* p) {
  const uintptr_t u = uintptr_t(p);
  if (u % 4) return -1;
  return int64_t((sizeof(vf) - u % sizeof(vf)) % sizeof(vf) / 4);
}
// A non-temporal store (around the cache) of a whole vector at a vector
// boundary; stream_fence() orders such stores before the results are read.
inline void stream_store(float* p, vf v) {
#if defined(__AVX512F__)
  _mm512_stream_ps(p, (__m512)v);
#elif defined(__AVX__)
  _mm256_stream_ps(p, (__m256)v);
#else
  store<F32>(p, v);
#endif
}
inline void stream_fence() {
#if defined(__AVX__)
  _mm_sfence();
#endif
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
// x = (n/16) ln2 + r with n an integer and |r| <= ln2/32: e^x = 2^floor(n/16)
// * 2^((n mod 16)/16) * e^r, the middle factor from a 16-entry table
// (vpermps on n's low bits), e^r = 1 + r + r^2/2 + r^3/6 (truncation 1e-8);
// about 2 ulp in all, like the polynomial form below. vscalefps applies the
// power of two with IEEE overflow / underflow / denormal handling; the clamp
// keeps NaN (max / min return their second operand on NaN).
alignas(64) inline constexpr float kExp2Sixteenths[16] = {
    1.0f, 1.0442737824274138f, 1.0905077326652577f, 1.1387886347566916f,
    1.189207115002721f, 1.241857812073484f, 1.2968395546510096f, 1.3542555469368927f,
    1.4142135623730951f, 1.4768261459394993f, 1.5422108254079407f, 1.6104903319492543f,
    1.681792830507429f, 1.7562521603732995f, 1.8340080864093424f, 1.9152065613971474f};
// ClampTop = false (vexp_nonpos below): the same less the upper clamp min(89, x).
template <bool ClampTop = true> inline vf vexp_t(vf x) {
  __m512 v;
  memcpy(&v, &x, sizeof v);
  const __m512 magic = _mm512_set1_ps(12582912.f);  // 1.5 * 2^23: adding it rounds to an integer
  __m512 xc = _mm512_max_ps(_mm512_set1_ps(-104.f), v);
  if constexpr (ClampTop) xc = _mm512_min_ps(_mm512_set1_ps(89.f), xc);
  const __m512 nm = _mm512_fmadd_ps(xc, _mm512_set1_ps(16 * 1.44269504088896341f), magic);  // n + magic
  const __m512 k = _mm512_fmadd_ps(nm, _mm512_set1_ps(1.f / 16), _mm512_set1_ps(-12582912.f / 16));  // n/16, exact
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), xc);  // ln2 in two parts: k * hi is exact
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(1.f / 6), r, _mm512_set1_ps(0.5f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.f));
  const __m512 t = _mm512_permutexvar_ps(_mm512_castps_si512(nm), _mm512_load_ps(kExp2Sixteenths));
  const __m512 res = _mm512_scalef_ps(_mm512_fmadd_ps(t, _mm512_mul_ps(q, r), t), k);
  vf out;
  memcpy(&out, &res, sizeof out);
  return out;
}
inline vf vexp(vf x) { return vexp_t<true>(x); }
// vexp(z) for z <= 0, -inf or NaN with one operation fewer: min(89, z) is z
// for every such z (NaN: min returns its second operand), so the same bits.
inline vf vexp_nonpos(vf x) { return vexp_t<false>(x); }
#elif defined(__AVX2__) && defined(__FMA__)
// The same with 8 lanes: n/8 steps and an 8-entry table (vpermps), a quartic
// for e^r (|r| <= ln2/16, truncation 1.3e-9), and 2^floor(n/8) applied in two
// halves (no vscalefps before AVX-512) so that denormal results stay exact.
// x is clamped to [-104, 88.7228...]: exp(-104) rounds to 0 and the top
// rounds to inf, so -inf / +inf need no special case; NaN passes the clamp.
alignas(32) inline constexpr float kExp2Eighths[8] = {
    1.0f, 1.0905077326652577f, 1.189207115002721f, 1.2968395546510096f,
    1.4142135623730951f, 1.5422108254079407f, 1.681792830507429f, 1.8340080864093424f};
inline vf vexp(vf x) {
  const __m256 magic = _mm256_set1_ps(12582912.f);  // 1.5 * 2^23
  const __m256 xc = _mm256_min_ps(_mm256_set1_ps(88.72283935546875f), _mm256_max_ps(_mm256_set1_ps(-104.f), (__m256)x));
  const __m256 nm = _mm256_fmadd_ps(xc, _mm256_set1_ps(8 * 1.44269504088896341f), magic);  // n + magic
  const __m256 kf = _mm256_sub_ps(nm, magic);                                               // n, exact
  __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(0.693359375f / 8), xc);
  r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(-2.12194440e-4f / 8), r);
  __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(1.f / 24), r, _mm256_set1_ps(1.f / 6));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0.5f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.f));
  const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(nm), _mm256_castps_si256(magic));
  const __m256 t = _mm256_permutevar8x32_ps(_mm256_load_ps(kExp2Eighths), n);
  const __m256 p = _mm256_fmadd_ps(t, _mm256_mul_ps(q, r), t);
  const __m256i k = _mm256_srai_epi32(n, 3), k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  return (vf)_mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
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
#if !defined(__AVX512F__)
inline vf vexp_nonpos(vf x) { return vexp(x); }
#endif

}  // namespace braze::cpu::BRAZE_ISA
