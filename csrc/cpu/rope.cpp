// Rope family on the CPU. Tokens are split over the thread pool; for each
// token, cos and sin of its rot/2 angles are computed once into a small table
// (already scaled and signed) and reused by every head of q and k, so the
// per-element work is two loads, four multiply-adds and two stores.
#include "cpu/rope.h"

#include <cstring>
#include <vector>

#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA {
namespace {

using rope::Args;
using rope::Part;

// sin and cos of float angles, to within about one float ulp for |a| < 2**25
// (positions up to 2**24 with inv_freq <= 1): the angle is reduced by pi/2 in
// double against pi/2 split into 28-bit pieces (k * piece is exact), then
// Taylor polynomials on [-pi/4, pi/4] (truncation error < 2e-10).
void sincos(const float* ang, float* s_out, float* c_out, int64_t n, float scale, float sin_sign) {
  const double P1 = 0x1.921fb54p+0, P2 = 0x1.10b461p-30, P3 = 0x1.a62633145c06ep-58;
  const double two_over_pi = 0x1.45f306dc9c883p-1, magic = 0x1.8p52;
  for (int64_t i = 0; i < n; ++i) {
    const double a = ang[i];
    const double t = a * two_over_pi + magic;  // rounds to the nearest integer k
    const double k = t - magic;
    uint64_t bits;
    std::memcpy(&bits, &t, 8);
    const uint64_t quadrant = bits & 3u;  // k mod 4
    const double r = ((a - k * P1) - k * P2) - k * P3, r2 = r * r;
    const double sp = r + r * r2 * (-1.0 / 6 + r2 * (1.0 / 120 + r2 * (-1.0 / 5040 + r2 * (1.0 / 362880 +
                                     r2 * (-1.0 / 39916800)))));
    const double cp = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24 + r2 * (-1.0 / 720 + r2 * (1.0 / 40320 +
                                     r2 * (-1.0 / 3628800)))));
    double sn = (quadrant & 1u) ? cp : sp, cs = (quadrant & 1u) ? sp : cp;
    sn = (quadrant & 2u) ? -sn : sn;
    cs = ((quadrant + 1u) & 2u) ? -cs : cs;
    s_out[i] = float(sn) * scale * sin_sign;
    c_out[i] = float(cs) * scale;
  }
}

// y[:h] = x1 c - x2 s, y[h:2h] = x2 c + x1 s with x1 = x[:h], x2 = x[h:2h].
template <class D> inline void rotate_half(const typename D::T* x, typename D::T* y, const float* c,
                                           const float* s, int64_t h) {
  lanes(h, [&](int64_t i, int64_t n) {
    vf x1 = ld<D>(x, i, n), x2 = ld<D>(x + h, i, n), cv = ld<F32>(c, i, n), sv = ld<F32>(s, i, n);
    st<D>(y, i, n, x1 * cv - x2 * sv);
    st<D>(y + h, i, n, x2 * cv + x1 * sv);
  });
}

// Pairs (x[2i], x[2i+1]); c and s are expanded to one entry per element, with s
// negated on the even lanes: y = x c + swap_pairs(x) s.
template <class D> inline void rotate_pairs(const typename D::T* x, typename D::T* y, const float* c,
                                            const float* s, int64_t rot) {
  lanes(rot, [&](int64_t i, int64_t n) {
    vf v = ld<D>(x, i, n);
    st<D>(y, i, n, v * ld<F32>(c, i, n) + swap_pairs(v) * ld<F32>(s, i, n));
  });
}

template <class D> void rotate_part(const Args& a, const Part& p, int64_t t, const float* c, const float* s) {
  using T = typename D::T;
  auto x = static_cast<const T*>(p.x) + t * p.x_tok;
  auto y = static_cast<T*>(p.y) + t * p.y_tok;
  const bool copy_rest = a.rot < a.dim && x != y;
  for (int64_t h = 0; h < p.heads; ++h) {
    const T* xh = x + h * p.x_head;
    T* yh = y + h * p.y_head;
    if (a.interleaved) rotate_pairs<D>(xh, yh, c, s, a.rot);
    else rotate_half<D>(xh, yh, c, s, a.rot / 2);
    if (copy_rest) std::memcpy(yh + a.rot, xh + a.rot, size_t(a.dim - a.rot) * sizeof(T));
  }
}

inline float position(const Args& a, int64_t t) {
  return a.pos_dtype == DType::i32 ? float(static_cast<const int32_t*>(a.pos)[t * a.pos_stride])
                                   : float(static_cast<const int64_t*>(a.pos)[t * a.pos_stride]);
}

template <class D> void run_typed(const Args& a, const float* inv_freq) {
  const int64_t half = a.rot / 2, heads = a.q.heads + a.k.heads;
  const int64_t bytes = 2 * heads * a.dim * int64_t(sizeof(typename D::T)) + 8;
  const float sin_sign = a.inverse ? -1.f : 1.f;
  parallel_rows(a.tokens, bytes, [&](int64_t t0, int64_t t1) {
    // angles, then cos/sin (expanded to one entry per element when interleaved)
    std::vector<float> buf(5 * size_t(half) + 1);
    float *ang = buf.data(), *c = ang + half, *s = c + 2 * half;
    for (int64_t t = t0; t < t1; ++t) {
      const float p = position(a, t);
      for (int64_t i = 0; i < half; ++i) ang[i] = p * inv_freq[i];
      sincos(ang, s, c, half, a.scale, sin_sign);
      if (a.interleaved) {
        for (int64_t i = half - 1; i >= 0; --i) {
          c[2 * i] = c[2 * i + 1] = c[i];
          s[2 * i + 1] = s[i];
          s[2 * i] = -s[i];
        }
      }
      rotate_part<D>(a, a.q, t, c, s);
      if (a.k.heads) rotate_part<D>(a, a.k, t, c, s);
    }
  });
}

}  // namespace

void rope_run(const Args& a) {
  if (a.tokens == 0 || a.dim == 0 || a.q.heads + a.k.heads == 0) return;
  std::vector<float> table;
  const float* inv_freq = a.inv_freq;
  if (!inv_freq) {
    table.resize(size_t(a.rot / 2));
    for (int64_t i = 0; i < a.rot / 2; ++i) table[size_t(i)] = rope::default_inv_freq(a.base, i, a.rot);
    inv_freq = table.data();
  }
  with_float_dtype(a.dtype, [&](auto d) { run_typed<decltype(d)>(a, inv_freq); });
}

}  // namespace braze::cpu::BRAZE_ISA
