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

template <int NT> struct SelectSmem {
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
  u64 above, target, base;
  u64 post_best, post_bound, post_mass;  // split rows: what each CTA posts for the others
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
  // The value every CTA of the cluster gets from op over all CTAs' v (in rank
  // order), through `slot` (one slot per call site: each is posted once).
  template <class Op> __device__ u64 across(u64* slot, u64 v, Op op) {
    if (threadIdx.x == 0) *slot = v;
    cluster_sync();
    u64 r = *cluster_map(slot, 0);
    for (unsigned i = 1; i < ctas; ++i) r = op(r, *cluster_map(slot, i));
    return r;
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
// own items first. Returns the cluster's total; the lists are whole only
// when it is at most kCap. The second barrier keeps each list (and count)
// until every CTA has read it.
template <int NT, bool kC> __device__ u32 gather(Ctx<NT, kC>& cx, u32 c) {
  if constexpr (!kC) {
    return c;
  } else {
    SelectSmem<NT>& sm = cx.sm;
    cluster_sync();
    u32 total = 0;
    for (unsigned i = 0; i < cx.ctas; ++i) total += *cluster_map(&sm.count, i);
    if (total <= kCap) {
      u32 pos = c;
      for (unsigned i = 0; i < cx.ctas; ++i) {
        if (i == cx.rank) continue;
        const u32 ci = *cluster_map(&sm.count, i);
        const u32* key = cluster_map(sm.list.key, i);
        const u32* idx = cluster_map(sm.list.idx, i);
        for (u32 j = threadIdx.x; j < ci; j += NT) {
          sm.list.key[pos + j] = key[j];
          sm.list.idx[pos + j] = idx[j];
        }
        pos += ci;
      }
    }
    cluster_sync();
    return total;
  }
}

// compact_slice over this CTA's slice, then gathered (split rows).
template <int NT, int V, int U, bool kC, class T, class Pred>
__device__ u32 compact(Ctx<NT, kC>& cx, const T* x, Pred&& pred) {
  return gather(cx, compact_slice<NT, V, U>(cx.sm, x, cx.c0, cx.n, pred));
}

// A select over the shared list's first c items.
template <int NT, bool kCount, bool kC, class W, class Tgt>
__device__ u32 select_list(Ctx<NT, kC>& cx, Sel s, u32 c, bool by_index, W&& w, Tgt&& target_of) {
  const ListSrc<NT> src{cx.sm, c, by_index};
  while (s.level < 4) radix_level<NT, kCount>(cx, s, src, w, target_of);
  return s.prefix;
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
