// out[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]) on the CPU, W quantized (any
// format of core/quant/formats.h, read through its codec) or dense.
//
// GEMV (m <= 16, decode): W rows split over the pool, each row read once and
// decoded a chunk at a time; block formats stay int8 levels, converted to f32
// in vectors and dotted with every row of x, the chunk's scale applied to the
// dot (d * sum(q x)) and its offset through the chunk sums of x (m * sum(x)).
// GEMM (m > 16, prefill): a panel of W rows decoded to f32 once per K block
// and packed k-major, then a register-blocked f32 kernel over rows of x.
// Every output element is summed by one thread in a fixed order: results do
// not depend on the thread count.
#include "cpu/quant.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/quant/affine.h"
#include "core/quant/fp8.h"
#include "core/quant/ggml.h"
#include "core/quant/gguf_fp4.h"
#include "core/quant/int8.h"
#include "core/quant/iquants.h"
#include "core/quant/kquants.h"
#include "core/quant/mx.h"
#include "core/quant/nvfp4.h"
#include "core/quant_mx.h"
#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA {
namespace {

using quant::Affine;
using quant::Codec;
using quant::Elem;
using quant::ElemCode;
using quant::QFormat;

// Chunks are multiples of 8 elements (fp8 / int8 rows only promise 8), so the
// GEMV works in 8-lane vectors on every ISA.
typedef float f8 __attribute__((vector_size(32)));
typedef int8_t i8x8 __attribute__((vector_size(8)));

inline f8 ld8(const float* p) {
  f8 v;
  memcpy(&v, p, sizeof v);
  return v;
}
inline f8 splat8(float a) { return f8{} + a; }
// 8 int8 levels as f32: GCC turns __builtin_convertvector(i8x8 -> f8) into 8 scalar conversions.
inline f8 levels8(const int8_t* q) {
#if defined(__AVX2__)
  const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
  f8 v;
  memcpy(&v, &f, sizeof v);
  return v;
#else
  i8x8 b;
  memcpy(&b, q, 8);
  return __builtin_convertvector(b, f8);
#endif
}
inline float hsum8(f8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// n elements of dtype D at src -> f32 at dst.
template <class D> inline void convert_row(const typename D::T* src, float* dst, int64_t n) {
  lanes(n, [&](int64_t i, int64_t c) { st<F32>(dst, i, c, ld<D>(src, i, c)); });
}

// ------------------------------------------------------------ decoders
// A decoder yields elements [k0, k0 + kChunk) of row r, either as int8 levels
// with the chunk's scale and offset (kLevels: block formats, through
// Codec<F>::levels) or as floats (split layouts through their decode helpers,
// dense rows converted).
template <QFormat F> struct BlockDec {
  static constexpr int kChunk = Codec<F>::kChunk;
  static constexpr bool kLevels = true;
  static constexpr Affine kAffine = Codec<F>::kAffine;
  const quant::DequantArgs& a;
  void levels(int64_t r, int64_t k0, int8_t* q, float& d, float& m) const {
    Codec<F>::levels(a.data + r * a.data_stride, k0, q, d, m);
  }
};

// q8_0, q4_0, q4_1: a whole block of 32 a chunk, unpacked with vector ops (the
// codec's levels yield 16 elements at a time, one by one). Same levels, scale
// and offset as the codec: results are those of BlockDec with chunks of 32.
typedef uint8_t u8x16 __attribute__((vector_size(16)));
template <QFormat F> struct Block32Dec {
  static_assert(F == QFormat::q8_0 || F == QFormat::q4_0 || F == QFormat::q4_1, "32-element GGML blocks");
  static constexpr int kChunk = 32;
  static constexpr bool kLevels = true;
  static constexpr Affine kAffine = Codec<F>::kAffine;
  static constexpr int64_t kBytes = quant::info(F).blocks.block_bytes;
  const quant::DequantArgs& a;
  void levels(int64_t r, int64_t k0, int8_t* q, float& d, float& m) const {
    const uint8_t* b = a.data + r * a.data_stride + (k0 / 32) * kBytes;
    d = quant::load_f16(b);
    if constexpr (F == QFormat::q8_0) {
      m = 0.f;
      memcpy(q, b + 2, 32);
    } else {
      const int off = F == QFormat::q4_1 ? 4 : 2;
      m = F == QFormat::q4_1 ? quant::load_f16(b + 2) : 0.f;
      u8x16 v;
      memcpy(&v, b + off, 16);
      // element j < 16: the low nibble of byte j, element j + 16: the high one; q4_0 centres on 8
      const uint8_t c = F == QFormat::q4_0 ? 8 : 0;
      const u8x16 lo = (v & 15) - c, hi = (v >> 4) - c;
      memcpy(q, &lo, 16);
      memcpy(q + 16, &hi, 16);
    }
  }
};

// Element code -> value tables, built once from the codec's decode_elem.
template <Elem E> const float* elem_table() {
  struct T {
    float v[1 << ElemCode<E>::bits];
    T() {
      for (uint32_t c = 0; c < (1u << ElemCode<E>::bits); ++c) v[c] = quant::decode_elem<E>(c);
    }
  };
  static const T t;
  return t.v;
}

template <Elem E> struct MxDec {
  static constexpr int kChunk = 32;
  static constexpr bool kLevels = false;
  const quant::DequantArgs& a;
  const float* t = elem_table<E>();
  void floats(int64_t r, int64_t k0, float* out, int64_t = kChunk) const {
    const uint8_t* row = a.data + r * a.data_stride;
    const float x = quant::e8m0_to_f32(static_cast<const uint8_t*>(a.scales)[r * a.scales_stride + k0 / 32]);
    for (int j0 = 0; j0 < kChunk; j0 += 8) {
      uint32_t c[8];
      quant::unpack8<ElemCode<E>::bits>(row, k0 + j0, c);
      for (int j = 0; j < 8; ++j) out[j0 + j] = t[c[j]] * x;
    }
  }
};

struct Nvfp4Dec {
  static constexpr int kChunk = 16;
  static constexpr bool kLevels = false;
  const quant::DequantArgs& a;
  const float* t4 = elem_table<Elem::e2m1>();
  const float* t8 = elem_table<Elem::e4m3>();
  void floats(int64_t r, int64_t k0, float* out, int64_t = kChunk) const {
    const uint8_t* p = a.data + r * a.data_stride + k0 / 2;
    const float s = t8[static_cast<const uint8_t*>(a.scales)[r * a.scales_stride + k0 / 16]], ts = *a.tensor_scale;
    for (int j = 0; j < 8; ++j) {
      out[2 * j] = t4[p[j] & 15u] * s * ts;
      out[2 * j + 1] = t4[p[j] >> 4] * s * ts;
    }
  }
};

// fp8 / int8: codes times a scale per tensor, per row or per 128 x 128 block.
inline float scaled_scale(const quant::DequantArgs& a, int64_t r, int64_t k0) {
  const float* s = static_cast<const float*>(a.scales);
  return a.group == quant::kFp8GroupTensor ? s[0]
       : a.group == quant::kFp8GroupRow    ? s[r]
                                           : s[r / 128 * a.scales_stride + k0 / 128];
}

template <Elem E> struct Fp8Dec {
  static constexpr int kChunk = 8;
  static constexpr bool kLevels = false;
  const quant::DequantArgs& a;
  const float* t = elem_table<E>();
  void floats(int64_t r, int64_t k0, float* out, int64_t = kChunk) const {
    const uint8_t* row = a.data + r * a.data_stride + k0;
    const float s = scaled_scale(a, r, k0);
    for (int j = 0; j < 8; ++j) out[j] = t[row[j]] * s;
  }
};

struct Int8Dec {
  static constexpr int kChunk = 8;
  static constexpr bool kLevels = true;
  static constexpr Affine kAffine = Affine::mul;
  const quant::DequantArgs& a;
  void levels(int64_t r, int64_t k0, int8_t* q, float& d, float& m) const {
    memcpy(q, a.data + r * a.data_stride + k0, 8);
    d = scaled_scale(a, r, k0);
    m = 0.f;
  }
};

template <int Bits, class S> struct AffineDec {
  static constexpr int kChunk = 32;  // groups are 32, 64 or 128 elements
  static constexpr bool kLevels = false;
  const quant::DequantArgs& a;
  void floats(int64_t r, int64_t k0, float* out, int64_t = kChunk) const {
    const uint8_t* row = a.data + r * a.data_stride;
    const int64_t gi = k0 / a.group;
    const auto* sp = static_cast<const typename S::T*>(a.scales);
    const auto* bp = static_cast<const typename S::T*>(a.biases);
    const float s = to_f32<S>(sp[r * a.scales_stride + gi]), b = to_f32<S>(bp[r * a.biases_stride + gi]);
    for (int j0 = 0; j0 < kChunk; j0 += 8) quant::affine_decode8<Bits>(row, s, b, k0 + j0, out + j0);
  }
};

// A plain [N, K] weight of dtype D; the only decoder with a partial last chunk.
template <class D> struct DenseDec {
  static constexpr int kChunk = 8;
  static constexpr bool kLevels = false;
  const quant::DequantArgs& a;
  void floats(int64_t r, int64_t k0, float* out, int64_t n = kChunk) const {
    const auto* row = reinterpret_cast<const typename D::T*>(a.data + r * a.data_stride) + k0;
    for (int64_t j = 0; j < n; ++j) out[j] = to_f32<D>(row[j]);
    for (int64_t j = n; j < kChunk; ++j) out[j] = 0.f;
  }
};

// Elements [k0, k0 + n) of row r as floats (n a multiple of the chunk but for
// a dense weight's last one): the GEMM's panel decode.
template <class Dec> inline void decode_range(const Dec& dec, int64_t r, int64_t k0, int64_t n, float* dst) {
  constexpr int CH = Dec::kChunk;
  for (int64_t c = 0; c < n; c += CH) {
    if constexpr (Dec::kLevels) {
      alignas(16) int8_t q[CH];
      float d, m;
      dec.levels(r, k0 + c, q, d, m);
      for (int j = 0; j < CH; ++j) dst[c + j] = quant::affine<Dec::kAffine>(d, m, float(q[j]));
    } else if (n - c >= CH) {
      dec.floats(r, k0 + c, dst + c);
    } else {
      alignas(32) float tmp[CH];
      dec.floats(r, k0 + c, tmp, n - c);
      memcpy(dst + c, tmp, size_t(n - c) * sizeof(float));
    }
  }
}

// ------------------------------------------------------------ GEMV
// x as f32 [MR][kpad] (rows past m zero), with per-chunk sums for the levels path.
struct GemvX {
  std::unique_ptr<float[]> buf;
  const float* x;       // [MR][kpad]
  const float* sums;    // [MR][chunks]
  int64_t kpad, chunks;
};

template <class D> GemvX gemv_x(const quant::MatmulArgs& a, int mr, int ch, bool sums_needed) {
  const int64_t k = a.w.cols, chunks = k / ch, kpad = (k + 7) / 8 * 8;
  GemvX g;
  g.buf.reset(new float[size_t(mr) * size_t(kpad + chunks)]());
  float* x = g.buf.get();
  float* sums = x + mr * kpad;
  for (int64_t i = 0; i < a.m; ++i) {
    convert_row<D>(static_cast<const typename D::T*>(a.x) + i * a.x_stride, x + i * kpad, k);
    for (int64_t c = 0; sums_needed && c < chunks; ++c) {
      float s = 0.f;
      for (int j = 0; j < ch; ++j) s += x[i * kpad + c * ch + j];
      sums[i * chunks + c] = s;
    }
  }
  g.x = x;
  g.sums = sums;
  g.kpad = kpad;
  g.chunks = chunks;
  return g;
}

template <class D> inline void put_out(const quant::MatmulArgs& a, int64_t i, int64_t n, float v) {
  if (a.bias) v += to_f32<D>(static_cast<const typename D::T*>(a.bias)[n]);
  static_cast<typename D::T*>(a.out)[i * a.out_stride + n] = from_f32<D>(v);
}

template <class Dec, class D, int MR> void gemv(const quant::MatmulArgs& a, const Dec& dec) {
  constexpr int CH = Dec::kChunk, NV = CH / 8;
  const int64_t k = a.w.cols, full = k / CH * CH;
  bool sums_needed = false;
  if constexpr (Dec::kLevels) sums_needed = Dec::kAffine != Affine::mul;
  const GemvX g = gemv_x<D>(a, MR, CH, sums_needed);
  const int64_t kp = g.kpad;
  // traffic a row: its packed bytes (about K for the quantized formats) and the output
  const int64_t row_bytes = k * (a.dense ? int64_t(sizeof(typename D::T)) : 1) + a.m * 4;
  parallel_rows(a.w.rows, row_bytes, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      f8 acc[MR];
      float off[MR];
      for (int i = 0; i < MR; ++i) acc[i] = f8{}, off[i] = 0.f;
      for (int64_t k0 = 0; k0 < full; k0 += CH) {
        f8 w[NV];
        if constexpr (Dec::kLevels) {
          alignas(16) int8_t q[CH];
          float d, m;
          dec.levels(r, k0, q, d, m);
          for (int v = 0; v < NV; ++v) w[v] = levels8(q + 8 * v);
          const f8 vd = splat8(d);
          for (int i = 0; i < MR; ++i) {
            const float* xi = g.x + i * kp + k0;
            f8 t = w[0] * ld8(xi);
            for (int v = 1; v < NV; ++v) t += w[v] * ld8(xi + 8 * v);
            acc[i] += vd * t;
          }
          if constexpr (Dec::kAffine != Affine::mul) {
            const float mm = Dec::kAffine == Affine::mul_add ? m : -m;
            // an explicit fused multiply-add: the compiler's own contraction differs between
            // row counts, and each row's result must not depend on the rows beside it
            for (int i = 0; i < MR; ++i) off[i] = __builtin_fmaf(mm, g.sums[i * g.chunks + k0 / CH], off[i]);
          }
        } else {
          alignas(32) float buf[CH];
          dec.floats(r, k0, buf);
          for (int v = 0; v < NV; ++v) w[v] = ld8(buf + 8 * v);
          for (int i = 0; i < MR; ++i) {
            const float* xi = g.x + i * kp + k0;
            for (int v = 0; v < NV; ++v) acc[i] += w[v] * ld8(xi + 8 * v);
          }
        }
      }
      if constexpr (!Dec::kLevels) {
        if (full < k) {  // a dense row's last partial chunk (x is zero-padded)
          alignas(32) float buf[CH];
          dec.floats(r, full, buf, k - full);
          for (int i = 0; i < MR; ++i) acc[i] += ld8(buf) * ld8(g.x + i * kp + full);
        }
      }
      for (int64_t i = 0; i < a.m; ++i) put_out<D>(a, i, r, hsum8(acc[i]) + off[i]);
    }
  });
}

// ------------------------------------------------------------ GEMM
constexpr int NB = 16;   // W rows of a micro-panel: output columns of one micro-kernel
constexpr int NC = 128;  // W rows a task owns (a multiple of NB)
constexpr int KB = 256;  // K per packed block (a multiple of every chunk)
constexpr int MB = 96;   // x rows converted per tile
constexpr int MR = 6;    // x rows of one micro-kernel
static_assert(NB % W == 0 && KB % 32 == 0 && MB % MR == 0, "tiles are whole vectors and chunks");

// C[MR_, NB] (row stride ldc) += x[MR_, kc] (row stride KB) . B[kc, NB].
template <int R> inline void micro(const float* x, const float* b, int64_t kc, float* c, int64_t ldc) {
  constexpr int NVEC = NB / W;
  vf acc[R][NVEC];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NVEC; ++v) acc[i][v] = load<F32>(c + i * ldc + v * W);
  for (int64_t k = 0; k < kc; ++k) {
    vf bv[NVEC];
    for (int v = 0; v < NVEC; ++v) bv[v] = load<F32>(b + k * NB + v * W);
    for (int i = 0; i < R; ++i) {
      const vf xv = splat(x[i * KB + k]);
      for (int v = 0; v < NVEC; ++v) acc[i][v] += xv * bv[v];
    }
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NVEC; ++v) store<F32>(c + i * ldc + v * W, acc[i][v]);
}

inline void micro_n(int r, const float* x, const float* b, int64_t kc, float* c, int64_t ldc) {
  switch (r) {
    case 6: return micro<6>(x, b, kc, c, ldc);
    case 5: return micro<5>(x, b, kc, c, ldc);
    case 4: return micro<4>(x, b, kc, c, ldc);
    case 3: return micro<3>(x, b, kc, c, ldc);
    case 2: return micro<2>(x, b, kc, c, ldc);
    default: return micro<1>(x, b, kc, c, ldc);
  }
}

template <class Dec, class D> void gemm(const quant::MatmulArgs& a, const Dec& dec) {
  using T = typename D::T;
  const int64_t m = a.m, n = a.w.rows, k = a.w.cols;
  const int64_t tasks = (n + NC - 1) / NC;
  parallel_for(tasks, [&](int64_t task, int) {
    const int64_t n0 = task * NC, nc = std::min<int64_t>(NC, n - n0), panels = (nc + NB - 1) / NB;
    std::unique_ptr<float[]> bpack(new float[size_t(panels) * NB * KB]);
    std::unique_ptr<float[]> xt(new float[size_t(MB) * KB]);
    std::unique_ptr<float[]> cacc(new float[size_t(m) * panels * NB]());
    alignas(32) float row[KB];
    for (int64_t k0 = 0; k0 < k; k0 += KB) {
      const int64_t kc = std::min<int64_t>(KB, k - k0);
      for (int64_t j = 0; j < panels * NB; ++j) {
        float* dst = bpack.get() + (j / NB) * NB * KB + j % NB;
        if (j < nc) decode_range(dec, n0 + j, k0, kc, row);
        else std::fill(row, row + kc, 0.f);
        for (int64_t kk = 0; kk < kc; ++kk) dst[kk * NB] = row[kk];
      }
      for (int64_t i0 = 0; i0 < m; i0 += MB) {
        const int64_t mb = std::min<int64_t>(MB, m - i0);
        for (int64_t i = 0; i < mb; ++i)
          convert_row<D>(static_cast<const T*>(a.x) + (i0 + i) * a.x_stride + k0, xt.get() + i * KB, kc);
        for (int64_t p = 0; p < panels; ++p)
          for (int64_t i = 0; i < mb; i += MR)
            micro_n(int(std::min<int64_t>(MR, mb - i)), xt.get() + i * KB, bpack.get() + p * NB * KB, kc,
                    cacc.get() + (i0 + i) * panels * NB + p * NB, panels * NB);
      }
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < nc; ++j) put_out<D>(a, i, n0 + j, cacc[size_t(i * panels * NB + j)]);
  });
}

// ------------------------------------------------------------ dispatch
constexpr int64_t kGemvRows = 16;

template <class Dec, class D> void run_with(const quant::MatmulArgs& a, const Dec& dec) {
  if (a.m == 0 || a.w.rows == 0) return;
  if (a.m > kGemvRows) return gemm<Dec, D>(a, dec);
  if (a.m == 1) return gemv<Dec, D, 1>(a, dec);
  if (a.m == 2) return gemv<Dec, D, 2>(a, dec);
  if (a.m <= 4) return gemv<Dec, D, 4>(a, dec);
  if (a.m <= 8) return gemv<Dec, D, 8>(a, dec);
  return gemv<Dec, D, 16>(a, dec);
}

template <class D> void run_split(const quant::MatmulArgs& a) {
  const quant::DequantArgs& w = a.w;
  switch (w.format) {
    case QFormat::mxfp4: return run_with<MxDec<Elem::e2m1>, D>(a, {w});
    case QFormat::mxfp6_e2m3: return run_with<MxDec<Elem::e2m3>, D>(a, {w});
    case QFormat::mxfp6_e3m2: return run_with<MxDec<Elem::e3m2>, D>(a, {w});
    case QFormat::mxfp8_e4m3: return run_with<MxDec<Elem::e4m3>, D>(a, {w});
    case QFormat::mxfp8_e5m2: return run_with<MxDec<Elem::e5m2>, D>(a, {w});
    case QFormat::nvfp4: return run_with<Nvfp4Dec, D>(a, {w});
    case QFormat::fp8_e4m3: return run_with<Fp8Dec<Elem::e4m3>, D>(a, {w});
    case QFormat::fp8_e5m2: return run_with<Fp8Dec<Elem::e5m2>, D>(a, {w});
    case QFormat::int8: return run_with<Int8Dec, D>(a, {w});
    default: break;
  }
  with_float_dtype(w.scales_dtype, [&](auto s) {
    using S = decltype(s);
    switch (w.format) {
      case QFormat::affine2: return run_with<AffineDec<2, S>, D>(a, {w});
      case QFormat::affine3: return run_with<AffineDec<3, S>, D>(a, {w});
      case QFormat::affine4: return run_with<AffineDec<4, S>, D>(a, {w});
      case QFormat::affine5: return run_with<AffineDec<5, S>, D>(a, {w});
      case QFormat::affine6: return run_with<AffineDec<6, S>, D>(a, {w});
      case QFormat::affine8: return run_with<AffineDec<8, S>, D>(a, {w});
      default: throw ValueError(std::string("matmul: no CPU kernel for ") + quant::info(w.format).name);
    }
  });
}

#define BRAZE_MATMUL_BLOCK_FORMATS(X) \
  BRAZE_QUANT_GGUF_FP4_FORMATS(X)     \
  BRAZE_QUANT_GGML_FORMATS(X)         \
  BRAZE_QUANT_KQUANTS_FORMATS(X)      \
  BRAZE_QUANT_IQUANTS_FORMATS(X)

#include "cpu/quant_dot.h"

// The int8-activation path for any M, as llama.cpp's CPU backend does: x in slabs
// of up to kGemvRows rows, each through the GEMV kernel (each row's result is
// the same as alone). False where the format keeps f32 x (decided before any write).
template <class D> bool matmul_int8_rows(const quant::MatmulArgs& a) {
  if (a.m <= kGemvRows) return matmul_int8<D>(a);
  for (int64_t i0 = 0; i0 < a.m; i0 += kGemvRows) {
    quant::MatmulArgs s = a;
    s.m = std::min(kGemvRows, a.m - i0);
    s.x = static_cast<const typename D::T*>(a.x) + i0 * a.x_stride;
    s.out = static_cast<typename D::T*>(a.out) + i0 * a.out_stride;
    if (!matmul_int8<D>(s)) return false;
  }
  return true;
}

}  // namespace

void matmul_run(const quant::MatmulArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    if (a.dense) return run_with<DenseDec<D>, D>(a, {a.w});
    if (a.m > 0 && a.w.rows > 0 && quant_int8_activations() && matmul_int8_rows<D>(a)) return;
    if (a.w.format == QFormat::q8_0) return run_with<Block32Dec<QFormat::q8_0>, D>(a, {a.w});
    if (a.w.format == QFormat::q4_0) return run_with<Block32Dec<QFormat::q4_0>, D>(a, {a.w});
    if (a.w.format == QFormat::q4_1) return run_with<Block32Dec<QFormat::q4_1>, D>(a, {a.w});
    switch (a.w.format) {
#define BRAZE_CASE(name) case QFormat::name: return run_with<BlockDec<QFormat::name>, D>(a, {a.w});
      BRAZE_MATMUL_BLOCK_FORMATS(BRAZE_CASE)
#undef BRAZE_CASE
      default:
        if (quant::info(a.w.format).layout == quant::Layout::split) return run_split<D>(a);
        throw ValueError(std::string("matmul: no CPU kernel for ") + quant::info(a.w.format).name);
    }
  });
}

}  // namespace braze::cpu::BRAZE_ISA
