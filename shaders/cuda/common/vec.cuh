// Packs of V consecutive elements moved as one 16-byte access when V * sizeof(T)
// == 16 and the address is 16-byte aligned (the launcher checks base pointers
// and row strides); V == 1 is the scalar path for anything else.
#pragma once
#include <cstdint>

#include "cuda/common/dtype.cuh"

namespace braze::cuda {

template <class T, int V> struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// Elements per 16-byte vector of T.
template <class T> constexpr int kVec16 = 16 / int(sizeof(T));

// Loads elements [col, col + n) of p (n <= V); the rest of the pack is zero.
template <class T, int V, class I>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p, I col, int n) {
  Pack<T, V> r;
  if (n == V) {
    r = *reinterpret_cast<const Pack<T, V>*>(p + col);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) r.v[e] = e < n ? p[col + e] : from_f32<T>(0.f);
  }
  return r;
}

template <class T, int V, class I>
__device__ __forceinline__ void store_pack(T* p, I col, int n, const Pack<T, V>& r) {
  if (n == V) {
    *reinterpret_cast<Pack<T, V>*>(p + col) = r;
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (e < n) p[col + e] = r.v[e];
  }
}

}  // namespace braze::cuda
