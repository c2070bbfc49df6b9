// quantize_activations on CUDA, and the per-row scaled weights (fp8 per row,
// int8) that share its shape of work.
//   Per row (fp8_e4m3 / fp8_e5m2 / int8): one CTA per row; each thread holds up
//   to P packs of 8 elements in registers (the row is read from memory once for
//   rows up to P * 8 * 256 elements), a block-wide amax gives the scale, then
//   the held packs are encoded and stored (8 code bytes a store).
//   Per block (mxfp8_e4m3 / nvfp4): one thread per block of 32 / 16, its amax
//   and codes from registers.
// Codes are the CPU's bit for bit: the division x / s with x86's NaN rules,
// then encode_elem (sm_89+: the hardware's saturating round-to-nearest-even
// conversion, which gives the same codes for every non-NaN input; NaN is fixed
// up to the codec's code).
#pragma once
#include <cuda_fp8.h>

#include "core/quant/fp8.h"
#include "core/quant/int8.h"
#include "core/quant/mx.h"
#include "core/quant/nvfp4.h"
#include "cuda/quant/io.cuh"

namespace braze::cuda::quant {

using namespace braze::quant;

constexpr int kRowThreads = 256;
constexpr int kRowHeld = 4;  // packs of 8 a thread holds: rows up to 8192 elements are read once
// (at most 64 registers a thread, so that 4 CTAs of rows share an SM and keep its loads in flight)

enum class RowCode { e4m3, e5m2, int8 };

struct RowParams {
  const void* x;
  int64_t x_stride;  // elements
  uint8_t* q;
  int64_t q_stride;  // bytes
  void* sx;
  int64_t sx_stride;  // elements; per-row scales are a contiguous [rows] vector
  int64_t rows, cols;
};

// Codes of two values of element type E: the hardware's cvt.rn.satfinite
// where it exists (sm_89+), encode_elem otherwise; NaN as encode_elem has it.
template <Elem E> __device__ __forceinline__ uint32_t encode2(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  const __nv_fp8x2_storage_t h =
      __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, E == Elem::e4m3 ? __NV_E4M3 : __NV_E5M2);
  uint32_t lo = h & 0xffu, hi = (h >> 8) & 0xffu;
  constexpr uint32_t nan = ElemCode<E>::nan_code;
  if (a != a) lo = ((__float_as_uint(a) >> 31) << 7) | nan;
  if (b != b) hi = ((__float_as_uint(b) >> 31) << 7) | nan;
  return lo | (hi << 8);
#else
  return encode_elem<E>(a) | (encode_elem<E>(b) << 8);
#endif
}

template <RowCode C> __device__ __forceinline__ float row_scale(uint32_t amax) {
  if constexpr (C == RowCode::e4m3) return fp8_scale<Elem::e4m3>(amax);
  else if constexpr (C == RowCode::e5m2) return fp8_scale<Elem::e5m2>(amax);
  else return int8_scale(amax);
}

// The codes of 8 values under scale s, packed little-endian in a uint2.
template <RowCode C> __device__ __forceinline__ uint2 encode8(const float* v, float s) {
  uint32_t w[2] = {0u, 0u};
  if (s != 0.f) {
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      uint32_t c;
      if constexpr (C == RowCode::int8) {
        c = uint32_t(uint8_t(int8_encode(v[j], s))) | (uint32_t(uint8_t(int8_encode(v[j + 1], s))) << 8);
      } else {
        constexpr Elem E = C == RowCode::e4m3 ? Elem::e4m3 : Elem::e5m2;
        c = encode2<E>(div_x86(v[j], s), div_x86(v[j + 1], s));
      }
      w[j >> 2] |= c << ((j & 3) * 8);
    }
  }
  return make_uint2(w[0], w[1]);
}

// Elements of pack pk (8 wide) inside a row of cols.
__device__ __forceinline__ int left8(int64_t cols, int64_t pk) {
  const int64_t n = cols - pk * 8;
  return n < 8 ? int(n) : 8;
}

template <bool Vec> __device__ __forceinline__ void store_codes8(uint8_t* dst, uint2 c, int n) {
  if (Vec && n == 8) {
    *reinterpret_cast<uint2*>(dst) = c;
  } else {
    const uint64_t u = uint64_t(c.x) | (uint64_t(c.y) << 32);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < n) dst[j] = uint8_t(u >> (8 * j));
  }
}

// Vec: x's rows 16-byte aligned, q's 8-byte aligned.
template <RowCode C, class T, bool Vec> __global__ void __launch_bounds__(kRowThreads, 4) row_quant_kernel(const RowParams p) {
  __shared__ uint32_t scratch[32];
  const int64_t npk = (p.cols + 7) / 8;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T* src = static_cast<const T*>(p.x) + r * p.x_stride;
    float v[kRowHeld][8];
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < kRowHeld; ++i) {
      const int64_t pk = threadIdx.x + int64_t(i) * blockDim.x;
      if (pk < npk) {
        load_n<T, 8, Vec>(src + pk * 8, v[i], left8(p.cols, pk));
#pragma unroll
        for (int j = 0; j < 8; ++j) m = max(m, abs_bits(v[i][j]));
      }
    }
    for (int64_t pk = threadIdx.x + int64_t(kRowHeld) * blockDim.x; pk < npk; pk += blockDim.x) {
      float w[8];
      load_n<T, 8, Vec>(src + pk * 8, w, left8(p.cols, pk));
#pragma unroll
      for (int j = 0; j < 8; ++j) m = max(m, abs_bits(w[j]));
    }
    m = block_max(m, scratch);
    const float s = row_scale<C>(m);
    if (threadIdx.x == 0) static_cast<float*>(p.sx)[r] = s;
    uint8_t* dst = p.q + r * p.q_stride;
#pragma unroll
    for (int i = 0; i < kRowHeld; ++i) {
      const int64_t pk = threadIdx.x + int64_t(i) * blockDim.x;
      if (pk < npk) store_codes8<Vec>(dst + pk * 8, encode8<C>(v[i], s), left8(p.cols, pk));
    }
    for (int64_t pk = threadIdx.x + int64_t(kRowHeld) * blockDim.x; pk < npk; pk += blockDim.x) {
      float w[8];  // read again: from L2, the row just went through it
      const int n = left8(p.cols, pk);
      load_n<T, 8, Vec>(src + pk * 8, w, n);
      store_codes8<Vec>(dst + pk * 8, encode8<C>(w, s), n);
    }
  }
}

// mxfp8_e4m3 activations: one thread per block of 32 (floor rule). Vec: x's
// rows 16-byte aligned, q's 16-byte aligned.
template <class T, bool Vec> __global__ void __launch_bounds__(kRowThreads) act_mxfp8_kernel(const RowParams p) {
  const int64_t nb = p.cols / kMxBlock, total = p.rows * nb;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / nb, b = i - r * nb;
    float x[kMxBlock];
    load_n<T, kMxBlock, Vec>(static_cast<const T*>(p.x) + r * p.x_stride + b * kMxBlock, x, kMxBlock);
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < kMxBlock; ++j) m = max(m, abs_bits(x[j]));
    const uint32_t s = mx_scale_code<Elem::e4m3>(m, ScaleRule::floor);
    const float inv = s == 0xffu ? 0.f : e8m0_inverse(s);
    uint32_t w[8];
#pragma unroll
    for (int j = 0; j < kMxBlock; j += 4) {
      const uint32_t lo = encode2<Elem::e4m3>(x[j] * inv, x[j + 1] * inv);
      const uint32_t hi = encode2<Elem::e4m3>(x[j + 2] * inv, x[j + 3] * inv);
      w[j >> 2] = s == 0xffu ? 0u : lo | (hi << 16);
    }
    uint8_t* dst = p.q + r * p.q_stride + b * kMxBlock;
    if (Vec) {
      reinterpret_cast<uint4*>(dst)[0] = make_uint4(w[0], w[1], w[2], w[3]);
      reinterpret_cast<uint4*>(dst)[1] = make_uint4(w[4], w[5], w[6], w[7]);
    } else {
#pragma unroll
      for (int j = 0; j < kMxBlock; ++j) dst[j] = uint8_t(w[j >> 2] >> ((j & 3) * 8));
    }
    static_cast<uint8_t*>(p.sx)[r * p.sx_stride + b] = uint8_t(s);
  }
}

// nvfp4 activations: one thread per block of 16, tensor scale 1 (nvfp4_encode_block's arithmetic).
template <class T, bool Vec> __global__ void __launch_bounds__(kRowThreads) act_nvfp4_kernel(const RowParams p) {
  const int64_t nb = p.cols / kNvfp4Block, total = p.rows * nb;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / nb, b = i - r * nb;
    float x[kNvfp4Block];
    load_n<T, kNvfp4Block, Vec>(static_cast<const T*>(p.x) + r * p.x_stride + b * kNvfp4Block, x, kNvfp4Block);
    union {
      uint8_t b[8];
      uint2 w;
    } c;
    const uint32_t s = nvfp4_encode_block(x, 1.f, c.b);
    uint8_t* dst = p.q + r * p.q_stride + b * (kNvfp4Block / 2);
    if (Vec) {
      *reinterpret_cast<uint2*>(dst) = c.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) dst[j] = c.b[j];
    }
    static_cast<uint8_t*>(p.sx)[r * p.sx_stride + b] = uint8_t(s);
  }
}

}  // namespace braze::cuda::quant
