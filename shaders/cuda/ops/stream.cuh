// Whole 16-byte packs moved with an explicit cache policy, for the tuning
// variants of the elementwise kernels (csrc/cuda/ops.cu): Stream = false is a
// plain access; Stream = true marks data touched once (ld.global.cs /
// st.global.cs, evict-first), so it does not push reused lines out of L2.
#pragma once
#include "cuda/common/vec.cuh"

namespace braze::cuda::ops {

template <bool Stream, class T, int V, class I>
__device__ __forceinline__ Pack<T, V> load_full(const T* p, I col) {
  if constexpr (Stream && sizeof(Pack<T, V>) == 16) {
    Pack<T, V> r;
    *reinterpret_cast<int4*>(&r) = __ldcs(reinterpret_cast<const int4*>(p + col));
    return r;
  } else {
    return load_pack<T, V>(p, col, V);
  }
}

template <bool Stream, class T, int V, class I>
__device__ __forceinline__ void store_full(T* p, I col, const Pack<T, V>& v) {
  if constexpr (Stream && sizeof(Pack<T, V>) == 16) {
    __stcs(reinterpret_cast<int4*>(p + col), *reinterpret_cast<const int4*>(&v));
  } else {
    store_pack<T, V>(p, col, V, v);
  }
}

}  // namespace braze::cuda::ops
