// Embedding gather: y[t, :] = table[ids[t], :], a row of zeros for an id
// outside [0, vocab) (the table is never read then). The layout of the
// activation kernel: a thread owns U lane-interleaved packs of one output row
// and issues its U loads before any store; the grid's x axis tiles a row, its
// y axis walks the tokens. Every thread of a row reads the row's id itself
// (one cached broadcast load), so nothing waits on a barrier.
#pragma once
#include <cstdint>

#include "cuda/common/dtype.cuh"
#include "cuda/common/vec.cuh"

namespace braze::cuda::ops {

struct EmbeddingParams {
  const void* ids;
  const void* table;
  void* y;
  int64_t ids_stride, table_stride, y_stride;  // elements
  int64_t tokens, vocab;
  int dim;
  int packs;  // ceil(dim / V)
};

template <class T, class Id, int V, int U>
__global__ void __launch_bounds__(256) embedding_kernel(EmbeddingParams p) {
  const Id* ids = static_cast<const Id*>(p.ids);
  const T* table = static_cast<const T*>(p.table);
  T* y = static_cast<T*>(p.y);
  const int tile = blockIdx.x * blockDim.x * U + threadIdx.x;
  for (int64_t t = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; t < p.tokens; t += int64_t(gridDim.y) * blockDim.y) {
    const int64_t id = int64_t(__ldg(ids + t * p.ids_stride));
    const bool inside = id >= 0 && id < p.vocab;
    const T* src = table + (inside ? id : 0) * p.table_stride;
    T* dst = y + t * p.y_stride;
    Pack<T, V> v[U];
#pragma unroll
    for (int i = 0; i < U; ++i) {
      const int k = tile + i * blockDim.x;
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
      const int k = tile + i * blockDim.x;
      if (k >= p.packs) continue;
      const int c = k * V;
      store_pack<T, V>(dst, c, min(V, p.dim - c), v[i]);
    }
  }
}

}  // namespace braze::cuda::ops
