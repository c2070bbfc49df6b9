// W8A8 matmul on CUDA: out[m, n] = x_scale[m] * w_scale[n] * sum_k xq[m, k] wq[n, k]
// (+ bias[n]), x and W 8-bit codes (csrc/core/quant_w8a8.h). Kinds:
//   kW8A8Int8: int8 x int8, exact int32 sums (dp4a in the GEMV, mma s8.s8.s32 in the GEMM);
//   kW8A8E4M3 / kW8A8E4M3E5M2: e4m3 x with e4m3 / e5m2 W, f32 sums (each product of two
//   fp8 values is exact in f32; the GEMM's mma .e4m3 / .e5m2 needs sm_89+).
// Epilogue as every backend's: fma(float(acc), x_scale * w_scale, bias or 0), one
// rounding to T (NaN as io.cuh's out_of).
//
// GEMV (1-16 rows of x; launched by csrc/cuda/quant_w8a8.cu): one warp per W row, 4
// warps a block; with Vec (rows 16-byte aligned, K % 16 == 0) each lane streams 16
// bytes of W a step (__ldcs: W is read once) against the same 16 bytes of every x
// row, then a warp reduction per x row in a fixed order. grid.y takes slabs of 16 x
// rows: the CUDA-core path of fp8 on GPUs without fp8 mma (sm_80 .. sm_88).
// GEMM (more rows): a 64 x 64 tile of out per block of 4 warps (2 x 2, each 32 x 32 =
// 2 m16 x 4 n8 mma.m16n8k32 tiles); K in steps of 64 bytes staged in shared memory
// (x rows and W rows, both k-contiguous: A row-major, B "col"), double-buffered by
// cp.async when Vec, rows padded to 80 bytes (16-byte aligned; the 32-bit fragment
// loads of a warp hit 32 different banks). fp8: the tensor cores' accumulation is
// narrower than f32 on Hopper (DeepSeek-V3 measured ~14 bits), so each 64-element K
// step is summed by mma into zeroed registers and added to f32 accumulators on the
// CUDA cores (DeepSeek-V3's promotion, at a 64 interval).
#pragma once
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/common/cp_async.cuh"
#include "cuda/quant/io.cuh"

namespace braze::cuda::quant {

enum W8A8Kind : int { kW8A8Int8 = 0, kW8A8E4M3 = 1, kW8A8E4M3E5M2 = 2 };

struct W8A8Params {
  const uint8_t* x;
  int64_t x_stride;  // bytes
  const float* x_scale;
  const uint8_t* w;
  int64_t w_stride;  // bytes
  const float* w_scale;
  int w_per_row;     // 0: one scale for the tensor
  const void* bias;  // [n] of T, or null
  void* out;
  int64_t out_stride;  // elements
  int64_t m, n, k;
};

constexpr int kW8A8GemvWarps = 4, kW8A8GemvRows = 16;
constexpr int kW8A8BM = 64, kW8A8BN = 64, kW8A8BK = 64, kW8A8Threads = 128;
constexpr int kW8A8Ld = kW8A8BK + 16;  // bytes between staged rows

template <int Kind> struct W8A8Acc { using type = float; };
template <> struct W8A8Acc<kW8A8Int8> { using type = int; };

__device__ __forceinline__ float w8a8_float(int v) { return __int2float_rn(v); }
__device__ __forceinline__ float w8a8_float(float v) { return v; }

template <class T, class A>
__device__ __forceinline__ void w8a8_store(const W8A8Params& p, int64_t row, int64_t col, A acc) {
  const float ws = p.w_per_row ? p.w_scale[col] : p.w_scale[0];
  const float b = p.bias ? in_f32(static_cast<const T*>(p.bias)[col]) : 0.0f;
  const float v = __fmaf_rn(w8a8_float(acc), __fmul_rn(p.x_scale[row], ws), b);
  static_cast<T*>(p.out)[row * p.out_stride + col] = out_of<T>(v);
}

// Two fp8 codes (low byte first) as f32, through the exact fp8x2 -> f16x2 conversion.
template <bool E5M2> __device__ __forceinline__ float2 w8a8_fp8x2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu),
                                                   E5M2 ? __NV_E5M2 : __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// acc += the dot of 4 codes of x (word xw) and of W (word ww), in element order.
template <int Kind> __device__ __forceinline__ void w8a8_dot4(uint32_t xw, uint32_t ww, int& acc) {
  acc = __dp4a(int(xw), int(ww), acc);
}
template <int Kind> __device__ __forceinline__ void w8a8_dot4(uint32_t xw, uint32_t ww, float& acc) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float2 xv = w8a8_fp8x2<false>(xw >> (16 * h));
    const float2 wv = w8a8_fp8x2<Kind == kW8A8E4M3E5M2>(ww >> (16 * h));
    acc = __fmaf_rn(xv.x, wv.x, acc);  // exact products: the fma rounds the sum only
    acc = __fmaf_rn(xv.y, wv.y, acc);
  }
}

template <class A> __device__ __forceinline__ A w8a8_warp_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int Kind, class T, int MT, bool Vec>
__global__ void __launch_bounds__(32 * kW8A8GemvWarps) w8a8_gemv_kernel(W8A8Params p) {
  using A = typename W8A8Acc<Kind>::type;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kW8A8GemvWarps + warp, m0 = int64_t(blockIdx.y) * MT;
  if (n >= p.n) return;  // the whole warp
  const int rows = int(min(int64_t(MT), p.m - m0));
  const uint8_t* wr = p.w + n * p.w_stride;
  const uint8_t* xr = p.x + m0 * p.x_stride;
  A acc[MT];
#pragma unroll
  for (int i = 0; i < MT; ++i) acc[i] = A(0);
  if constexpr (Vec) {
    for (int64_t k = int64_t(lane) * 16; k < p.k; k += 32 * 16) {
      const uint4 wv = __ldcs(reinterpret_cast<const uint4*>(wr + k));
      if constexpr (Kind == kW8A8Int8) {
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          if (i >= rows) break;
          const uint4 xv = __ldg(reinterpret_cast<const uint4*>(xr + i * p.x_stride + k));
          w8a8_dot4<Kind>(xv.x, wv.x, acc[i]);
          w8a8_dot4<Kind>(xv.y, wv.y, acc[i]);
          w8a8_dot4<Kind>(xv.z, wv.z, acc[i]);
          w8a8_dot4<Kind>(xv.w, wv.w, acc[i]);
        }
      } else {  // W's 16 codes decoded once, for every x row
        const uint32_t ww[4] = {wv.x, wv.y, wv.z, wv.w};
        float2 wf[8];
#pragma unroll
        for (int h = 0; h < 8; ++h) wf[h] = w8a8_fp8x2<Kind == kW8A8E4M3E5M2>(ww[h / 2] >> (16 * (h % 2)));
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          if (i >= rows) break;
          const uint4 xv = __ldg(reinterpret_cast<const uint4*>(xr + i * p.x_stride + k));
          const uint32_t xw[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
          for (int h = 0; h < 8; ++h) {  // element order, as w8a8_dot4
            const float2 xf = w8a8_fp8x2<false>(xw[h / 2] >> (16 * (h % 2)));
            acc[i] = __fmaf_rn(xf.x, wf[h].x, acc[i]);
            acc[i] = __fmaf_rn(xf.y, wf[h].y, acc[i]);
          }
        }
      }
    }
  } else {
    for (int64_t k = lane; k < p.k; k += 32) {
      const uint32_t wc = wr[k];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        if (i >= rows) break;
        const uint32_t xc = xr[i * p.x_stride + k];
        if constexpr (Kind == kW8A8Int8) {
          acc[i] += int(int8_t(xc)) * int(int8_t(wc));
        } else {
          const float xv = w8a8_fp8x2<false>(xc).x, wv = w8a8_fp8x2<Kind == kW8A8E4M3E5M2>(wc).x;
          acc[i] = __fmaf_rn(xv, wv, acc[i]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    if (i >= rows) break;  // uniform over the warp
    const A s = w8a8_warp_sum(acc[i]);
    if (lane == i) w8a8_store<T>(p, m0 + i, n, s);
  }
}

// ------------------------------------------------------------ GEMM
__device__ __forceinline__ uint32_t w8a8_ld32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// 16 staged bytes of row `off` (bytes; -1: past the last row) from column k: zeros past K or the rows.
template <bool Vec>
__device__ __forceinline__ void w8a8_stage16(uint8_t* dst, const uint8_t* base, int64_t off, int64_t k, int64_t K) {
  if (off < 0 || k >= K) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
  } else if constexpr (Vec) {  // K % 16 == 0: the chunk is whole
    cp_async16(dst, base + off + k);
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j) dst[j] = k + j < K ? base[off + k + j] : uint8_t(0);
  }
}

template <int Kind> __device__ __forceinline__ void w8a8_mma(int (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <int Kind>
__device__ __forceinline__ void w8a8_mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (Kind == kW8A8E4M3) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  __trap();  // no fp8 mma before sm_89: the launcher takes the GEMV path there
#endif
}

template <int Kind, class T, bool Vec>
__global__ void __launch_bounds__(kW8A8Threads) w8a8_gemm_kernel(W8A8Params p) {
  using A = typename W8A8Acc<Kind>::type;
  constexpr bool kFp8 = Kind != kW8A8Int8;
  __shared__ __align__(16) uint8_t xs[2][kW8A8BM * kW8A8Ld];
  __shared__ __align__(16) uint8_t ws[2][kW8A8BN * kW8A8Ld];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int64_t m0 = int64_t(blockIdx.y) * kW8A8BM, n0 = int64_t(blockIdx.x) * kW8A8BN;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  A acc[2][4][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mi][ni][i] = A(0);
  const int64_t ktiles = (p.k + kW8A8BK - 1) / kW8A8BK;
  auto stage = [&](int buf, int64_t k0) {  // 64 rows x 4 chunks of 16 bytes, of x and of W
#pragma unroll
    for (int c = tid; c < kW8A8BM * 4; c += kW8A8Threads) {
      const int r = c >> 2, q = (c & 3) * 16;
      w8a8_stage16<Vec>(&xs[buf][r * kW8A8Ld + q], p.x, m0 + r < p.m ? (m0 + r) * p.x_stride : -1, k0 + q, p.k);
      w8a8_stage16<Vec>(&ws[buf][r * kW8A8Ld + q], p.w, n0 + r < p.n ? (n0 + r) * p.w_stride : -1, k0 + q, p.k);
    }
  };
  if (ktiles > 0) stage(0, 0);
  cp_async_commit();
  for (int64_t kt = 0; kt < ktiles; ++kt) {
    if (kt + 1 < ktiles) stage(int((kt + 1) & 1), (kt + 1) * kW8A8BK);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const uint8_t* xa = xs[kt & 1];
    const uint8_t* wb = ws[kt & 1];
    A part[2][4][4];  // fp8: this step's sums, promoted to acc below; int8: acc itself
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i) part[mi][ni][i] = kFp8 ? A(0) : acc[mi][ni][i];
#pragma unroll
    for (int ks = 0; ks < kW8A8BK; ks += 32) {
      uint32_t a[2][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const uint8_t* r0 = xa + (wm + mi * 16 + g) * kW8A8Ld + ks + t * 4;
        a[mi][0] = w8a8_ld32(r0);
        a[mi][1] = w8a8_ld32(r0 + 8 * kW8A8Ld);
        a[mi][2] = w8a8_ld32(r0 + 16);
        a[mi][3] = w8a8_ld32(r0 + 8 * kW8A8Ld + 16);
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const uint8_t* c0 = wb + (wn + ni * 8 + g) * kW8A8Ld + ks + t * 4;
        b[ni][0] = w8a8_ld32(c0);
        b[ni][1] = w8a8_ld32(c0 + 16);
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) w8a8_mma<Kind>(part[mi][ni], a[mi], b[ni]);
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mi][ni][i] = kFp8 ? acc[mi][ni][i] + part[mi][ni][i] : part[mi][ni][i];
    __syncthreads();
  }
  cp_async_wait<0>();
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = m0 + wm + mi * 16 + g + (i >= 2 ? 8 : 0), col = n0 + wn + ni * 8 + t * 2 + (i & 1);
        if (row < p.m && col < p.n) w8a8_store<T>(p, row, col, acc[mi][ni][i]);
      }
}

}  // namespace braze::cuda::quant
