// Elementwise activations, gated (silu_and_mul, gelu_and_mul, swiglu_clamped)
// or not (silu, gelu), and their VJPs (Bwd), written for memory bandwidth: no shared memory, no
// barrier. A thread owns U packs of V output elements of one row, placed
// lane-interleaved (pack tile + i * blockDim.x + tid) so that every warp access
// is one contiguous span, and issues all of its loads (U packs of the gate and
// U of the up half) before the first use. Blocks are (threads, rows_y): the
// grid's x axis tiles a row, its y axis walks the rows (looping past 65535).
// In place (silu, gelu with y == x) is safe: each element is read and then
// written by the same thread, and threads own disjoint elements.
// Tuning variants (csrc/cuda/ops.cu, BRAZE_CUDA_ACT_VARIANT): U, cache-streaming
// accesses (Stream), a persistent grid (Persist: blocks sized from the SM
// count walk the (row group, tile) items, see walk.cuh) and leaner math (Fast).
#pragma once
#include <cstdint>
#include <type_traits>

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
  const void* dy;              // the VJP kernels (Bwd): y is dx, x's shape
  int64_t dy_stride;
  int64_t rows;
  int cols;                    // output row length
  int packs;                   // ceil(cols / V)
  float alpha, limit;
  Walk walk;                   // Persist kernels only
};

// 1 / (1 + e^-v): __expf's error (a few ulp, growing with |v|) stays far below
// the f32 tolerance, and its overflow to inf gives exactly 0. Fast (a tuning
// variant): the hardware reciprocal (rcp.approx, 1 ulp; of inf: 0) instead of
// the IEEE one, whose refinement is most of the per-element instructions of
// silu_and_mul, which at 16384 x 14336 are not far from the memory time.
template <bool Fast = false> __device__ __forceinline__ float sigmoid(float v) {
  const float d = 1.f + __expf(-v);
  if constexpr (Fast) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
    return r;
  } else {
    return __frcp_rn(d);
  }
}

template <Act A, bool Fast = false> __device__ __forceinline__ float act(float g) {
  if constexpr (A == Act::silu) {
    return g * sigmoid<Fast>(g);
  } else if constexpr (A == Act::gelu_erf) {
    return 0.5f * g * (1.f + erff(g * 0.70710678118654752f));
  } else {
    // g/2 (1 + tanh(u)) == g * sigmoid(2u): one exponential, no tanhf.
    const float u = 0.7978845608028654f * (g + 0.044715f * g * g * g);
    return g * sigmoid<Fast>(2.f * u);
  }
}

// The gated output of gate g and up u. swiglu_clamped clamps with compares
// (not fminf), so a NaN input stays NaN as in the reference.
template <Act A, bool Fast = false>
__device__ __forceinline__ float gated(float g, float u, float alpha, float limit) {
  if constexpr (A == Act::swiglu_clamped) {
    g = g > limit ? limit : g;
    u = u > limit ? limit : (u < -limit ? -limit : u);
    return g * sigmoid<Fast>(alpha * g) * (u + 1.f);
  } else {
    return act<A, Fast>(g) * u;
  }
}

// The VJP of gated (u = 1 when not gated) from dy: returns dg, sets du.
// The derivatives of python/braze/integrations/_grads.py; tanh gelu through
// s = sigmoid(2w): (1 + tanh w) / 2 = s, (1 - tanh^2 w) / 2 = 2 s (1 - s).
// swiglu_clamped: on gc = min(g, limit), dg times [g < limit], du times
// [-limit < u < limit] (multiplied, as the reference: a NaN gate stays NaN).
template <Act A, bool Fast = false>
__device__ __forceinline__ float gated_vjp(float g, float u, float dy, float alpha, float limit, float& du) {
  float f, df;
  if constexpr (A == Act::gelu_erf) {
    const float cdf = 0.5f * (1.f + erff(g * 0.70710678118654752f));
    f = g * cdf;
    df = cdf + g * __expf(-0.5f * g * g) * 0.3989422804014327f;  // 1 / sqrt(2 pi)
  } else if constexpr (A == Act::gelu_tanh) {
    const float s = sigmoid<Fast>(1.5957691216057308f * (g + 0.044715f * g * g * g));
    f = g * s;
    df = s + g * s * (1.f - s) * 1.5957691216057308f * (1.f + 0.134145f * g * g);
  } else {
    constexpr bool clamped = A == Act::swiglu_clamped;
    const float gc = clamped && g > limit ? limit : g, al = clamped ? alpha : 1.f;
    const float s = sigmoid<Fast>(al * gc);
    f = gc * s;
    df = s * (1.f + al * gc * (1.f - s));
    if constexpr (clamped) {
      df *= g < limit ? 1.f : 0.f;
      du = dy * f * (u > -limit && u < limit ? 1.f : 0.f);
      return dy * ((u > limit ? limit : (u < -limit ? -limit : u)) + 1.f) * df;
    }
  }
  du = dy * f;
  return dy * u * df;
}

// Element pairs (e, e + 1) of a pack rounded together: one cvt.rn.bf16x2 /
// f16x2 for two outputs (Fast) instead of one conversion each.
template <bool Fast, class T, int V>
__device__ __forceinline__ void put_pair(Pack<T, V>& o, int e, float a, float b) {
  if constexpr (Fast && std::is_same_v<T, __nv_bfloat16>) {
    *reinterpret_cast<__nv_bfloat162*>(&o.v[e]) = __floats2bfloat162_rn(a, b);
  } else if constexpr (Fast && std::is_same_v<T, __half>) {
    *reinterpret_cast<__half2*>(&o.v[e]) = __floats2half2_rn(a, b);
  } else {
    o.v[e] = from_f32<T>(a);
    o.v[e + 1] = from_f32<T>(b);
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

// Output e's gate and up from the packs loaded for it (u = 1 when not gated):
// interleaved, inputs 2e and 2e + 1 of the 2V loaded in g, u.
template <bool Gated, bool Il, class T, int V>
__device__ __forceinline__ void gate_up(const Pack<T, V>& g, const Pack<T, V>& u, int e, float& gv, float& uv) {
  if constexpr (Il) {
    const int q = 2 * e;
    gv = to_f32(q < V ? g.v[q] : u.v[q - V]);
    uv = to_f32(q + 1 < V ? g.v[q + 1] : u.v[q + 1 - V]);
  } else {
    gv = to_f32(g.v[e]);
    if constexpr (Gated) uv = to_f32(u.v[e]);
    else uv = 1.f;
  }
}

// Row r, packs k0 + i * blockDim.x (i < U) of the output (Bwd: of dy). V:
// elements per pack (16 bytes, or 1 on the scalar path). Gated
// non-interleaved rows use whole packs only (the launcher takes the scalar
// path unless cols % V == 0), so the up half stays aligned. Bwd (the VJP)
// reads dy's pack too and writes dg and du where g and u were read.
template <class T, int V, int U, Act A, bool Gated, bool Il, bool Stream, bool Fast, bool Bwd>
__device__ __forceinline__ void act_row(const ActParams& p, int64_t r, int k0) {
  const T* xr = static_cast<const T*>(p.x) + r * p.x_stride;
  T* yr = static_cast<T*>(p.y) + r * p.y_stride;
  Pack<T, V> g[U], u[U], d[Bwd ? U : 1];
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
    if constexpr (Bwd) d[i] = ld<Stream, T, V>(static_cast<const T*>(p.dy) + r * p.dy_stride, c, n);
  }
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int k = k0 + i * blockDim.x;
    if (k >= p.packs) continue;
    const int c = k * V, n = min(V, p.cols - c);
    Pack<T, V> o, o2;
    float w[V], w2[Bwd ? V : 1];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float gv, uv;
      gate_up<Gated, Il>(g[i], u[i], e, gv, uv);
      if constexpr (Bwd) w[e] = gated_vjp<A, Fast>(gv, uv, to_f32(d[i].v[e]), p.alpha, p.limit, w2[e]);
      else if constexpr (Gated) w[e] = gated<A, Fast>(gv, uv, p.alpha, p.limit);
      else w[e] = act<A, Fast>(gv);
    }
    if constexpr (Bwd && Il) {  // dg, du of output e at 2e, 2e + 1 of the 2V stored
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const int q = 2 * e;
        (q < V ? o.v[q] : o2.v[q - V]) = from_f32<T>(w[e]);
        (q + 1 < V ? o.v[q + 1] : o2.v[q + 1 - V]) = from_f32<T>(w2[e]);
      }
      st<Stream, T, V>(yr, 2 * c, min(V, 2 * n), o);
      if (2 * n > V) st<Stream, T, V>(yr, 2 * c + V, 2 * n - V, o2);
      continue;
    }
    if constexpr (V % 2 == 0) {
#pragma unroll
      for (int e = 0; e < V; e += 2) put_pair<Fast>(o, e, w[e], w[e + 1]);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) o.v[e] = from_f32<T>(w[e]);
    }
    st<Stream, T, V>(yr, c, n, o);
    if constexpr (Bwd && Gated) {  // du: the up half
#pragma unroll
      for (int e = 0; e < V; ++e) o2.v[e] = from_f32<T>(w2[e]);
      st<Stream, T, V>(yr, p.cols + c, V, o2);
    }
  }
}

template <class T, int V, int U, Act A, bool Gated, bool Il, bool Stream, bool Persist, bool Fast, bool Bwd>
__global__ void __launch_bounds__(256) act_kernel(ActParams p) {
  if constexpr (Persist) {
    for (WalkPos w = walk_start(p.walk); w.group < p.walk.groups; walk_next(p.walk, w)) {
      const int64_t r = w.group * blockDim.y + threadIdx.y;
      if (r < p.rows) act_row<T, V, U, A, Gated, Il, Stream, Fast, Bwd>(p, r, w.tile * blockDim.x * U + threadIdx.x);
    }
  } else {
    const int k0 = blockIdx.x * blockDim.x * U + threadIdx.x;
    for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r < p.rows;
         r += int64_t(gridDim.y) * blockDim.y)
      act_row<T, V, U, A, Gated, Il, Stream, Fast, Bwd>(p, r, k0);
  }
}

}  // namespace braze::cuda::ops
