// quantize_activations on CUDA, and the per-row scaled weights (fp8 per row,
// int8) that share its shape of work.
//   Per row (fp8_e4m3 / fp8_e5m2 / int8), bf16 / f16 rows of whole 16-byte
//   vectors (row_held_kernel): a persistent CTA holds a row as raw bits, loads
//   the next row before reducing and encoding this one, and divides by the
//   row's scale as a reciprocal and one exact correction (div_fast). Otherwise
//   (f32, unaligned, odd widths; row_quant_kernel): one CTA per row; each
//   thread holds up to P packs of 8 elements as f32 (the row is read from
//   memory once for rows up to P * 8 * 256 elements), a block-wide amax gives
//   the scale, then the held packs are encoded and stored (8 code bytes a store).
//   Per block (mxfp8_e4m3 / nvfp4): one thread per block of 32 / 16, its amax
//   and codes from registers.
// Codes are the CPU's bit for bit: the division x / s with x86's NaN rules,
// then encode_elem (sm_89+: the hardware's saturating round-to-nearest-even
// conversion, which gives the same codes for every non-NaN input; NaN is fixed
// up to the codec's code).
#pragma once
#include <cuda_fp8.h>

#include <type_traits>

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

// Rows whose scale s has its exponent field in [67, 252) (2^-60 <= s < 2^125):
// 1 / s is a normal float, and for every finite x with |x / s| >= 2^-20 the
// residual below is exact, so div_fast's result depends on the significands of
// x and s alone (and their exponent difference); main() checks it equals x / s
// for all of those (bf16 and f16 x, every s). Where |x / s| < 2^-20 its result
// keeps x's sign and stays below 2^-19, which every code (e4m3, e5m2, int8)
// sends to a signed zero as it does x / s. Rows with inf / NaN / 0 or extreme
// scales take the library's division.
__device__ __forceinline__ bool scale_fast(float s) { return (__float_as_uint(s) >> 23) - 67u < 185u; }

// x / s, given r = 1 / s rounded to nearest: q0 = x r, then one correction by
// the exact residual q0 s - x. The residual's sign arrangement keeps -0 (x = -0
// gives q0 = -0, e = +0, -e r + q0 = -0).
__device__ __forceinline__ float div_fast(float x, float s, float r) {
  const float q0 = __fmul_rn(x, r);
  const float e = __fmaf_rn(q0, s, -x);
  return __fmaf_rn(-e, r, q0);
}

// Two elements of a 32-bit word of T (2 bytes) as floats, exactly as in_f32.
template <class T> __device__ __forceinline__ float2 unpack2(uint32_t w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  } else {
    return make_float2(__half2float(__ushort_as_half(uint16_t(w))), __half2float(__ushort_as_half(uint16_t(w >> 16))));
  }
}

// Running amax (abs_bits of in_f32) over a 16-byte vector of T. bf16: in its
// own bits (x's f32 bits are its bits << 16, so the order is the same); f16:
// through the floats, as the library has it (NaN payloads ordered alike).
template <class T> struct Amax {
  uint32_t lo = 0, hi = 0;
  __device__ __forceinline__ void add(uint4 w) {
    const uint32_t a[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        lo = max(lo, a[j] & 0x7fffu);
        hi = max(hi, a[j] & 0x7fff0000u);
      } else {
        const float2 f = unpack2<T>(a[j]);
        lo = max(lo, abs_bits(f.x));
        hi = max(hi, abs_bits(f.y));
      }
    }
  }
  // The f32 abs bits of the max.
  __device__ __forceinline__ uint32_t bits() const {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return max(lo << 16, hi);
    else return max(lo, hi);
  }
};

// Codes of two finite values: the hardware conversion (no NaN fix-up), encode_elem before sm_89.
template <Elem E> __device__ __forceinline__ uint32_t encode2_finite(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, E == Elem::e4m3 ? __NV_E4M3 : __NV_E5M2);
#else
  return encode_elem<E>(a) | (encode_elem<E>(b) << 8);
#endif
}

// int8_encode of a finite quotient: clamp to +-127, round half to even.
__device__ __forceinline__ uint32_t int8_code(float q) {
  const float c = fminf(fmaxf(q, -127.f), 127.f);
  return uint32_t(__float2int_rn(c)) & 0xffu;
}

// 8 codes of a 16-byte vector of T, s in the fast range (r = 1 / s).
template <RowCode C, class T> __device__ __forceinline__ uint2 encode8_fast(uint4 w, float s, float r) {
  const uint32_t a[4] = {w.x, w.y, w.z, w.w};
  uint32_t c[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = unpack2<T>(a[j]);
    const float q0 = div_fast(f.x, s, r), q1 = div_fast(f.y, s, r);
    if constexpr (C == RowCode::int8) c[j] = int8_code(q0) | (int8_code(q1) << 8);
    else c[j] = encode2_finite<C == RowCode::e4m3 ? Elem::e4m3 : Elem::e5m2>(q0, q1);
  }
  return make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
}

// Any s: the library's encode8 (div_x86, NaN rules).
template <RowCode C, class T> __device__ __forceinline__ uint2 encode8_any(uint4 w, float s) {
  const uint32_t a[4] = {w.x, w.y, w.z, w.w};
  float f[8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 t = unpack2<T>(a[j]);
    f[2 * j] = t.x;
    f[2 * j + 1] = t.y;
  }
  return encode8<C>(f, s);
}

// Per row, 2-byte T (bf16 / f16): one row per CTA pass; thread t holds vectors
// t + i NT (i < H) of 8 elements as raw bits (4 registers each, half the f32
// form's). Pipe: the next row's vectors are loaded before this row's reduce and
// encode, on a persistent grid, so each CTA has a row's loads in flight while
// it encodes (2H vectors held). Needs cols % 8 == 0, x's rows 16-byte aligned,
// q's 8; vectors past NT H are read again for the encode (from L2).
template <RowCode C, class T, int NT, int H, bool Pipe, int MinB>
__global__ void __launch_bounds__(NT, MinB) row_held_kernel(const RowParams p) {
  static_assert(sizeof(T) == 2, "2-byte elements");
  __shared__ uint32_t scratch[32];
  const int nv = int(p.cols >> 3);
  const int t = int(threadIdx.x);
  uint4 cur[H], nxt[H];
  auto load = [&](int64_t row, uint4(&b)[H]) {
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const T*>(p.x) + row * p.x_stride);
#pragma unroll
    for (int i = 0; i < H; ++i) b[i] = t + i * NT < nv ? __ldg(src + t + i * NT) : make_uint4(0u, 0u, 0u, 0u);
  };
  int64_t r = blockIdx.x;
  if (Pipe && r < p.rows) load(r, cur);
  for (; r < p.rows; r += gridDim.x) {
    if constexpr (Pipe) {
      const int64_t rn = r + gridDim.x;
      if (rn < p.rows) load(rn, nxt);
    } else {
      load(r, cur);
    }
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const T*>(p.x) + r * p.x_stride);
    Amax<T> am;
#pragma unroll
    for (int i = 0; i < H; ++i) am.add(cur[i]);
    for (int k = t + H * NT; k < nv; k += NT) am.add(__ldg(src + k));
    const uint32_t m = block_max(am.bits(), scratch);
    const float s = row_scale<C>(m);
    if (t == 0) static_cast<float*>(p.sx)[r] = s;
    uint2* dst = reinterpret_cast<uint2*>(p.q + r * p.q_stride);
    if (scale_fast(s)) {
      const float rc = __frcp_rn(s);
#pragma unroll
      for (int i = 0; i < H; ++i)
        if (t + i * NT < nv) dst[t + i * NT] = encode8_fast<C, T>(cur[i], s, rc);
      for (int k = t + H * NT; k < nv; k += NT) dst[k] = encode8_fast<C, T>(__ldg(src + k), s, rc);
    } else {
#pragma unroll
      for (int i = 0; i < H; ++i)
        if (t + i * NT < nv) dst[t + i * NT] = encode8_any<C, T>(cur[i], s);
      for (int k = t + H * NT; k < nv; k += NT) dst[k] = encode8_any<C, T>(__ldg(src + k), s);
    }
    if constexpr (Pipe) {
#pragma unroll
      for (int i = 0; i < H; ++i) cur[i] = nxt[i];
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
