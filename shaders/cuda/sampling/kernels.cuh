// Sampling family kernels: one block per row. Same rules as the CPU
// (csrc/cpu/sampling.cpp): thresholds by an exact radix select over float
// keys (select.cuh), kept tokens drawn by inverse CDF in index order with the
// row's Philox uniform. Masses are summed in 2^-40 fixed point with integer
// atomics, so every result is independent of thread scheduling.
//
// sample / top_k_mask with a small k read the row twice: pass 1 takes the
// row max (and its first index) and each thread's max; the k-th largest of
// the thread maxima bounds the k-th largest element from below (k threads
// each hold an element >= it), so pass 2 lists the few elements at or above
// that bound in shared memory, and top-k, top-p and the draw run on the list:
// short lists (the usual case) by select_small, a loop over the list per
// answer instead of four radix levels, longer ones by radix levels. Split rows
// exchange the max and the bound through one cluster barrier (with k at most
// the cluster's warps, the bound is the k-th largest of every warp's max over
// the cluster: a list of ~55 at k 50) and gather the lists through a second;
// a list one warp holds is finished by warp 0 alone. Other cases select over
// the whole row, a pass per radix level until the bucket fits the list.
#pragma once
#include <cstdint>

#include "core/philox.h"
#include "core/sampling.h"
#include "cuda/common/dtype.cuh"
#include "cuda/sampling/normalize.cuh"
#include "cuda/sampling/select.cuh"

namespace braze::cuda::sampling {

constexpr int kThreads = 1024;        // argmax, masks, sample, penalties
constexpr float kInf = __builtin_huge_valf();
constexpr double kFix = 1099511627776.0;  // 2^40

// Packs a thread loads before it uses them: more for pass 1 (from HBM), where
// registers allow (sm_80 spills with 8 packs of 16 bytes at 1024 threads).
template <int V> constexpr int kU = V == 1 ? 8 : 4;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
template <int V> constexpr int kUFirst = V == 1 ? 16 : 4;
#else
template <int V> constexpr int kUFirst = V == 1 ? 16 : 8;
#endif

__device__ __forceinline__ u64 fixed(float e) { return u64(double(e) * kFix); }

using braze::sampling::ArgmaxArgs;
using braze::sampling::Logits;
using braze::sampling::MaskArgs;
using braze::sampling::PenaltyArgs;
using braze::sampling::PhiloxArgs;
using braze::sampling::SampleArgs;

template <class T> __device__ __forceinline__ const T* row_in(const Logits& a, int64_t r) {
  return static_cast<const T*>(a.x) + r * a.x_stride;
}
// The [rows, cols] output of a mask or of apply_penalties.
template <class T, class A> __device__ __forceinline__ T* row_out(const A& a, int64_t r) {
  return static_cast<T*>(a.out) + r * a.out_stride;
}

// Pass 1: the row max (NaN ignored), its first index, whether the row is
// samplable (no NaN, finite max), and this thread's own max.
struct RowMax {
  bool valid;
  float m, tm;
  u32 first;
  u64 best;  // (key, ~first); all ones: NaN seen; 0: no element above -inf
};
template <int NT, int V, class T> __device__ RowMax row_max(const T* x, int n, BlockReduce<NT>& br) {
  float tm = -kInf;
  u32 ti = 0;
  bool nan = false;
  for_elems<NT, V, kUFirst<V>>(x, n, [&](int i, float v) {
    nan |= v != v;
    if (v > tm) {  // strict: a thread's first max stays
      tm = v;
      ti = u32(i);
    }
  });
  // (key, ~index): the block max is the row max at its first index; NaN
  // anywhere makes it all ones, a row of -inf (or no element) leaves 0.
  const u64 best = br.max(nan ? ~0ull : tm > -kInf ? (u64(key_of(tm)) << 32) | ~ti : 0ull);
  const float m = float_of(u32(best >> 32));
  return {best != ~0ull && best != 0 && isfinite(m), m, tm, ~u32(best), best};
}

// A lower bound of the k-th largest key of this CTA's elements: the k-th
// largest of its thread maxima (k threads each hold an element >= it), its top
// 16 bits fixed by two radix levels (tight enough, and cheaper than all four;
// an even number, since split rows sum histograms by buffer index, so every
// CTA must stand at the same one). known = false when k is outside [1,
// threads holding elements]. Rows the list holds whole need none (low 0).
struct Bound {
  bool known;
  u32 low;
};
template <int NT, int V, bool kC> __device__ Bound local_bound(Ctx<NT, kC>& cx, int n, int64_t k, float tm) {
  if (n <= kCap) return {true, 0u};
  const int np = (cx.n + V - 1) / V, holders = np < NT ? np : NT;
  if (!(k >= 1 && k <= holders)) return {false, 0u};
  if (threadIdx.x < holders) cx.sm.list.key[threadIdx.x] = key_of(tm);
  __syncthreads();
  Sel s;
  const ListSrc<NT> src{cx.sm, u32(holders), false};
  auto one = [](u32, u32) { return u64(1); };
  auto target = [k](u64) { return u64(k); };
  radix_level<NT, true>(cx, s, src, one, target);
  radix_level<NT, true>(cx, s, src, one, target);
  return {true, s.prefix};
}

// Split rows with k at most the cluster's warps: the k-th largest of every
// warp's max over the cluster (k warps each hold an element >= it), from the
// maxima the CTAs posted (sm.wmax) before the barrier of max_and_bound. Near
// the row's k-th largest itself (a 128256-element row over 8 x 32 warps, k
// 50: some 55 elements at or above it, where the CTAs' own bounds of
// local_bound let ~350 through), so the list and its selects stay short.
// Unknown (0) where fewer than k warps hold an element above -inf.
// Warp w takes CTA w's 32 maxima and sorts them (bitonic, largest first); each
// maximum's rank in the cluster is then its place in its own list plus, in
// every other list, how many are larger (ties: the lists of lower rank count
// as larger), found by binary search: the ranks are 0 .. c - 1, once each, and
// the maximum of rank k - 1 is the answer. No block reduction and ~40 shared
// loads a thread, where counting every maximum's peers read 256 keys a thread.
template <int NT, bool kC> __device__ Bound warp_max_bound(Ctx<NT, kC>& cx, int64_t k) {
  SelectSmem<NT>& sm = cx.sm;
  constexpr u32 kW = NT / 32;
  static_assert(kW == 32, "warp_max_bound: one sorted list of 32 maxima a warp");
  const u32 lane = threadIdx.x & 31, list = threadIdx.x >> 5;
  u32 v = 0;
  if (list < cx.ctas) {
    v = *cluster_map(&sm.wmax[lane], list);
#pragma unroll
    for (u32 size = 2; size <= 32; size <<= 1) {
#pragma unroll
      for (u32 j = size >> 1; j; j >>= 1) {
        const u32 o = __shfl_xor_sync(kFull, v, j);
        const bool hi = ((lane & size) == 0) == ((lane & j) == 0);  // this lane keeps the larger
        v = hi ? max(v, o) : min(v, o);
      }
    }
    sm.list.key[threadIdx.x] = v;
  }
  __syncthreads();
  if (list < cx.ctas) {
    u32 rank = lane;
    for (u32 l = 0; l < cx.ctas; ++l) {
      if (l == list) continue;
      const u32* a = sm.list.key + l * 32;
      // entries of list l ahead of v: >= v for lower lists, > v for higher ones (a descends)
      if (l > list && v == ~0u) continue;  // nothing is above all ones
      const u32 t = l < list ? v : v + 1;
      u32 pos = 0;
#pragma unroll
      for (u32 s = 16; s; s >>= 1)
        if (a[pos + s - 1] >= t) pos += s;
      rank += pos + u32(a[pos] >= t);  // pos <= 31 here
    }
    if (rank == u32(k - 1)) sm.cut = v;
  }
  __syncthreads();
  v = sm.cut;
  return {v != 0u, v};
}

// The row's RowMax (split rows: over the cluster, the first index in the
// row; tm stays this thread's own) and, where `want`, a lower bound of its
// k-th largest key: split rows take warp_max_bound where k allows, else the
// highest of the CTAs' bounds (each a bound of the row's k-th largest too),
// exchanging it and the max through one cluster barrier.
template <int NT, int V, bool kC, class T>
__device__ RowMax max_and_bound(Ctx<NT, kC>& cx, const T* row, int n, int64_t k, bool want, Bound* b) {
  const RowMax own = row_max<NT, V>(row + cx.c0, cx.n, cx.br);
  // Split rows past the list's capacity: the warps' maxima instead of this CTA's own bound.
  const bool by_warps = kC && want && n > kCap && k >= 1 && k <= int64_t(cx.ctas) * (NT / 32);
  if (by_warps) {
    const u32 wk = warp_all(own.tm > -kInf ? key_of(own.tm) : 0u, [](u32 a, u32 c) { return a > c ? a : c; });
    if ((threadIdx.x & 31) == 0) cx.sm.wmax[threadIdx.x >> 5] = wk;
    *b = Bound{false, 0u};
  } else {
    *b = want ? local_bound<NT, V>(cx, n, k, own.tm) : Bound{false, 0u};
  }
  if constexpr (!kC) {
    return own;
  } else {
    const bool plain = own.best != ~0ull && own.best != 0;
    u64 best = plain ? (own.best & ~0xffffffffull) | ~(u32(cx.c0) + own.first) : own.best;
    u64 bound = b->known ? (u64(1) << 32) | b->low : 0ull;
    auto mx = [](u64 a, u64 c) { return a > c ? a : c; };
    cx.across2(&best, mx, &bound, mx);  // its barrier also publishes every CTA's sm.wmax
    *b = by_warps ? warp_max_bound(cx, k) : Bound{bound != 0, u32(bound)};
    const float m = float_of(u32(best >> 32));
    return {best != ~0ull && best != 0 && isfinite(m), m, own.tm, ~u32(best), best};
  }
}

// Lists every element at or above the bound (every CTA of a split row holding
// the cluster's items; their lists stay shared until Ctx::finish). Returns how
// many, 0 when no bound is known or they do not fit.
template <int NT, int V, bool kC, class T> __device__ u32 list_above(Ctx<NT, kC>& cx, const T* x, Bound b) {
  if (!b.known) return 0;
  const float bound = threshold_of(b.low);
  const u32 c = compact<NT, V, kU<V>>(cx, x, [bound](float v, u32) { return v >= bound; }, true);
  return c <= kCap ? c : 0;
}

// The key of the k-th largest element (1 < k < n); listed = list_above's answer.
template <int NT, int V, bool kC, class T>
__device__ u32 kth_key(Ctx<NT, kC>& cx, const T* x, int64_t k, u32 listed) {
  auto one = [](u32, u32) { return u64(1); };
  auto target = [k](u64) { return u64(k); };
  u32 v;
  if (listed > u32(kWarpItems) && kth_pivot(cx, listed, u32(k), &v)) return v;
  if (listed && listed <= kSmallCount && listed <= NT)
    return select_small<true, false>(cx, cx.sm.list.key, cx.sm.list.idx, nullptr, listed, target);
  if (listed) return select_list<NT, true>(cx, Sel{}, listed, false, one, target);
  return select_global<NT, V, kU<V>, true>(cx, x, one, target);
}

template <int NT, int V, class T> __device__ void copy_row(const T* x, T* y, int n) {
  for_packs<NT, V, kU<V>>(x, n, [&](int q, const Pack<T, V>& p, int len) {
    if (len) store_pack<T, V>(y, int64_t(q) * V, len, p);
  });
}

template <class T, int V> __global__ void __launch_bounds__(kThreads) argmax_kernel(ArgmaxArgs a) {
  __shared__ typename BlockReduce<kThreads>::Smem red;
  BlockReduce<kThreads> br{&red};
  const int64_t r = blockIdx.x;
  const RowMax rm = row_max<kThreads, V>(row_in<T>(a, r), int(a.cols), br);
  if (threadIdx.x == 0) a.out[r] = rm.valid ? int32_t(rm.first) : -1;
}

// What a mask keeps of row r: everything, or the keys >= cut whose mass
// exp((v - m) * it) is >= e_min (with e_min > 0).
struct Keep {
  bool all;
  u32 cut;
  float e_min, m, it;
};

template <int NT, int V, bool kC, class T>
__device__ Keep mask_keep(Ctx<NT, kC>& cx, const MaskArgs& a, int64_t r, const T* x) {
  const int n = int(a.cols);
  const int64_t k = a.op == Op::top_k_mask ? a.top_k.at(r) : 0;
  Bound b;
  const RowMax rm = max_and_bound<NT, V>(cx, x, n, k, k > 0 && k < n, &b);
  Keep kp{true, 0u, 0.f, rm.m, a.op == Op::top_k_mask ? 1.f : 1.f / a.temperature.at(r)};
  if (!rm.valid) return kp;
  if (a.op == Op::top_k_mask) {
    if (k <= 0 || k >= n) return kp;
    kp.cut = kth_key<NT, V>(cx, x, k, list_above<NT, V>(cx, x, b));
  } else if (a.op == Op::min_p_mask) {
    kp.e_min = a.min_p.at(r);
    if (!(kp.e_min > 0.f)) return kp;
  } else {
    const float p = a.top_p.at(r), m = kp.m, it = kp.it;
    if (p >= 1.f) return kp;
    auto mass = [m, it](u32 key, u32) { return fixed(__expf((float_of(key) - m) * it)); };
    auto target = [p](u64 total) { return u64(ceil(double(p) * double(total))); };
    const u32 listed = n <= kCap ? list_above<NT, V>(cx, x, Bound{true, 0u}) : 0;
    kp.cut = listed ? select_list<NT, false>(cx, Sel{}, listed, false, mass, target)
                    : select_global<NT, V, kU<V>, false>(cx, x, mass, target);
  }
  kp.all = false;
  return kp;
}

// kC: the row split over a cluster (sm_90), each CTA writing its own slice.
template <class T, int V, bool kC = false> __global__ void __launch_bounds__(kThreads) mask_kernel(MaskArgs a) {
  constexpr int NT = kThreads;
  __shared__ SelectSmem<NT> sm;
  Ctx<NT, kC> cx(sm, int(a.cols), V);
  const int64_t r = blockIdx.x / cx.ctas;
  const T* x = row_in<T>(a, r);
  const Keep kp = mask_keep<NT, V>(cx, a, r, x);
  __syncthreads();  // in place: every read of the slice happened before any write
  const T* xs = x + cx.c0;
  T* ys = row_out<T>(a, r) + cx.c0;
  if (kp.all) {
    if (!a.in_place) copy_row<NT, V>(xs, ys, cx.n);
  } else {
    const float bound = threshold_of(kp.cut);
    for_packs<NT, V, kU<V>>(xs, cx.n, [&](int q, const Pack<T, V>& p, int len) {
      if (!len) return;
      Pack<T, V> o = p;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float v = p.f(e);
        bool keep = v >= bound;
        if (kp.e_min > 0.f) keep &= __expf((v - kp.m) * kp.it) >= kp.e_min;
        if (!keep) o.set(e, Elem<T>::kNegInf);
      }
      store_pack<T, V>(ys, int64_t(q) * V, len, o);
    });
  }
  cx.finish();  // no CTA leaves while another may read its shared memory
}

// The token drawn from row r (-1: the row has NaN or no finite max), and
// whether this CTA writes it.
struct Drawn {
  int32_t tok;
  bool mine;
};

// Stop > 0 (scripts/cuda_sample_bw.cu's stage timings only) returns after
// stage Stop: 1 the max and the bound, 2 the list, 3 the k-th key, 4 the kept
// items and their masses, 5 top-p.
template <int NT, int V, bool kC, int Stop = 0, class T>
__device__ Drawn sample_row(Ctx<NT, kC>& cx, const SampleArgs& a, int64_t r, const T* x) {
  const int n = int(a.cols);
  const bool lead = cx.rank == 0;
  const float t = a.temperature.at(r);
  const int64_t k = a.top_k.at(r);
  const bool draw = t > 0.f && k != 1;  // else the row's first max
  const bool top_k = k > 1 && k < n;
  Bound b;
  const RowMax rm = max_and_bound<NT, V>(cx, x, n, top_k ? k : 0, draw, &b);
  if constexpr (Stop == 1) return {int32_t(b.low), lead};
  if (!rm.valid) return {-1, lead};
  if (!draw) return {int32_t(rm.first), lead};
  const float m = rm.m, it = 1.f / t, mp = a.min_p.at(r), p = a.top_p.at(r);
  // The row's uniform (top 24 bits of its Philox word), drawn where it is used.
  auto uniform24 = [&] { return braze::philox::row_block(a.seed, a.offset, uint64_t(r)).v[0] >> 8; };
  // The mass an element keeps (keys below cut keep none), as on the CPU.
  auto mass_above = [&](u32 key, u32 cut) -> u64 {
    if (key < cut) return 0;
    const float e = __expf((float_of(key) - m) * it);
    return e >= mp ? fixed(e) : 0;
  };
  auto top_p_target = [p](u64 total) { return u64(ceil(double(p) * double(total))); };
  auto draw_target = [](u32 u24) { return [u24](u64 total) { return scaled(total, u24) + 1; }; };
  const u32 listed = list_above<NT, V>(cx, x, b);
  if constexpr (Stop == 2) return {int32_t(listed), lead};
  SelectSmem<NT>& sm = cx.sm;
  u32 cut = 0, kept = 0;
  if (listed && listed <= u32(kWarpItems)) {  // a list one warp holds: warp 0 alone from here
    if (threadIdx.x >= 32) return {0, false};
    if (top_k) cut = warp_select<true, false>(sm.list.key, sm.list.idx, nullptr, listed, [k](u64) { return u64(k); });
    if constexpr (Stop == 3) return {int32_t(cut), lead};
    kept = warp_compact(sm, listed, cut, u64(1) << 32);
  } else {
    cut = top_k ? kth_key<NT, V>(cx, x, k, listed) : 0;
    if constexpr (Stop == 3) return {int32_t(cut), lead};
    if (listed) kept = compact_small(cx, listed, cut);
  }
  if (listed) {  // every element that can be kept is on the list (of every CTA)
    if (kept <= u32(kWarpItems)) {  // the few keys >= cut: warp 0 alone (thread 0 writes the token)
      if (threadIdx.x >= 32) return {0, false};
      const u32 l = threadIdx.x;
      if (l < kept) sm.small.w[l] = mass_above(sm.small.key[l], cut);
      if (l + 32 < kept) sm.small.w[l + 32] = mass_above(sm.small.key[l + 32], cut);
      __syncwarp();
      if constexpr (Stop == 4) return {int32_t(kept), lead};
      if (p < 1.f) {
        cut = max(cut, warp_select<false, false>(sm.small.key, sm.small.idx, sm.small.w, kept, top_p_target));
        if (l < kept && sm.small.key[l] < cut) sm.small.w[l] = 0;
        if (l + 32 < kept && sm.small.key[l + 32] < cut) sm.small.w[l + 32] = 0;
        __syncwarp();
      }
      if constexpr (Stop == 5) return {int32_t(cut), lead};
      const u32 tok = ~warp_select<false, true>(sm.small.key, sm.small.idx, sm.small.w, kept, draw_target(uniform24()));
      return {int32_t(tok), lead};
    }
    if (kept <= u32(kSmall) && kept <= u32(NT)) {  // select_small
      const u32 i = threadIdx.x;
      if (i < kept) sm.small.w[i] = mass_above(sm.small.key[i], cut);
      __syncthreads();
      if constexpr (Stop == 4) return {int32_t(kept), lead};
      if (p < 1.f) {
        cut = max(cut, select_small<false, false>(cx, sm.small.key, sm.small.idx, sm.small.w, kept, top_p_target));
        if (i < kept && sm.small.key[i] < cut) sm.small.w[i] = 0;
        __syncthreads();
      }
      if constexpr (Stop == 5) return {int32_t(cut), lead};
      const u32 tok =
          ~select_small<false, true>(cx, sm.small.key, sm.small.idx, sm.small.w, kept, draw_target(uniform24()));
      return {int32_t(tok), lead};
    }
    if (p < 1.f) {
      const u32 ck = cut;
      cut = max(cut, select_list<NT, false>(cx, Sel{}, listed, false, [&](u32 key, u32) { return mass_above(key, ck); },
                                            top_p_target));
    }
    // Keys ~index: idx < 2^(8 * bytes), so the top digits of ~idx are all ones.
    const int bits = 32 - __clz(u32(n - 1) | 1u), bytes = (bits + 7) / 8;
    Sel s;
    s.level = 4 - bytes;
    s.mask = s.prefix = bytes == 4 ? 0u : ~0u << (8 * bytes);
    const u32 tok = ~select_list<NT, false>(cx, s, listed, true, [&](u32, u32 key) { return mass_above(key, cut); },
                                            draw_target(uniform24()));
    return {int32_t(tok), lead};
  }
  if (p < 1.f) {
    const u32 ck = cut;
    cut = max(cut, select_global<NT, V, kU<V>, false>(cx, x, [&](u32 key, u32) { return mass_above(key, ck); },
                                                      top_p_target));
  }
  const u32 tok = cdf_global<NT, V, kU<V>>(cx, x, [&](u32 key) { return mass_above(key, cut); }, uniform24());
  return {int32_t(tok), kC ? tok != ~0u : lead};
}

// kC: the row split over a cluster (sm_90). Stop: see sample_row.
template <class T, int V, bool kC = false, int Stop = 0>
__global__ void __launch_bounds__(kThreads) sample_kernel(SampleArgs a) {
  constexpr int NT = kThreads;
  __shared__ SelectSmem<NT> sm;
  Ctx<NT, kC> cx(sm, int(a.cols), V);
  const int64_t r = blockIdx.x / cx.ctas;
  const Drawn d = sample_row<NT, V, kC, Stop>(cx, a, r, row_in<T>(a, r));
  if (threadIdx.x == 0 && d.mine) a.out[r] = d.tok;
  cx.finish();  // no CTA leaves while another may read its shared memory
}

template <class T, int V> __global__ void __launch_bounds__(kThreads) penalty_kernel(PenaltyArgs a) {
  const int64_t r = blockIdx.x;
  const T* x = row_in<T>(a, r);
  T* y = row_out<T>(a, r);
  const int32_t* ids = a.token_ids + r * a.ids_stride;
  if (!a.in_place) copy_row<kThreads, V>(x, y, int(a.cols));
  __syncthreads();
  for (int64_t j = threadIdx.x; j < a.ids_len; j += kThreads) {
    const int32_t tok = ids[j];
    if (tok < 0 || tok >= a.cols) continue;
    bool first = true;
    for (int64_t q = 0; q < j && first; ++q) first = ids[q] != tok;
    if (!first) continue;  // the first occurrence applies the penalty for all of them
    int count = 0;
    for (int64_t q = j; q < a.ids_len; ++q) count += ids[q] == tok;
    float v = to_f32(x[tok]);
    v = v > 0.f ? v / a.repetition : v * a.repetition;
    y[tok] = from_f32<T>(v - (float(count) * a.frequency + a.presence));
  }
}

__global__ void philox_uniform_kernel(PhiloxArgs a) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < a.n) a.out[r] = braze::philox::row_uniform(a.seed, a.offset, uint64_t(r));
}

}  // namespace braze::cuda::sampling
