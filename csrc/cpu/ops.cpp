// The ops family on the CPU: activations (gated or not), the embedding gather
// and the Hadamard transform. Rows (and, for few long rows, column ranges of
// them) are split over the thread pool; math in f32 vectors of W lanes.
#include "cpu/ops.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/hadamard.h"
#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA {
namespace {

using ops::Act;

// ---------------------------------------------------------------- activations
// Each activation runs on K vectors at once, every step written as a loop over
// k: the math is a long dependent chain (vexp, a division, a polynomial), and
// K chains interleaved in program order keep the FP pipes busy where one chain
// after another would leave them waiting (measured on one AVX2 thread, erf
// gelu_and_mul: 2.7 ns per output one at a time, 1.46 with K = 4, 1.27 with
// K = 8; silu and the tanh gelu about even from K = 2).

struct Params {
  float alpha, limit;
};

// g[k] <- g[k] / (1 + e^-z[k]): one vexp (about 2 ulp) and a division.
template <int K> inline void div_one_plus_exp(vf* g, vf* z) {
  for (int k = 0; k < K; ++k) z[k] = vexp(-z[k]);
  for (int k = 0; k < K; ++k) g[k] = g[k] / (1.f + z[k]);
}

// silu(g) = g / (1 + e^-g).
template <int K> inline void vsilu(vf* g) {
  vf z[K];
  for (int k = 0; k < K; ++k) z[k] = g[k];
  div_one_plus_exp<K>(g, z);
}

// gelu with the tanh approximation, through 1 + tanh(z) = 2 / (1 + e^-2z):
// g / (1 + e^(-2 sqrt(2/pi) (g + 0.044715 g^3))), exact in that identity, so
// the error is vexp's plus a few roundings (a few ulp).
template <int K> inline void vgelu_tanh(vf* g) {
  constexpr float c = 2 * 0.7978845608028654f;  // 2 sqrt(2/pi)
  vf z[K];
  for (int k = 0; k < K; ++k) z[k] = (g[k] + 0.044715f * g[k] * g[k] * g[k]) * c;
  div_one_plus_exp<K>(g, z);
}

// Phi(g) = erfc(-g / sqrt 2) / 2 (gelu(g) = g Phi(g)). erfc(z) for z >= 0 is the
// Chebyshev fit of Numerical Recipes (2nd ed., sec. 6.2, "erfcc"): t = 1 /
// (1 + z/2), erfc(z) = t exp(-z^2 + P(t)), fractional error < 1.2e-7 over all
// z >= 0. Phi of a negative g is then accurate relative to itself (no 1 - erf
// cancellation); f32 rounding of the exponent -z^2 + P adds up to about
// 1.5e-7 * z^2 relative (2e-6 at g = -5, 1e-5 at g = -11.7, where gelu is
// 1e-30; tests/test_ops.py checks a dense range). Phi(g >= 0) = 1 - erfc/2.
template <int K> inline void vnormal_cdf(const vf* g, vf* cdf) {
  static constexpr float P[] = {0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f};
  vf z[K], t[K], p[K];
  for (int k = 0; k < K; ++k) z[k] = select(g[k] < 0.f, -g[k], g[k]) * 0.7071067811865476f;
  for (int k = 0; k < K; ++k) t[k] = 1.f / (1.f + 0.5f * z[k]);
  for (int k = 0; k < K; ++k) p[k] = splat(P[0]);
  for (int j = 1; j < 10; ++j)
    for (int k = 0; k < K; ++k) p[k] = p[k] * t[k] + P[j];
  for (int k = 0; k < K; ++k) p[k] = vexp(p[k] - z[k] * z[k]);
  for (int k = 0; k < K; ++k) {
    const vf half_erfc = 0.5f * t[k] * p[k];
    cdf[k] = select(g[k] < 0.f, half_erfc, 1.f - half_erfc);
  }
}

template <int K> inline void vgelu_erf(vf* g) {
  vf cdf[K];
  vnormal_cdf<K>(g, cdf);
  for (int k = 0; k < K; ++k) g[k] = g[k] * cdf[k];
}

// gpt-oss: gc = min(g, limit), gc / (1 + e^(-alpha gc)) * (clamp(u, +-limit) + 1).
// vmin / vmax return their second operand on NaN: with the limit first, NaN stays NaN.
template <int K> inline void vswiglu_clamped(vf* g, vf* u, const Params& p) {
  vf z[K];
  for (int k = 0; k < K; ++k) {
    g[k] = vmin(splat(p.limit), g[k]);
    u[k] = vmax(splat(-p.limit), vmin(splat(p.limit), u[k])) + 1.f;
    z[k] = g[k] * p.alpha;
  }
  div_one_plus_exp<K>(g, z);
}

// The VJPs: f = act(g) and df = act'(g), the derivatives written out as in
// python/braze/integrations/_grads.py, each with one vexp and one division
// (sigmoid s), except erf gelu: Phi as above, and its density e^(-g^2/2) / sqrt(2 pi).
// gelu_tanh: with s = sigmoid(2w), w = sqrt(2/pi) (g + 0.044715 g^3):
// (1 + tanh w) / 2 = s and (1 - tanh^2 w) / 2 = 2 s (1 - s).
// swiglu_clamped: on gc = min(g, limit), df zero where g >= limit (times the
// mask, as the reference, so a NaN gate stays NaN).
template <Act A, int K> inline void act_d(const vf* g, vf* f, vf* df, const Params& p) {
  vf s[K], z[K];
  if constexpr (A == Act::gelu_erf) {
    vnormal_cdf<K>(g, s);
    for (int k = 0; k < K; ++k) z[k] = vexp(-0.5f * g[k] * g[k]);
    for (int k = 0; k < K; ++k) {
      f[k] = g[k] * s[k];
      df[k] = s[k] + g[k] * z[k] * 0.3989422804014327f;  // 1 / sqrt(2 pi)
    }
    return;
  }
  constexpr float c = 2 * 0.7978845608028654f, a3 = 3 * 0.044715f;
  vf gc[K];
  for (int k = 0; k < K; ++k) {
    s[k] = splat(1.f);
    if constexpr (A == Act::silu) z[k] = gc[k] = g[k];
    else if constexpr (A == Act::gelu_tanh) z[k] = (g[k] + 0.044715f * g[k] * g[k] * g[k]) * c;
    else z[k] = (gc[k] = vmin(splat(p.limit), g[k])) * p.alpha;
  }
  div_one_plus_exp<K>(s, z);
  for (int k = 0; k < K; ++k) {
    if constexpr (A == Act::gelu_tanh) {
      f[k] = g[k] * s[k];
      df[k] = s[k] + g[k] * s[k] * (1.f - s[k]) * c * (1.f + a3 * g[k] * g[k]);
    } else {
      const float al = A == Act::silu ? 1.f : p.alpha;
      f[k] = gc[k] * s[k];
      df[k] = s[k] * (1.f + al * gc[k] * (1.f - s[k]));
      if constexpr (A == Act::swiglu_clamped) df[k] *= select(g[k] < p.limit, splat(1.f), splat(0.f));
    }
  }
}

// dg and du (u = 1 when not gated; du unused) from dy, in g and u.
template <Act A, int K> inline void act_vjp(vf* g, vf* u, const vf* dy, const Params& p) {
  vf f[K], df[K];
  act_d<A, K>(g, f, df, p);
  for (int k = 0; k < K; ++k) {
    if constexpr (A == Act::swiglu_clamped) {
      const vf inside = select((u[k] > -p.limit) & (u[k] < p.limit), splat(1.f), splat(0.f));
      g[k] = dy[k] * (vmax(splat(-p.limit), vmin(splat(p.limit), u[k])) + 1.f) * df[k];
      u[k] = dy[k] * f[k] * inside;
    } else {
      g[k] = dy[k] * u[k] * df[k];
      u[k] = dy[k] * f[k];
    }
  }
}

// y[k] = act(g[k]) * u[k] (u = 1 when not gated), in g.
template <Act A, int K> inline void act(vf* g, vf* u, const Params& p) {
  if constexpr (A == Act::silu) vsilu<K>(g);
  else if constexpr (A == Act::gelu_erf) vgelu_erf<K>(g);
  else if constexpr (A == Act::gelu_tanh) vgelu_tanh<K>(g);
  else vswiglu_clamped<K>(g, u, p);
  for (int k = 0; k < K; ++k) g[k] *= u[k];
}

// (a0 a1 a2 a3 ..., b0 b1 ...) -> evens (a0 a2 ... b0 b2 ...) and odds (a1 a3 ... b1 b3 ...).
inline void deinterleave(vf a, vf b, vf& even, vf& odd) {
#if defined(__AVX512F__)
  even = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  odd = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#elif defined(__AVX__)
  even = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
  odd = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
#else
  even = __builtin_shufflevector(a, b, 0, 2, 4, 6);
  odd = __builtin_shufflevector(a, b, 1, 3, 5, 7);
#endif
}

// The inverse: (even, odd) -> lo (e0 o0 e1 o1 ...) and hi (the same of the upper halves).
template <int... I> inline void interleave(vf even, vf odd, vf& lo, vf& hi, std::integer_sequence<int, I...>) {
  lo = __builtin_shufflevector(even, odd, ((I & 1) * W + I / 2)...);
  hi = __builtin_shufflevector(even, odd, ((I & 1) * W + W / 2 + I / 2)...);
}
inline void interleave(vf even, vf odd, vf& lo, vf& hi) {
  interleave(even, odd, lo, hi, std::make_integer_sequence<int, W>{});
}

enum class Layout { plain, halves, interleaved };

// Gate and up of c <= W output columns at i (u = 1 when not gated).
template <class D, Layout L> inline void gate_up(const typename D::T* x, int64_t cols, int64_t i, int64_t c, vf& g, vf& u) {
  if constexpr (L == Layout::plain) {
    g = ld<D>(x, i, c);
    u = splat(1.f);
  } else if constexpr (L == Layout::halves) {
    g = ld<D>(x, i, c);
    u = ld<D>(x + cols, i, c);
  } else {
    const vf lo = ld<D>(x, 2 * i, std::min<int64_t>(2 * c, W));
    const vf hi = 2 * c > W ? ld<D>(x, 2 * i + W, 2 * c - W) : splat(0.f);
    deinterleave(lo, hi, g, u);
  }
}

// dx of c <= W output columns at i: dg (and du when gated) to their places in the row.
template <class D, Layout L> inline void put_grads(typename D::T* dx, int64_t cols, int64_t i, int64_t c, vf dg, vf du) {
  if constexpr (L == Layout::plain) {
    st<D>(dx, i, c, dg);
  } else if constexpr (L == Layout::halves) {
    st<D>(dx, i, c, dg);
    st<D>(dx + cols, i, c, du);
  } else {
    vf lo, hi;
    interleave(dg, du, lo, hi);
    st<D>(dx, 2 * i, std::min<int64_t>(2 * c, W), lo);
    if (2 * c > W) st<D>(dx, 2 * i + W, 2 * c - W, hi);
  }
}

// K vectors of output columns at i (c == W), or one of c < W lanes (K == 1):
// the forward writes y; the VJP (Bwd) reads dy there and writes dx to y.
template <class D, Act A, Layout L, bool Bwd, int K>
inline void act_step(const ops::ActArgs& a, const Params& p, int64_t r, int64_t i, int64_t c) {
  using T = typename D::T;
  const T* x = static_cast<const T*>(a.x) + r * a.x_stride;
  T* y = static_cast<T*>(a.y) + r * a.y_stride;
  vf g[K], u[K];
  for (int k = 0; k < K; ++k) gate_up<D, L>(x, a.cols, i + k * W, c, g[k], u[k]);
  if constexpr (Bwd) {
    const T* dy = static_cast<const T*>(a.dy) + r * a.dy_stride;
    vf d[K];
    for (int k = 0; k < K; ++k) d[k] = ld<D>(dy, i + k * W, c);
    act_vjp<A, K>(g, u, d, p);
    for (int k = 0; k < K; ++k) put_grads<D, L>(y, a.cols, i + k * W, c, g[k], u[k]);
  } else {
    act<A, K>(g, u, p);
    for (int k = 0; k < K; ++k) st<D>(y, i + k * W, c, g[k]);
  }
}

// Output columns [c0, c1) of rows [r0, r1); c0 is a multiple of W.
template <class D, Act A, Layout L, bool Bwd> void act_tile(const ops::ActArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  constexpr int K = 8;
  const Params p{a.alpha, a.limit};
  for (int64_t r = r0; r < r1; ++r) {
    int64_t i = c0;
    for (; i + K * W <= c1; i += K * W) act_step<D, A, L, Bwd, K>(a, p, r, i, W);
    for (; i < c1; i += W) act_step<D, A, L, Bwd, 1>(a, p, r, i, std::min<int64_t>(W, c1 - i));
  }
}

// Runs body(r0, r1, c0, c1) over the output: whole rows when there are enough
// of them, else each row cut into column ranges (multiples of 64 elements), so
// that a few long rows still use every thread. Work under 128 KiB a task
// stays on the caller, as in parallel_rows.
template <class F> void parallel_tiles(int64_t rows, int64_t cols, int64_t bytes_per_col, F body) {
  if (rows <= 0 || cols <= 0) return;
  constexpr int64_t kMinBytes = 1 << 17;
  const int64_t threads = num_threads();
  const int64_t total = rows * cols * bytes_per_col;
  const int64_t want = std::min<int64_t>(4 * threads, total / kMinBytes);
  if (want <= 1 || rows >= want) {
    parallel_rows(rows, cols * bytes_per_col, [&](int64_t r0, int64_t r1) { body(r0, r1, int64_t(0), cols); });
    return;
  }
  const int64_t per_row = (want + rows - 1) / rows;
  const int64_t chunk = ((cols + per_row - 1) / per_row + 63) / 64 * 64;
  const int64_t pieces = (cols + chunk - 1) / chunk;
  parallel_for(rows * pieces, [&](int64_t t, int) {
    const int64_t r = t / pieces, c0 = (t % pieces) * chunk;
    body(r, r + 1, c0, std::min(cols, c0 + chunk));
  });
}

template <class D, Act A, Layout L, bool Bwd> void act_typed(const ops::ActArgs& a) {
  // bytes an output column moves: x's (1 or 2), y's; the VJP dy's and dx's (as x's) as well
  const int64_t ins = L == Layout::plain ? 1 : 2, elem = int64_t(sizeof(typename D::T));
  parallel_tiles(a.rows, a.cols, (Bwd ? 2 * ins + 1 : ins + 1) * elem,
                 [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) { act_tile<D, A, L, Bwd>(a, r0, r1, c0, c1); });
}

template <class D, Act A, bool Bwd> void act_layout(const ops::ActArgs& a) {
  if (!a.gated) act_typed<D, A, Layout::plain, Bwd>(a);
  else if (a.interleaved) act_typed<D, A, Layout::interleaved, Bwd>(a);
  else act_typed<D, A, Layout::halves, Bwd>(a);
}

template <class D, bool Bwd> void act_dispatch(const ops::ActArgs& a) {
  switch (a.act) {
    case Act::silu: return act_layout<D, Act::silu, Bwd>(a);
    case Act::gelu_erf: return act_layout<D, Act::gelu_erf, Bwd>(a);
    case Act::gelu_tanh: return act_layout<D, Act::gelu_tanh, Bwd>(a);
    case Act::swiglu_clamped: return act_layout<D, Act::swiglu_clamped, Bwd>(a);
  }
}

// ---------------------------------------------------------------- embedding
template <class I> void embedding_rows(const ops::EmbeddingArgs& a, int64_t t0, int64_t t1) {
  const int64_t elem = dtype_size(a.dtype);
  const size_t row_bytes = size_t(a.dim * elem);
  const I* ids = static_cast<const I*>(a.ids);
  const char* table = static_cast<const char*>(a.table);
  char* y = static_cast<char*>(a.y);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t id = int64_t(ids[t * a.ids_stride]);
    char* dst = y + t * a.y_stride * elem;
    // An id outside [0, vocab) writes zeros and reads nothing (ops.h).
    if (id >= 0 && id < a.vocab) std::memcpy(dst, table + id * a.table_stride * elem, row_bytes);
    else std::memset(dst, 0, row_bytes);
  }
}

// ---------------------------------------------------------------- hadamard
// The Sylvester transform of each block of L = 2^log2 floats runs on a
// per-thread f32 copy of the row (at most 128 KiB: L1 / L2): the butterflies
// of distance < W inside each vector (shuffles) as the first pass reads x,
// and the wider ones three stages per pass (eight vectors in registers), so
// the row is walked log2(L / W) / 3 times instead of log2(L), the first and
// the last of them reading x and writing y. Then H_m across the m blocks, or
// for m = 1 the last pass, scales and writes the output.

// In-vector butterflies: with s the lanes swapped at distance h and sgn = +1
// on the lower lane of each pair, -1 on the upper, v * sgn + s gives
// (a + b, a - b) for each pair (a, b).
inline vf butterfly_in_vector(vf v) {
  const vf s1 = swap_pairs(v);
  vf sg1{};
  for (int i = 0; i < W; ++i) sg1[i] = (i & 1) ? -1.f : 1.f;
  v = v * sg1 + s1;
  vf sg2{};
  for (int i = 0; i < W; ++i) sg2[i] = (i & 2) ? -1.f : 1.f;
#if defined(__AVX512F__)
  v = v * sg2 + __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  vf sg4{}, sg8{};
  for (int i = 0; i < W; ++i) sg4[i] = (i & 4) ? -1.f : 1.f;
  for (int i = 0; i < W; ++i) sg8[i] = (i & 8) ? -1.f : 1.f;
  v = v * sg4 + __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  v = v * sg8 + __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
#elif defined(__AVX__)
  v = v * sg2 + __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
  vf sg4{};
  for (int i = 0; i < W; ++i) sg4[i] = (i & 4) ? -1.f : 1.f;
  v = v * sg4 + __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
#else
  v = v * sg2 + __builtin_shufflevector(v, v, 2, 3, 0, 1);
#endif
  return v;
}

// S butterfly stages of distances h, 2h, ..., 2^(S-1) h (h a multiple of W)
// over a block of L floats: in(offset) gives each vector, out(offset, v)
// receives it finished.
template <int S, class In, class Out> void radix_pass(int64_t L, int64_t h, In in, Out out) {
  constexpr int Q = 1 << S;
  for (int64_t base = 0; base < L; base += h * Q) {
    for (int64_t j = 0; j < h; j += W) {
      vf v[Q];
      for (int q = 0; q < Q; ++q) v[q] = in(base + j + q * h);
      for (int d = 1; d < Q; d *= 2) {
        for (int q = 0; q < Q; ++q) {
          if (q & d) continue;
          const vf s = v[q], t = v[q + d];
          v[q] = s + t;
          v[q + d] = s - t;
        }
      }
      for (int q = 0; q < Q; ++q) out(base + j + q * h, v[q]);
    }
  }
}

// Stages a pass holds in registers (eight vectors): four (sixteen vectors) measured 2x slower
// with AVX-512, the in-vector butterflies of the first pass needing registers of their own.
constexpr int kPassStages = 3;

template <class In, class Out> void radix(int stages, int64_t L, int64_t h, In in, Out out) {
  if (stages == 1) radix_pass<1>(L, h, in, out);
  else if (stages == 2) radix_pass<2>(L, h, in, out);
  else radix_pass<kPassStages>(L, h, in, out);
}

// The order-m matrices as compile-time constants, so that hadamard_m unrolls
// into straight adds: no index tables, no sign branches.
constexpr uint32_t kH12[] = BRAZE_HADAMARD_12, kH20[] = BRAZE_HADAMARD_20, kH28[] = BRAZE_HADAMARD_28;
template <int M> constexpr const uint32_t* masks_of() { return M == 12 ? kH12 : M == 20 ? kH20 : kH28; }

// y[i, j] = scale * sum_l H_m[i, l] buf[l, j] over the m blocks of L floats
// (`stride` apart). The columns go in groups of four: each group's eight
// signed sums t0 +- t1 +- t2 +- t3 take 12 adds, and a row of H_m picks one
// of them per group, negated or not (its entry on t0 gives the sign), so an
// output costs m/4 adds instead of m - 1 (m = 28: 252 adds per 28 outputs
// instead of 756).
template <int M, class D> void hadamard_m(const float* buf, int64_t stride, int64_t L, typename D::T* y, float scale) {
  static_assert(M % 4 == 0, "H_m is taken four columns at a time");
  constexpr int G = M / 4;
  constexpr const uint32_t* H = masks_of<M>();
  const vf sc = splat(scale);
  for (int64_t j = 0; j < L; j += W) {
    const int64_t c = std::min<int64_t>(W, L - j);
    vf sums[G][8];  // sums[g][p]: t0 + s1 t1 + s2 t2 + s3 t3, s_k = -1 where bit k-1 of p is set
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const float* col = buf + 4 * g * stride;
      const vf t0 = ld<F32>(col, j, c), t1 = ld<F32>(col + stride, j, c);
      const vf t2 = ld<F32>(col + 2 * stride, j, c), t3 = ld<F32>(col + 3 * stride, j, c);
      const vf u[2] = {t0 + t1, t0 - t1}, v[2] = {t2 + t3, t2 - t3};
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) {
        const int s1 = p & 1, s2 = (p >> 1) & 1, s3 = (p >> 2) & 1;
        sums[g][p] = s2 ? u[s1] - v[s2 ^ s3] : u[s1] + v[s2 ^ s3];
      }
    }
#pragma GCC unroll 32
    for (int i = 0; i < M; ++i) {
      vf acc{};
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        const uint32_t bits = (H[i] >> (4 * g)) & 0xfu;  // -1 entries of columns 4g .. 4g + 3
        const bool neg = bits & 1u;
        const int p = int((neg ? ~bits : bits) >> 1) & 7;
        if (g == 0) acc = neg ? -sums[g][p] : sums[g][p];
        else acc = neg ? acc - sums[g][p] : acc + sums[g][p];
      }
      st<D>(y + i * L, j, c, acc * sc);
    }
  }
}

// Scalar Sylvester transform of a block shorter than a vector.
void fwht_scalar(float* v, int64_t L) {
  for (int64_t h = 1; h < L; h *= 2)
    for (int64_t b = 0; b < L; b += 2 * h)
      for (int64_t j = b; j < b + h; ++j) {
        const float s = v[j], t = v[j + h];
        v[j] = s + t;
        v[j + h] = s - t;
      }
}

thread_local std::vector<float> t_row;  // the row in f32 (per thread, reused)

template <class D> void hadamard_row(const ops::HadamardArgs& a, const typename D::T* x, typename D::T* y) {
  const int64_t n = a.n, L = int64_t(1) << a.log2;
  // The m blocks sit 64 bytes further apart than L floats: the H_m stage reads
  // one vector of each, and at a power-of-two stride of 2-4 KiB all m would
  // fall in one L1 set (measured: m = 28, L = 1024 ran 1.6x slower).
  const int64_t stride = a.m > 1 ? L + 16 : L;
  if (int64_t(t_row.size()) < a.m * stride + W) t_row.resize(size_t(a.m * stride + W));
  float* buf = t_row.data();
  const vf scale = splat(a.scale);
  // Butterfly passes after the in-vector ones: distances W .. L/2.
  int wide = 0;
  for (int64_t h = W; h < L; h *= 2) ++wide;
  for (int b = 0; b < a.m; ++b) {
    const typename D::T* xb = x + b * L;
    float* blk = buf + b * stride;
    // Captured by value: a reference would be reloaded after every store (the stores could alias it).
    const auto from_x = [xb](int64_t off) { return butterfly_in_vector(load<D>(xb + off)); };
    const auto from_blk = [blk](int64_t off) { return load<F32>(blk + off); };
    const auto to_blk = [blk](int64_t off, vf v) { store<F32>(blk + off, v); };
    const auto to_y = [y, scale](int64_t off, vf v) { store<D>(y + off, v * scale); };
    if (L < W) {
      lanes(L, [&](int64_t i, int64_t c) { st<F32>(blk, i, c, ld<D>(xb, i, c)); });
      fwht_scalar(blk, L);
    } else if (wide == 0) {
      for (int64_t i = 0; i < L; i += W) to_blk(i, from_x(i));
    } else {
      // The first pass reads x and runs the in-vector butterflies too; the last writes y (m = 1).
      int64_t h = W;
      for (int left = wide; left > 0;) {
        const int s = std::min(left, kPassStages);
        left -= s;
        const bool first = h == W, last = left == 0 && a.m == 1;
        if (first && last) radix(s, L, h, from_x, to_y);
        else if (first) radix(s, L, h, from_x, to_blk);
        else if (last) radix(s, L, h, from_blk, to_y);
        else radix(s, L, h, from_blk, to_blk);
        h <<= s;
      }
    }
  }
  if (a.m == 12) {
    hadamard_m<12, D>(buf, stride, L, y, a.scale);
  } else if (a.m == 20) {
    hadamard_m<20, D>(buf, stride, L, y, a.scale);
  } else if (a.m == 28) {
    hadamard_m<28, D>(buf, stride, L, y, a.scale);
  } else if (wide == 0) {
    lanes(n, [&](int64_t i, int64_t c) { st<D>(y, i, c, ld<F32>(buf, i, c) * scale); });
  }
}

template <class D> void hadamard_typed(const ops::HadamardArgs& a) {
  using T = typename D::T;
  parallel_rows(a.rows, 2 * a.n * int64_t(sizeof(T)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      hadamard_row<D>(a, static_cast<const T*>(a.x) + r * a.x_stride, static_cast<T*>(a.y) + r * a.y_stride);
  });
}

}  // namespace

void act_run(const ops::ActArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    if (a.dy) act_dispatch<decltype(d), true>(a);
    else act_dispatch<decltype(d), false>(a);
  });
}

void embedding_run(const ops::EmbeddingArgs& a) {
  const int64_t row_bytes = a.dim * dtype_size(a.dtype);
  parallel_rows(a.tokens, 2 * row_bytes, [&](int64_t t0, int64_t t1) {
    if (a.id_dtype == DType::i64) embedding_rows<int64_t>(a, t0, t1);
    else embedding_rows<int32_t>(a, t0, t1);
  });
}

void hadamard_run(const ops::HadamardArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) { hadamard_typed<decltype(d)>(a); });
}

}  // namespace braze::cpu::BRAZE_ISA
