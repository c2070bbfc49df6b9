// Rope kernel: one block rotates a group of tokens, every head of q and k.
// The block first computes cos / sin of each (token, pair) once into shared
// memory (sincosf: full-range accurate, unlike __sincosf, whose error grows
// with the angle), then each thread rotates a pack of V elements (one 16-byte
// access per operand when the layout allows) of one head.
#pragma once
#include <cstdint>

#include "cuda/common/dtype.cuh"
#include "cuda/common/vec.cuh"

namespace braze::cuda::rope {

struct Params {
  const void* pos;
  int64_t pos_stride;
  bool pos64;
  const float* inv_freq;  // null: base ** (-2i / rot), in double, rounded once
  double base;
  float scale, sin_sign;
  int64_t tokens, dim, rot;
  int tokens_per_block;
  int64_t q_heads, heads;  // heads = q heads + k heads
  const void* x[2];
  void* y[2];
  int64_t x_tok[2], x_head[2], y_tok[2], y_head[2];
  int rot_packs, rest_packs;  // packs of V elements per head: rotated, passed through
};

// V elements at p (n <= V of them real); Vec: one aligned 16-byte access when n == V.
template <class T, int V, bool Vec>
__device__ __forceinline__ void load(const T* p, int n, float (&f)[V]) {
  if (Vec && n == V) {
    const Pack<T, V> k = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
    for (int e = 0; e < V; ++e) f[e] = to_f32(k.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) f[e] = e < n ? to_f32(p[e]) : 0.f;
  }
}

template <class T, int V, bool Vec>
__device__ __forceinline__ void store(T* p, int n, const float (&f)[V]) {
  if (Vec && n == V) {
    Pack<T, V> k;
#pragma unroll
    for (int e = 0; e < V; ++e) k.v[e] = from_f32<T>(f[e]);
    *reinterpret_cast<Pack<T, V>*>(p) = k;
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (e < n) p[e] = from_f32<T>(f[e]);
  }
}

template <class T, int V, bool Vec, bool Interleaved>
__global__ void __launch_bounds__(256) rope_kernel(Params p) {
  extern __shared__ float sm[];
  const int half = int(p.rot / 2);
  float* invf = sm;
  float* cs = invf + half;
  float* sn = cs + p.tokens_per_block * half;
  const int64_t t0 = int64_t(blockIdx.x) * p.tokens_per_block;
  const int nt = int(min(int64_t(p.tokens_per_block), p.tokens - t0));

  for (int i = threadIdx.x; i < half; i += blockDim.x)
    invf[i] = p.inv_freq ? p.inv_freq[i] : float(pow(p.base, -double(2 * i) / double(p.rot)));
  __syncthreads();
  for (int j = threadIdx.x; j < nt * half; j += blockDim.x) {
    const int tt = j / half, i = j - tt * half;
    const int64_t t = t0 + tt;
    const float pos = p.pos64 ? float(static_cast<const long long*>(p.pos)[t * p.pos_stride])
                              : float(static_cast<const int*>(p.pos)[t * p.pos_stride]);
    float s, c;
    sincosf(__fmul_rn(pos, invf[i]), &s, &c);  // the f32 product, never fused
    cs[j] = c * p.scale;
    sn[j] = s * p.scale * p.sin_sign;
  }
  __syncthreads();

  const int per_head = p.rot_packs + p.rest_packs;
  const int64_t per_token = p.heads * per_head;
  for (int64_t w = threadIdx.x; w < nt * per_token; w += blockDim.x) {
    const int tt = int(w / per_token);
    const int64_t r = w - tt * per_token;
    int64_t head = r / per_head;
    const int k = int(r - head * per_head);
    const int part = head >= p.q_heads;
    head -= part ? p.q_heads : 0;
    const int64_t t = t0 + tt;
    const T* x = static_cast<const T*>(p.x[part]) + t * p.x_tok[part] + head * p.x_head[part];
    T* y = static_cast<T*>(p.y[part]) + t * p.y_tok[part] + head * p.y_head[part];
    const float* c = cs + tt * half;
    const float* s = sn + tt * half;
    float a[V], o[V];
    if (k >= p.rot_packs) {  // dims past rotary_dim pass through (nothing to do in place)
      if (x == y) continue;
      const int e = int(p.rot) + (k - p.rot_packs) * V, n = int(min(int64_t(V), p.dim - e));
      load<T, V, Vec>(x + e, n, a);
      store<T, V, Vec>(y + e, n, a);
    } else if (Interleaved) {
      const int e = k * V, n = int(min(int64_t(V), p.rot - e));
      load<T, V, Vec>(x + e, n, a);
#pragma unroll
      for (int q = 0; q < V; q += 2) {
        const float cc = q < n ? c[(e + q) / 2] : 0.f, ss = q < n ? s[(e + q) / 2] : 0.f;
        o[q] = a[q] * cc - a[q + 1] * ss;
        o[q + 1] = a[q + 1] * cc + a[q] * ss;
      }
      store<T, V, Vec>(y + e, n, o);
    } else {
      const int i = k * V, n = min(V, half - i);
      float b[V], o2[V];
      load<T, V, Vec>(x + i, n, a);
      load<T, V, Vec>(x + half + i, n, b);
#pragma unroll
      for (int q = 0; q < V; ++q) {
        const float cc = q < n ? c[i + q] : 0.f, ss = q < n ? s[i + q] : 0.f;
        o[q] = a[q] * cc - b[q] * ss;
        o2[q] = b[q] * cc + a[q] * ss;
      }
      store<T, V, Vec>(y + i, n, o);
      store<T, V, Vec>(y + half + i, n, o2);
    }
  }
}

}  // namespace braze::cuda::rope
