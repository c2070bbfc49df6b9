// Block-wide pieces of the sampling kernels (one block of NT threads per row):
// reductions, an exclusive scan of uint64, the order-preserving float keys the
// radix selects work on, and an exact uint64 add built from 32-bit atomics.
#pragma once
#include <cstdint>

namespace braze::cuda::sampling {

using u32 = uint32_t;
using u64 = unsigned long long;

constexpr unsigned kFull = 0xffffffffu;

// Order-preserving float -> uint32 (-0.0 and +0.0 share a key), as on the CPU.
__device__ __forceinline__ u32 key_of(float f) {
  u32 u = __float_as_uint(f);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float float_of(u32 k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
// The float f with (v >= f) == (key_of(v) >= k) for every non-NaN v: keys at or
// below key_of(-inf) (the ones below are NaN patterns) keep everything.
__device__ __forceinline__ float threshold_of(u32 k) {
  return k <= 0x007fffffu ? -__builtin_huge_valf() : float_of(k);
}

template <class V, class Op> __device__ __forceinline__ V warp_all(V v, Op op) {
  // xor butterflies: every lane combines the same operands (commutatively), so
  // every lane ends with the same bits, floats included.
#pragma unroll
  for (int o = 16; o; o >>= 1) v = op(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

// Reductions whose result every thread of the block receives: shuffles, one
// exchange through shared memory, one barrier. Two buffers alternate, so a
// buffer is written again only after the barrier of the reduction in between,
// which a thread reaches only once it has read that buffer. Every thread of
// the block must make the same sequence of calls.
template <int NT> struct BlockReduce {
  static constexpr int kWarps = NT / 32;
  static_assert(NT % 32 == 0 && kWarps <= 32, "NT: a multiple of 32, at most 1024");
  struct Smem {
    float f[2][kWarps];
    u64 u[2][kWarps];
  };
  Smem* sm;
  int phase = 0;

  template <class V, class Op> __device__ __forceinline__ V all(V v, V identity, Op op) {
    V* buf;
    if constexpr (sizeof(V) == 8) buf = sm->u[phase];
    else buf = sm->f[phase];
    const int lane = threadIdx.x & 31;
    v = warp_all(v, op);
    if (lane == 0) buf[threadIdx.x >> 5] = v;
    __syncthreads();
    v = warp_all(lane < kWarps ? buf[lane] : identity, op);
    phase ^= 1;
    return v;
  }
  __device__ __forceinline__ float max(float v) {
    return all(v, -__builtin_huge_valf(), [](float a, float b) { return fmaxf(a, b); });
  }
  __device__ __forceinline__ float sum(float v) {
    return all(v, 0.f, [](float a, float b) { return a + b; });
  }
  __device__ __forceinline__ u64 max(u64 v) {
    return all(v, 0ull, [](u64 a, u64 b) { return a > b ? a : b; });
  }
};

// Exclusive prefix sum over threads in thread order; *total gets the sum.
template <int NT>
__device__ __forceinline__ u64 block_exclusive_scan(u64 v, u64* total, u64 (&buf)[NT / 32]) {
  constexpr int kWarps = NT / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u64 inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 n = __shfl_up_sync(kFull, inc, o);
    if (lane >= o) inc += n;
  }
  __syncthreads();
  if (lane == 31) buf[warp] = inc;
  __syncthreads();
  u64 before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    const u64 s = buf[w];
    before += w < warp ? s : 0;
    all += s;
  }
  *total = all;
  return before + inc - v;
}

// *(hi:lo) += w, exactly: 64-bit shared atomics are CAS loops on sm_80/sm_90
// (and spin under contention), 32-bit adds are native. Each wrap of the low
// word is seen by exactly the adder that caused it, which carries it.
__device__ __forceinline__ void atomic_add_u64(u32* lo, u32* hi, u64 w) {
  const u32 l = u32(w), old = atomicAdd(lo, l);
  const u32 h = u32(w >> 32) + (old + l < old ? 1u : 0u);
  if (h) atomicAdd(hi, h);
}
__device__ __forceinline__ u64 join_u64(u32 lo, u32 hi) { return (u64(hi) << 32) | lo; }

}  // namespace braze::cuda::sampling
