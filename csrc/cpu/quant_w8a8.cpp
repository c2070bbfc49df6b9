// W8A8 on the CPU (core/quant_w8a8.h): out = x_scale[m] w_scale[n] sum_k xq wq (+ bias).
//
// The output is cut into tiles of MB x rows by NB W rows, one task each on the
// pool (few rows, m <= 16: one row tile and narrower W tiles, so W is streamed
// once and split over the threads: the GEMV; more rows: 64 x 64 tiles, each row
// of x and of W read once per tile: the blocked GEMM). A tile runs a micro-kernel of
// up to 4 x rows by 4 W rows, whose 16 accumulators share every load.
//   int8: exact int32 dot products. AVX-512 with VNNI: vpdpbusd on W made unsigned
//   (w ^ 0x80 = w + 128), x signed, then 128 * sum_k x[m, k] (once per row and call)
//   subtracted: int32 arithmetic wraps, so the difference is exact whenever the true
//   sum fits, which K <= 131072 guarantees. Without VNNI (AVX-512 BW, AVX2): bytes
//   widened to int16 and vpmaddwd (pairs of products, exact); base: scalar int32.
//   More than 16 rows where the CPU has AMX-INT8 (quant_amx(), avx512 build): each tile's
//   sums by the tile unit instead (TDPBSSD, signed x signed, quant_w8a8_amx.cpp), the same
//   exact int32 values, the same epilogue.
//   fp8: codes to f32 (AVX2 / AVX-512: bits moved into f16 and widened by F16C; base:
//   256-entry tables) into tiles of KB columns; each product of two fp8 values is exact in
//   f32, so vector lanes sum exact products, then the lanes and the K blocks in a
//   fixed order.
// Epilogue (every backend): fma(float(acc), x_scale[m] * w_scale[n], bias[n] or 0),
// one rounding to the out dtype. Each output is summed by one task in a fixed order:
// results do not depend on the thread count.
#include "cpu/quant.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/quant/fp8.h"
#include "core/quant_w8a8.h"
#include "cpu/simd.h"
#include <memory>
#include <new>

#include "cpu/quant_amx.h"
#if defined(BRAZE_HAVE_AMX) && defined(__AVX512BW__)
#define BRAZE_W8A8_AMX 1
#endif

namespace braze::cpu::BRAZE_ISA {
namespace {

using quant::Elem;
using quant::QFormat;
using quant::W8A8Args;

constexpr int RX = 4, RW = 4;  // micro-kernel: x rows x W rows
constexpr int64_t KB = 512;    // fp8: K columns decoded per step

// ------------------------------------------------------------ int8 dots
#if defined(__AVX512BW__)
constexpr int64_t kI8Step = 32;
#elif defined(__AVX2__)
constexpr int64_t kI8Step = 16;
#else
constexpr int64_t kI8Step = 1;
#endif

// acc[i][j] = sum_{k < kv} x_i[k] w_j[k], kv a multiple of kI8Step.
template <int R, int C> void dot_i8(const int8_t* const* x, const int8_t* const* w, int64_t kv, int32_t acc[RX][RW]) {
#if defined(__AVX512BW__)
  __m512i s[R][C];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) s[i][j] = _mm512_setzero_si512();
  for (int64_t k = 0; k < kv; k += 32) {
    __m512i wv[C];
    for (int j = 0; j < C; ++j) wv[j] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i*)(w[j] + k)));
    for (int i = 0; i < R; ++i) {
      const __m512i xv = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i*)(x[i] + k)));
      for (int j = 0; j < C; ++j) s[i][j] = _mm512_add_epi32(s[i][j], _mm512_madd_epi16(xv, wv[j]));
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) acc[i][j] = _mm512_reduce_add_epi32(s[i][j]);
#elif defined(__AVX2__)
  __m256i s[R][C];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) s[i][j] = _mm256_setzero_si256();
  for (int64_t k = 0; k < kv; k += 16) {
    __m256i wv[C];
    for (int j = 0; j < C; ++j) wv[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(w[j] + k)));
    for (int i = 0; i < R; ++i) {
      const __m256i xv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(x[i] + k)));
      for (int j = 0; j < C; ++j) s[i][j] = _mm256_add_epi32(s[i][j], _mm256_madd_epi16(xv, wv[j]));
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      alignas(32) int32_t l[8];
      _mm256_store_si256((__m256i*)l, s[i][j]);
      acc[i][j] = ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
    }
#else
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      int32_t s = 0;
      for (int64_t k = 0; k < kv; ++k) s += int32_t(x[i][k]) * int32_t(w[j][k]);
      acc[i][j] = s;
    }
#endif
}

#if defined(__AVX512BW__)
// The same with vpdpbusd, 64 bytes a step: acc = sum (w + 128) x, wrapping; the caller
// subtracts 128 * sum_{k < kv} x_i[k].
template <int R, int C> __attribute__((target("avx512vnni")))
void dot_i8_vnni(const int8_t* const* x, const int8_t* const* w, int64_t kv, int32_t acc[RX][RW]) {
  __m512i s[R][C];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) s[i][j] = _mm512_setzero_si512();
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  for (int64_t k = 0; k < kv; k += 64) {
    __m512i wv[C];
    for (int j = 0; j < C; ++j) wv[j] = _mm512_xor_si512(_mm512_loadu_si512(w[j] + k), flip);
    for (int i = 0; i < R; ++i) {
      const __m512i xv = _mm512_loadu_si512(x[i] + k);
      for (int j = 0; j < C; ++j) s[i][j] = _mm512_dpbusd_epi32(s[i][j], wv[j], xv);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) acc[i][j] = _mm512_reduce_add_epi32(s[i][j]);
}
#endif

// ------------------------------------------------------------ fp8 dots
// acc[i][j] += sum_{k < kc} x_i[k] w_j[k]: rows ld floats apart, kc a multiple of W.
template <int R, int C> void dot_f32(const float* x, const float* w, int64_t ld, int64_t kc, float acc[RX][RW]) {
  vf s[R][C];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) s[i][j] = vf{};
  for (int64_t k = 0; k < kc; k += W) {
    vf wv[C];
    for (int j = 0; j < C; ++j) wv[j] = load<F32>(w + j * ld + k);
    for (int i = 0; i < R; ++i) {
      const vf xv = load<F32>(x + i * ld + k);
      for (int j = 0; j < C; ++j) s[i][j] += xv * wv[j];  // exact products: a multiply-add rounds once either way
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) acc[i][j] += hsum(s[i][j]);
}

// n codes of E -> f32 (the codec's values, table t for the scalar tail); dst padded with
// zeros to a multiple of W. AVX2 / AVX-512: the codes' bits moved into f16 (e5m2 is the top
// byte of an f16; e4m3 << 7 is an f16 of value v / 256, subnormals included), widened by
// F16C and, for e4m3, times 256 (exact) and NaN put back where the code is 0x7f / 0xff.
template <Elem E> inline void decode_codes(const uint8_t* src, const float* t, int64_t n, float* dst) {
  int64_t j = 0;
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  for (; j + 16 <= n; j += 16) {
    const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(src + j)));
    if constexpr (E == Elem::e5m2) {
      _mm512_storeu_ps(dst + j, _mm512_cvtph_ps(_mm256_slli_epi16(b, 8)));
    } else {
      const __m256i h = _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(b, 7), _mm256_set1_epi16(0x3f80)),
                                        _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8));
      const __mmask16 nan =
          _mm256_cmpeq_epi16_mask(_mm256_and_si256(b, _mm256_set1_epi16(0x7f)), _mm256_set1_epi16(0x7f));
      const __m512 f = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.f));
      _mm512_storeu_ps(dst + j, _mm512_mask_mov_ps(f, nan, _mm512_set1_ps(__builtin_nanf(""))));
    }
  }
#elif defined(__AVX2__)
  for (; j + 8 <= n; j += 8) {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)(src + j)));
    if constexpr (E == Elem::e5m2) {
      _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_slli_epi16(b, 8)));
    } else {
      const __m128i h = _mm_or_si128(_mm_and_si128(_mm_slli_epi16(b, 7), _mm_set1_epi16(0x3f80)),
                                     _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8));
      const __m128i nan16 = _mm_cmpeq_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), _mm_set1_epi16(0x7f));
      const __m256 nan = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan16));
      const __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.f));
      _mm256_storeu_ps(dst + j, _mm256_blendv_ps(f, _mm256_set1_ps(__builtin_nanf("")), nan));
    }
  }
#endif
  for (; j < n; ++j) dst[j] = t[src[j]];
  for (; j % W; ++j) dst[j] = 0.f;
}

template <Elem E> const float* fp8_values() {
  struct T {
    float v[256];
    T() { quant::fp8_table<E>(v); }
  };
  static const T t;
  return t.v;
}

// ------------------------------------------------------------ tiles
// Calls f.template run<R, C>() for r, c in [1, 4].
template <class F> void with_rc(int r, int c, F& f) {
#define BRAZE_RC(R)                                  \
  switch (c) {                                       \
    case 1: return f.template run<R, 1>();           \
    case 2: return f.template run<R, 2>();           \
    case 3: return f.template run<R, 3>();           \
    default: return f.template run<R, 4>();          \
  }
  switch (r) {
    case 1: BRAZE_RC(1)
    case 2: BRAZE_RC(2)
    case 3: BRAZE_RC(3)
    default: BRAZE_RC(4)
  }
#undef BRAZE_RC
}

// out[i][j] of tile (i0, j0), acc a float (fp8) or an exact int32 (int8).
template <class D, class A> void epilogue(const W8A8Args& a, int64_t i0, int64_t j0, int64_t mb, int64_t nb,
                                          const A* acc, int64_t ld) {
  using T = typename D::T;
  for (int64_t i = 0; i < mb; ++i) {
    const float xs = a.x_scale[i0 + i];
    T* o = static_cast<T*>(a.out) + (i0 + i) * a.out_stride + j0;
    for (int64_t j = 0; j < nb; ++j) {
      const float b = a.bias ? to_f32<D>(static_cast<const T*>(a.bias)[j0 + j]) : 0.f;
      o[j] = from_f32<D>(__builtin_fmaf(float(acc[i * ld + j]), xs * quant::w8a8_w_scale(a.w, j0 + j), b));
    }
  }
}

struct Tiling {
  int64_t mb, nb, mt, nt;
};
inline Tiling tiling(const W8A8Args& a) {
  Tiling t;
  t.mb = a.m <= 16 ? a.m : 64;
  t.nb = a.m <= 16 ? 32 : 64;
  t.mt = (a.m + t.mb - 1) / t.mb;
  t.nt = (a.w.rows + t.nb - 1) / t.nb;
  return t;
}

// One micro-kernel call of a tile: rows i.. of x against rows j.. of W.
struct MicroI8 {
  const W8A8Args& a;
  int64_t i, j, kv, k;
  bool vnni;
  int32_t acc[RX][RW];
  template <int R, int C> void run() {
    const int8_t* x[RX];
    const int8_t* w[RW];
    for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const int8_t*>(a.x + (i + r) * a.x_stride);
    for (int c = 0; c < C; ++c) w[c] = reinterpret_cast<const int8_t*>(a.w.data + (j + c) * a.w.data_stride);
#if defined(__AVX512BW__)
    if (vnni) dot_i8_vnni<R, C>(x, w, kv, acc);
    else dot_i8<R, C>(x, w, kv, acc);
#else
    dot_i8<R, C>(x, w, kv, acc);
#endif
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c)
        for (int64_t q = kv; q < k; ++q)  // unsigned: VNNI's sums may have wrapped
          acc[r][c] = int32_t(uint32_t(acc[r][c]) + uint32_t(int32_t(x[r][q]) * int32_t(w[c][q])));
  }
};

struct MicroF32 {
  const float *x, *w;
  int64_t ld, kc;
  float acc[RX][RW];
  template <int R, int C> void run() { dot_f32<R, C>(x, w, ld, kc, acc); }
};

// More than 16 rows on the AMX tile unit (quant_amx.h): x packed once, then the same
// tiles, the exact int32 sums of each from U::gemm_tile, and the same epilogue. U: the
// hardware's unit (amx) or the software model (amx_emu, tests).
struct AmxUnit {
  int64_t (*packed_x_bytes)(int64_t, int64_t);
  void (*pack_x)(const int8_t*, int64_t, int64_t, int64_t, int8_t*);
  void (*gemm_tile)(const int8_t*, int64_t, int64_t, int64_t, const int8_t*, int64_t, int64_t, int32_t*, int64_t);
};

template <class D> void run_int8_amx(const W8A8Args& a, const AmxUnit& u) {
  const int64_t k = a.w.cols, blk = u.packed_x_bytes(16, k), nblk = (a.m + 15) / 16;
  struct Free {
    void operator()(int8_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<int8_t[], Free> xp(
      static_cast<int8_t*>(::operator new[](size_t(nblk * blk), std::align_val_t(64))));
  const int8_t* x = reinterpret_cast<const int8_t*>(a.x);
  parallel_for(nblk, [&](int64_t b, int) {
    u.pack_x(x + 16 * b * a.x_stride, a.x_stride, std::min<int64_t>(16, a.m - 16 * b), k, xp.get() + b * blk);
  });
  const Tiling t = tiling(a);
  const int8_t* w = reinterpret_cast<const int8_t*>(a.w.data);
  parallel_for(t.mt * t.nt, [&](int64_t task, int) {
    const int64_t i0 = task / t.nt * t.mb, j0 = task % t.nt * t.nb;
    const int64_t mb = std::min(t.mb, a.m - i0), nb = std::min(t.nb, a.w.rows - j0);
    std::vector<int32_t> tile(size_t(mb * nb));
    u.gemm_tile(xp.get(), k, i0, mb, w + j0 * a.w.data_stride, a.w.data_stride, nb, tile.data(), nb);
    epilogue<D>(a, i0, j0, mb, nb, tile.data(), nb);
  });
}

template <class D> void run_int8(const W8A8Args& a) {
  if (a.m > 16 && quant_amx_emulated())
    return run_int8_amx<D>(a, {amx_emu::packed_x_bytes, amx_emu::pack_x, amx_emu::gemm_tile});
#if defined(BRAZE_W8A8_AMX)
  if (a.m > 16 && quant_amx()) return run_int8_amx<D>(a, {amx::packed_x_bytes, amx::pack_x, amx::gemm_tile});
#endif
  const int64_t k = a.w.cols;
  bool vnni = false;
#if defined(__AVX512BW__)
  vnni = quant_vnni();
#endif
  const int64_t step = vnni ? 64 : kI8Step, kv = k / step * step;
  std::vector<uint32_t> xsum(vnni ? size_t(a.m) : 0);  // 128 * sum_{k < kv} x: VNNI's correction
  for (int64_t i = 0; vnni && i < a.m; ++i) {
    const int8_t* xr = reinterpret_cast<const int8_t*>(a.x + i * a.x_stride);
    int32_t s = 0;
    for (int64_t c = 0; c < kv; ++c) s += xr[c];
    xsum[size_t(i)] = uint32_t(s) * 128u;  // wraps as the lanes do
  }
  const Tiling t = tiling(a);
  parallel_for(t.mt * t.nt, [&](int64_t task, int) {
    const int64_t i0 = task / t.nt * t.mb, j0 = task % t.nt * t.nb;
    const int64_t mb = std::min(t.mb, a.m - i0), nb = std::min(t.nb, a.w.rows - j0);
    std::vector<int32_t> tile(size_t(mb * nb));
    for (int64_t j = 0; j < nb; j += RW)
      for (int64_t i = 0; i < mb; i += RX) {
        MicroI8 mk{a, i0 + i, j0 + j, kv, k, vnni, {}};
        const int r = int(std::min<int64_t>(RX, mb - i)), c = int(std::min<int64_t>(RW, nb - j));
        with_rc(r, c, mk);
        for (int rr = 0; rr < r; ++rr)
          for (int cc = 0; cc < c; ++cc)  // unsigned: the wrapped difference is the exact sum
            tile[size_t((i + rr) * nb + j + cc)] =
                int32_t(uint32_t(mk.acc[rr][cc]) - (vnni ? xsum[size_t(i0 + i + rr)] : 0u));
      }
    epilogue<D>(a, i0, j0, mb, nb, tile.data(), nb);
  });
}

template <class D, Elem WE> void run_fp8(const W8A8Args& a) {
  const int64_t k = a.w.cols;
  const float* tx = fp8_values<Elem::e4m3>();
  const float* tw = fp8_values<WE>();
  const Tiling t = tiling(a);
  const int64_t ld = std::min<int64_t>(KB, (k + W - 1) / W * W);
  parallel_for(t.mt * t.nt, [&](int64_t task, int) {
    const int64_t i0 = task / t.nt * t.mb, j0 = task % t.nt * t.nb;
    const int64_t mb = std::min(t.mb, a.m - i0), nb = std::min(t.nb, a.w.rows - j0);
    std::vector<float> tile(size_t(mb * nb), 0.f), xf(size_t(mb * ld)), wf(size_t(nb * ld));
    for (int64_t k0 = 0; k0 < k; k0 += KB) {
      const int64_t kc = std::min(KB, k - k0), kcp = (kc + W - 1) / W * W;
      for (int64_t i = 0; i < mb; ++i)
        decode_codes<Elem::e4m3>(a.x + (i0 + i) * a.x_stride + k0, tx, kc, xf.data() + i * ld);
      for (int64_t j = 0; j < nb; ++j)
        decode_codes<WE>(a.w.data + (j0 + j) * a.w.data_stride + k0, tw, kc, wf.data() + j * ld);
      for (int64_t j = 0; j < nb; j += RW)
        for (int64_t i = 0; i < mb; i += RX) {
          MicroF32 mk{xf.data() + i * ld, wf.data() + j * ld, ld, kcp, {}};
          const int r = int(std::min<int64_t>(RX, mb - i)), c = int(std::min<int64_t>(RW, nb - j));
          with_rc(r, c, mk);
          for (int rr = 0; rr < r; ++rr)
            for (int cc = 0; cc < c; ++cc) tile[size_t((i + rr) * nb + j + cc)] += mk.acc[rr][cc];
        }
    }
    epilogue<D>(a, i0, j0, mb, nb, tile.data(), nb);
  });
}

}  // namespace

void matmul_w8a8_run(const W8A8Args& a) {
  if (a.m == 0 || a.w.rows == 0) return;
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    if (a.w.format == QFormat::int8) return run_int8<D>(a);
    if (a.w.format == QFormat::fp8_e4m3) return run_fp8<D, Elem::e4m3>(a);
    return run_fp8<D, Elem::e5m2>(a);
  });
}

}  // namespace braze::cpu::BRAZE_ISA
