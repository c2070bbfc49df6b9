// quantize of weights on CUDA through the same codecs as the CPU (slower is
// fine: weights are quantized once). One thread per block (per group, for MLX
// affine) encodes with Codec<F>::encode / mx_encode_block / nvfp4_encode_block
// / affine_encode_group; scales that span more than a block (nvfp4's tensor
// scale, fp8 per tensor or per 128 x 128 block) come from an amax pass first.
#pragma once
#include "core/quant/kquants_encode.h"
#include "cuda/quant/dequant.cuh"

namespace braze::cuda::quant {

struct QParams {
  const void* x;
  int64_t x_stride;  // elements
  uint8_t* data;
  int64_t data_stride;  // bytes
  void* scales;
  int64_t scales_stride;
  DType scales_dtype;
  void* biases;
  int64_t biases_stride;
  float* tensor_scale;
  int64_t group;
  int scale_rule;
  int64_t rows, cols;
};

constexpr int kQThreads = 64;  // encoders keep a block of floats and their scratch in local memory

template <class T, int N> __device__ __forceinline__ void load_block(const T* src, float* x) {
#pragma unroll 8
  for (int i = 0; i < N; ++i) x[i] = in_f32(src[i]);
}

// GGUF blocks (GGML, K-quants, i-quants): one thread per block.
template <QFormat F, class T> __global__ void __launch_bounds__(kQThreads) quantize_blocks_kernel(const QParams p) {
  constexpr int B = info(F).blocks.block, BB = info(F).blocks.block_bytes;
  const int64_t nb = p.cols / B, total = p.rows * nb;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / nb, b = i - r * nb;
    float x[B];
    load_block<T, B>(static_cast<const T*>(p.x) + r * p.x_stride + b * B, x);
    Codec<F>::encode(x, p.data + r * p.data_stride + b * BB);
  }
}

// MX: one thread per block of 32, its e8m0 scale by the rule.
template <Elem E, class T> __global__ void __launch_bounds__(kQThreads) quantize_mx_kernel(const QParams p) {
  const int64_t nb = p.cols / kMxBlock, total = p.rows * nb;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / nb, b = i - r * nb;
    float x[kMxBlock];
    load_block<T, kMxBlock>(static_cast<const T*>(p.x) + r * p.x_stride + b * kMxBlock, x);
    const uint32_t s = mx_encode_block<E>(x, ScaleRule(p.scale_rule), p.data + r * p.data_stride, b * kMxBlock);
    static_cast<uint8_t*>(p.scales)[r * p.scales_stride + b] = uint8_t(s);
  }
}

// amax bits (|x| as integers, NaN above every number) of the whole tensor
// into *amax (zeroed before): one atomicMax per warp.
template <class T> __global__ void amax_kernel(const QParams p, uint32_t* amax) {
  uint32_t m = 0;
  const int64_t total = p.rows * p.cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / p.cols, k = i - r * p.cols;
    const uint32_t a = abs_bits(in_f32(static_cast<const T*>(p.x)[r * p.x_stride + k]));
    m = a > m ? a : m;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint32_t w = __shfl_xor_sync(0xffffffffu, m, o);
    m = w > m ? w : m;
  }
  if ((threadIdx.x & 31) == 0) atomicMax(amax, m);
}

// The amax bits at *slot turned, in place, into the float scale they give.
template <int Kind> __global__ void amax_to_scale_kernel(float* slot) {
  const uint32_t a = *reinterpret_cast<uint32_t*>(slot);
  *slot = Kind == 0 ? nvfp4_tensor_scale(a) : Kind == 1 ? fp8_scale<Elem::e4m3>(a) : fp8_scale<Elem::e5m2>(a);
}

// nvfp4: one thread per block of 16 under the tensor scale *p.tensor_scale.
template <class T> __global__ void __launch_bounds__(kQThreads) quantize_nvfp4_kernel(const QParams p) {
  const float t = *p.tensor_scale;
  const int64_t nb = p.cols / kNvfp4Block, total = p.rows * nb;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / nb, b = i - r * nb;
    float x[kNvfp4Block];
    load_block<T, kNvfp4Block>(static_cast<const T*>(p.x) + r * p.x_stride + b * kNvfp4Block, x);
    const uint32_t s = nvfp4_encode_block(x, t, p.data + r * p.data_stride + b * (kNvfp4Block / 2));
    static_cast<uint8_t*>(p.scales)[r * p.scales_stride + b] = uint8_t(s);
  }
}

// fp8 per 128 x 128 block: one CTA per block computes its scale.
template <Elem E, class T> __global__ void __launch_bounds__(256) fp8_block_scale_kernel(const QParams p) {
  __shared__ uint32_t scratch[32];
  const int64_t kb = (p.cols + 127) / 128, rb = blockIdx.x / kb, cb = blockIdx.x - rb * kb;
  const int64_t r1 = min(p.rows, rb * 128 + 128), c1 = min(p.cols, cb * 128 + 128);
  uint32_t m = 0;
  for (int64_t r = rb * 128 + threadIdx.y; r < r1; r += blockDim.y)
    for (int64_t c = cb * 128 + threadIdx.x; c < c1; c += blockDim.x) {
      const uint32_t a = abs_bits(in_f32(static_cast<const T*>(p.x)[r * p.x_stride + c]));
      m = a > m ? a : m;
    }
  // block_max reduces over threadIdx.x-major warps: flatten the 2-D block
  const unsigned flat = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint32_t w = __shfl_xor_sync(0xffffffffu, m, o);
    m = w > m ? w : m;
  }
  if ((flat & 31) == 0) scratch[flat >> 5] = m;
  __syncthreads();
  if (flat == 0) {
    for (unsigned w = 1; w < (blockDim.x * blockDim.y) / 32; ++w) m = scratch[w] > m ? scratch[w] : m;
    static_cast<float*>(p.scales)[rb * p.scales_stride + cb] = fp8_scale<E>(m);
  }
}

// fp8 codes under a per-tensor or per-block scale already written: one thread per element.
template <Elem E, class T> __global__ void fp8_encode_kernel(const QParams p) {
  const float* sc = static_cast<const float*>(p.scales);
  const int64_t total = p.rows * p.cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / p.cols, k = i - r * p.cols;
    const float s = p.group == kFp8GroupTensor ? sc[0] : sc[r / 128 * p.scales_stride + k / 128];
    const float x = in_f32(static_cast<const T*>(p.x)[r * p.x_stride + k]);
    p.data[r * p.data_stride + k] = s == 0.f ? uint8_t(0) : uint8_t(encode_elem<E>(div_x86(x, s)));
  }
}

template <class T> __device__ __forceinline__ void store_scalar(void* p, DType t, int64_t i, float v) {
  if (t == DType::f32) static_cast<float*>(p)[i] = v;
  else if (t == DType::f16) static_cast<uint16_t*>(p)[i] = f32_to_f16(v);
  else static_cast<uint16_t*>(p)[i] = f32_to_bf16(v);
}

// MLX affine: one thread per group (32, 64 or 128 elements).
template <int Bits, class T> __global__ void __launch_bounds__(kQThreads) quantize_affine_kernel(const QParams p) {
  const int g = int(p.group);
  const int64_t ng = p.cols / g, total = p.rows * ng;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / ng, gi = i - r * ng;
    float x[128];
    const T* src = static_cast<const T*>(p.x) + r * p.x_stride + gi * g;
    for (int j = 0; j < g; ++j) x[j] = in_f32(src[j]);
    float s, b;
    affine_encode_group<Bits>(x, g, p.data + r * p.data_stride, gi * g, s, b);
    store_scalar<T>(p.scales, p.scales_dtype, r * p.scales_stride + gi, s);
    store_scalar<T>(p.biases, p.scales_dtype, r * p.biases_stride + gi, b);
  }
}

}  // namespace braze::cuda::quant
