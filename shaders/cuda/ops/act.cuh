// Elementwise activations, gated (silu_and_mul, gelu_and_mul, swiglu_clamped)
// or not (silu, gelu), written for memory bandwidth: no shared memory, no
// barrier. A thread owns U packs of V output elements of one row, placed
// lane-interleaved (pack tile + i * blockDim.x + tid) so that every warp access
// is one contiguous span, and issues all of its loads (U packs of the gate and
// U of the up half) before the first use. Blocks are (threads, rows_y): the
// grid's x axis tiles a row, its y axis walks the rows (looping past 65535).
// In place (silu, gelu with y == x) is safe: each element is read and then
// written by the same thread, and threads own disjoint elements.
// Tuning variants (csrc/cuda/ops.cu, BRAZE_CUDA_ACT_VARIANT): U, cache-streaming
// accesses (Stream) and a persistent grid (Persist: blocks sized from the SM
// count walk the (row group, tile) items, see walk.cuh).
#pragma once
#include <cstdint>

#include "core/ops.h"
#include "cuda/common/dtype.cuh"
#include "cuda/common/vec.cuh"
#include "cuda/ops/stream.cuh"
#include "cuda/ops/walk.cuh"

namespace braze::cuda::ops {

using braze::ops::Act;

struct ActParams {
  const void* x;
  void* y;
  int64_t x_stride, y_stride;  // elements
  int64_t rows;
  int cols;                    // output row length
  int packs;                   // ceil(cols / V)
  float alpha, limit;
  Walk walk;                   // Persist kernels only
};

// 1 / (1 + e^-v): __expf's error (a few ulp, growing with |v|) stays far below
// the f32 tolerance, and its overflow to inf gives exactly 0.
__device__ __forceinline__ float sigmoid(float v) { return __frcp_rn(1.f + __expf(-v)); }

template <Act A> __device__ __forceinline__ float act(float g) {
  if constexpr (A == Act::silu) {
    return g * sigmoid(g);
  } else if constexpr (A == Act::gelu_erf) {
    return 0.5f * g * (1.f + erff(g * 0.70710678118654752f));
  } else {
    // g/2 (1 + tanh(u)) == g * sigmoid(2u): one exponential, no tanhf.
    const float u = 0.7978845608028654f * (g + 0.044715f * g * g * g);
    return g * sigmoid(2.f * u);
  }
}

// The gated output of gate g and up u. swiglu_clamped clamps with compares
// (not fminf), so a NaN input stays NaN as in the reference.
template <Act A> __device__ __forceinline__ float gated(float g, float u, float alpha, float limit) {
  if constexpr (A == Act::swiglu_clamped) {
    g = g > limit ? limit : g;
    u = u > limit ? limit : (u < -limit ? -limit : u);
    return g * sigmoid(alpha * g) * (u + 1.f);
  } else {
    return act<A>(g) * u;
  }
}

// Packs [col, col + n) of p (n <= V), with the variant's cache policy for whole packs.
template <bool Stream, class T, int V>
__device__ __forceinline__ Pack<T, V> ld(const T* p, int col, int n) {
  return n == V ? load_full<Stream, T, V>(p, col) : load_pack<T, V>(p, col, n);
}
template <bool Stream, class T, int V>
__device__ __forceinline__ void st(T* p, int col, int n, const Pack<T, V>& v) {
  if (n == V) store_full<Stream, T, V>(p, col, v);
  else store_pack<T, V>(p, col, n, v);
}

// Row r, packs k0 + i * blockDim.x (i < U) of the output. V: elements per pack
// (16 bytes, or 1 on the scalar path). Gated non-interleaved rows use whole
// packs only (the launcher takes the scalar path unless cols % V == 0), so the
// up half stays aligned.
template <class T, int V, int U, Act A, bool Gated, bool Il, bool Stream>
__device__ __forceinline__ void act_row(const ActParams& p, int64_t r, int k0) {
  const T* xr = static_cast<const T*>(p.x) + r * p.x_stride;
  T* yr = static_cast<T*>(p.y) + r * p.y_stride;
  Pack<T, V> g[U], u[Il ? U : (Gated ? U : 1)];
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int k = k0 + i * blockDim.x;
    if (k >= p.packs) continue;
    const int c = k * V, n = min(V, p.cols - c);
    if constexpr (Il) {  // 2n inputs, gate and up alternating
      g[i] = ld<Stream, T, V>(xr, 2 * c, min(V, 2 * n));
      u[i] = ld<Stream, T, V>(xr, 2 * c + V, max(0, 2 * n - V));
    } else if constexpr (Gated) {
      g[i] = ld<Stream, T, V>(xr, c, V);
      u[i] = ld<Stream, T, V>(xr, p.cols + c, V);
    } else {
      g[i] = ld<Stream, T, V>(xr, c, n);
    }
  }
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int k = k0 + i * blockDim.x;
    if (k >= p.packs) continue;
    const int c = k * V, n = min(V, p.cols - c);
    Pack<T, V> o;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float v;
      if constexpr (Il) {
        // output e takes inputs 2e and 2e + 1 of the 2V loaded
        const int q = 2 * e;
        const float gv = to_f32(q < V ? g[i].v[q] : u[i].v[q - V]);
        const float uv = to_f32(q + 1 < V ? g[i].v[q + 1] : u[i].v[q + 1 - V]);
        v = gated<A>(gv, uv, p.alpha, p.limit);
      } else if constexpr (Gated) {
        v = gated<A>(to_f32(g[i].v[e]), to_f32(u[i].v[e]), p.alpha, p.limit);
      } else {
        v = act<A>(to_f32(g[i].v[e]));
      }
      o.v[e] = from_f32<T>(v);
    }
    st<Stream, T, V>(yr, c, n, o);
  }
}

template <class T, int V, int U, Act A, bool Gated, bool Il, bool Stream, bool Persist>
__global__ void __launch_bounds__(256) act_kernel(ActParams p) {
  if constexpr (Persist) {
    for (WalkPos w = walk_start(p.walk); w.group < p.walk.groups; walk_next(p.walk, w)) {
      const int64_t r = w.group * blockDim.y + threadIdx.y;
      if (r < p.rows) act_row<T, V, U, A, Gated, Il, Stream>(p, r, w.tile * blockDim.x * U + threadIdx.x);
    }
  } else {
    const int k0 = blockIdx.x * blockDim.x * U + threadIdx.x;
    for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r < p.rows;
         r += int64_t(gridDim.y) * blockDim.y)
      act_row<T, V, U, A, Gated, Il, Stream>(p, r, k0);
  }
}

}  // namespace braze::cuda::ops
