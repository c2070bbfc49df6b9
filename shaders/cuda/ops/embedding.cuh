// Embedding gather: y[t, :] = table[ids[t], :], a row of zeros for an id
// outside [0, vocab) (the table is never read then). The layout of the
// activation kernel: a thread owns U lane-interleaved packs of one output row
// and issues its U loads before any store; the grid's x axis tiles a row, its
// y axis walks the tokens. Every thread of a row reads the row's id itself
// (one cached broadcast load), so nothing waits on a barrier.
// Tuning variants (BRAZE_CUDA_EMB_VARIANT) as for the activations: U,
// streaming stores (the table keeps plain loads: repeated ids may hit L2) and
// the persistent grid of walk.cuh.
#pragma once
#include <cstdint>

#include "cuda/common/dtype.cuh"
#include "cuda/common/vec.cuh"
#include "cuda/ops/stream.cuh"
#include "cuda/ops/walk.cuh"

namespace braze::cuda::ops {

struct EmbeddingParams {
  const void* ids;
  const void* table;
  void* y;
  int64_t ids_stride, table_stride, y_stride;  // elements
  int64_t tokens, vocab;
  int dim;
  int packs;  // ceil(dim / V)
  Walk walk;  // Persist kernels only
};

// Token t, packs k0 + i * blockDim.x (i < U) of its row.
template <class T, class Id, int V, int U, bool Stream>
__device__ __forceinline__ void embedding_row(const EmbeddingParams& p, int64_t t, int k0) {
  const int64_t id = int64_t(__ldg(static_cast<const Id*>(p.ids) + t * p.ids_stride));
  const bool inside = id >= 0 && id < p.vocab;
  const T* src = static_cast<const T*>(p.table) + (inside ? id : 0) * p.table_stride;
  T* dst = static_cast<T*>(p.y) + t * p.y_stride;
  Pack<T, V> v[U];
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int k = k0 + i * blockDim.x;
    if (k >= p.packs) continue;
    const int c = k * V;
    if (inside) {
      v[i] = load_pack<T, V>(src, c, min(V, p.dim - c));
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) v[i].v[e] = from_f32<T>(0.f);
    }
  }
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int k = k0 + i * blockDim.x;
    if (k >= p.packs) continue;
    const int c = k * V, n = min(V, p.dim - c);
    if (n == V) store_full<Stream, T, V>(dst, c, v[i]);
    else store_pack<T, V>(dst, c, n, v[i]);
  }
}

template <class T, class Id, int V, int U, bool Stream, bool Persist>
__global__ void __launch_bounds__(256) embedding_kernel(EmbeddingParams p) {
  if constexpr (Persist) {
    for (WalkPos w = walk_start(p.walk); w.group < p.walk.groups; walk_next(p.walk, w)) {
      const int64_t t = w.group * blockDim.y + threadIdx.y;
      if (t < p.tokens) embedding_row<T, Id, V, U, Stream>(p, t, w.tile * blockDim.x * U + threadIdx.x);
    }
  } else {
    const int k0 = blockIdx.x * blockDim.x * U + threadIdx.x;
    for (int64_t t = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; t < p.tokens;
         t += int64_t(gridDim.y) * blockDim.y)
      embedding_row<T, Id, V, U, Stream>(p, t, k0);
  }
}

}  // namespace braze::cuda::ops
