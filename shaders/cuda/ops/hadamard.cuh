// Hadamard transform of rows of n = M * P elements (P = 2^k, M in {1, 12, 20,
// 28}): y[r] = scale * (H_M (x) H_P) x[r], x[r] viewed [M, P] row-major.
//
// A block takes R whole rows (R > 1 only for short rows); each subrow of P
// gets G = P / E threads holding E elements each in f32 registers. Element j
// of a subrow lives in thread s, register e = i * V + v, with
//   j = V * (s + G * i) + v        (V: elements of a 16-byte pack, or 1)
// so pack i of all threads is one contiguous span (coalesced 16-byte
// accesses). The bits of j therefore fall in three places: the v and i bits in
// registers, the low 5 bits of s in the lanes of a warp, the rest of s in the
// warps. The Sylvester transform is one butterfly per bit of j, and
// butterflies on different bits commute (as does H_M, which acts on the other
// axis), so they run where the data is:
//  1. registers: every butterfly over the bits of e;
//  2. lanes: __shfl_xor over the low bits of s (a warp never spans two
//     subrows' lane bits: G is a power of two, subrows start at multiples of G);
//  3. "staged" rows (G > 32 or M > 1): the values go to shared memory as
//     [R * M][P] f32; the warp bits of s run as passes that gather groups of
//     elements down the row, and H_M mixes the M subrows column by column;
//     every thread then reads back its own elements.
// Then scale and store as loaded. No padding is needed: in every shared
// access consecutive lanes touch consecutive words (the 16-byte accesses of
// steps 3 are at most 2-way conflicted, V = 8).
// In place is safe: a block reads its rows before the first barrier (or
// shuffle) that its writes depend on, and blocks own disjoint rows.
#pragma once
#include <cstdint>

#include "core/hadamard.h"
#include "cuda/common/cp_async.cuh"
#include "cuda/common/dtype.cuh"
#include "cuda/common/vec.cuh"

namespace braze::cuda::ops {

// Threads a block may have (the launcher never asks more): 128 registers each.
constexpr int kHadThreads = 512;
constexpr int kHadSplitThreads = 128;  // hadamard_split_kernel's block

// Rows of H_12, H_20, H_28 (bit j of row i set: H[i][j] = -1), read with
// compile-time indices, so each is a constant-bank operand.
__constant__ uint32_t kHad12[12] = BRAZE_HADAMARD_12;
__constant__ uint32_t kHad20[20] = BRAZE_HADAMARD_20;
__constant__ uint32_t kHad28[28] = BRAZE_HADAMARD_28;

struct HadamardParams {
  const void* x;
  void* y;
  int64_t x_stride, y_stride;  // elements
  int64_t rows;
  int64_t groups;              // ceil(rows / R)
  float scale;
  int M, logP;                 // subrows per row, log2 of their length
  int logG;                    // log2 threads per subrow
  int R;                       // rows per block
  int threads;                 // R * M * G (the block may be padded to a whole warp)
};

// Butterflies over every index bit of d[0, N).
template <int N> __device__ __forceinline__ void butterflies(float (&d)[N]) {
#pragma unroll
  for (int h = 1; h < N; h *= 2)
#pragma unroll
    for (int e = 0; e < N; ++e)
      if ((e & h) == 0) {
        const float a = d[e], b = d[e + h];
        d[e] = a + b;
        d[e + h] = a - b;
      }
}

// Butterflies over bits [lo, lo + W) of the index of every subrow in sm
// (subrows of P = 2^logP, `subrows` of them back to back). A task is one
// group of 2^W elements that differ in those bits only; consecutive threads
// take consecutive low bits (lo >= 5), so each warp access is 32 consecutive
// words.
template <int W>
__device__ __forceinline__ void smem_pass(float* sm, int subrows, int logP, int lo, int t, int nt) {
  const int tasks = subrows << (logP - W);
  const int hib = logP - lo - W;  // index bits above the pass
  for (int g = t; g < tasks; g += nt) {
    const int low = g & ((1 << lo) - 1), rest = g >> lo;
    const int hi = rest & ((1 << hib) - 1), q = rest >> hib;
    float* base = sm + (int64_t(q) << logP) + low + (hi << (lo + W));
    float f[1 << W];
#pragma unroll
    for (int e = 0; e < (1 << W); ++e) f[e] = base[e << lo];
    butterflies<1 << W>(f);
#pragma unroll
    for (int e = 0; e < (1 << W); ++e) base[e << lo] = f[e];
  }
}

// H_M across the M subrows of each of the R rows in sm, one column a task.
template <int M>
__device__ __forceinline__ void mix_subrows(float* sm, const uint32_t* H, int R, int logP, int t, int nt) {
  const int P = 1 << logP, tasks = R << logP;
  for (int g = t; g < tasks; g += nt) {
    float* base = sm + int64_t(g >> logP) * M * P + (g & (P - 1));
    float u[M];
#pragma unroll
    for (int l = 0; l < M; ++l) u[l] = base[l * P];
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const uint32_t neg = H[i];
      float acc = 0.f;
#pragma unroll
      for (int l = 0; l < M; ++l) acc += (neg >> l) & 1u ? -u[l] : u[l];
      base[i * P] = acc;
    }
  }
}

// E elements a thread, V a pack (V == 1 or a 16-byte pack, E % V == 0); Mix:
// M > 1 (its own kernels: the M x M stage costs registers the M = 1 rows,
// which are bandwidth-bound, need for loads in flight).
template <class T, int E, int V, bool Mix>
__global__ void __launch_bounds__(kHadThreads) hadamard_kernel(HadamardParams p) {
  static_assert(E % V == 0, "a thread holds whole packs");
  constexpr int I = E / V;
  extern __shared__ float4 sm4[];
  float* sm = reinterpret_cast<float*>(sm4);
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const int t = threadIdx.x, nt = blockDim.x;
  const int G = 1 << p.logG, P = 1 << p.logP;
  const int s = t & (G - 1), q = t >> p.logG;  // q: subrow slot of the block
  const int rb = q / p.M, a = q - rb * p.M;
  const bool mine = t < p.threads;             // padding threads hold zeros, write nothing
  const bool staged = Mix || p.logG > 5;
  const int lane_bits = min(p.logG, 5);
  float* own = sm + (int64_t(q) << p.logP);    // this thread's subrow in sm

  for (int64_t grp = blockIdx.x; grp < p.groups; grp += gridDim.x) {
    const int64_t r = grp * p.R + rb;
    const bool active = mine && r < p.rows;
    float d[E];
    {
      Pack<T, V> k[I];
      if (active) {
        const T* xr = x + r * p.x_stride + int64_t(a) * P;
#pragma unroll
        for (int i = 0; i < I; ++i) k[i] = load_pack<T, V>(xr, V * (s + G * i), V);
      }
#pragma unroll
      for (int i = 0; i < I; ++i)
#pragma unroll
        for (int v = 0; v < V; ++v) d[i * V + v] = active ? to_f32(k[i].v[v]) : 0.f;
    }
    butterflies<E>(d);
    for (int b = 0; b < lane_bits; ++b) {
      const bool upper = (t >> b) & 1;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float o = __shfl_xor_sync(0xffffffffu, d[e], 1 << b);
        d[e] = upper ? o - d[e] : d[e] + o;
      }
    }

    if (staged) {
      if (mine) {
#pragma unroll
        for (int i = 0; i < I; ++i) {
          float* dst = own + V * (s + G * i);
          if constexpr (V % 4 == 0) {
#pragma unroll
            for (int v = 0; v < V; v += 4)
              *reinterpret_cast<float4*>(dst + v) = make_float4(d[i * V + v], d[i * V + v + 1], d[i * V + v + 2],
                                                                d[i * V + v + 3]);
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v) dst[v] = d[i * V + v];
          }
        }
      }
      __syncthreads();
      const int subrows = p.R * p.M, lo = __ffs(V) - 1 + 5;  // the warp bits of s start at bit log2(V) + 5
      switch (p.logG - 5) {
        case 1: smem_pass<1>(sm, subrows, p.logP, lo, t, nt); __syncthreads(); break;
        case 2: smem_pass<2>(sm, subrows, p.logP, lo, t, nt); __syncthreads(); break;
        case 3: smem_pass<3>(sm, subrows, p.logP, lo, t, nt); __syncthreads(); break;
        case 4: smem_pass<4>(sm, subrows, p.logP, lo, t, nt); __syncthreads(); break;
        default: break;  // no warp bits (the launcher keeps G <= 512)
      }
      if constexpr (Mix) {
        switch (p.M) {
          case 12: mix_subrows<12>(sm, kHad12, p.R, p.logP, t, nt); break;
          case 20: mix_subrows<20>(sm, kHad20, p.R, p.logP, t, nt); break;
          default: mix_subrows<28>(sm, kHad28, p.R, p.logP, t, nt); break;  // the launcher passes 12, 20 or 28
        }
        __syncthreads();
      }
      if (mine) {
#pragma unroll
        for (int i = 0; i < I; ++i) {
          const float* src = own + V * (s + G * i);
          if constexpr (V % 4 == 0) {
#pragma unroll
            for (int v = 0; v < V; v += 4) {
              const float4 f = *reinterpret_cast<const float4*>(src + v);
              d[i * V + v] = f.x, d[i * V + v + 1] = f.y, d[i * V + v + 2] = f.z, d[i * V + v + 3] = f.w;
            }
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v) d[i * V + v] = src[v];
          }
        }
      }
      __syncthreads();  // the next row group reuses sm
    }

    if (active) {
      T* yr = y + r * p.y_stride + int64_t(a) * P;
#pragma unroll
      for (int i = 0; i < I; ++i) {
        Pack<T, V> o;
#pragma unroll
        for (int v = 0; v < V; ++v) o.v[v] = from_f32<T>(d[i * V + v] * p.scale);
        store_pack<T, V>(yr, V * (s + G * i), V, o);
      }
    }
  }
}

// Rows of P = 2^logP (M = 1, 64 <= P <= 4096) without shuffles: a thread holds
// E = 2^e elements, G = P / E = 2^g threads a row (e >= g >= log2 V), and the
// row goes through shared memory once between two register phases:
//   L0 (as loaded, coalesced): j = V * (s + G * i) + u: registers hold the u
//      bits [0, v) and the i bits [v + g, logP); butterflies over all of them;
//   L1: thread s = u + V * h, register r = m + G * c holds
//      j = u + V * m + 2^(v + g) * (h + 2^(g - v) * c): butterflies over the m
//      bits [v, v + g) only (the c bits were done in L0);
// then back to L0 through shared memory for the packed stores. Shared memory
// keeps V padding floats after every 2^(v + g): the lanes of an L1 access
// (consecutive u, then h) fall in distinct banks. Every butterfly runs once
// per bit, so the result is H_P x whatever the order (they commute).
// Prefetch (a grid of resident blocks walking the row groups): each thread
// copies its own packs of the block's next row group into a raw staging area
// of shared memory with cp.async as soon as it has read the current one, so
// a group's loads are in flight while the previous group computes and stores
// (each thread reads back only what it copied: no barrier for the staging).
template <class T, int E, int LG, bool Prefetch>
__global__ void __launch_bounds__(kHadSplitThreads, 4) hadamard_split_kernel(HadamardParams p) {
  constexpr int V = kVec16<T>, I = E / V;
  constexpr int LV = V == 8 ? 3 : V == 4 ? 2 : 1;
  constexpr int G = 1 << LG, LM = LV + LG;  // LM: the bits below L0's i bits
  static_assert(E % V == 0 && (1 << LV) == V && E >= G && LG >= LV, "a thread holds whole 16-byte packs");
  extern __shared__ float4 sm4[];
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  constexpr int P = G * E;
  const int t = threadIdx.x;
  const int s = t & (G - 1), q = t >> LG;
  float* row = reinterpret_cast<float*>(sm4) + q * (P + E);  // P floats, V padding after each 2^LM
  // L0's pack i of this thread, and L1's register k (m = k % G, c = k / G): the padded offsets
  float* l0 = row + V * s;
  constexpr int kL0Step = V * G + V;
  float* l1 = row + (s & (V - 1)) + (s >> LV) * ((1 << LM) + V);
  constexpr int kCStep = (G / V) * ((1 << LM) + V);
  // the raw staging of Prefetch: R rows of P elements of T after the f32 rows
  T* raw = reinterpret_cast<T*>(reinterpret_cast<float*>(sm4) + p.R * (P + E)) + q * P + V * s;
  const auto prefetch = [&](int64_t grp) {
    const int64_t r = grp * p.R + q;
    if (grp < p.groups && q < p.R && r < p.rows) {
      const T* xr = x + r * p.x_stride + V * s;
#pragma unroll
      for (int i = 0; i < I; ++i) cp_async16(raw + V * G * i, xr + V * G * i);
    }
    cp_async_commit();
  };
  if constexpr (Prefetch) prefetch(blockIdx.x);

  for (int64_t grp = blockIdx.x; grp < p.groups; grp += gridDim.x) {
    const int64_t r = grp * p.R + q;
    const bool active = q < p.R && r < p.rows;
    float d[E];
    {
      Pack<T, V> k[I];
      if constexpr (Prefetch) {
        cp_async_wait<0>();
        if (active) {
#pragma unroll
          for (int i = 0; i < I; ++i) k[i] = *reinterpret_cast<const Pack<T, V>*>(raw + V * G * i);
        }
        prefetch(grp + gridDim.x);  // the staging is free again: this thread has read its packs
      } else if (active) {
        const T* xr = x + r * p.x_stride;
#pragma unroll
        for (int i = 0; i < I; ++i) k[i] = load_pack<T, V>(xr, V * (s + G * i), V);
      }
#pragma unroll
      for (int i = 0; i < I; ++i)
#pragma unroll
        for (int u = 0; u < V; ++u) d[i * V + u] = active ? to_f32(k[i].v[u]) : 0.f;
    }
    butterflies<E>(d);
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int u = 0; u < V; u += 4)
        *reinterpret_cast<float4*>(l0 + i * kL0Step + u) =
            make_float4(d[i * V + u], d[i * V + u + 1], d[i * V + u + 2], d[i * V + u + 3]);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < E; ++k) d[k] = l1[(k % G) * V + (k / G) * kCStep];
#pragma unroll
    for (int h = 1; h < G; h *= 2) {
#pragma unroll
      for (int k = 0; k < E; ++k)
        if ((k & h) == 0) {
          const float a = d[k], b = d[k + h];
          d[k] = a + b;
          d[k + h] = a - b;
        }
    }
#pragma unroll
    for (int k = 0; k < E; ++k) l1[(k % G) * V + (k / G) * kCStep] = d[k];
    __syncthreads();
    if (active) {
      T* yr = y + r * p.y_stride;
#pragma unroll
      for (int i = 0; i < I; ++i) {
        const float* src = l0 + i * kL0Step;
        Pack<T, V> o;
#pragma unroll
        for (int u = 0; u < V; u += 4) {
          const float4 f = *reinterpret_cast<const float4*>(src + u);
          o.v[u] = from_f32<T>(f.x * p.scale), o.v[u + 1] = from_f32<T>(f.y * p.scale);
          o.v[u + 2] = from_f32<T>(f.z * p.scale), o.v[u + 3] = from_f32<T>(f.w * p.scale);
        }
        store_pack<T, V>(yr, V * (s + G * i), V, o);
      }
    }
    __syncthreads();  // the next row group reuses the rows' shared memory
  }
}

}  // namespace braze::cuda::ops
