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
//
// Promote (for fp8, whose tensor-core sums keep fewer bits than f32): a
// 128 x 128 tile (W slab 128 rows, 6 stages of 32 KB); each stage's four k
// steps go into a fresh set of accumulators, added into the f32 sums once the
// stage is done (two sets alternate, so the next stage's MMAs run meanwhile):
// the tensor cores then sum at most 128 products before an f32 addition.
// Host requirements (checked by the launcher): sm_90, x / W 16-byte aligned
// with row strides a multiple of 16 bytes, K * element bytes >= 16.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common/tc90.cuh"

namespace braze::cuda::quant {

constexpr int kTc90BM = 128, kTc90KBytes = 128, kTc90Threads = 384;
constexpr int kTc90StageX = kTc90BM * kTc90KBytes;
// The tile's columns, stages and bytes, plain (false) or promoted (true).
template <bool Promote> struct Tc90Tile {
  static constexpr int bn = Promote ? 128 : 256, stages = Promote ? 6 : 4;
  static constexpr int stage_w = bn * kTc90KBytes, stage = kTc90StageX + stage_w;
  static constexpr int smem = stages * stage + 1024 + 2 * stages * 8;  // + alignment slack, mbarriers
};

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

// The epilogue of a consumer's 64 x (2 NJ x 8) sums d: out = fma(d, row scale x column scale, bias).
template <class Out, int NJ>
__device__ __forceinline__ void tc90_store(const Tc90Epilogue& e, const float* d, int64_t r0, int64_t n0) {
  const int t = int(threadIdx.x) % 128, w = t / 32, lane = t % 32;
  Out* out = static_cast<Out*>(e.out);
  const Out* bias = static_cast<const Out*>(e.bias);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t r = r0 + w * 16 + lane / 4 + 8 * h;
    if (r >= e.m) continue;
    const float rs = e.row_scale ? e.row_scale[r] : 1.f;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const int64_t c = n0 + j * 8 + (lane % 4) * 2;
      if (c >= e.n) continue;
      const bool second = c + 1 < e.n;
      float s0 = rs, s1 = rs, b0 = 0.f, b1 = 0.f;
      if (e.col_scale) {
        s0 *= e.col_scale[c * e.col_scale_stride];
        if (second) s1 *= e.col_scale[(c + 1) * e.col_scale_stride];
      }
      if (bias) {
        b0 = load_f(bias, c);
        if (second) b1 = load_f(bias, c + 1);
      }
      store_pair(out + r * e.out_stride + c, fmaf(d[4 * j + 2 * h], s0, b0), fmaf(d[4 * j + 2 * h + 1], s1, b1),
                 e.pair_out, second);
    }
  }
}

#if BRAZE_TC90
// One stage of a consumer: its 64 rows of the x slab times the W slab, four k steps of 32 bytes.
template <class In, int N>
__device__ __forceinline__ void tc90_stage(float (&d)[N / 2], uint32_t st, int cw, bool accumulate) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t da = tc90::sw128_desc(st + cw * 64 * kTc90KBytes + kk * 32);
    const uint64_t db = tc90::sw128_desc(st + kTc90StageX + kk * 32);
    if constexpr (N == 256) tc90::wgmma_n256<In>(d, da, db, accumulate || kk > 0);
    else tc90::wgmma_n128_ss<In>(d, da, db, accumulate || kk > 0);
  }
}
#endif

// In: tc90::Bf16In / F16In / E4m3In / E5m2In; Out: float, __half or __nv_bfloat16.
template <class In, class Out, bool Promote>
__global__ void __launch_bounds__(kTc90Threads, 1)
    gemm_tc90_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
                     const Tc90Epilogue e) {
#if BRAZE_TC90
  using namespace tc90;
  using Tile = Tc90Tile<Promote>;
  constexpr int kStages = Tile::stages, kStage = Tile::stage;
  extern __shared__ uint8_t tc90_smem[];
  const uint32_t base = (smem_addr(tc90_smem) + 1023u) & ~1023u;  // swizzled tiles start on 1024 bytes
  const uint32_t full0 = base + kStages * kStage, empty0 = full0 + 8 * kStages;
  constexpr int el = (std::is_same_v<In, E4m3In> || std::is_same_v<In, E5m2In>) ? 1 : 2;
  const int tid = int(threadIdx.x), wg = tid / 128;
  const int kt_count = int((e.k * el + kTc90KBytes - 1) / kTc90KBytes);
  const int m0 = int(blockIdx.y) * kTc90BM, n0 = int(blockIdx.x) * Tile::bn;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
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
        const int s = kt % kStages;
        if (kt >= kStages) mbar_wait(empty0 + 8 * s, uint32_t(kt / kStages - 1) & 1u);
        const uint32_t full = full0 + 8 * s, st = base + s * kStage;
        mbar_expect(full, kStage);
        tma_load_2d(st, &map_x, full, kt * (kTc90KBytes / el), m0);
        tma_load_2d(st + kTc90StageX, &map_w, full, kt * (kTc90KBytes / el), n0);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int cw = wg - 1;  // this consumer's 64 rows of the tile
    auto wait_full = [&](int kt) {
      mbar_wait(full0 + 8 * (kt % kStages), uint32_t(kt / kStages) & 1u);
      return base + (kt % kStages) * kStage;
    };
    auto free_stage = [&](int kt) {
      if (tid % 128 == 0) mbar_arrive(empty0 + 8 * (kt % kStages));
    };
    if constexpr (!Promote) {
      float d[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.f;
      for (int kt = 0; kt < kt_count; ++kt) {
        const uint32_t st = wait_full(kt);
        wgmma_fence();
        tc90_stage<In, 256>(d, st, cw, true);
        wgmma_commit();
        wgmma_wait<1>();  // the stage before is read: free it
        if (kt > 0) free_stage(kt - 1);
      }
      wgmma_wait<0>();
      reg_fence(d);
      tc90_store<Out, 32>(e, d, m0 + cw * 64, n0);
    } else {
      float acc[64], p[64];
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = p[i] = 0.f;
      for (int kt = 0; kt < kt_count; ++kt) {
        const uint32_t st = wait_full(kt);
        wgmma_fence();
        tc90_stage<In, 128>(p, st, cw, false);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(p);
        free_stage(kt);
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] += p[i];
      }
      tc90_store<Out, 16>(e, acc, m0 + cw * 64, n0);
    }
  }
#endif
}

}  // namespace braze::cuda::quant
