// Block-wide pieces of the sampling kernels (one block of kThreads per row):
// max / sum / (value, index) reductions, an exclusive scan of uint64, and the
// order-preserving float keys the radix select works on.
#pragma once
#include <cstdint>

namespace braze::cuda::sampling {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

struct Shared {
  float f[kWarps];
  int i[kWarps];
  unsigned long long u[kWarps];
};

__device__ __forceinline__ float block_max(float v, Shared& sh) {
  for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.f[threadIdx.x >> 5] = v;
  __syncthreads();
  v = sh.f[0];
  for (int w = 1; w < kWarps; ++w) v = fmaxf(v, sh.f[w]);
  return v;
}

__device__ __forceinline__ float block_sum(float v, Shared& sh) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.f[threadIdx.x >> 5] = v;
  __syncthreads();
  v = 0.f;
  for (int w = 0; w < kWarps; ++w) v += sh.f[w];  // same order in every thread
  return v;
}

__device__ __forceinline__ bool block_any(bool b) { return __syncthreads_or(b) != 0; }

// The smallest index among the threads' candidates (INT64_MAX = none).
__device__ __forceinline__ long long block_min_index(long long v, Shared& sh) {
  for (int o = 16; o; o >>= 1) v = min(v, (long long)__shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.u[threadIdx.x >> 5] = (unsigned long long)v;
  __syncthreads();
  v = (long long)sh.u[0];
  for (int w = 1; w < kWarps; ++w) v = min(v, (long long)sh.u[w]);
  return v;
}

// Exclusive prefix sum over threads in thread order; *total gets the sum.
__device__ __forceinline__ unsigned long long block_exclusive_scan(unsigned long long v, unsigned long long* total,
                                                                   Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned long long inc = v;
  for (int o = 1; o < 32; o <<= 1) {
    unsigned long long n = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += n;
  }
  __syncthreads();
  if (lane == 31) sh.u[warp] = inc;
  __syncthreads();
  unsigned long long before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += sh.u[w];
    all += sh.u[w];
  }
  *total = all;
  return before + inc - v;
}

// Order-preserving float -> uint32 (-0.0 and +0.0 share a key), as on the CPU.
__device__ __forceinline__ uint32_t key_of(float f) {
  uint32_t u = __float_as_uint(f);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float float_of(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

}  // namespace braze::cuda::sampling
