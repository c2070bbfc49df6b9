// Element types of the CUDA kernels and their conversions to and from f32
// (all math is f32; one rounding, to nearest even, on the way out).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace braze::cuda {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// v rounded to T and back: what a value looks like once stored as T.
template <class T> __device__ __forceinline__ float round_to(float v) { return to_f32(from_f32<T>(v)); }

}  // namespace braze::cuda
