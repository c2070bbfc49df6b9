// Sampling family on the CPU. Rows are split over the thread pool.
//
// softmax & co: one read of a row gives its max and sum of exp (online, per
// lane); a second read (from L2) writes the output, around the cache when it
// is large. Two exps per element, so that the output is written once; the
// first read of the next row runs in the loop that writes this one.
//
// Thresholds (top-k, top-p) are found without sorting: a radix select over
// the order-preserving integer keys of the float logits, 11 + 11 + 10 bits,
// with a histogram of counts (top-k) or of probability mass (top-p) per
// digit; only the first digit reads the whole row, the later ones read the
// bucket that holds the threshold. sample then draws by inverse CDF over the
// kept tokens in index order, with the row's Philox uniform.
#include "cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "core/philox.h"
#include "cpu/select.h"
#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA {
namespace {

using sampling::ArgmaxArgs;
using sampling::Logits;
using sampling::MaskArgs;
using sampling::NormalizeArgs;
using sampling::Op;
using sampling::PenaltyArgs;
using sampling::PhiloxArgs;
using sampling::SampleArgs;

constexpr float kInf = std::numeric_limits<float>::infinity();
// Software prefetch distance of the statistics pass that runs beside a write
// pass: there the hardware's own prefetch runs short of the memory's rate.
constexpr int64_t kPrefetchBytes = 4096;

// ---------------------------------------------------------------- row statistics
// The raw row max m and s = sum(exp((x - m) * inv_t)), from one read of the
// row: each lane keeps its own running max M and sum s of exp((x - M) * inv_t)
// and rescales s when M rises (a few times per lane on real rows; at worst at
// every step). NaN sticks in s. M starts at -FLT_MAX, so -inf elements add
// exp(-inf) = 0; a row of only -inf gets m = -inf, s = 0.
struct Stats {
  float m, s;
  float m_safe() const { return m == -kInf ? 0.f : m; }  // a row of -inf: s = 0, softmax = 0/0
};

struct Online {
  vf M = splat(-std::numeric_limits<float>::max()), s{};
  // Adds e = exp((v - M) * it) with M the lane maxima after v, and returns e;
  // rose(M) is told each time M rises.
  template <class Rose> vf add(vf v, vf it, Rose rose) {
    if (any_greater(v, M)) {
      const vf up = vmax(v, M);
      s *= vexp((M - up) * it);
      M = up;
      rose(up);
    }
    const vf e = vexp((v - M) * it);
    s += e;
    return e;
  }
  vf add(vf v, vf it) { return add(v, it, [](vf) {}); }
};

inline Stats finish(const Online& a, const Online& b, float inv_t) {
  const vf it = splat(inv_t);
  const float m = hmax(vmax(a.M, b.M));
  const float s = hsum(a.s * vexp((a.M - m) * it) + b.s * vexp((b.M - m) * it));
  return {s == 0.f ? -kInf : m, s};  // s == 0 only when no element exceeds -inf
}

template <class D> Stats row_stats(const typename D::T* x, int64_t n, float inv_t) {
  const vf it = splat(inv_t);
  Online a, b;  // two chains for the pipeline
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    a.add(load<D>(x + i), it);
    b.add(load<D>(x + i + W), it);
  }
  lanes(n - i, [&](int64_t j, int64_t c) { a.add(ld<D>(x + i, j, c, -kInf), it); });
  return finish(a, b, inv_t);
}

// ---------------------------------------------------------------- softmax, log_softmax
// The statistics pass of a row keeps, in a per-thread f32 row: for softmax
// e = exp((x - M) * inv_t) against the lane maxima M of the moment, with the
// segments where M rose and its new value; for log_softmax x itself. The
// write pass then needs no exp: y = e * exp((M - m) * inv_t) / s (one exp per
// rise), or (x - m) * inv_t - log s. Row r is written in the loop that takes
// row r + 1's statistics, in place in the same scratch row, so the
// compute-bound statistics overlap the memory-bound writes. Outputs larger
// than half the last-level cache are written around it (a plain store reads
// each line first); that needs every row's segments at the same alignment.
struct Rise {
  int64_t i;  // the segment that starts at element i
  vf M;
};
struct NormWorkspace {
  std::vector<float> e;
  std::vector<Rise> rises[2];
};
thread_local NormWorkspace tls_norm;

template <class D> void normalize_rows(const NormalizeArgs& a, int64_t r0, int64_t r1) {
  using T = typename D::T;
  const int64_t n = a.cols;
  const auto row = [&](int64_t r) { return static_cast<const T*>(a.x) + r * a.x_stride; };
  const auto inv_t = [&](int64_t r) { return 1.f / a.temperature.at(r); };
  if (a.op == Op::logsumexp) {
    for (int64_t r = r0; r < r1; ++r) {
      const Stats rs = row_stats<D>(row(r), n, inv_t(r));
      a.out[r] = rs.m_safe() * inv_t(r) + std::log(rs.s);
    }
    return;
  }
  const bool softmax = a.op == Op::softmax;
  float* const y0 = a.out + r0 * a.out_stride;
  const int64_t head = to_vector_boundary(y0);
  const bool stream = a.rows * n * int64_t(sizeof(float)) > stream_min_bytes() && head >= 0 &&
                      (r1 - r0 == 1 || a.out_stride % W == 0);
  const int64_t seg_head = stream ? head : 0;
  NormWorkspace& ws = tls_norm;
  ws.e.resize(size_t(n));
  float* const e = ws.e.data();
  std::vector<Rise>*cur = &ws.rises[0], *nxt = &ws.rises[1];

  // The statistics of row r, for the segment (i, c), into the scratch row.
  const auto take = [&](const T* x, vf it, Online& on, std::vector<Rise>& rises, int64_t i, int64_t c) {
    __builtin_prefetch(reinterpret_cast<const void*>(uintptr_t(x + i) + kPrefetchBytes));  // may pass the end: no fault
    const vf v = ld<D>(x, i, c, -kInf);
    const vf z = on.add(v, it, [&](vf M) {
      if (softmax) rises.push_back({i, M});
    });
    st<F32>(e, i, c, softmax ? z : v);
  };
  Online on;
  cur->clear();
  {
    const T* x = row(r0);
    const vf it = splat(inv_t(r0));
    segments(n, seg_head, [&](int64_t i, int64_t c) { take(x, it, on, *cur, i, c); });
  }
  Stats rs = finish(on, Online{}, inv_t(r0));
  for (int64_t r = r0; r < r1; ++r) {
    float* y = a.out + r * a.out_stride;
    const vf it = splat(inv_t(r)), mm = splat(rs.m_safe()), inv_s = splat(1.f / rs.s), l = splat(std::log(rs.s));
    vf f = vexp((splat(-std::numeric_limits<float>::max()) - mm) * it) * inv_s;  // before any rise: e = 0
    size_t k = 0;
    int64_t at = cur->empty() ? n : (*cur)[0].i;
    const auto write = [&](int64_t i, int64_t c) {
      const vf v = ld<F32>(e, i, c);
      vf out;
      if (softmax) {
        if (i == at) {
          f = vexp(((*cur)[k].M - mm) * it) * inv_s;
          at = ++k < cur->size() ? (*cur)[k].i : n;
        }
        out = v * f;
      } else {
        out = (v - mm) * it - l;
      }
      if (stream && c == W) stream_store(y + i, out);
      else st<F32>(y, i, c, out);
    };
    if (r + 1 == r1) {
      segments(n, seg_head, write);
      break;
    }
    const T* xn = row(r + 1);
    const vf itn = splat(inv_t(r + 1));
    Online next;
    nxt->clear();
    segments(n, seg_head, [&](int64_t i, int64_t c) {
      write(i, c);
      take(xn, itn, next, *nxt, i, c);
    });
    rs = finish(next, Online{}, inv_t(r + 1));
    std::swap(cur, nxt);
  }
  if (stream) stream_fence();
}

// ---------------------------------------------------------------- per-row workspace
struct Item {
  uint32_t key;
  float w;
  int64_t index;
};

struct Workspace {
  std::vector<float> x, e;   // the row in f32; exp((x - max) / T)
  std::vector<Item> items, kept, tmp;
  double bins[2048];
};
thread_local Workspace tls_ws;

// Order-preserving map float -> uint32 (-0.0 and +0.0 share a key).
inline uint32_t key_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
inline float float_of(uint32_t k) {
  uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// The largest key v with sum(w of items whose key >= v) >= target (target > 0;
// w = 1 counts). Consumes `items` (left holding the threshold's bucket).
uint32_t select_key(std::vector<Item>& items, double target, Workspace& ws) {
  static constexpr int kShift[3] = {21, 10, 0};
  static constexpr uint32_t kMask[3] = {0x7ff, 0x7ff, 0x3ff};
  uint32_t prefix = 0;
  double above = 0;  // weight of the items in higher buckets of earlier digits
  for (int level = 0; level < 3; ++level) {
    const int shift = kShift[level];
    const uint32_t mask = kMask[level];
    std::fill(ws.bins, ws.bins + mask + 1, 0.0);
    for (const Item& it : items) ws.bins[(it.key >> shift) & mask] += it.w;
    int b = int(mask), lowest = -1;
    for (; b >= 0; --b) {
      if (ws.bins[b] == 0) continue;
      lowest = b;
      if (above + ws.bins[b] >= target) break;
      above += ws.bins[b];
    }
    if (b < 0) b = lowest;  // rounding left the target above the total: take the smallest
    if (b < 0) return 0;    // no weight at all
    prefix |= uint32_t(b) << shift;
    if (level == 2) break;
    ws.tmp.clear();
    for (const Item& it : items)
      if (((it.key >> shift) & mask) == uint32_t(b)) ws.tmp.push_back(it);
    items.swap(ws.tmp);
  }
  return prefix;
}

// Loads row r into ws.x (f32); returns its max, or NaN when the row is not samplable.
template <class D> float load_row(const Logits& a, int64_t r, Workspace& ws) {
  using T = typename D::T;
  const T* x = static_cast<const T*>(a.x) + r * a.x_stride;
  ws.x.resize(size_t(a.cols) + W);
  vf mv = splat(-kInf);
  vi nan{};
  lanes(a.cols, [&](int64_t i, int64_t c) {
    vf v = ld<D>(x, i, c, -kInf);
    nan |= v != v;
    mv = vmax(mv, v);
    st<F32>(ws.x.data(), i, c, v);
  });
  const float m = hmax(mv);
  if (any(nan) || !std::isfinite(m)) return std::numeric_limits<float>::quiet_NaN();
  return m;
}

int64_t first_equal(const float* x, int64_t n, float m) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] == m) return i;
  return -1;
}

// ws.e = exp((x - m) * inv_t): exactly 1 at the max.
void fill_exp(Workspace& ws, int64_t n, float m, float inv_t) {
  ws.e.resize(size_t(n) + W);
  const vf it = splat(inv_t), mm = splat(m);
  lanes(n, [&](int64_t i, int64_t c) { st<F32>(ws.e.data(), i, c, vexp((ld<F32>(ws.x.data(), i, c) - mm) * it)); });
}

// The k-th largest value of ws.x (k in [1, n)).
float kth_largest(Workspace& ws, int64_t n, int64_t k) {
  ws.items.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) ws.items[i] = {key_of(ws.x[i]), 1.f, i};
  return float_of(select_key(ws.items, double(k), ws));
}

// The top-p cut among ws.items (weights = probability mass): the largest
// value whose items at or above it hold at least p of the items' mass.
float top_p_cut(Workspace& ws, double p) {
  double total = 0;
  for (const Item& it : ws.items) total += it.w;
  return float_of(select_key(ws.items, p * total, ws));
}

template <class D> void write_masked(const MaskArgs& a, int64_t r, const Workspace& ws, float cut, float e_min) {
  using T = typename D::T;
  T* y = static_cast<T*>(a.out) + r * a.out_stride;
  const vf c = splat(cut), neg = splat(-kInf), em = splat(e_min);
  const float* x = ws.x.data();
  const float* e = e_min > 0 ? ws.e.data() : nullptr;
  lanes(a.cols, [&](int64_t i, int64_t n) {
    vf v = ld<F32>(x, i, n);
    vi keep = v >= c;
    if (e) keep &= ld<F32>(e, i, n) >= em;
    st<D>(y, i, n, select(keep, v, neg));
  });
}

// The masks' and the penalties' copy of a row the op leaves as it is.
template <class D, class A> void copy_row(const A& a, int64_t r) {
  using T = typename D::T;
  if (a.in_place) return;
  memcpy(static_cast<T*>(a.out) + r * a.out_stride, static_cast<const T*>(a.x) + r * a.x_stride,
         size_t(a.cols) * sizeof(T));
}

template <class D> void mask_rows(const MaskArgs& a, int64_t r0, int64_t r1) {
  Workspace& ws = tls_ws;
  for (int64_t r = r0; r < r1; ++r) {
    const float m = load_row<D>(a, r, ws);
    if (std::isnan(m)) {
      copy_row<D>(a, r);
      continue;
    }
    if (a.op == Op::top_k_mask) {
      const int64_t k = a.top_k.at(r);
      if (k <= 0 || k >= a.cols) copy_row<D>(a, r);
      else write_masked<D>(a, r, ws, kth_largest(ws, a.cols, k), 0.f);
      continue;
    }
    const float inv_t = 1.f / a.temperature.at(r);
    fill_exp(ws, a.cols, m, inv_t);
    if (a.op == Op::min_p_mask) {
      const float mp = a.min_p.at(r);
      if (mp <= 0) copy_row<D>(a, r);
      else write_masked<D>(a, r, ws, -kInf, mp);
      continue;
    }
    const float p = a.top_p.at(r);
    if (p >= 1) {
      copy_row<D>(a, r);
      continue;
    }
    ws.items.resize(size_t(a.cols));
    for (int64_t i = 0; i < a.cols; ++i) ws.items[i] = {key_of(ws.x[i]), ws.e[i], i};
    write_masked<D>(a, r, ws, top_p_cut(ws, p), 0.f);
  }
}

// ---------------------------------------------------------------- argmax
// Rows over the threads; rows fewer than threads are split in parts too, and
// the parts' (max, first index) combined in order.
template <class D> void argmax_rows(const ArgmaxArgs& a) {
  using T = typename D::T;
  const int64_t n = a.cols, row_bytes = n * int64_t(sizeof(T));
  const auto row = [&](int64_t r) { return static_cast<const T*>(a.x) + r * a.x_stride; };
  int32_t* y = a.out;
  const auto token = [](const rowsel::ArgMax& am) { return am.nan || !std::isfinite(am.m) ? -1 : int32_t(am.i); };
  constexpr int64_t kMinPart = 1 << 16;  // bytes: below this a part costs more to hand out than it saves
  if (a.rows == 0) return;
  const int64_t threads = num_threads();
  const int64_t parts = a.rows >= threads ? 1 : std::min((threads + a.rows - 1) / a.rows, row_bytes / kMinPart);
  if (parts <= 1) {
    parallel_rows(a.rows, row_bytes, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) y[r] = token(rowsel::arg_max<D>(row(r), n));
    });
    return;
  }
  std::vector<rowsel::ArgMax> part(size_t(a.rows * parts));
  parallel_for(a.rows * parts, [&](int64_t t, int) {
    const int64_t r = t / parts, q = t % parts, c0 = n * q / parts, c1 = n * (q + 1) / parts;
    rowsel::ArgMax am = rowsel::arg_max<D>(row(r) + c0, c1 - c0);
    am.i += c0;
    part[size_t(t)] = am;
  });
  for (int64_t r = 0; r < a.rows; ++r) {
    rowsel::ArgMax best = part[size_t(r * parts)];
    for (int64_t q = 1; q < parts; ++q) {
      const rowsel::ArgMax& p = part[size_t(r * parts + q)];
      best.nan |= p.nan;
      if (p.m > best.m) best = {p.m, p.i, best.nan};  // strict: the first part with the max wins
    }
    y[r] = token(best);
  }
}

// ---------------------------------------------------------------- sample
// The general sampler: the row in f32, radix selects over all of it. The
// fast one (sample_row) falls back to it where its candidate lists would be
// long: many ties at the top-k bound, a large k, a top-p cut deep in the tail.
template <class D> int32_t sample_row_radix(const SampleArgs& a, int64_t r, Workspace& ws) {
  const float m = load_row<D>(a, r, ws);
  if (std::isnan(m)) return -1;
  const float t = a.temperature.at(r);
  const int64_t k = a.top_k.at(r);
  if (!(t > 0) || k == 1) return int32_t(first_equal(ws.x.data(), a.cols, m));
  const float inv_t = 1.f / t, mp = a.min_p.at(r), p = a.top_p.at(r);
  const float cut_k = (k > 1 && k < a.cols) ? kth_largest(ws, a.cols, k) : -kInf;
  fill_exp(ws, a.cols, m, inv_t);
  // The tokens top-k and min-p keep, in index order.
  ws.items.clear();
  for (int64_t i = 0; i < a.cols; ++i)
    if (ws.x[i] >= cut_k && ws.e[i] >= mp) ws.items.push_back({key_of(ws.x[i]), ws.e[i], i});
  float cut_p = -kInf;
  if (p < 1) {
    ws.kept.assign(ws.items.begin(), ws.items.end());
    cut_p = top_p_cut(ws, p);  // consumes ws.items; ws.kept keeps the index order
    ws.items.swap(ws.kept);
  }
  double total = 0;
  for (const Item& it : ws.items)
    if (float_of(it.key) >= cut_p) total += it.w;
  const double target = double(philox::row_uniform(a.seed, a.offset, uint64_t(r))) * total;
  double cum = 0;
  int64_t last = -1;
  for (const Item& it : ws.items) {
    if (float_of(it.key) < cut_p) continue;
    cum += it.w;
    last = it.index;
    if (cum > target) return int32_t(it.index);
  }
  return int32_t(last);
}

struct SampleWorkspace {
  std::vector<float> bmax, kth, ke;
  std::vector<int32_t> bins, bstart;
  std::vector<uint16_t> vmask;
  std::vector<double> bsum;
  rowsel::List list, bin_list;
  rowsel::Sketch sketch;
  double hist[rowsel::kHists][rowsel::kBins];
};
thread_local SampleWorkspace tls_sample;
// The calling thread's sample workspace, through a call: given the variable itself, GCC
// specialized sample_row on it and looked its address up (__tls_get_addr) at every use,
// 2.4% of a top-p sample's time (64 x 128256 f32, perf).
__attribute__((noinline)) SampleWorkspace& sample_workspace() { return tls_sample; }

// The top-p cut from the full mass histogram of the row, and the draw (the
// path of rows whose sketch window misses the crossing).
template <class D>
__attribute__((noinline)) int32_t top_p_full(const typename D::T* x, int64_t n, const rowsel::Mass& all, double p,
                                             float u, size_t cap, SampleWorkspace& ws,
                                             const std::function<int32_t()>& radix) {
  using namespace rowsel;
  std::fill(&ws.hist[0][0], &ws.hist[0][0] + kHists * kBins, 0.0);
  const double target = p * mass_pass<D>(x, n, all, ws.bsum.data(), ws.hist);
  // The bin where the mass from the top reaches the target (the lowest with mass if rounding never lets it).
  int bin = -1;
  double above = 0, above_bin = 0;
  for (int j = 0; j < kBins; ++j) {
    double g = 0;
    for (int h = 0; h < kHists; ++h) g += ws.hist[h][j];
    if (g == 0) continue;
    bin = j;
    above_bin = above;
    if (above + g >= target) break;
    above += g;
  }
  const vi want = vi{} + bin;
  List& L = ws.list;
  if (!gather<D>(x, n, L, cap, [&](vf v, int64_t) { return bin_of(v, all) == want; })) return radix();
  list_exp(L, all.mm[0], all.it[0]);
  list_keep(L, -kInf, all.mp);
  const Mass top{all.mp, list_cut(L, above_bin, target), all.mm, all.it};
  const double total = mass_pass<D>(x, n, top, ws.bsum.data(), nullptr);
  return int32_t(block_draw<D>(x, n, top, ws.bsum.data(), total, u));
}

// The top-p draw through the sketch window (see select.h); -2 when the
// window misses the crossing or lists too much. Not inlined (nor top_p_full):
// inlined into sample_row, its code slowed the top-k path there (64 x 128256
// f32, top_k 50, one thread: 45 -> 75 us a row; 41 out of line).
template <class D>
__attribute__((noinline)) int32_t top_p_window(const typename D::T* x, int64_t n, const rowsel::Mass& all, double p,
                                               float u, size_t cap, SampleWorkspace& ws, const typename D::T* next) {
  using namespace rowsel;
  const float big_e = big_threshold(ws.bmax.data(), (n + kBlock - 1) / kBlock, all);
  // Without min-p (and with no cut yet) every e is kept: the passes skip the filter.
  const bool filter = all.mp > 0 || all.cut > -kInf;
  // With T = 1 the passes skip the multiply by 1 / T (the same bits).
  const bool unit = all.it[0] == 1.f;
  if (filter)
    sketch_row<D, true, false>(x, n, all, big_e, ws.bmax.data(), ws.sketch);
  else if (unit)
    sketch_row<D, false, true>(x, n, all, big_e, ws.bmax.data(), ws.sketch);
  else
    sketch_row<D, false, false>(x, n, all, big_e, ws.bmax.data(), ws.sketch);
  int lo, hi;
  if (!sketch_window(ws.sketch, p, lo, hi)) return -2;
  List& L = ws.list;
  double mass = 0;
  const int64_t nb = (n + kSumBlock - 1) / kSumBlock;
  constexpr int64_t kVecs = kSumBlock / W;
  ws.vmask.resize(size_t(nb * kVecs));
  ws.bstart.resize(size_t(nb + 1));
  uint16_t* vmask = ws.vmask.data();
  const int32_t* bstart = ws.bstart.data();
  const int64_t listed =
      filter ? exp_window_pass<D, true, false>(x, n, all, lo, hi, ws.bsum.data(), mass, L, cap, next, vmask,
                                               ws.bstart.data())
      : unit ? exp_window_pass<D, false, true>(x, n, all, lo, hi, ws.bsum.data(), mass, L, cap, next, vmask,
                                               ws.bstart.data())
             : exp_window_pass<D, false, false>(x, n, all, lo, hi, ws.bsum.data(), mass, L, cap, next, vmask,
                                                ws.bstart.data());
  if (listed < 0) return -2;
  const double target = p * mass;
  double above = 0;
  for (int64_t b = 0; b < nb; ++b) above += ws.bsum[size_t(b)];
  if (above >= target) return -2;  // the crossing lies above the window
  // Exact mass per window bin, in index order; bins as the passes compute them.
  const size_t len = size_t(listed);
  ws.bins.resize(len + W);
  int32_t* bins = ws.bins.data();
  lanes(int64_t(len), [&](int64_t i, int64_t c) {
    const vi b = ebin(ld<F32>(L.e.data(), i, c));
    int32_t t[W];
    memcpy(t, &b, sizeof b);
    memcpy(bins + i, t, size_t(c) * sizeof(int32_t));
  });
  // Two histograms, so that neighbours of one bin chain less; raw pointers keep the loops free of TLS lookups.
  double* g0 = &ws.hist[0][0];
  double* g1 = &ws.hist[1][0];
  std::fill(g0 + lo, g0 + hi + 1, 0.0);
  std::fill(g1 + lo, g1 + hi + 1, 0.0);
  const float* le = L.e.data();
  size_t i = 0;
  for (; i + 2 <= len; i += 2) {
    g0[bins[i]] += le[i];
    g1[bins[i + 1]] += le[i + 1];
  }
  if (i < len) g0[bins[i]] += le[i];
  int bin = -1;
  double above_bin = 0;
  bool reached = false;
  for (int j = lo; j <= hi && !reached; ++j) {
    const double g = g0[j] + g1[j];
    if (g == 0) continue;
    bin = j;
    above_bin = above;
    reached = above + g >= target;
    above += g;
  }
  // Not reached: the crossing lies below the window, unless the window runs to the last bin
  // (then rounding kept the target out of reach, and the cut is the lowest value with mass).
  if (bin < 0 || (!reached && hi < kEBins - 1)) return -2;
  // The bins above the crossing are kept whole, their e picked by a vector select (an
  // element of a lower bin gives 0) and added to their blocks' sums a block at a time (the
  // list is in index order: only the block change branches); the crossing bin's elements
  // (few) are listed with their values. bins and L.e have W spare slots past len.
  double* bs = ws.bsum.data();
  List& B = ws.bin_list;
  B.idx.clear();
  B.val.clear();
  B.e.clear();
  ws.ke.resize(len + W);
  float* ke = ws.ke.data();
  const vi bv = vi{} + bin;
  // Entry j's index: its block b (bstart[b] <= j < bstart[b + 1]), then the vector of the
  // block and the lane by the vectors' masks; the entries come in index order, so (b, q) only
  // move forward.
  int64_t cb = 0, cq = 0;
  size_t cbase = 0;  // entries before vector (cb, cq)
  const auto index_of = [&](size_t j) -> int32_t {
    if (!(size_t(bstart[cb + 1]) > j)) {
      while (!(size_t(bstart[cb + 1]) > j)) ++cb;
      cq = 0;
      cbase = size_t(bstart[cb]);
    }
    for (;;) {
      uint32_t m = vmask[cb * kVecs + cq];
      const size_t pc = size_t(__builtin_popcount(m));
      if (j < cbase + pc) {
        for (size_t r = j - cbase; r; --r) m &= m - 1;
        return int32_t(cb * kSumBlock + cq * W + __builtin_ctz(m));
      }
      cbase += pc;
      ++cq;
    }
  };
  for (i = 0; i < len; i += W) {
    vi b;
    vf e;
    memcpy(&b, bins + i, sizeof b);
    memcpy(&e, le + i, sizeof e);
    const vf k = select(b < bv, e, vf{});
    memcpy(ke + i, &k, sizeof k);
    uint32_t hit = mask_bits(b == bv);
    if (len - i < size_t(W)) hit &= (1u << (len - i)) - 1;
    for (; hit; hit &= hit - 1) {
      const size_t j = i + size_t(__builtin_ctz(hit));
      const int32_t at = index_of(j);
      B.idx.push_back(at);
      B.val.push_back(load_n<D>(x + at, 1)[0]);
      B.e.push_back(le[j]);
    }
  }
  // Each block's kept window mass. These e lie in the window's bins: where those span at most
  // 16 binades (and not the last bin, which holds e down to the denormals), every partial sum
  // of a block's (at most 256) e is exact in a double, so four accumulators give the sum one
  // gives in index order, without its chain of dependent adds.
  // A block's entries are [bstart[b], bstart[b + 1]).
  if (hi < kEBins - 1 && (hi >> 6) - (lo >> 6) <= 16) {
    for (int64_t b = 0; b < nb; ++b) {
      size_t j = size_t(bstart[b]);
      const size_t end = size_t(bstart[b + 1]);
      if (j == end) continue;
      double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (; j + 4 <= end; j += 4) {
        a0 += double(ke[j]);
        a1 += double(ke[j + 1]);
        a2 += double(ke[j + 2]);
        a3 += double(ke[j + 3]);
      }
      for (; j < end; ++j) a0 += double(ke[j]);
      bs[b] += (a0 + a1) + (a2 + a3);
    }
  } else {
    for (int64_t b = 0; b < nb; ++b) {
      size_t j = size_t(bstart[b]);
      const size_t end = size_t(bstart[b + 1]);
      if (j == end) continue;
      double acc = 0;
      for (; j < end; ++j) acc += double(ke[j]);
      bs[b] += acc;
    }
  }
  const float cut = list_cut(B, above_bin, target);
  for (size_t j = 0; j < B.size(); ++j)
    if (B.val[j] >= cut) bs[B.idx[j] / kSumBlock] += B.e[j];
  double total = 0;
  for (int64_t b = 0; b < nb; ++b) total += bs[b];
  const Mass top{all.mp, cut, all.mm, all.it};
  return int32_t(block_draw<D>(x, n, top, ws.bsum.data(), total, u));
}

// `next`: the row after this one (or null), prefetched while this one computes.
template <class D> int32_t sample_row(const SampleArgs& a, int64_t r, SampleWorkspace& ws, const typename D::T* next) {
  using namespace rowsel;
  using T = typename D::T;
  const T* x = static_cast<const T*>(a.x) + r * a.x_stride;
  const int64_t n = a.cols, nb = (n + kBlock - 1) / kBlock;
  ws.bmax.resize(size_t(nb));
  const RowMax rm = row_max<D>(x, n, ws.bmax.data());
  if (!rm.valid()) return -1;
  const float m = rm.m, t = a.temperature.at(r);
  const int64_t k = a.top_k.at(r);
  if (!(t > 0) || k == 1) return int32_t(rowsel::first_equal<D>(x, n, m));
  const float it = 1.f / t, mp = a.min_p.at(r), p = a.top_p.at(r);
  const auto u = [&] { return philox::row_uniform(a.seed, a.offset, uint64_t(r)); };
  const auto radix = [&] { return sample_row_radix<D>(a, r, tls_ws); };
  const size_t cap = size_t(std::clamp<int64_t>(n / 4, 1024, 16384));
  List& L = ws.list;
  bool listed = false;
  float cut_k = -kInf;
  if (k > 1 && k < n) {
    if (k > nb) return radix();
    ws.kth.assign(ws.bmax.begin(), ws.bmax.end());
    std::nth_element(ws.kth.begin(), ws.kth.begin() + (k - 1), ws.kth.end(), std::greater<float>());
    const vf bound = splat(ws.kth[size_t(k - 1)]);
    if (!gather<D>(x, n, L, cap, [&](vf v, int64_t) { return v >= bound; })) return radix();
    cut_k = list_kth(L, k);
    listed = true;
  } else if (mp > 0) {
    // vexp is within a few ulp of exp: the margin keeps every e >= mp on the list.
    const vf mm = splat(m), itv = splat(it), zmin = splat(float(std::log(double(mp)) * (1 + 1e-4) - 1e-3));
    listed = gather<D>(x, n, L, cap, [&](vf v, int64_t) { return (v - mm) * itv >= zmin; });
  }
  if (listed) {
    list_exp(L, m, it);
    list_keep(L, cut_k, mp);
    float cut_p = -kInf;
    if (p < 1) {
      double total = 0;
      for (float e : L.e) total += e;
      cut_p = list_cut(L, 0, double(p) * total);
    }
    return int32_t(list_draw(L, cut_p, u()));
  }
  ws.bsum.resize(size_t((n + kSumBlock - 1) / kSumBlock));
  const Mass all{mp, -kInf, splat(m), splat(it)};
  if (p >= 1) {
    const double total = mass_pass<D>(x, n, all, ws.bsum.data(), nullptr);
    return int32_t(block_draw<D>(x, n, all, ws.bsum.data(), total, u()));
  }
  const int32_t tok = top_p_window<D>(x, n, all, p, u(), cap, ws, next);
  if (tok != -2) return tok;
  return top_p_full<D>(x, n, all, p, u(), cap, ws, radix);
}

template <class D> void sample_rows(const SampleArgs& a, int64_t r0, int64_t r1) {
  SampleWorkspace& ws = sample_workspace();
  using T = typename D::T;
  for (int64_t r = r0; r < r1; ++r) {
    const T* next = r + 1 < r1 ? static_cast<const T*>(a.x) + (r + 1) * a.x_stride : nullptr;
    a.out[r] = sample_row<D>(a, r, ws, next);
  }
}

// ---------------------------------------------------------------- penalties
template <class D> void penalty_rows(const PenaltyArgs& a, int64_t r0, int64_t r1) {
  using T = typename D::T;
  std::vector<int32_t> seen;
  for (int64_t r = r0; r < r1; ++r) {
    copy_row<D>(a, r);
    const T* x = static_cast<const T*>(a.x) + r * a.x_stride;
    T* y = static_cast<T*>(a.out) + r * a.out_stride;
    const int32_t* ids = a.token_ids + r * a.ids_stride;
    seen.clear();
    for (int64_t j = 0; j < a.ids_len; ++j)
      if (ids[j] >= 0 && ids[j] < a.cols) seen.push_back(ids[j]);
    std::sort(seen.begin(), seen.end());
    for (size_t j = 0; j < seen.size();) {
      size_t e = j;
      while (e < seen.size() && seen[e] == seen[j]) ++e;
      const int32_t tok = seen[j];
      float v = load_n<D>(x + tok, 1)[0];
      v = v > 0 ? v / a.repetition : v * a.repetition;
      v -= float(e - j) * a.frequency + a.presence;
      store_n<D>(y + tok, splat(v), 1);
      j = e;
    }
  }
}

template <class D> int64_t row_bytes(const Logits& a) { return a.cols * int64_t(sizeof(typename D::T)); }

}  // namespace

void normalize_run(const NormalizeArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    parallel_rows(a.rows, 4 * row_bytes<D>(a), [&](int64_t r0, int64_t r1) { normalize_rows<D>(a, r0, r1); });
  });
}

void argmax_run(const ArgmaxArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) { argmax_rows<decltype(d)>(a); });
}

void mask_run(const MaskArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    parallel_rows(a.rows, 16 * row_bytes<D>(a), [&](int64_t r0, int64_t r1) { mask_rows<D>(a, r0, r1); });
  });
}

void penalties_run(const PenaltyArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    parallel_rows(a.rows, 2 * row_bytes<D>(a) + 8 * a.ids_len,
                  [&](int64_t r0, int64_t r1) { penalty_rows<D>(a, r0, r1); });
  });
}

void sample_run(const SampleArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    parallel_rows(a.rows, 16 * row_bytes<D>(a), [&](int64_t r0, int64_t r1) { sample_rows<D>(a, r0, r1); });
  });
}

void philox_run(const PhiloxArgs& a) {
  for (int64_t r = 0; r < a.n; ++r) a.out[r] = philox::row_uniform(a.seed, a.offset, uint64_t(r));
}

}  // namespace braze::cpu::BRAZE_ISA
