// Passes over one row by a block of NT threads. The row is cut into packs of V
// elements (16 bytes, or 4 elements for the softmax family, when the launcher
// found every row aligned for them; else V == 1);
// thread t owns packs i * NT + t, so each warp access is one contiguous span,
// and each thread issues U pack loads before it uses any (bytes in flight
// hide the latency of the re-reads from L2). A partial last pack is loaded
// element by element. Loop trip counts are the same in every thread, so the
// callbacks may use warp shuffles and ballots. In-row indices are int: the
// launcher limits rows to 2^30 elements, so q * V never overflows.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace braze::cuda::sampling {

// Elements are moved as raw bits in 32-bit words (two 16-bit elements to a
// word, so a pack of 8 bf16 lives in 4 registers, and a 16-byte pack is one
// 16-byte access); they are widened to f32 where they are used.
template <class T> struct Elem;
template <> struct Elem<float> {
  static constexpr uint32_t kNegInf = 0xff800000u;
  static __device__ __forceinline__ float f32(uint32_t b) { return __uint_as_float(b); }
};
template <> struct Elem<__nv_bfloat16> {
  static constexpr uint32_t kNegInf = 0xff80u;
  static __device__ __forceinline__ float f32(uint32_t b) { return __uint_as_float(b << 16); }
};
template <> struct Elem<__half> {
  static constexpr uint32_t kNegInf = 0xfc00u;
  static __device__ __forceinline__ float f32(uint32_t b) { return __half2float(__ushort_as_half(uint16_t(b))); }
};

template <int Bytes> struct Word;
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint2; };
template <> struct Word<16> { using type = uint4; };

template <class T, int V> struct alignas(sizeof(T) * V) Pack {
  static constexpr int kBytes = int(sizeof(T)) * V, kHalf = sizeof(T) == 2 && V > 1;
  using W = std::conditional_t<(kBytes >= 4), uint32_t, uint16_t>;
  W w[(kBytes + int(sizeof(W)) - 1) / int(sizeof(W))];

  // The bits of element e (low bits of the result).
  __device__ __forceinline__ uint32_t bits(int e) const {
    if constexpr (kHalf) return (uint32_t(w[e >> 1]) >> (16 * (e & 1))) & 0xffffu;
    else return uint32_t(w[e]);
  }
  __device__ __forceinline__ void set(int e, uint32_t b) {
    if constexpr (kHalf) {
      const int sh = 16 * (e & 1);
      w[e >> 1] = (w[e >> 1] & ~(0xffffu << sh)) | (b << sh);
    } else {
      w[e] = W(b);
    }
  }
  __device__ __forceinline__ float f(int e) const {
    if constexpr (kHalf && std::is_same_v<T, __nv_bfloat16>)  // widen in place: no shift for the high half
      return __uint_as_float((e & 1) ? (w[e >> 1] & 0xffff0000u) : (w[e >> 1] << 16));
    else return Elem<T>::f32(bits(e));
  }
};

// Elements [col, col + n) of x (0 <= n <= V); the rest of the pack holds the
// element bits `fill`.
template <class T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* x, int64_t col, int n, uint32_t fill = 0) {
  using P = Pack<T, V>;
  using W = typename Word<P::kBytes>::type;
  P r;
  if (n == V) {
    const W w = *reinterpret_cast<const W*>(x + col);
    memcpy(&r, &w, sizeof(P));
  } else {
    using B = std::conditional_t<sizeof(T) == 2, uint16_t, uint32_t>;
    const B* xb = reinterpret_cast<const B*>(x) + col;
#pragma unroll
    for (int e = 0; e < V; ++e) r.set(e, e < n ? uint32_t(xb[e]) : fill);
  }
  return r;
}

template <class T, int V> __device__ __forceinline__ void store_pack(T* y, int64_t col, int n, const Pack<T, V>& r) {
  using P = Pack<T, V>;
  using W = typename Word<P::kBytes>::type;
  if (n == V) {
    W w;
    memcpy(&w, &r, sizeof(P));
    *reinterpret_cast<W*>(y + col) = w;
  } else {
    using B = std::conditional_t<sizeof(T) == 2, uint16_t, uint32_t>;
    B* yb = reinterpret_cast<B*>(y) + col;
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (e < n) yb[e] = B(r.bits(e));
  }
}

// A whole pack through the read-only path, for rows nothing writes during the
// kernel (inline asm also keeps the compiler from merging this branch-free
// load with the element-wise one of load_pack).
template <class T, int V> __device__ __forceinline__ Pack<T, V> load_pack_ro(const T* x, int64_t col) {
  static_assert(sizeof(Pack<T, V>) == 8 || sizeof(Pack<T, V>) == 16, "load_pack_ro: 8- or 16-byte packs");
  Pack<T, V> r;
  const T* a = x + col;
  if constexpr (sizeof(Pack<T, V>) == 16)
    asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(a));
  else
    asm("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(r.w[0]), "=r"(r.w[1]) : "l"(a));
  return r;
}

// Valid elements of pack q (0 for a pack past the end).
template <int V> __device__ __forceinline__ int pack_len(int q, int n) {
  const int left = n - q * V;
  return left >= V ? V : left > 0 ? left : 0;
}

// Hides a pack's value from the optimizer (no instruction): values derived
// from it earlier (widened floats) are recomputed after this point instead
// of being kept alive in registers beside the packed data.
template <class T, int V> __device__ __forceinline__ void opaque(Pack<T, V>& p) {
  constexpr int kWords = (int(sizeof(p)) + 3) / 4;
  uint32_t w[kWords] = {};
  memcpy(w, &p, sizeof(p));
#pragma unroll
  for (int i = 0; i < kWords; ++i) asm volatile("" : "+r"(w[i]));
  memcpy(&p, w, sizeof(p));
}

// f(q, pack, len) for every pack slot of every thread (len == 0 past the end).
template <int NT, int V, int U, class T, class F>
__device__ __forceinline__ void for_packs(const T* x, int n, F&& f) {
  const int np = (n + V - 1) / V, iters = (np + NT - 1) / NT;
  for (int it = 0; it < iters; it += U) {
    Pack<T, V> p[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int q = (it + j) * NT + threadIdx.x, len = pack_len<V>(q, n);
      if (len) p[j] = load_pack<T, V>(x, int64_t(q) * V, len);
    }
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int q = (it + j) * NT + threadIdx.x;
      f(q, p[j], pack_len<V>(q, n));
    }
  }
}

// f(i, v) for every element, each thread in increasing index order.
template <int NT, int V, int U, class T, class F>
__device__ __forceinline__ void for_elems(const T* x, int n, F&& f) {
  for_packs<NT, V, U>(x, n, [&](int q, const Pack<T, V>& p, int len) {
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (e < len) f(q * V + e, p.f(e));
  });
}

}  // namespace braze::cuda::sampling
