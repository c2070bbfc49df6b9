// Sums across the threads that share one row: a warp (shuffles only) or a whole
// block (shuffles, then one exchange through shared memory).
#pragma once
#include "cuda/common/cluster.cuh"

namespace braze::cuda {

template <int N> struct Sums {
  float v[N];
};

template <int N> __device__ __forceinline__ Sums<N> warp_sum(Sums<N> s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int i = 0; i < N; ++i) s.v[i] += __shfl_xor_sync(0xffffffffu, s.v[i], o);
  return s;
}

// kWarp: the row belongs to one warp. Otherwise to the whole block (blockDim.x a
// multiple of 32): every warp posts its partial, one barrier, and every warp
// sums all partials itself, so no second barrier is needed for a broadcast.
// kCluster: to every CTA of a cluster; thread 0 of each posts its block total,
// one cluster barrier, and every thread sums the totals in rank order (the same
// order in every CTA, so every CTA gets the same bits).
// Two buffers alternate: a thread writes buffer p again only two reductions
// later, after the barrier of the reduction in between, which every thread
// reaches only once it has read buffer p. Every thread of the block (cluster)
// must make the same sequence of calls; a cluster must pass one more
// cluster_sync() before any CTA exits, so that none still reads its buffer.
template <bool kWarp, int kMaxN = 2, bool kCluster = false> struct RowReduce {
  float (*buf)[kMaxN][32];
  float (*cbuf)[kMaxN] = nullptr;  // kCluster: [2][kMaxN] in shared memory
  int phase = 0;

  template <int N> __device__ __forceinline__ Sums<N> operator()(Sums<N> s) {
    static_assert(N <= kMaxN, "RowReduce: too many values");
    s = warp_sum(s);
    if constexpr (!kWarp) {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
      if (lane == 0)
#pragma unroll
        for (int i = 0; i < N; ++i) buf[phase][i][warp] = s.v[i];
      __syncthreads();
#pragma unroll
      for (int i = 0; i < N; ++i) s.v[i] = lane < nwarps ? buf[phase][i][lane] : 0.f;
      s = warp_sum(s);
      if constexpr (kCluster) {
        if (threadIdx.x == 0)
#pragma unroll
          for (int i = 0; i < N; ++i) cbuf[phase][i] = s.v[i];
        cluster_sync();
        const unsigned n = cluster_size();
#pragma unroll
        for (int i = 0; i < N; ++i) {
          float t = 0.f;
          for (unsigned r = 0; r < n; ++r) t += cluster_load(&cbuf[phase][i], r);
          s.v[i] = t;
        }
      }
      phase ^= 1;
    }
    return s;
  }
};

}  // namespace braze::cuda
