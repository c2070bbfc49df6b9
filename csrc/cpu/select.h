// Building blocks of the CPU argmax and sampler (included by sampling.cpp,
// once per ISA). The sampler reads a row from memory once (its max, NaN and
// block maxima), then works on the cached row or on a short candidate list:
//
// * top-k: the k-th largest block max is a lower bound L of the k-th largest
//   element (k blocks each hold an element >= L), so the elements >= L, a
//   list of about k, hold every token top-k can keep.
// * min-p: e >= min_p needs (x - m) / T >= log(min_p) (less a margin for the
//   exp's rounding), again a short list on real rows.
// * otherwise the row's mass: one pass sums e = exp((x - m) / T) per block
//   of kSumBlock elements, in f32 lanes and then in double (and, for the
//   top-p fallback, in double into a histogram of
//   (m - x) / T in bins of 1/kBinScale); the top-p cut lies in the bin where
//   the mass from the top crosses p * total, so only that bin is sorted; the
//   draw walks the block sums and re-reads one block.
//
// e is computed exactly as before (vexp((x - m) * (1 / T)) per element) and
// the kept sets are the same; only the order of the sums differs (a block's
// 256 e in f32 lanes, then in double, where the first version summed every e
// in double), which moves a token only where u * total or p * total meets a
// partial sum within ~1e-7.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA::rowsel {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kBlock = 64;      // elements per block max: a multiple of W
constexpr int64_t kSumBlock = 256;  // elements per block sum of the draw
constexpr int kBins = 2048;  // mass histogram over (m - x) / T in [0, 32)
constexpr float kBinScale = 64.f;
constexpr int kHists = 2;  // lanes spread over copies, so repeated bins chain less

// ---------------------------------------------------------------- pass 1
struct RowMax {
  float m;      // max (NaN ignored)
  bool nan;     // the row holds a NaN
  bool valid() const { return !nan && std::isfinite(m); }
};

// The row max and NaN flag; block maxima into bmax[ceil(n / kBlock)] when given.
template <class D> RowMax row_max(const typename D::T* x, int64_t n, float* bmax) {
  const vf ninf = splat(-kInf);
  vf mv = ninf;
  vi nan{};
  int64_t i = 0, b = 0;
  for (; i + kBlock <= n; i += kBlock, ++b) {
    vf a = ninf, c = ninf;
    for (int64_t j = 0; j < kBlock; j += 2 * W) {
      const vf v0 = load<D>(x + i + j), v1 = load<D>(x + i + j + W);
      nan |= (v0 != v0) | (v1 != v1);
      a = vmax(v0, a);  // vmax(v, acc) keeps acc when v is NaN
      c = vmax(v1, c);
    }
    a = vmax(a, c);
    if (bmax) bmax[b] = hmax(a);
    mv = vmax(a, mv);
  }
  if (i < n) {
    vf a = ninf;
    lanes(n - i, [&](int64_t j, int64_t c) {
      const vf v = ld<D>(x + i, j, c, -kInf);
      nan |= v != v;
      a = vmax(v, a);
    });
    if (bmax) bmax[b] = hmax(a);
    mv = vmax(a, mv);
  }
  return {hmax(mv), any(nan)};
}

template <class D> int64_t first_equal(const typename D::T* x, int64_t n, float m) {
  const vf mm = splat(m);
  int64_t found = -1;
  for (int64_t i = 0; i < n && found < 0; i += W) {
    const int64_t c = std::min<int64_t>(W, n - i);
    const uint32_t bits = mask_bits(ld<D>(x, i, c, std::numeric_limits<float>::quiet_NaN()) == mm);
    if (bits) found = i + __builtin_ctz(bits);
  }
  return found;
}

// ---------------------------------------------------------------- argmax
// Max and first index of [0, n): a chunk's max first (vmax only), the chunk
// read again from L1 only when it raises some lane's max.
struct ArgMax {
  float m;
  int64_t i;
  bool nan;
};
template <class D> ArgMax arg_max(const typename D::T* x, int64_t n) {
  constexpr int64_t kChunk = 8 * W;
  const vf ninf = splat(-kInf);
  vf best = ninf;
  vi at{}, nan{};
  vi lane;
  for (int l = 0; l < W; ++l) lane[l] = l;
  const auto track = [&](vf v, int64_t i) {
    const vi gt = v > best;  // strict: a lane keeps its first max
    best = select(gt, v, best);
    at = (at & ~gt) | ((lane + int32_t(i)) & gt);
  };
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    vf a = ninf, c = ninf;
    for (int64_t j = 0; j < kChunk; j += 2 * W) {
      const vf v0 = load<D>(x + i + j), v1 = load<D>(x + i + j + W);
      nan |= (v0 != v0) | (v1 != v1);
      a = vmax(v0, a);
      c = vmax(v1, c);
    }
    if (any_greater(vmax(a, c), best))
      for (int64_t j = 0; j < kChunk; j += W) track(load<D>(x + i + j), i + j);
  }
  lanes(n - i, [&](int64_t j, int64_t c) {
    const vf v = ld<D>(x + i, j, c, -kInf);
    nan |= v != v;
    track(v, i + j);
  });
  const float m = hmax(best);
  int64_t first = -1;
  for (int l = 0; l < W; ++l)
    if (best[l] == m && (first < 0 || at[l] < first)) first = at[l];
  return {m, first < 0 ? 0 : first, any(nan)};
}

// ---------------------------------------------------------------- candidate lists
struct List {
  std::vector<int32_t> idx;
  std::vector<float> val, e;
  struct Keyed {
    uint32_t key;  // largest value first
    float val, e;
  };
  std::vector<Keyed> sorted, spare;  // list_cut's (value, e) sorted
  size_t size() const { return idx.size(); }
};

// Appends (i, x[i]) for every i with pred(v, i) set, in index order; false
// (list left partial) once it would pass `cap`.
template <class D, class Pred> bool gather(const typename D::T* x, int64_t n, List& out, size_t cap, Pred pred) {
  out.idx.clear();
  out.val.clear();
  bool ok = true;
  lanes(n, [&](int64_t i, int64_t c) {
    if (!ok) return;
    const vf v = ld<D>(x, i, c, -kInf);
    uint32_t bits = mask_bits(pred(v, i)) & (c == W ? ~0u : (1u << c) - 1);
    if (!bits) return;
    if (out.idx.size() + __builtin_popcount(bits) > cap) {
      ok = false;
      return;
    }
    for (; bits; bits &= bits - 1) {
      const int l = __builtin_ctz(bits);
      out.idx.push_back(int32_t(i + l));
      out.val.push_back(v[l]);
    }
  });
  return ok;
}

// e = vexp((val - m) * it) of every list entry, as the row passes compute it.
inline void list_exp(List& L, float m, float it) {
  const size_t n = L.size();
  L.e.resize(n + W);
  const vf mm = splat(m), t = splat(it);
  lanes(int64_t(n), [&](int64_t i, int64_t c) { st<F32>(L.e.data(), i, c, vexp((ld<F32>(L.val.data(), i, c) - mm) * t)); });
  L.e.resize(n);
}

// Keeps the entries with val >= cut_k and e >= mp, in place.
inline void list_keep(List& L, float cut_k, float mp) {
  size_t o = 0;
  for (size_t i = 0; i < L.size(); ++i) {
    if (!(L.val[i] >= cut_k && L.e[i] >= mp)) continue;
    L.idx[o] = L.idx[i];
    L.val[o] = L.val[i];
    L.e[o] = L.e[i];
    ++o;
  }
  L.idx.resize(o);
  L.val.resize(o);
  L.e.resize(o);
}

// The k-th largest value of the list (k in [1, size]).
inline float list_kth(List& L, int64_t k) {
  std::vector<float>& v = L.e;  // scratch: e is computed after the cut
  v.assign(L.val.begin(), L.val.end());
  std::nth_element(v.begin(), v.begin() + (k - 1), v.end(), std::greater<float>());
  return v[size_t(k - 1)];
}

// The top-p cut among the list's entries [0, size) given the mass `above`
// of everything larger than all of them: the largest value whose entries at
// or above it, plus `above`, reach `target`; the lowest value with mass when
// rounding leaves the target unreached; -inf when no entry has mass.
inline float list_cut(List& L, double above, double target) {
  // Sorted by value, largest first: a radix sort over 8-bit digits of an order-reversing key
  // (a comparison sort of random values mispredicts a branch a comparison); digits all
  // entries share are skipped. -0 sorts next to +0, with which it compares equal below.
  const size_t n = L.size();
  L.sorted.resize(n);
  L.spare.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    memcpy(&b, &L.val[i], 4);
    L.sorted[i] = {(b >> 31) ? b : ~(b | 0x80000000u), L.val[i], L.e[i]};
  }
  for (int shift = 0; shift < 32; shift += 8) {
    uint32_t count[256] = {};
    for (size_t i = 0; i < n; ++i) ++count[(L.sorted[i].key >> shift) & 255];
    if (n == 0 || count[(L.sorted[0].key >> shift) & 255] == n) continue;
    uint32_t at = 0;
    for (uint32_t& c : count) {
      const uint32_t k = c;
      c = at;
      at += k;
    }
    for (size_t i = 0; i < n; ++i) L.spare[count[(L.sorted[i].key >> shift) & 255]++] = L.sorted[i];
    L.sorted.swap(L.spare);
  }
  double acc = above;
  float lowest = -kInf;
  for (size_t j = 0; j < n;) {
    const float v = L.sorted[j].val;
    double g = 0;
    for (; j < n && L.sorted[j].val == v; ++j) g += L.sorted[j].e;
    if (g == 0) continue;
    lowest = v;
    acc += g;
    if (acc >= target) return v;
  }
  return lowest;
}

// The draw over the list's entries with val >= cut, in index order: the first
// whose running mass exceeds u * total; -1 when none has mass.
inline int64_t list_draw(const List& L, float cut, float u) {
  double total = 0;
  for (size_t i = 0; i < L.size(); ++i)
    if (L.val[i] >= cut) total += L.e[i];
  const double target = double(u) * total;
  double cum = 0;
  int64_t last = -1;
  for (size_t i = 0; i < L.size(); ++i) {
    if (!(L.val[i] >= cut) || L.e[i] == 0) continue;
    cum += L.e[i];
    last = L.idx[i];
    if (cum > target) return last;
  }
  return last;
}

// ---------------------------------------------------------------- row mass

struct Mass {
  const float mp, cut;  // kept: e >= mp and x >= cut
  const vf mm, it;
  // x <= m (the row max; the sampler's rows hold no NaN) and 1 / T > 0 give z <= 0 (or
  // NaN when 1 / T is inf): vexp_nonpos's bits are vexp's there.
  vf e_of(vf v) const { return vexp_nonpos((v - mm) * it); }
  // The same where 1 / T is 1: (v - m) * 1 is v - m, bit for bit.
  template <bool Unit> vf e_of(vf v) const { return Unit ? vexp_nonpos(v - mm) : e_of(v); }
  vf kept(vf v, vf e) const { return select((e >= splat(mp)) & (v >= splat(cut)), e, vf{}); }
};

// Block sums of the kept mass into bsum[ceil(n / kSumBlock)]; with `hist`,
// the kept mass by bin of (m - x) / T too. Returns the total.
template <class D> double mass_pass(const typename D::T* x, int64_t n, const Mass& ms, double* bsum,
                                    double (*hist)[kBins]) {
  double total = 0;
  for (int64_t b0 = 0, b = 0; b0 < n; b0 += kSumBlock, ++b) {
    const int64_t len = std::min(kSumBlock, n - b0);
    if (!hist) {  // a block's e summed in f32 lanes, then in double (as the top-p window does)
      vf acc{};
      for (int64_t j = 0; j < len; j += W) {
        const int64_t c = std::min<int64_t>(W, len - j);
        const vf v = ld<D>(x + b0, j, c, -kInf);
        acc += ms.kept(v, vexp((v - ms.mm) * ms.it));
      }
      DoubleSum d;
      d.add(acc);
      bsum[b] = d.sum();
      total += bsum[b];
      continue;
    }
    DoubleSum acc;
    lanes(len, [&](int64_t j, int64_t c) {
      const vf v = ld<D>(x + b0, j, c, -kInf);
      const vf z = (v - ms.mm) * ms.it;
      const vf e = ms.kept(v, vexp(z));
      acc.add(e);
      const vi bin = __builtin_convertvector(vmin(z * -kBinScale, splat(float(kBins - 1))), vi);
      for (int l = 0; l < W; ++l) hist[l % kHists][bin[l]] += double(e[l]);
    });
    bsum[b] = acc.sum();
    total += bsum[b];
  }
  return total;
}

// ---------------------------------------------------------------- top-p window
// The full histogram above costs a scalar add per element. Instead a sketch
// of the mass by bin of e (its float bits, 64 bins a binade) is taken first,
// from the cached row: every kSampleEvery-th vector, plus every element with
// e >= big_e (the few that carry most of a sample's variance, found through
// the block maxima): big_e is kBigE, or kBigShare of a lower bound of the
// row's mass where that is less (a peaked row, whose mass sits in few
// elements, is sketched exactly there). The bins where the sketch's
// cumulative mass is within kSigmas standard errors of p of its total form a
// window. One exp pass then sums the row's mass per block, the mass above
// the window per block, and lists the window's elements (index, e), whose
// exact bin masses place the cut. e is monotone in x, so the bin that holds
// one element of a value holds them all, and the cut by value is made within
// one bin. A window that misses the crossing, or too long a list, sends the
// row back to the full histogram.
constexpr int kSampleEvery = 16;
constexpr float kBigE = 0.05f;
constexpr float kBigShare = 1e-3f;
constexpr double kSigmas = 5;
constexpr int kEBins = 2048;  // 32 binades under 1; e == 0 and e < 2^-32 in the last
constexpr int kEBinShift = 17;
constexpr int32_t kOneBits = 0x3f800000;

// The bin of each e in [0, 1]: 0 for the top 64th of the binade under 1.
inline vi ebin(vf e) {
  const vi top = vi{} + (kEBins - 1);
  const vi b = ((vi{} + kOneBits) - (vi)e) >> kEBinShift;
  return (vi)select(b > top, (vf)top, (vf)b);
}
// The top edge of bin j: e > upper_edge(j) exactly when e's bin is below j.
inline float upper_edge(int j) {
  const int32_t bits = kOneBits - (int32_t(j) << kEBinShift);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// big_e for a row of block maxima bmax[nb]: kBigE, or kBigShare of the mass
// the block maxima alone hold (a lower bound of the row's) where that is less.
inline float big_threshold(const float* bmax, int64_t nb, const Mass& ms) {
  vf acc{};
  lanes(nb, [&](int64_t i, int64_t c) { acc += ms.e_of(ld<F32>(bmax, i, c, -kInf)); });
  return std::min(kBigE, kBigShare * hsum(acc));
}

struct Sketch {
  float sampled[kEBins], big[kEBins];  // sampled: every kSampleEvery-th vector, elements below big_e
};

// The kept e of a vector: with Filter, e >= min-p and x >= cut; without, every e.
template <bool Filter, bool Unit = false> inline vf kept_e(vf v, const Mass& ms) {
  const vf ex = ms.template e_of<Unit>(v);
  return Filter ? ms.kept(v, ex) : ex;
}

// The sketch of the row x[n] with block maxima bmax[ceil(n / kBlock)]. Each
// histogram is added to in index order.
template <class D, bool Filter, bool Unit> void sketch_row(const typename D::T* x, int64_t n, const Mass& ms, float big_e,
                                                const float* bmax, Sketch& sk) {
  std::fill(sk.sampled, sk.sampled + kEBins, 0.f);
  std::fill(sk.big, sk.big + kEBins, 0.f);
  const vf big = splat(big_e);
  static_assert(W < 32, "a lane mask in a uint32_t");
  constexpr uint32_t kAll = (1u << W) - 1;
  // The sampled vectors' (bin, e) are stored a batch of kSampleBatch vectors at a time and then
  // added lane by lane in the same order: read well after their stores, the lanes are not held
  // back by store forwarding, and no lane is taken out of a register by a shuffle.
  {
    constexpr int64_t kSampleBatch = 32;
    alignas(64) int32_t sb[kSampleBatch * W];
    alignas(64) float se[kSampleBatch * W];
    const int64_t step = W * kSampleEvery;
    for (int64_t i0 = 0; i0 < n; i0 += step * kSampleBatch) {
      int64_t got = 0;
      for (int64_t i = i0; i < n && i < i0 + step * kSampleBatch; i += step, got += W) {
        const vf k = kept_e<Filter, Unit>(ld<D>(x, i, std::min<int64_t>(W, n - i), -kInf), ms);
        const vf kk = select(k >= big, vf{}, k);  // a big lane adds +0: no change
        const vi bv = ebin(kk);
        memcpy(sb + got, &bv, sizeof bv);
        memcpy(se + got, &kk, sizeof kk);
      }
      for (int64_t j = 0; j < got; ++j) sk.sampled[sb[j]] += se[j];
    }
  }
  // Big elements: z = (x - m) / T >= log(big_e) (less a margin for the exp's rounding) picks
  // the blocks, by their max, and then the elements whose e are tested. Their (bin, e) are
  // queued and added in index order a batch at a time: read back right after the vector's
  // store, a lane seemed to wait for the store (as the sampled vectors above did).
  const vf zb = splat(float(std::log(double(big_e)) - 1e-3)), mm = ms.mm, it = ms.it;
  constexpr size_t kBatch = 512;
  alignas(64) int32_t qb[kBatch + kBlock + W];
  alignas(64) float qe[kBatch + kBlock + W];
  size_t queued = 0;
  const auto drain = [&] {
    for (size_t i = 0; i < queued; ++i) sk.big[qb[i]] += qe[i];
    queued = 0;
  };
  const int64_t nb = (n + kBlock - 1) / kBlock;
#if defined(__AVX512F__)
  // The candidates (values with z >= zb) of the chosen blocks are compressed into cv without a
  // branch a vector (one mispredicted at random there), then their e computed a vector at a time
  // and the big ones added, all in index order as before.
  alignas(64) float cv[kBatch + kBlock + W];
  size_t nc = 0;
  const auto flush = [&] {
    for (size_t q = 0; q < nc; q += W) {
      const vf k = kept_e<Filter, Unit>(ld<F32>(cv, int64_t(q), std::min<int64_t>(W, int64_t(nc - q)), -kInf), ms);
      const vi bins = ebin(k);
      memcpy(qb + q, &bins, sizeof bins);
      memcpy(qe + q, &k, sizeof k);
    }
    const float be = big_e;
    for (size_t q = 0; q < nc; ++q)
      if (qe[q] >= be) sk.big[qb[q]] += qe[q];
    nc = 0;
  };
  __m512 zbz, mmz, itz;
  memcpy(&zbz, &zb, sizeof zbz);
  memcpy(&mmz, &mm, sizeof mmz);
  memcpy(&itz, &it, sizeof itz);
#endif
  for (int64_t j0 = 0; j0 < nb; j0 += W) {
    const int64_t c = std::min<int64_t>(W, nb - j0);
    uint32_t blocks = mask_bits((ld<F32>(bmax, j0, c, -kInf) - mm) * it >= zb) & (c == W ? kAll : (1u << c) - 1);
    for (; blocks; blocks &= blocks - 1) {
      const int64_t b0 = (j0 + __builtin_ctz(blocks)) * kBlock, end = std::min(b0 + kBlock, n);
#if defined(__AVX512F__)
      if (end - b0 == kBlock) {
        for (int64_t i = b0; i < end; i += W) {
          const vf vv = load<D>(x + i);
          __m512 v;
          memcpy(&v, &vv, sizeof v);
          const __mmask16 zm = _mm512_cmp_ps_mask(_mm512_mul_ps(_mm512_sub_ps(v, mmz), itz), zbz, _CMP_GE_OQ);
          _mm512_storeu_ps(cv + nc, _mm512_maskz_compress_ps(zm, v));
          nc += size_t(__builtin_popcount(zm));
        }
        if (nc >= kBatch) flush();
        continue;
      }
      flush();  // the partial block below goes through the queue: keep index order
#endif
      for (int64_t i = b0; i < end; i += W) {
        const vf v = ld<D>(x, i, std::min<int64_t>(W, end - i), -kInf);
        if (!mask_bits((v - mm) * it >= zb)) continue;
        const vf k = kept_e<Filter, Unit>(v, ms);
        const uint32_t bigs = mask_bits(k >= big);
        if (!bigs) continue;
        const vi bins = ebin(k);
        for (uint32_t r = bigs; r; r &= r - 1) {
          const int l = __builtin_ctz(r);
          qb[queued] = bins[l];
          qe[queued++] = k[l];
        }
        if (queued >= kBatch) drain();
      }
    }
  }
#if defined(__AVX512F__)
  flush();
#endif
  drain();
}

// The window of bins [lo, hi] that holds the bin where the mass from the top
// reaches p of the total, by the sketch; false when the sketch has no mass.
inline bool sketch_window(const Sketch& sk, double p, int& lo, int& hi) {
  constexpr double f = kSampleEvery;
  // variance of f * (a sum of sampled e): f (f - 1) sum e^2, each e at most its bin's top edge
  struct Edges {
    double v[kEBins];
    Edges() {
      const double step = std::exp2(-1.0 / double(1 << (23 - kEBinShift)));
      double edge = f * (f - 1);
      for (int j = 0; j < kEBins; ++j, edge *= step) v[j] = edge;
    }
  };
  static const Edges edges;
  const double* E = edges.v;
  // Partial sums in lanes: the window is a bound, not a result (any window that holds the
  // crossing gives the same cut), so the order of these sums is free.
  typedef float f8 __attribute__((vector_size(32)));
  typedef double d8 __attribute__((vector_size(64)));
  d8 tv{}, vv{};
  for (int j = 0; j < kEBins; j += 8) {
    f8 bg, sm;
    d8 ev;
    memcpy(&bg, sk.big + j, sizeof bg);
    memcpy(&sm, sk.sampled + j, sizeof sm);
    memcpy(&ev, E + j, sizeof ev);
    const d8 sd = __builtin_convertvector(sm, d8);
    tv += __builtin_convertvector(bg, d8) + f * sd;
    vv += sd * ev;
  }
  double T = 0, VT = 0;
  for (int l = 0; l < 8; ++l) {
    T += tv[l];
    VT += vv[l];
  }
  if (!(T > 0)) return false;
  // F +- k sd against p, with sd = sqrt(var) / T + 1e-5, compared in squares (no sqrt a bin).
  const double k = kSigmas, k2 = k * k, iT = 1 / T;
  double A = 0, V = 0;
  lo = -1;
  hi = kEBins - 1;
  for (int j = 0; j < kEBins; ++j) {
    if (sk.big[j] == 0 && sk.sampled[j] == 0) continue;
    A += sk.big[j] + f * sk.sampled[j];
    V += double(sk.sampled[j]) * E[j];
    const double F = A * iT;
    const double var = std::max(0.0, V * (1 - F) * (1 - F) + (VT - V) * F * F);
    if (lo < 0) {
      const double gap = (p - F - k * 1e-5) * T;  // F + k sd >= p: gap <= k sqrt(var)
      if (gap <= 0 || gap * gap <= k2 * var) lo = j;
    }
    const double over = (F - p - k * 1e-5) * T;  // F - k sd >= p: over >= k sqrt(var)
    if (over >= 0 && over * over >= k2 * var) {
      hi = j;
      break;
    }
  }
  if (lo < 0) lo = kEBins - 1;
  return true;
}

// One exp pass over x[n] for the window [lo, hi]: `total` = the kept mass,
// summed a block of kSumBlock at a time in f32 lanes and then in double;
// bsum[b] = the mass of block b above bin `lo`, the same way; and the elements
// in bins [lo, hi] with e > 0 (index into L.idx, e into L.e; no value), in
// index order. Returns their count, or -1 (list partial) once it would pass
// `cap`. L.idx / L.e keep their length (cap + W) from row to row; only the
// first `count` entries are the list. A block's e wait in an L1 buffer; where
// more than a quarter of its vectors hold listed elements every vector is
// compressed and stored (count moves by its popcount): a branch per vector
// mispredicts where the window is dense; sparser blocks visit only the
// vectors that hold some. Prefetches `next` (the next row, same length) for
// the following row's first pass. Plain loops: an accumulator captured by a
// lambda that also stores is kept in memory.
template <class D, bool Filter, bool Unit> int64_t exp_window_pass(const typename D::T* x, int64_t n, const Mass& ms, int lo,
                                                        int hi, double* bsum, double& total, List& L, size_t cap,
                                                        const typename D::T* next, uint16_t* vmask,
                                                        int32_t* bstart) {
  constexpr int kVecs = int(kSumBlock / W);
  static_assert(W <= 16, "a vector's lane mask in a uint16_t");
  if (L.e.size() < cap + W) L.e.resize(cap + W);
  L.val.clear();
  float* le = L.e.data();
  size_t count = 0;
  total = 0;
  const vf ta = splat(upper_edge(lo)), tb = splat(hi >= kEBins - 1 ? 0.f : upper_edge(hi + 1));
  alignas(64) float kb[kSumBlock];
  const Mass mr{ms.mp, ms.cut, ms.mm, ms.it};  // in registers: the list's stores could alias ms
  for (int64_t b0 = 0, b = 0; b0 < n; b0 += kSumBlock, ++b) {
    const int64_t len = std::min(kSumBlock, n - b0);
    bstart[b] = int32_t(count);
    vf all{}, above{};
    uint32_t bits[kVecs];
    uint32_t any = 0;
    const int64_t vecs = (len + W - 1) / W;
#if defined(__AVX512F__)
    if (len == kSumBlock) {  // mask registers throughout (the generic vector masks cost ~3x the instructions)
      __m512 a = _mm512_setzero_ps(), s = _mm512_setzero_ps();
      const __m512 va = _mm512_set1_ps(ta[0]), vb = _mm512_set1_ps(tb[0]);
      for (int q = 0; q < kVecs; ++q) {
        if (next && (q * W * sizeof(*x)) % 64 == 0) __builtin_prefetch(next + b0 + q * W);
        const vf k = kept_e<Filter, Unit>(load<D>(x + b0 + q * W), mr);
        __m512 km;
        memcpy(&km, &k, sizeof km);
        _mm512_store_ps(kb + q * W, km);
        s = _mm512_add_ps(s, km);
        const __mmask16 ab = _mm512_cmp_ps_mask(km, va, _CMP_GT_OQ);
        a = _mm512_mask_add_ps(a, ab, a, km);
        bits[q] = _mm512_mask_cmp_ps_mask(__mmask16(~ab), km, vb, _CMP_GT_OQ);
        any |= bits[q];
      }
      memcpy(&above, &a, sizeof a);
      memcpy(&all, &s, sizeof s);
    } else
#endif
      for (int64_t j = 0, q = 0; j < len; j += W, ++q) {
        const int64_t c = std::min<int64_t>(W, len - j);
        if (next && (j * sizeof(*x)) % 64 == 0) __builtin_prefetch(next + b0 + j);
        const vf k = kept_e<Filter, Unit>(ld<D>(x + b0, j, c, -kInf), mr);
        memcpy(kb + j, &k, sizeof k);
        all += k;
        const vi up = k > ta;
        above += select(up, k, vf{});
        bits[q] = mask_bits(~up & (k > tb));
        any |= bits[q];
      }
    DoubleSum d;
    d.add(all);
    total += d.sum();
    DoubleSum u;
    u.add(above);
    bsum[b] = u.sum();
    if (!any) continue;
    static_assert(kVecs <= 64, "a bit a vector");
    uint64_t with = 0;  // bit q: vector q holds some
    size_t got = 0;
    for (int64_t q = 0; q < vecs; ++q) {
      with |= uint64_t(bits[q] != 0) << q;
      got += size_t(__builtin_popcount(bits[q]));
    }
    if (count + got > cap) return -1;
    for (int64_t q = 0; q < vecs; ++q) vmask[b * kVecs + q] = uint16_t(bits[q]);
    const auto put = [&](int64_t q) {
      const uint32_t m = bits[q];
      const int64_t j = q * W;
#if defined(__AVX512F__)
      // The register form of compress (the memory form is slow on some cores); the list has W spare slots.
      _mm512_storeu_ps(le + count, _mm512_maskz_compress_ps(__mmask16(m), _mm512_load_ps(kb + j)));
#else
      size_t o = count;
      for (uint32_t r = m; r; r &= r - 1) le[o++] = kb[j + __builtin_ctz(r)];
#endif
      count += size_t(__builtin_popcount(m));
    };
    if (__builtin_popcountll(with) <= kVecs / 4) {
      for (uint64_t v = with; v; v &= v - 1) put(__builtin_ctzll(v));
    } else {
      for (int64_t q = 0; q < vecs; ++q) put(q);
    }
  }
  bstart[(n + kSumBlock - 1) / kSumBlock] = int32_t(count);
  return int64_t(count);
}

// The bin of (m - x) / T that mass_pass gives v (same float operations).
inline vi bin_of(vf v, const Mass& ms) {
  return __builtin_convertvector(vmin((v - ms.mm) * ms.it * -kBinScale, splat(float(kBins - 1))), vi);
}

// The draw over the kept mass from the block sums: the first element, in
// index order, whose running mass exceeds u * total; -1 when none has mass.
template <class D> int64_t block_draw(const typename D::T* x, int64_t n, const Mass& ms, const double* bsum,
                                      double total, float u) {
  const double target = double(u) * total;
  const int64_t nb = (n + kSumBlock - 1) / kSumBlock;
  double cum = 0;
  int64_t last = -1;
  for (int64_t b = 0; b < nb; ++b) {
    if (bsum[b] == 0) continue;
    if (cum + bsum[b] <= target) {
      cum += bsum[b];
      continue;
    }
    // Within the block, element by element (the sums may round apart: go on if so).
    const int64_t b0 = b * kSumBlock, len = std::min(kSumBlock, n - b0);
    int64_t hit = -1;
    lanes(len, [&](int64_t j, int64_t c) {
      if (hit >= 0) return;
      const vf v = ld<D>(x + b0, j, c, -kInf);
      const vf e = ms.kept(v, ms.e_of(v));
      for (int l = 0; l < c && hit < 0; ++l) {
        if (e[l] == 0) continue;
        cum += e[l];
        last = b0 + j + l;
        if (cum > target) hit = last;
      }
    });
    if (hit >= 0) return hit;
  }
  // u * total was not reached (rounding): the last element with mass.
  for (int64_t b = nb - 1; b >= 0; --b) {
    if (bsum[b] == 0) continue;
    const int64_t b0 = b * kSumBlock, len = std::min(kSumBlock, n - b0);
    lanes(len, [&](int64_t j, int64_t c) {
      const vf v = ld<D>(x + b0, j, c, -kInf);
      const vf e = ms.kept(v, ms.e_of(v));
      for (int l = 0; l < c; ++l)
        if (e[l] != 0) last = b0 + j + l;
    });
    break;
  }
  return last;
}

}  // namespace braze::cpu::BRAZE_ISA::rowsel
