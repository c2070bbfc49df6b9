// out[m, n] = row_scale[m] col_scale[n] sum_k x[m, k] W[n, k] (+ bias[n]) on Hopper's
// warpgroup MMA, for many rows of x (prefill): x and W both K-major (rows of K
// elements) of one operand type (bf16, f16, fp8 e4m3 / e5m2), f32 accumulators.
//
// A CTA of 3 warpgroups computes a 128 x 256 tile of out:
//   warpgroup 0, the producer: one thread issues the copy engine's 2-D tensor
//     copies of x's 128 x 128-byte and W's 256 x 128-byte slabs (128-byte
//     swizzle; rows and columns past the tensor read as 0) into a ring of
//     kTc90Stages stages, each completing on its "full" mbarrier, and waits on
//     a stage's "empty" mbarrier before refilling it;
//   warpgroups 1 and 2, the consumers: each multiplies its 64 rows of the x
//     slab by all 256 rows of the W slab (4 wgmma m64n256 a stage, 32 bytes of
//     K each), keeps one stage of them in flight and frees the stage before;
//     then scales, adds the bias and writes its 64 x 256 outputs.
// setmaxnreg moves registers from the producer (40) to the consumers (232:
// 128 f32 accumulators each). Shared memory: 4 stages of 48 KB.
// Host requirements (checked by the launcher): sm_90, x / W 16-byte aligned
// with row strides a multiple of 16 bytes, K * element bytes >= 16.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common/tc90.cuh"

namespace braze::cuda::quant {

constexpr int kTc90BM = 128, kTc90BN = 256, kTc90KBytes = 128, kTc90Stages = 4, kTc90Threads = 384;
constexpr int kTc90StageX = kTc90BM * kTc90KBytes, kTc90StageW = kTc90BN * kTc90KBytes;
constexpr int kTc90Stage = kTc90StageX + kTc90StageW;
constexpr int kTc90Smem = kTc90Stages * kTc90Stage + 1024 + 2 * kTc90Stages * 8;  // + alignment slack, mbarriers

struct Tc90Epilogue {
  void* out;
  int64_t out_stride;        // elements
  const void* bias;          // [N] of out's type, or null
  const float* row_scale;    // [M] (per token), or null
  const float* col_scale;    // [N] with col_scale_stride 1, one value with 0, or null
  int64_t col_scale_stride;
  int64_t m, n, k;           // k in elements
  bool pair_out;             // out and out_stride allow 2-element stores
};

template <class T> __device__ __forceinline__ void store_pair(T* p, float a, float b, bool pair, bool second) {
  if (pair && second) {
    if constexpr (std::is_same_v<T, float>) *reinterpret_cast<float2*>(p) = make_float2(a, b);
    else if constexpr (std::is_same_v<T, __half>) *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
    else *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
    return;
  }
  auto cast = [](float v) {
    if constexpr (std::is_same_v<T, float>) return v;
    else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
    else return __float2bfloat16_rn(v);
  };
  p[0] = cast(a);
  if (second) p[1] = cast(b);
}
template <class T> __device__ __forceinline__ float load_f(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, float>) return p[i];
  else if constexpr (std::is_same_v<T, __half>) return __half2float(p[i]);
  else return __bfloat162float(p[i]);
}

// In: tc90::Bf16In / F16In / E4m3In / E5m2In; Out: float, __half or __nv_bfloat16.
template <class In, class Out>
__global__ void __launch_bounds__(kTc90Threads, 1)
    gemm_tc90_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
                     const Tc90Epilogue e) {
#if BRAZE_TC90
  using namespace tc90;
  extern __shared__ uint8_t tc90_smem[];
  const uint32_t base = (smem_addr(tc90_smem) + 1023u) & ~1023u;  // swizzled tiles start on 1024 bytes
  const uint32_t full0 = base + kTc90Stages * kTc90Stage, empty0 = full0 + 8 * kTc90Stages;
  constexpr int el = (std::is_same_v<In, E4m3In> || std::is_same_v<In, E5m2In>) ? 1 : 2;
  const int tid = int(threadIdx.x), wg = tid / 128;
  const int kt_count = int((e.k * el + kTc90KBytes - 1) / kTc90KBytes);
  const int m0 = int(blockIdx.y) * kTc90BM, n0 = int(blockIdx.x) * kTc90BN;
  if (tid == 0) {
    for (int s = 0; s < kTc90Stages; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, 2);  // one arrival from each consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {
      for (int kt = 0; kt < kt_count; ++kt) {
        const int s = kt % kTc90Stages;
        if (kt >= kTc90Stages) mbar_wait(empty0 + 8 * s, uint32_t(kt / kTc90Stages - 1) & 1u);
        const uint32_t full = full0 + 8 * s, st = base + s * kTc90Stage;
        mbar_expect(full, kTc90Stage);
        tma_load_2d(st, &map_x, full, kt * (kTc90KBytes / el), m0);
        tma_load_2d(st + kTc90StageX, &map_w, full, kt * (kTc90KBytes / el), n0);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int cw = wg - 1;  // this consumer's 64 rows of the tile
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    for (int kt = 0; kt < kt_count; ++kt) {
      const int s = kt % kTc90Stages;
      mbar_wait(full0 + 8 * s, uint32_t(kt / kTc90Stages) & 1u);
      const uint32_t st = base + s * kTc90Stage;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_n256<In>(d, sw128_desc(st + cw * 64 * kTc90KBytes + kk * 32), sw128_desc(st + kTc90StageX + kk * 32), 1);
      wgmma_commit();
      wgmma_wait<1>();  // the stage before is read: free it
      if (kt > 0 && tid % 128 == 0) mbar_arrive(empty0 + 8 * ((kt - 1) % kTc90Stages));
    }
    wgmma_wait<0>();
    const int t = tid % 128, w = t / 32, lane = t % 32;
    Out* out = static_cast<Out*>(e.out);
    const Out* bias = static_cast<const Out*>(e.bias);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = m0 + cw * 64 + w * 16 + lane / 4 + 8 * h;
      if (r >= e.m) continue;
      const float rs = e.row_scale ? e.row_scale[r] : 1.f;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int64_t c = n0 + j * 8 + (lane % 4) * 2;
        if (c >= e.n) continue;
        const bool second = c + 1 < e.n;
        float v0 = d[4 * j + 2 * h] * rs, v1 = d[4 * j + 2 * h + 1] * rs;
        if (e.col_scale) {
          v0 *= e.col_scale[c * e.col_scale_stride];
          if (second) v1 *= e.col_scale[(c + 1) * e.col_scale_stride];
        }
        if (bias) {
          v0 += load_f(bias, c);
          if (second) v1 += load_f(bias, c + 1);
        }
        store_pair(out + r * e.out_stride + c, v0, v1, e.pair_out, second);
      }
    }
  }
#endif
}

}  // namespace braze::cuda::quant
