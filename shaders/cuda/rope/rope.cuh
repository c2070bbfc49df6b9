// Rope kernel: one block rotates a group of tokens, every head of q and k.
// The block first computes cos / sin of each (token, pair) once into shared
// memory (sincosf: full-range accurate, unlike __sincosf, whose error grows
// with the angle), then each thread rotates packs of V elements (one 16-byte
// access per operand when the layout allows) of one head across the tokens.
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

// V elements at p (n <= V of them real, the rest zero); Vec: one aligned
// 16-byte access when n == V.
template <class T, int V, bool Vec>
__device__ __forceinline__ Pack<T, V> load(const T* p, int n) {
  Pack<T, V> k;
  if (Vec && n == V) {
    k = *reinterpret_cast<const Pack<T, V>*>(p);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) k.v[e] = e < n ? p[e] : from_f32<T>(0.f);
  }
  return k;
}

template <class T, int V, bool Vec>
__device__ __forceinline__ void store(T* p, int n, const Pack<T, V>& k) {
  if (Vec && n == V) {
    *reinterpret_cast<Pack<T, V>*>(p) = k;
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (e < n) p[e] = k.v[e];
  }
}

constexpr int kUnroll = 4;  // tokens whose loads a thread issues before its first store

// Each thread owns one (head, pack) of the token layout and walks the block's
// tokens, kUnroll at a time (loads first, for memory-level parallelism; each
// element belongs to one thread, so in place is safe).
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
  const int per_token = int(p.heads) * per_head;
  for (int r = threadIdx.x; r < per_token; r += blockDim.x) {
    const int hh = r / per_head, k = r - hh * per_head;
    const int part = hh >= p.q_heads;
    const int64_t head = part ? hh - p.q_heads : hh;
    const int64_t xs = p.x_tok[part], ys = p.y_tok[part];
    const T* x = static_cast<const T*>(p.x[part]) + t0 * xs + head * p.x_head[part];
    T* y = static_cast<T*>(p.y[part]) + t0 * ys + head * p.y_head[part];
    if (k >= p.rot_packs) {  // dims past rotary_dim pass through (nothing to do in place)
      if (static_cast<const void*>(x) == static_cast<const void*>(y)) continue;
      const int e = int(p.rot) + (k - p.rot_packs) * V, n = int(min(int64_t(V), p.dim - e));
      for (int tt = 0; tt < nt; ++tt) store<T, V, Vec>(y + tt * ys + e, n, load<T, V, Vec>(x + tt * xs + e, n));
      continue;
    }
    // rotate-half: packs at i and half + i; interleaved: one pack at e = k V
    const int i = Interleaved ? k * V : k * V, n = Interleaved ? min(V, int(p.rot) - i) : min(V, half - i);
    const int off2 = Interleaved ? 0 : half;
    for (int tb = 0; tb < nt; tb += kUnroll) {
      Pack<T, V> a[kUnroll], b[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (tb + u < nt) {
          a[u] = load<T, V, Vec>(x + (tb + u) * xs + i, n);
          if (!Interleaved) b[u] = load<T, V, Vec>(x + (tb + u) * xs + off2 + i, n);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (tb + u >= nt) break;
        const float* c = cs + (tb + u) * half;
        const float* s = sn + (tb + u) * half;
        if (Interleaved) {
#pragma unroll
          for (int q = 0; q < V; q += 2) {
            const int pi = (i + q) / 2;
            const float cc = q < n ? c[pi] : 0.f, ss = q < n ? s[pi] : 0.f;
            const float x0 = to_f32(a[u].v[q]), x1 = to_f32(a[u].v[q + 1]);
            a[u].v[q] = from_f32<T>(x0 * cc - x1 * ss);
            a[u].v[q + 1] = from_f32<T>(x1 * cc + x0 * ss);
          }
        } else {
#pragma unroll
          for (int q = 0; q < V; ++q) {
            const float cc = q < n ? c[i + q] : 0.f, ss = q < n ? s[i + q] : 0.f;
            const float x1 = to_f32(a[u].v[q]), x2 = to_f32(b[u].v[q]);
            a[u].v[q] = from_f32<T>(x1 * cc - x2 * ss);
            b[u].v[q] = from_f32<T>(x2 * cc + x1 * ss);
          }
        }
        store<T, V, Vec>(y + (tb + u) * ys + i, n, a[u]);
        if (!Interleaved) store<T, V, Vec>(y + (tb + u) * ys + off2 + i, n, b[u]);
      }
    }
  }
}

}  // namespace braze::cuda::rope
