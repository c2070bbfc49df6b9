// softmax / log_softmax / logsumexp (float32 out), a block of kNormThreads per
// row. Packs are 4 elements: 16-byte f32 stores, so every warp store is one
// contiguous 512-byte span (bf16 / f16 rows are read 8 bytes per pack).
//
// Register form (rows up to kNormThreads * P packs): the row is loaded once,
// all loads issued before any use; each thread takes its own max and sum of
// exp against it; two block reductions (max, then the rescaled sums); the
// output is computed from the registers. At most 32 registers of row data per
// thread, so two blocks of 512 threads fit on an SM and one block's loads
// overlap the other's reductions and stores.
// Cluster form (sm_90): the register form with the row split over the CTAs of
// a thread-block cluster, kNormThreads * P packs each, for rows longer than
// one CTA holds or too few rows to fill the GPU. Each CTA posts its (max, sum)
// in shared memory; every CTA combines all of them in rank order (the same
// bits everywhere) through distributed shared memory.
// Looped form (longer rows, or rows not aligned for packs): pass 1 keeps an
// online max and sum per thread, pass 2 re-reads the row (mostly from L2).
#pragma once
#include <cstdint>

#include "core/sampling.h"
#include "cuda/common/cluster.cuh"
#include "cuda/sampling/block.cuh"
#include "cuda/sampling/row.cuh"

namespace braze::cuda::sampling {

using braze::sampling::NormalizeArgs;
using braze::sampling::Op;

constexpr int kNormThreads = 512;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float ex2(float x) {  // 2^x, as __expf uses it
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The row's (max, sum of exp((x - max) / T)) from each thread's (m, s) with s
// taken against m: NaN (or +inf, flagged by the caller) sticks; a row of -inf
// sums to 0.
__device__ __forceinline__ float2 row_stats(float m, float s, float c, BlockReduce<kNormThreads>& br) {
  const float mx = br.max(m);
  return {mx, br.sum(s * (m == -__builtin_huge_valf() ? 0.f : ex2((m - mx) * c)))};
}

// The cluster's (max, sum) from each CTA's, in rank order; the second barrier
// keeps every CTA (and its shared memory) until all have read the others.
__device__ __forceinline__ float2 cluster_stats(float2 st, float c) {
  __shared__ float2 post;
  if (threadIdx.x == 0) post = st;
  cluster_sync();
  const unsigned n = cluster_size();
  float mx = -__builtin_huge_valf(), sum = 0.f;
  for (unsigned i = 0; i < n; ++i) mx = fmaxf(mx, cluster_load(&post.x, i));
  for (unsigned i = 0; i < n; ++i) {
    const float m = cluster_load(&post.x, i);
    sum += cluster_load(&post.y, i) * (m == -__builtin_huge_valf() ? 0.f : ex2((m - mx) * c));
  }
  cluster_sync();
  return {mx, sum};
}

struct NormOut {
  Op op;
  float it, c, ms, inv, log_s;
  __device__ NormOut(Op o, float inv_t, float cc, float2 st)
      : op(o), it(inv_t), c(cc), ms(st.x == -__builtin_huge_valf() ? 0.f : st.x), inv(1.f / st.y),
        log_s(logf(st.y)) {}
  // logsumexp: true once written (the row has no other output); `writer`:
  // this CTA writes it.
  __device__ bool scalar(float* y, int64_t r, bool writer = true) const {
    if (op != Op::logsumexp) return false;
    if (threadIdx.x == 0 && writer) y[r] = ms * it + log_s;
    return true;
  }
  __device__ float operator()(float v) const {
    return op == Op::softmax ? ex2((v - ms) * c) * inv : (v - ms) * it - log_s;
  }
};

template <class T, int P, bool kCluster = false>
__global__ void __launch_bounds__(kNormThreads, 2) normalize_regs(NormalizeArgs a) {
  constexpr int V = 4;
  __shared__ typename BlockReduce<kNormThreads>::Smem red;
  BlockReduce<kNormThreads> br{&red};
  unsigned rank = 0, ctas = 1;
  if constexpr (kCluster) {
    rank = cluster_rank();
    ctas = cluster_size();
  }
  const int64_t r = blockIdx.x / ctas;
  const int n = int(a.cols), q0 = int(rank) * kNormThreads * P;  // this CTA's first pack
  const T* x = static_cast<const T*>(a.x) + r * a.x_stride;
  const float it = 1.f / a.temperature.at(r), c = it * kLog2e;
  // Slots past the end hold -inf: they change neither the max nor the sum,
  // so the loops below need no per-element bounds.
  // Threads whose packs are all whole (all but those at the row's end) load
  // without per-pack branches.
  Pack<T, V> p[P];
  const bool whole = q0 + (P - 1) * kNormThreads + int(threadIdx.x) < n / V;
  if (whole) {
    const T* xt = x + (q0 + int(threadIdx.x)) * V;  // constant offsets from one address
#pragma unroll
    for (int j = 0; j < P; ++j) p[j] = load_pack_ro<T, V>(xt, j * kNormThreads * V);
  } else {
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int q = q0 + j * kNormThreads + threadIdx.x;
      p[j] = load_pack<T, V>(x, int64_t(q) * V, pack_len<V>(q, n), Elem<T>::kNegInf);
    }
  }
  float m = -__builtin_huge_valf(), s = 0.f;
  bool bad = false;
#pragma unroll
  for (int j = 0; j < P; ++j)
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float v = p[j].f(e);
      bad |= v != v || v == __builtin_huge_valf();
      m = fmaxf(m, v);
    }
  if (m != -__builtin_huge_valf()) {
#pragma unroll
    for (int j = 0; j < P; ++j) {
      opaque(p[j]);  // keep only the packed row live, not its floats
#pragma unroll
      for (int e = 0; e < V; ++e) s += ex2((p[j].f(e) - m) * c);
    }
  }
  if (bad) s = __builtin_nanf("");
  float2 st = row_stats(m, s, c, br);
  if constexpr (kCluster) st = cluster_stats(st, c);
  const NormOut out(a.op, it, c, st);
  if (out.scalar(a.out, r, rank == 0)) return;
  float* y = a.out + r * a.out_stride;
#pragma unroll
  for (int j = 0; j < P; ++j) {
    opaque(p[j]);
    const int q = q0 + j * kNormThreads + threadIdx.x, len = pack_len<V>(q, n);
    if (!len) continue;
    Pack<float, V> o;
#pragma unroll
    for (int e = 0; e < V; ++e) o.w[e] = __float_as_uint(out(p[j].f(e)));
    store_pack<float, V>(y, int64_t(q) * V, len, o);
  }
}

template <class T, int V> __global__ void __launch_bounds__(kNormThreads) normalize_looped(NormalizeArgs a) {
  constexpr int U = V == 1 ? 16 : 8;
  __shared__ typename BlockReduce<kNormThreads>::Smem red;
  BlockReduce<kNormThreads> br{&red};
  const int64_t r = blockIdx.x;
  const int n = int(a.cols);
  const T* x = static_cast<const T*>(a.x) + r * a.x_stride;
  const float it = 1.f / a.temperature.at(r), c = it * kLog2e;
  float m = -__builtin_huge_valf(), s = 0.f;
  bool bad = false;
  for_packs<kNormThreads, V, U>(x, n, [&](int, const Pack<T, V>& p, int len) {
    float pm = -__builtin_huge_valf();
#pragma unroll
    for (int e = 0; e < V; ++e) {
      if (e >= len) continue;
      const float v = p.f(e);
      bad |= v != v || v == __builtin_huge_valf();
      pm = fmaxf(pm, v);
    }
    if (pm > m) {  // rescale the running sum once per pack that raises the max
      s *= ex2((m - pm) * c);
      m = pm;
    }
    if (m == -__builtin_huge_valf()) return;
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (e < len) s += ex2((p.f(e) - m) * c);
  });
  if (bad) s = __builtin_nanf("");
  const NormOut out(a.op, it, c, row_stats(m, s, c, br));
  if (out.scalar(a.out, r)) return;
  float* y = a.out + r * a.out_stride;
  for_packs<kNormThreads, V, U>(x, n, [&](int q, const Pack<T, V>& p, int len) {
    if (!len) return;
    Pack<float, V> o;
#pragma unroll
    for (int e = 0; e < V; ++e) o.w[e] = __float_as_uint(out(p.f(e)));
    store_pack<float, V>(y, int64_t(q) * V, len, o);
  });
}

}  // namespace braze::cuda::sampling
