// Rope kernel, written for memory bandwidth. A thread owns one token, one
// "lane" of the head layout (a pack of V elements of the first rotated half
// and its partner pack in the second, or one interleaved pack, or one pack
// past rotary_dim) and a group of consecutive heads of q or of k (the grid's
// y axis). It computes cos / sin of its pack's frequencies once, in registers,
// and applies them to every head of its group: V (or V / 2) sincosf per
// (token, lane, group) rather than per element, no table phase, no shared
// memory, no barrier, one 32-bit division per thread. Heads go in batches
// whose loads (8 packs of 16 bytes) are all issued before the first use.
//
// sincosf is the accurate one (not __sincosf, whose error grows with the
// angle: positions go up to 2**24); its Payne-Hanek branch (|angle| >= 105615,
// with a 28-byte local-memory stack) is out of line and runs only for large
// positions.
#pragma once
#include <cstdint>

#include "cuda/common/dtype.cuh"
#include "cuda/common/vec.cuh"

namespace braze::cuda::rope {

// Default frequencies base ** (-2i / rot) for rot / 2 <= kFreqTable are
// computed on the host (bit for bit the CPU's, rounded once from double) and
// passed in the parameter block (read with indexed constant loads); a
// per-thread double pow would cost more than the memory traffic. Larger
// rotary dims compute them on the device.
constexpr int kFreqTable = 128;

struct Params {
  const void* pos;
  int64_t pos_stride;
  bool pos64;
  const float* inv_freq;  // given [rot / 2], or null: freq_table, else base ** (-2i / rot) on the device
  double base;
  float scale, sin_sign;
  int tokens, rot, dim;
  int lanes;      // threads per (token, head group): rot_lanes rotate, the rest copy dims past rot
  int rot_lanes;
  int group_heads;   // heads per group (the last group of a part may have fewer)
  int q_groups;      // blockIdx.y < q_groups: groups of q heads, else of k heads
  int heads[2];
  const void* x[2];
  void* y[2];
  int64_t x_tok[2], x_head[2], y_tok[2], y_head[2];  // strides in elements
  float freq_table[kFreqTable];
};

// One full pack: a 16-byte access when Vec, else V (1 or 2) element accesses.
// Full packs never go through per-element merging, so a 16-byte pack stays in
// four registers instead of one per element.
template <class T, int V, bool Vec>
__device__ __forceinline__ Pack<T, V> load(const T* p) {
  Pack<T, V> k;
  if constexpr (Vec) {
    k = *reinterpret_cast<const Pack<T, V>*>(p);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) k.v[e] = p[e];
  }
  return k;
}

template <class T, int V, bool Vec>
__device__ __forceinline__ void store(T* p, const Pack<T, V>& k) {
  if constexpr (Vec) {
    *reinterpret_cast<Pack<T, V>*>(p) = k;
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) p[e] = k.v[e];
  }
}

// sincosf's Payne-Hanek reduction (|a| >= 105615, positions past ~10^5) kept
// out of line, so its registers and stack do not count against the common
// path. The inline call below tests exactly what sincosf tests, so the
// compiler drops the inlined copy's own slow path.
__device__ __noinline__ float2 sincos_large(float a) {
  float s, c;
  sincosf(a, &s, &c);
  return make_float2(s, c);
}

__device__ __forceinline__ void sincos_accurate(float a, float& s, float& c) {
  if (!(fabsf(a) >= 105615.f)) {  // NaN too: the same test as sincosf's own
    sincosf(a, &s, &c);
  } else {
    const float2 r = sincos_large(a);
    s = r.x;
    c = r.y;
  }
}

// Frequencies f0 .. f0 + F - 1, the source chosen once so that the F loads
// of a given inv_freq are in flight together.
template <int F> __device__ __forceinline__ void frequencies(const Params& p, int f0, float (&f)[F]) {
  if (p.inv_freq) {
#pragma unroll
    for (int q = 0; q < F; ++q) f[q] = __ldg(p.inv_freq + f0 + q);
  } else if (p.rot <= 2 * kFreqTable) {
#pragma unroll
    for (int q = 0; q < F; ++q) f[q] = p.freq_table[f0 + q];
  } else {
#pragma unroll
    for (int q = 0; q < F; ++q) f[q] = float(pow(p.base, -double(2 * (f0 + q)) / double(p.rot)));
  }
}

// Starts moving a line towards L2 without holding a register for it.
__device__ __forceinline__ void prefetch_l2(const void* ptr) { asm volatile("prefetch.L2 [%0];" ::"l"(ptr)); }

// Heads per batch: 4 for rotate-half (8 packs of loads in flight, 2 per head),
// 8 for interleaved (1 pack per head); about 32 data registers either way.
template <bool Interleaved> constexpr int kBatch = Interleaved ? 8 : 4;

// Three resident blocks of 256 threads (<= 80 registers; 768 threads x 128
// bytes in flight per SM, several times what HBM latency needs): the whole
// batch's loads are issued before any use. At four (64 registers) the
// compiler splits each batch's loads into two rounds on sm_90 and spills on
// sm_80.
constexpr int kMinBlocks = 3;

// Vec: 16-byte packs (V = 8 bf16 / f16, 4 f32), every pack of the rotated part
// full (the launcher checks rot / 2 or rot is a multiple of V and everything is
// 16-byte aligned). Else element accesses with V = 1 (rotate-half) or 2 (one
// interleaved pair). Only the last pass-through pack of a head may be partial.
template <class T, int V, bool Vec, bool Interleaved>
__global__ void __launch_bounds__(256, kMinBlocks) rope_kernel(const __grid_constant__ Params p) {
  // 32-bit: the launcher checks tokens * lanes < 2**31; one division per thread.
  const unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned t = idx / unsigned(p.lanes);
  if (t >= unsigned(p.tokens)) return;
  const int lane = int(idx - t * unsigned(p.lanes));
  const int part = int(blockIdx.y) >= p.q_groups;
  const int h0 = (int(blockIdx.y) - (part ? p.q_groups : 0)) * p.group_heads;
  const int nh = min(p.group_heads, p.heads[part] - h0);
  const int64_t xh = p.x_head[part], yh = p.y_head[part];
  const T* x = static_cast<const T*>(p.x[part]) + int64_t(t) * p.x_tok[part] + h0 * xh;
  T* y = static_cast<T*>(p.y[part]) + int64_t(t) * p.y_tok[part] + h0 * yh;

  if (lane >= p.rot_lanes) {  // dims past rotary_dim pass through (nothing to do in place)
    if (p.x[part] == p.y[part]) return;
    const int e = p.rot + (lane - p.rot_lanes) * V, n = p.dim - e;
    if (n < V) {  // the last pack of a head_dim that is not a multiple of V
      for (int h = 0; h < nh; ++h)
        for (int i = 0; i < n; ++i) y[h * yh + e + i] = x[h * xh + e + i];
      return;
    }
    constexpr int B = 8;
    for (int h = 0; h < nh; h += B) {
      Pack<T, V> k[B];
#pragma unroll
      for (int u = 0; u < B; ++u) k[u] = load<T, V, Vec>(x + min(h + u, nh - 1) * xh + e);
#pragma unroll
      for (int u = 0; u < B; ++u)
        if (h + u < nh) store<T, V, Vec>(y + (h + u) * yh + e, k[u]);
    }
    return;
  }

  // rotate-half: pairs (e + q, half + e + q), frequency e + q; interleaved:
  // pairs (e + 2q, e + 2q + 1), frequency e / 2 + q.
  constexpr int F = Interleaved ? V / 2 : V;  // frequencies per pack
  constexpr int B = kBatch<Interleaved>;
  const int e = lane * V, partner = Interleaved ? 0 : p.rot / 2;
  // The angles come before the first loads: with the batch's 32 data
  // registers live, the compiler interleaves the F sincosf and needs ~40 more
  // registers (113 instead of 75 for bf16). The first batch is prefetched to
  // L2 instead, so its DRAM latency still overlaps the sincosf (most of a
  // decode launch's latency).
#pragma unroll
  for (int u = 0; u < B; ++u) {
    if (u < nh) {
      prefetch_l2(x + u * xh + e);
      if (!Interleaved) prefetch_l2(x + u * xh + partner + e);
    }
  }
  float c[F], s[F];
  {
    const int64_t pi = int64_t(t) * p.pos_stride;
    const float pos = p.pos64 ? float(static_cast<const long long*>(p.pos)[pi])
                              : float(static_cast<const int*>(p.pos)[pi]);
    float f[F];
    frequencies(p, Interleaved ? e / 2 : e, f);
#pragma unroll
    for (int q = 0; q < F; ++q) {
      float sn, cs;
      sincos_accurate(__fmul_rn(pos, f[q]), sn, cs);  // the f32 product, never fused
      c[q] = cs * p.scale;
      s[q] = sn * p.scale * p.sin_sign;
    }
  }

  for (int h = 0; h < nh; h += B) {
    // Packs live within one iteration (a pack carried across iterations, or
    // loaded under a predicate, is split into one register per 16-bit
    // element); past the group's last head the loads repeat that head, an L1
    // hit, and are not stored.
    Pack<T, V> a[B], b[B];
#pragma unroll
    for (int u = 0; u < B; ++u) {
      const T* xu = x + min(h + u, nh - 1) * xh + e;
      a[u] = load<T, V, Vec>(xu);
      if (!Interleaved) b[u] = load<T, V, Vec>(xu + partner);
    }
#pragma unroll
    for (int u = 0; u < B; ++u) {
      if (h + u >= nh) break;
      if (Interleaved) {
#pragma unroll
        for (int q = 0; q < V; q += 2) {
          const float x0 = to_f32(a[u].v[q]), x1 = to_f32(a[u].v[q + 1]);
          a[u].v[q] = from_f32<T>(x0 * c[q / 2] - x1 * s[q / 2]);
          a[u].v[q + 1] = from_f32<T>(x1 * c[q / 2] + x0 * s[q / 2]);
        }
      } else {
#pragma unroll
        for (int q = 0; q < V; ++q) {
          const float x1 = to_f32(a[u].v[q]), x2 = to_f32(b[u].v[q]);
          a[u].v[q] = from_f32<T>(x1 * c[q] - x2 * s[q]);
          b[u].v[q] = from_f32<T>(x2 * c[q] + x1 * s[q]);
        }
      }
      // each element is read and written by this thread only: in place is safe
      store<T, V, Vec>(y + (h + u) * yh + e, a[u]);
      if (!Interleaved) store<T, V, Vec>(y + (h + u) * yh + partner + e, b[u]);
    }
  }
}

}  // namespace braze::cuda::rope
