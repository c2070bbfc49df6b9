// Loads and stores of the quant kernels: floats in and out of the three
// element types with the CPU backend's exact bits (NaN payloads included), the
// staging of a tile of packed bytes in shared memory, and a block-wide max.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "cuda/common/cp_async.cuh"

namespace braze::cuda::quant {

__device__ __forceinline__ float in_f32(float v) { return v; }
__device__ __forceinline__ float in_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float in_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

// One rounding to nearest even; a NaN keeps its sign and top payload bits as
// the CPU's conversions (F16C, and the bf16 bit trick of cpu/simd.h) keep them.
template <class T> __device__ __forceinline__ T out_of(float v);
template <> __device__ __forceinline__ float out_of<float>(float v) { return v; }
template <> __device__ __forceinline__ __half out_of<__half>(float v) {
  if (v == v) return __float2half_rn(v);
  const uint32_t u = __float_as_uint(v);
  return __ushort_as_half(uint16_t(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu)));
}
template <> __device__ __forceinline__ __nv_bfloat16 out_of<__nv_bfloat16>(float v) {
  if (v == v) return __float2bfloat16_rn(v);
  return __ushort_as_bfloat16(uint16_t((__float_as_uint(v) >> 16) | 0x40u));
}

// n (<= N) floats to dst as T; vec: dst is 16-byte aligned (N * sizeof(T) a multiple of 16).
template <class T, int N> __device__ __forceinline__ void store_n(T* dst, const float* v, int n, bool vec) {
  if (vec && n == N) {
    constexpr int kWords = N * int(sizeof(T)) / 16;
    static_assert(kWords * 16 == N * int(sizeof(T)), "whole 16-byte vectors");
    union {
      T e[N];
      uint4 w[kWords];
    } u;
#pragma unroll
    for (int i = 0; i < N; ++i) u.e[i] = out_of<T>(v[i]);
#pragma unroll
    for (int i = 0; i < kWords; ++i) reinterpret_cast<uint4*>(dst)[i] = u.w[i];
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (i < n) dst[i] = out_of<T>(v[i]);
  }
}

// store_n for values that a GPU multiply or add produced: any NaN among them is
// the canonical one, which out_of and the hardware's paired conversions
// (cvt.rn.{bf16x2,f16x2}.f32) both turn into 0x7fff, so the pairs give store_n's
// bits with half the conversions and no NaN test.
template <class T, int N> __device__ __forceinline__ void store_arith_n(T* dst, const float* v, int n, bool vec) {
  if constexpr (sizeof(T) == 2) {
    if (vec && n == N) {
      static_assert(N % 8 == 0, "whole 16-byte vectors");
      union {
        uint32_t pair[N / 2];
        uint4 w[N / 8];
      } u;
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        if constexpr (std::is_same_v<T, __half>) {
          const __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
          u.pair[i] = *reinterpret_cast<const uint32_t*>(&h);
        } else {
          const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
          u.pair[i] = *reinterpret_cast<const uint32_t*>(&b);
        }
      }
#pragma unroll
      for (int i = 0; i < N / 8; ++i) reinterpret_cast<uint4*>(dst)[i] = u.w[i];
      return;
    }
  }
  store_n<T, N>(dst, v, n, vec);
}

// n (<= N) elements of src as floats (the rest 0); Vec: src is 16-byte aligned.
template <class T, int N, bool Vec> __device__ __forceinline__ void load_n(const T* src, float* v, int n) {
  if (Vec && n == N) {
    constexpr int kWords = N * int(sizeof(T)) / 16;
    static_assert(kWords * 16 == N * int(sizeof(T)), "whole 16-byte vectors");
    union {
      T e[N];
      uint4 w[kWords];
    } u;
#pragma unroll
    for (int i = 0; i < kWords; ++i) u.w[i] = __ldg(reinterpret_cast<const uint4*>(src) + i);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = in_f32(u.e[i]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = i < n ? in_f32(src[i]) : 0.f;
  }
}

// x / s with x86's NaN rules, which the CPU kernels follow and the encoders
// see through a NaN's sign: a NaN operand comes back (x's first), and an
// invalid operation (inf / inf, 0 / 0) gives the negative default NaN, where
// CUDA's division returns a positive canonical NaN.
__device__ __forceinline__ float div_x86(float x, float s) {
  const float y = x / s;
  if (y == y) return y;
  return x != x ? x : s != s ? s : __uint_as_float(0xffc00000u);
}

// The maximum of every thread's v, returned to every thread (blockDim.x a multiple of 32, <= 1024).
__device__ __forceinline__ uint32_t block_max(uint32_t v, uint32_t* scratch /* [32] shared */) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint32_t w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? scratch[lane] : 0u;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint32_t w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  __syncthreads();  // scratch may be reused by the caller's next reduction
  return v;
}

// Threads t (of nt) copy n bytes of global src to shared dst (16-byte
// aligned) with cp.async: 16-byte pieces where src is 16-byte aligned, 4-byte
// ones where 4-byte aligned, the rest with plain loads (visible after the
// caller's cp_async_wait and __syncthreads).
__device__ __forceinline__ void stage_async(uint8_t* dst, const uint8_t* src, int n, int t, int nt) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(src);
  int done = 0;
  if ((a & 15u) == 0) {
    const int nv = n >> 4;
    for (int i = t; i < nv; i += nt) cp_async16(dst + 16 * i, src + 16 * i);
    done = nv << 4;
  } else if ((a & 3u) == 0) {
    const int nv = n >> 2;
    for (int i = t; i < nv; i += nt) cp_async4(dst + 4 * i, src + 4 * i);
    done = nv << 2;
  }
  for (int i = done + t; i < n; i += nt) dst[i] = __ldg(src + i);
}

}  // namespace braze::cuda::quant
