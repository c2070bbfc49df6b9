// Thresholds of the sampling kernels without sorting: a radix select over the
// order-preserving keys, 8 bits per level, with integer histograms (counts,
// or masses in 2^-40 fixed point), so every answer is exact and independent of
// thread scheduling. It runs over the global row (a pass per level) or over a
// candidate list in shared memory: once a level's bucket holds at most kCap
// weighted items, one more pass compacts them and the rest of the levels read
// shared memory only.
//
// select(target) returns the largest key v with sum(weight of items >= v) >=
// target (target <= the total weight; the first level may derive it from the
// total). The same select finds the drawn token: over keys ~index, the largest
// with at least target + 1 mass at or below its index is the first index whose
// running mass exceeds target.
#pragma once
#include <cstdint>

#include "cuda/sampling/block.cuh"
#include "cuda/sampling/row.cuh"

namespace braze::cuda::sampling {

constexpr int kCap = 4096;     // candidates the shared list holds
constexpr int kGroups = 2048;  // span groups of the inverse-CDF pass (aliases the list)
constexpr int kSmall = 256;    // items of the small list (select_small's masses)
constexpr int kWarpItems = 64;  // items one warp's selects take (two a lane)
constexpr int kSmallCount = 512;  // list length up to which the k-th key is found by select_small
constexpr int kMaxCtas = 16;   // CTAs of a split row (8 portable; 16 where the device allows)

template <int NT> struct alignas(16) SelectSmem {
  union {
    struct {
      u32 key[kCap], idx[kCap];
    } list;
    struct {
      u32 lo[kGroups], hi[kGroups];
    } grp;
  };
  // Histograms, two alternating buffers: a level clears the other one, so
  // buffer ph is zero whenever a level starts (the kernel clears buffer 0).
  u32 lo[2][256], hi[2][256], cnt[2][256];
  u32 count, bucket, bucket_cnt, group, tok;
  u32 counts[kMaxCtas];  // split rows: every CTA's list length (gather)
  u32 piv_key[32], piv_cnt[32], cut, cut_ok;  // kth_pivot
  u32 wmax[NT / 32];  // split rows: each warp's largest key (0: no element above -inf), for the bound
  u64 above, target, base;
  u64 post_best, post_bound, post_mass;  // split rows: what each CTA posts for the others
  struct alignas(16) {
    u32 key[kSmall], idx[kSmall];
    u64 w[kSmall];
    u32 count;
  } small;  // the kept candidates (key >= the top-k cut), for select_small
  u64 scan[NT / 32];
  typename BlockReduce<NT>::Smem red;
};

// A row's select state in one CTA. kC: the row is split over the CTAs of a
// cluster, this one taking elements [c0, c0 + n) (c0 a multiple of V); else
// c0 = 0 and n is the row's length.
template <int NT, bool kC = false> struct Ctx {
  SelectSmem<NT>& sm;
  BlockReduce<NT> br;
  int ph = 0;
  unsigned rank = 0, ctas = 1;
  int c0 = 0, n;
  __device__ Ctx(SelectSmem<NT>& s, int cols, int V) : sm(s), br{&s.red}, n(cols) {
    for (int b = threadIdx.x; b < 256; b += NT) sm.lo[0][b] = sm.hi[0][b] = sm.cnt[0][b] = 0;
    if constexpr (kC) {
      rank = cluster_rank();
      ctas = cluster_size();
      const int per = ((cols + int(ctas) - 1) / int(ctas) + V - 1) / V * V;
      c0 = min(cols, int(rank) * per);
      n = min(cols - c0, per);
    }
  }
  // Two values through one barrier: *a over post_best, *b over post_bound.
  template <class OpA, class OpB> __device__ void across2(u64* a, OpA opa, u64* b, OpB opb) {
    if (threadIdx.x == 0) {
      sm.post_best = *a;
      sm.post_bound = *b;
    }
    cluster_sync();
    *a = combine(&sm.post_best, opa);
    *b = combine(&sm.post_bound, opb);
  }
  // op over every CTA's *slot in rank order (unrolled: the remote loads are
  // independent, so they are issued together).
  template <class Op> __device__ u64 combine(u64* slot, Op op) const {
    u64 r = *cluster_map(slot, 0);
#pragma unroll
    for (int i = 1; i < kMaxCtas; ++i)
      if (i < int(ctas)) r = op(r, *cluster_map(slot, unsigned(i)));
    return r;
  }
  // gather() may leave this CTA's arrival at the last cluster barrier done
  // and its wait pending (its list stays readable until every CTA has read
  // it); the kernel ends with finish(), which keeps every CTA resident until
  // no other can still read its shared memory.
  bool pending = false;
  __device__ void finish() {
    if constexpr (kC) {
      if (pending) cluster_wait();
      else cluster_sync();
    }
  }
};

// Where a select stands: the digits fixed so far and the weight above them.
struct Sel {
  u32 prefix = 0, mask = 0;
  u64 above = 0, target = 0;
  int level = 0;
  bool first = true;
};

__device__ __forceinline__ u64 u64_add(u64 a, u64 b) { return a + b; }

// One level: histogram of the items matching the prefix (src(f) calls
// f(key, aux) for each item; w(key, aux) is its weight, 0 = not an item),
// then one warp picks the bucket. Returns how many items the bucket holds.
// kSum (split rows, items of this CTA's slice): the histogram is summed over
// the cluster first.
template <int NT, bool kCount, bool kSum = false, bool kC, class Src, class W, class Tgt>
__device__ u32 radix_level(Ctx<NT, kC>& cx, Sel& s, Src&& src, W&& w, Tgt&& target_of) {
  SelectSmem<NT>& sm = cx.sm;
  const int ph = cx.ph, shift = 24 - 8 * s.level;
  for (int b = threadIdx.x; b < 256; b += NT) sm.lo[ph ^ 1][b] = sm.hi[ph ^ 1][b] = sm.cnt[ph ^ 1][b] = 0;
  src([&](u32 k, u32 aux) {
    if ((k & s.mask) != s.prefix) return;
    const u64 wt = w(k, aux);
    if (!wt) return;
    const u32 d = (k >> shift) & 255u;
    atomicAdd(&sm.cnt[ph][d], 1u);  // a warp-aggregated increment (ATOMS.POPC.INC)
    if constexpr (!kCount) atomic_add_u64(&sm.lo[ph][d], &sm.hi[ph][d], wt);
  });
  __syncthreads();
  if constexpr (kSum && kC) {
    // Every CTA reads every CTA's bins, then (once all have read) keeps the sums.
    cluster_sync();
    u32 c = 0;
    u64 m = 0;
    const int b = threadIdx.x;
    if (b < 256)
      for (unsigned i = 0; i < cx.ctas; ++i) {
        c += *cluster_map(&sm.cnt[ph][b], i);
        if constexpr (!kCount) m += join_u64(*cluster_map(&sm.lo[ph][b], i), *cluster_map(&sm.hi[ph][b], i));
      }
    cluster_sync();
    if (b < 256) {
      sm.cnt[ph][b] = c;
      sm.lo[ph][b] = u32(m);
      sm.hi[ph][b] = u32(m >> 32);
    }
    __syncthreads();
  }
  if (threadIdx.x < 32) {  // lane l scans bins 255 - 8l down to 248 - 8l
    const int lane = threadIdx.x, top = 255 - 8 * lane;
    u64 c[8], sum = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      c[j] = kCount ? u64(sm.cnt[ph][top - j]) : join_u64(sm.lo[ph][top - j], sm.hi[ph][top - j]);
      sum += c[j];
    }
    const u64 target = s.first ? u64(target_of(warp_all(sum, u64_add))) : s.target;
    u64 inc = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const u64 t = __shfl_up_sync(kFull, inc, o);
      if (lane >= o) inc += t;
    }
    const unsigned hit = __ballot_sync(kFull, s.above + inc >= target && sum > 0);
    const unsigned nonempty = __ballot_sync(kFull, sum > 0);
    // Integer sums cannot fall short of a target <= the total; the lowest
    // nonempty bucket is the answer only if they ever did.
    const int pick = hit ? __ffs(hit) - 1 : (nonempty ? 31 - __clz(nonempty) : 0);
    if (lane == pick) {
      u64 acc = s.above + inc - sum;
      int b = -1, lowest = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (b >= 0 || !c[j]) continue;
        lowest = j;
        if (acc + c[j] >= target) b = j;
        else acc += c[j];
      }
      if (b < 0) b = lowest;
      sm.bucket = u32(top - b);
      sm.bucket_cnt = sm.cnt[ph][top - b];
      sm.above = acc;
      sm.target = target;
    }
  }
  __syncthreads();
  s.prefix |= sm.bucket << shift;
  s.mask |= 255u << shift;
  s.above = sm.above;
  s.target = sm.target;
  s.first = false;
  ++s.level;
  cx.ph = ph ^ 1;
  return sm.bucket_cnt;
}

// Items of the shared list: (value key, index), or (~index, value key).
template <int NT> struct ListSrc {
  const SelectSmem<NT>& sm;
  u32 c;
  bool by_index;
  template <class F> __device__ __forceinline__ void operator()(F&& f) const {
    for (u32 i = threadIdx.x; i < c; i += NT) {
      if (by_index) f(~sm.list.idx[i], sm.list.key[i]);
      else f(sm.list.key[i], sm.list.idx[i]);
    }
  }
};

// Elements [c0, c0 + n) of the row x: (value key, index in the row).
template <int NT, int V, int U, class T> struct GlobalSrc {
  const T* x;
  int c0, n;
  template <class F> __device__ __forceinline__ void operator()(F&& f) const {
    for_elems<NT, V, U>(x + c0, n, [&](int i, float v) { f(key_of(v), u32(c0 + i)); });
  }
};

// Appends (key, index) of the row's elements [c0, c0 + n) with pred(value,
// index) to the shared list (warp-aggregated, in no particular order);
// returns how many there are (those past kCap are counted, not stored).
template <int NT, int V, int U, class T, class Pred>
__device__ u32 compact_slice(SelectSmem<NT>& sm, const T* x, int c0, int n, Pred&& pred) {
  x += c0;
  if (threadIdx.x == 0) sm.count = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  for_packs<NT, V, U>(x, n, [&](int q, const Pack<T, V>& p, int len) {
    u32 bits = 0;
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (e < len && pred(p.f(e), u32(c0 + q * V + e))) bits |= 1u << e;
    if (!__ballot_sync(kFull, bits)) return;
    const int mine = __popc(bits);
    int inc = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int t = __shfl_up_sync(kFull, inc, o);
      if (lane >= o) inc += t;
    }
    u32 base = 0;
    if (lane == 31) base = atomicAdd(&sm.count, u32(inc));
    u32 pos = __shfl_sync(kFull, base, 31) + u32(inc - mine);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      if (!((bits >> e) & 1u)) continue;
      if (pos < kCap) {
        sm.list.key[pos] = key_of(p.f(e));
        sm.list.idx[pos] = u32(c0 + q * V + e);
      }
      ++pos;
    }
  });
  __syncthreads();
  return sm.count;
}

// Split rows: every CTA's list (c items here) gathered into every CTA, its
// own items first, then the others' in rank order (every remote load of a
// thread issued before its stores). Returns the cluster's total; the lists
// are whole only when it is at most kCap. Every CTA must keep its list (and
// count) until all have read them: a second barrier, or with `defer` (and a
// whole list) only its arrival here and the wait in Ctx::finish, so nothing
// may write this CTA's list, count or another cluster barrier in between.
template <int NT, bool kC> __device__ u32 gather(Ctx<NT, kC>& cx, u32 c, bool defer = false) {
  if constexpr (!kC) {
    return c;
  } else {
    SelectSmem<NT>& sm = cx.sm;
    cluster_sync();
    if (threadIdx.x < kMaxCtas)  // the others' lengths (this CTA's counts as 0: its items stay first)
      sm.counts[threadIdx.x] =
          threadIdx.x < cx.ctas && threadIdx.x != cx.rank ? *cluster_map(&sm.count, threadIdx.x) : 0u;
    __syncthreads();
    u32 total = c;
    for (unsigned i = 0; i < cx.ctas; ++i) total += sm.counts[i];
    const bool whole = total <= kCap;
    if (whole) {
      for (u32 g = threadIdx.x; g < total - c; g += NT) {
        u32 rem = g, src = 0;
        while (rem >= sm.counts[src]) rem -= sm.counts[src++];
        const u32 key = *cluster_map(&sm.list.key[rem], src), idx = *cluster_map(&sm.list.idx[rem], src);
        sm.list.key[c + g] = key;
        sm.list.idx[c + g] = idx;
      }
    }
    if (defer && whole) {
      cluster_arrive();
      cx.pending = true;
      __syncthreads();
    } else {
      cluster_sync();
    }
    return total;
  }
}

// compact_slice over this CTA's slice, then gathered (split rows).
template <int NT, int V, int U, bool kC, class T, class Pred>
__device__ u32 compact(Ctx<NT, kC>& cx, const T* x, Pred&& pred, bool defer = false) {
  return gather(cx, compact_slice<NT, V, U>(cx.sm, x, cx.c0, cx.n, pred), defer);
}

// A select over the shared list's first c items.
template <int NT, bool kCount, bool kC, class W, class Tgt>
__device__ u32 select_list(Ctx<NT, kC>& cx, Sel s, u32 c, bool by_index, W&& w, Tgt&& target_of) {
  const ListSrc<NT> src{cx.sm, c, by_index};
  while (s.level < 4) radix_level<NT, kCount>(cx, s, src, w, target_of);
  return s.prefix;
}

// Short lists without radix levels: thread i < c takes item i and sums the
// weights of the items whose order key is at or above its own (a loop over
// shared memory, four items a load); the answer is a block max. The order key
// is key[j], or ~idx[j] (kByIndex); kCount: every item weighs 1 (w unused).
// The answer is select_list's over the same items where the target is at most
// the total (every caller's: k of at least k items, ceil(p * total) with p < 1,
// the draw's scaled(total, u) + 1 < total + 1), checked against a model of
// radix_level over random lists with ties and zero weights: the largest order
// key whose items at or above it weigh at least target_of(total), or all ones
// when nothing weighs anything. c <= NT; key / idx / w 16-byte aligned.
template <bool kCount, bool kByIndex, int NT, bool kC, class Tgt>
__device__ u32 select_small(Ctx<NT, kC>& cx, const u32* key, const u32* idx, const u64* w, u32 c, Tgt&& target_of) {
  const u32* src = kByIndex ? idx : key;
  const u32 i = threadIdx.x;
  u64 val = 0;
  if (i < c) {
    const u32 own = src[i];
    auto ge = [own](u32 a) { return kByIndex ? a <= own : a >= own; };  // order key of a >= own's
    u64 tot = 0, s = 0;
    u32 n = 0;
    u32 j = 0;
    for (; j + 4 <= c; j += 4) {
      const uint4 q = *reinterpret_cast<const uint4*>(src + j);
      if constexpr (kCount) {
        n += u32(ge(q.x)) + u32(ge(q.y)) + u32(ge(q.z)) + u32(ge(q.w));
      } else {
        const ulonglong2 a = *reinterpret_cast<const ulonglong2*>(w + j);
        const ulonglong2 b = *reinterpret_cast<const ulonglong2*>(w + j + 2);
        tot += (a.x + a.y) + (b.x + b.y);
        s += (ge(q.x) ? a.x : 0ull) + (ge(q.y) ? a.y : 0ull) + (ge(q.z) ? b.x : 0ull) + (ge(q.w) ? b.y : 0ull);
      }
    }
    for (; j < c; ++j) {
      if constexpr (kCount) {
        n += u32(ge(src[j]));
      } else {
        tot += w[j];
        s += ge(src[j]) ? w[j] : 0ull;
      }
    }
    if constexpr (kCount) {
      tot = c;
      s = n;
    }
    const u64 wi = kCount ? 1ull : w[i], target = target_of(tot);
    const u32 ord = kByIndex ? ~own : own;
    if (wi && s >= target) val = (u64(1) << 32) | ord;
  }
  const u64 r = cx.br.max(val);
  return r ? u32(r) : ~0u;
}

// The shared list's items (of c) with key >= cut, copied to sm.small in no
// particular order; returns how many there are (the first kSmall are stored).
// Writes nothing of the list itself (gather may have left it shared).
template <int NT, bool kC> __device__ u32 compact_small(Ctx<NT, kC>& cx, u32 c, u32 cut) {
  SelectSmem<NT>& sm = cx.sm;
  if (threadIdx.x == 0) sm.small.count = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  for (u32 b = 0; b < c; b += NT) {
    const u32 i = b + threadIdx.x;
    const bool take = i < c && sm.list.key[i] >= cut;
    const unsigned m = __ballot_sync(kFull, take);
    if (!m) continue;
    const int leader = __ffs(m) - 1;
    u32 base = 0;
    if (lane == leader) base = atomicAdd(&sm.small.count, u32(__popc(m)));
    base = __shfl_sync(kFull, base, leader);
    if (take) {
      const u32 pos = base + u32(__popc(m & ((1u << lane) - 1u)));
      if (pos < kSmall) {
        sm.small.key[pos] = sm.list.key[i];
        sm.small.idx[pos] = sm.list.idx[i];
      }
    }
  }
  __syncthreads();
  return sm.small.count;
}

// ---- One warp's selects. A block-wide phase costs every one of 32 warps its
// bookkeeping (8 issue cycles an instruction at 1024 threads) however few its
// items; lists of at most kWarpItems go to warp 0 alone, no block barrier.

// select_small's answer (same order keys, weights and target rules) over
// items [0, c) of key / idx / w, c <= kWarpItems, by the calling warp (every
// lane gets it): lane l takes items l and l + 32 and sums over all items.
template <bool kCount, bool kByIndex, class Tgt>
__device__ u32 warp_select(const u32* key, const u32* idx, const u64* w, u32 c, Tgt&& target_of) {
  const u32 lane = threadIdx.x & 31;
  const u32* src = kByIndex ? idx : key;
  const u32 own0 = lane < c ? src[lane] : 0u, own1 = lane + 32 < c ? src[lane + 32] : 0u;
  auto ge = [](u32 a, u32 own) { return kByIndex ? a <= own : a >= own; };  // order key of a >= own's
  u64 s0 = 0, s1 = 0, tot = 0;
#pragma unroll 4
  for (u32 j = 0; j < c; ++j) {
    const u32 a = src[j];
    const u64 wj = kCount ? 1ull : w[j];
    tot += wj;
    s0 += ge(a, own0) ? wj : 0ull;
    s1 += ge(a, own1) ? wj : 0ull;
  }
  const u64 target = target_of(tot);
  const bool q0 = lane < c && (kCount || w[lane]) && s0 >= target;
  const bool q1 = lane + 32 < c && (kCount || w[lane + 32]) && s1 >= target;
  const u32 o0 = q0 ? (kByIndex ? ~own0 : own0) : 0u, o1 = q1 ? (kByIndex ? ~own1 : own1) : 0u;
  const u32 best = __reduce_max_sync(kFull, max(o0, o1));
  return __ballot_sync(kFull, q0 || q1) ? best : ~0u;
}

// The list's items j < c with lo <= key < hi, copied to sm.small (key, idx) by
// the calling warp, in no particular order; returns how many (every lane; the
// first kSmall stored).
template <int NT> __device__ u32 warp_compact(SelectSmem<NT>& sm, u32 c, u32 lo, u64 hi) {
  const u32 lane = threadIdx.x & 31;
  u32 base = 0;
  for (u32 b = 0; b < c; b += 32) {
    const u32 j = b + lane;
    const u32 kj = j < c ? sm.list.key[j] : 0u;
    const bool take = j < c && kj >= lo && kj < hi;
    const unsigned m = __ballot_sync(kFull, take);
    const u32 pos = base + u32(__popc(m & ((1u << lane) - 1u)));
    if (take && pos < u32(kSmall)) {
      sm.small.key[pos] = kj;
      sm.small.idx[pos] = sm.list.idx[j];
    }
    base += u32(__popc(m));
  }
  __syncwarp();
  return base;
}

// The k-th largest key of the shared list (c > kWarpItems items, 1 <= k <= c)
// without radix levels: warp w counts the keys at or above pivot key[w * c /
// 32]; warp 0 takes the highest pivot counted at least k times (lo) and the
// lowest counted fewer (hi, with `above` keys at or above it), copies the
// keys in [lo, hi) (the answer is among them) and selects the (k - above)-th
// largest of those. False where they are more than kWarpItems (ties): the
// caller falls back. Every thread gets the answer (one barrier after warp 0).
template <int NT, bool kC> __device__ bool kth_pivot(Ctx<NT, kC>& cx, u32 c, u32 k, u32* out) {
  static_assert(NT == 1024, "kth_pivot: a pivot a warp, 32 warps");
  SelectSmem<NT>& sm = cx.sm;
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u32 pv = sm.list.key[warp * c / 32];
  u32 n = 0;
  for (u32 j = lane; j < c; j += 32) n += u32(sm.list.key[j] >= pv);
  n = __reduce_add_sync(kFull, n);
  if (lane == 0) {
    sm.piv_key[warp] = pv;
    sm.piv_cnt[warp] = n;
  }
  __syncthreads();
  if (warp == 0) {
    const u32 v = sm.piv_key[lane], m = sm.piv_cnt[lane];
    const u32 lo = __reduce_max_sync(kFull, m >= k ? v : 0u);
    const unsigned fewer = __ballot_sync(kFull, m < k);
    u64 hi = u64(1) << 32;
    u32 above = 0;
    if (fewer) {
      const u32 h = __reduce_min_sync(kFull, m < k ? v : ~0u);
      hi = h;
      above = __shfl_sync(kFull, m, __ffs(__ballot_sync(kFull, m < k && v == h)) - 1);
    }
    const u32 nb = warp_compact(sm, c, lo, hi);
    const bool ok = nb <= u32(kWarpItems);
    u32 r = 0;
    if (ok) r = warp_select<true, false>(sm.small.key, sm.small.idx, nullptr, nb, [k, above](u64) { return u64(k - above); });
    if (lane == 0) {
      sm.cut = r;
      sm.cut_ok = ok;
    }
  }
  __syncthreads();
  if (!sm.cut_ok) return false;
  *out = sm.cut;
  return true;
}

// A select over the global row: a pass per level until the bucket fits the list.
template <int NT, int V, int U, bool kCount, bool kC, class T, class W, class Tgt>
__device__ u32 select_global(Ctx<NT, kC>& cx, const T* x, W&& w, Tgt&& target_of) {
  Sel s;
  while (s.level < 4) {
    const u32 c = radix_level<NT, kCount, true>(cx, s, GlobalSrc<NT, V, U, T>{x, cx.c0, cx.n}, w, target_of);
    if (s.level < 4 && c <= kCap) {
      const u32 listed = compact<NT, V, U>(cx, x, [&](float v, u32 i) {
        const u32 k = key_of(v);
        return (k & s.mask) == s.prefix && w(k, i);
      });
      return select_list<NT, kCount>(cx, s, listed, false, w, target_of);
    }
  }
  return s.prefix;
}

// floor(u24 / 2^24 * total) without overflow.
__device__ __forceinline__ u64 scaled(u64 total, u32 u24) {
  return (total >> 24) * u24 + (((total & 0xffffffull) * u24) >> 24);
}

// The drawn token over the whole row (inverse CDF in index order): pass 1
// sums the mass of each group of 32-pack spans, one thread finds the group
// that holds floor(u * total), then warp 0 re-reads that group alone. Split
// rows: the slices' masses are summed in rank order (index order), and only
// the CTA whose slice holds the target searches it; the others get ~0u.
template <int NT, int V, int U, bool kC, class T, class W>
__device__ u32 cdf_global(Ctx<NT, kC>& cx, const T* row, W&& mass, u32 u24) {
  SelectSmem<NT>& sm = cx.sm;
  const T* x = row + cx.c0;
  const int n = cx.n;
  const int lane = threadIdx.x & 31;
  const int np = (n + V - 1) / V, spans = (np + 31) / 32, per = max(1, (spans + kGroups - 1) / kGroups);
  const int ng = int((spans + per - 1) / per);
  for (int g = threadIdx.x; g < ng; g += NT) sm.grp.lo[g] = sm.grp.hi[g] = 0;
  __syncthreads();
  for_packs<NT, V, U>(x, n, [&](int q, const Pack<T, V>& p, int len) {
    u64 s = 0;
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (e < len) s += mass(key_of(p.f(e)));
    if (!__ballot_sync(kFull, s != 0)) return;
    s = warp_all(s, u64_add);
    const int g = (q >> 5) / per;  // every lane of a warp holds the same span
    if (lane == 0 && s) atomic_add_u64(&sm.grp.lo[g], &sm.grp.hi[g], s);
  });
  __syncthreads();
  const int per_t = (ng + NT - 1) / NT, g0 = min(ng, int(threadIdx.x) * per_t), g1 = min(ng, g0 + per_t);
  u64 local = 0, total = 0;
  for (int g = g0; g < g1; ++g) local += join_u64(sm.grp.lo[g], sm.grp.hi[g]);
  const u64 before = block_exclusive_scan<NT>(local, &total, sm.scan);
  u64 target = 0;
  if constexpr (kC) {
    // Each CTA's total and, for this one, the totals of the slices before it.
    if (threadIdx.x == 0) sm.post_mass = total;
    cluster_sync();
    u64 all = 0, lower = 0;
    for (unsigned i = 0; i < cx.ctas; ++i) {
      const u64 t = *cluster_map(&sm.post_mass, i);
      all += t;
      lower += i < cx.rank ? t : 0;
    }
    target = scaled(all, u24);
    if (target < lower || target - lower >= total) return ~0u;  // not in this slice (the same in every thread)
    target -= lower;
  } else {
    target = scaled(total, u24);
  }
  if (before <= target && target < before + local) {  // exactly one thread
    u64 acc = before;
    for (int g = g0; g < g1; ++g) {
      const u64 s = join_u64(sm.grp.lo[g], sm.grp.hi[g]);
      if (acc + s > target) {
        sm.group = u32(g);
        sm.base = acc;
        break;
      }
      acc += s;
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    u64 base = sm.base;
    const int s1 = min(spans, int(sm.group + 1) * per);
    for (int sp = int(sm.group) * per; sp < s1; ++sp) {
      const int q = sp * 32 + lane;
      const int len = pack_len<V>(q, n);
      Pack<T, V> p;
      if (len) p = load_pack<T, V>(x, int64_t(q) * V, len);
      u64 ms = 0;
#pragma unroll
      for (int e = 0; e < V; ++e)
        if (e < len) ms += mass(key_of(p.f(e)));
      u64 inc = ms;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const u64 t = __shfl_up_sync(kFull, inc, o);
        if (lane >= o) inc += t;
      }
      const unsigned hit = __ballot_sync(kFull, base + inc > target);
      if (hit) {
        if (lane == __ffs(hit) - 1) {
          u64 acc = base + inc - ms;
          u32 tok = u32(q * V);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            if (e >= len) break;
            acc += mass(key_of(p.f(e)));
            if (acc > target) {
              tok = u32(q * V + e);
              break;
            }
          }
          sm.tok = tok;
        }
        break;
      }
      base += __shfl_sync(kFull, inc, 31);
    }
  }
  __syncthreads();
  return u32(cx.c0) + sm.tok;
}

}  // namespace braze::cuda::sampling
