// How the threads of one row group walk a row, shared by every norm kernel.
//
// A row group is a warp (kWarp: short rows, several rows per block), the
// whole block (long rows) or a cluster of blocks (kCluster: very long rows).
// Thread t of a group of S threads owns the packs i*S + t, i = 0, 1, ..., so
// every access of a warp is one contiguous span.
// Register form (!kLoop): a thread owns at most K packs per input; the first
// pass loads them all (K independent 16-byte loads in flight) and later passes
// reuse them, so the row is read from memory once. Looped form (kLoop): the row
// is too long for registers; every pass re-reads it (mostly from L2) in batches
// of K packs.
#pragma once
#include <type_traits>

#include "cuda/common/reduce.cuh"
#include "cuda/common/vec.cuh"
#include "cuda/norm/params.cuh"

namespace braze::cuda::norm {

// kFull: every row is whole packs (cols % V == 0), so no pass needs the code
// for a partial last pack. The register forms index columns in 32 bits (their
// rows are at most 16384 elements); the looped form in 64.
// kCluster: the register form with the row split over the CTAs of a cluster.
template <class T_, int V_, int K_, bool kWarp_, bool kLoop_, bool kFull_ = false, bool kCluster_ = false>
struct Cfg {
  using T = T_;
  static constexpr int V = V_, K = K_;
  static constexpr bool kWarp = kWarp_, kLoop = kLoop_, kFull = kFull_, kCluster = kCluster_;
  static_assert(!kCluster || (!kWarp && !kLoop), "a cluster splits the block register form");
  using Col = std::conditional_t<kLoop, int64_t, int>;
};

// This thread's place: its lane in the row group, the group's size, the first
// row it takes and the step to its next row, and the group's index in the grid.
template <class C> struct Group {
  int tid, size;
  int64_t first, step, index;
  __device__ __forceinline__ Group() {
    if constexpr (C::kWarp) {
      const int per_block = blockDim.x >> 5;
      tid = threadIdx.x & 31;
      size = 32;
      index = int64_t(blockIdx.x) * per_block + (threadIdx.x >> 5);
      step = int64_t(gridDim.x) * per_block;
    } else if constexpr (C::kCluster) {  // the cluster is the group; its CTAs hold consecutive threads
      const int n = int(cluster_size());
      tid = int(cluster_rank()) * blockDim.x + threadIdx.x;
      size = n * blockDim.x;
      index = blockIdx.x / n;
      step = gridDim.x / n;
    } else {
      tid = threadIdx.x;
      size = blockDim.x;
      index = blockIdx.x;
      step = gridDim.x;
    }
    first = index;
  }
};

// Row `row` of an array with the given row stride; with groups > 1 the row is
// one group of an array row.
template <class T>
__device__ __forceinline__ T* row_ptr(const void* base, int64_t stride, int64_t row, const RowShape& p) {
  int64_t r = row, off = 0;
  if (p.groups != 1) {
    r = row / p.groups;
    off = (row - r * p.groups) * p.cols;
  }
  return static_cast<T*>(const_cast<void*>(base)) + r * stride + off;
}

// The vector (weight / bias) slice that goes with row `row`; null stays null.
template <class T> __device__ __forceinline__ const T* vec_ptr(const void* base, int64_t row, const RowShape& p) {
  if (!base) return nullptr;
  return static_cast<const T*>(base) + (p.groups != 1 ? (row % p.groups) * p.cols : 0);
}

// Passes over one row with NIN row-shaped inputs. f(k, col, n, packs) gets the
// k-th pack slot of the batch (fixed columns per thread in register form), the
// first column, the number of valid elements n <= V (a partial pack is zero
// padded) and the NIN packs, which it may modify: in register form the change
// is what later passes see.
template <class C, int NIN> struct RowPass {
  using T = typename C::T;
  using P = Pack<T, C::V>;
  static constexpr int V = C::V, K = C::K;
  P q[K][NIN];
  using Col = typename C::Col;
  int tid, size;
  Col cols;

  __device__ __forceinline__ RowPass(const Group<C>& g, int64_t cols_) : tid(g.tid), size(g.size), cols(Col(cols_)) {}

  __device__ __forceinline__ Col col(Col i) const { return (i * size + tid) * Col(V); }
  __device__ __forceinline__ int valid(Col c) const {
    if constexpr (C::kFull) return V;
    else return cols - c < V ? int(cols - c) : V;
  }

  template <int NLOAD, class F>
  __device__ __forceinline__ void batch(Col i0, const T* const (&src)[NIN], F& f) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const Col c = col(i0 + k);
      if (c < cols) {
#pragma unroll
        for (int s = 0; s < NLOAD; ++s) q[k][s] = load_pack<T, V>(src[s], c, valid(c));
      }
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const Col c = col(i0 + k);
      if (c < cols) f(k, c, valid(c), q[k]);
    }
  }

  template <int NLOAD, class F> __device__ __forceinline__ void loop(const T* const (&src)[NIN], F& f) {
    for (Col i0 = 0; col(i0) - tid * Col(V) < cols; i0 += K) batch<NLOAD>(i0, src, f);
  }

  // First pass: loads the first NLOAD inputs (register form: and keeps them).
  template <int NLOAD = NIN, class F> __device__ __forceinline__ void first(const T* const (&src)[NIN], F f) {
    if constexpr (C::kLoop) loop<NLOAD>(src, f);
    else batch<NLOAD>(0, src, f);
  }

  // A later pass over the first NUSE inputs: register form reuses the packs,
  // the looped form reads them again from src.
  template <int NUSE = NIN, class F> __device__ __forceinline__ void again(const T* const (&src)[NIN], F f) {
    if constexpr (C::kLoop) {
      loop<NUSE>(src, f);
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const Col c = col(k);
        if (c < cols) f(k, c, valid(c), q[k]);
      }
    }
  }
};

// weight (+ offset) of element e of a pack, one when there is no weight.
template <class T, int V>
__device__ __forceinline__ float scale_at(const Pack<T, V>& w, bool has_w, int e, float offset) {
  return (has_w ? to_f32(w.v[e]) : 1.f) + offset;
}

template <class T, int V, class I>
__device__ __forceinline__ Pack<T, V> load_vec(const T* w, I col, int n) {
  Pack<T, V> r;
  if (w) r = load_pack<T, V>(w, col, n);
  return r;
}

}  // namespace braze::cuda::norm
