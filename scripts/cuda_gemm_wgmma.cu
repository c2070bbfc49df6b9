// Issue 15's prefill GEMM on Hopper: C[M, N] = A[M, K] B[N, K]^T with both operands K-major
// (x rows and W rows), bf16 or fp8 e4m3 in, f32 accumulators, bf16 out.
//
// A CTA of 3 warpgroups computes a 128 x 256 tile of C: warpgroup 0 is the producer (one thread
// issues the bulk tensor copies of A's 128 x 128-byte and B's 256 x 128-byte slabs, 128-byte
// swizzled, into a 4-stage ring, each stage completing on a "full" mbarrier), warpgroups 1 and 2
// consume: each multiplies its 64 rows of A by all 256 rows of B with wgmma m64n256 (k 16 for
// bf16, 32 for e4m3; 4 per stage), keeps one stage's wgmmas in flight, and releases the previous
// stage on its "empty" mbarrier. setmaxnreg moves registers from the producer to the consumers
// (128 f32 accumulators each). Timed against cuBLAS (bf16) in the same run; output checked against
// a CUDA-core f32 product over a sample of rows.
//
// nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I scripts scripts/cuda_gemm_wgmma.cu [-lcublas]
#if __has_include(<cublas_v2.h>)
#include <cublas_v2.h>
#define BZ_CUBLAS 1
#else
using cublasHandle_t = void*;
#endif
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>

#include "cuda_bw.cuh"

namespace {

constexpr int BM = 128, BN = 256, BKB = 128, STAGES = 4, THREADS = 384;  // BKB: bytes of K a stage
constexpr int kStageA = BM * BKB, kStageB = BN * BKB, kStage = kStageA + kStageB;
constexpr int kSmem = STAGES * kStage + 1024 + 2 * STAGES * 8;

__device__ __forceinline__ uint32_t sa(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint32_t b, int n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(b), "r"(n));
}
__device__ __forceinline__ void mbar_expect(uint32_t b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(b) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t b, uint32_t parity) {
  uint32_t ok = 0;
  while (!ok)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok) : "r"(b), "r"(parity) : "memory");
}
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
// K-major operand, 128-byte rows swizzled by the copy engine, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

#define BZ_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define BZ_F16(i) BZ_F4(i), BZ_F4(i + 4), BZ_F4(i + 8), BZ_F4(i + 12)
#define BZ_F128 BZ_F16(0), BZ_F16(16), BZ_F16(32), BZ_F16(48), BZ_F16(64), BZ_F16(80), BZ_F16(96), BZ_F16(112)
#define BZ_D128                                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                         \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "    \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// d += A(64 x kstep) B(256 x kstep)^T, both from shared memory; scale_d 0 starts d from zero.
template <bool Fp8> __device__ __forceinline__ void wgmma_n256(float (&d)[128], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (Fp8) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " BZ_D128 ", %128, %129, p, 1, 1;\n}\n"
                 : BZ_F128 : "l"(da), "l"(db), "r"(scale_d));
  } else {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " BZ_D128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : BZ_F128 : "l"(da), "l"(db), "r"(scale_d));
  }
}

template <bool Fp8>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_wgmma(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb, __nv_bfloat16* c,
               int M, int N, int K) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (sa(smem_raw) + 1023) & ~1023u;  // swizzled tiles start on 1024 bytes
  const uint32_t bars = base + STAGES * kStage;          // full[s] at bars + 8 s, empty[s] at bars + 8 (STAGES + s)
  const int tid = threadIdx.x, wg = tid / 128;
  const int kt_count = (K + BKB - 1) / BKB;  // K in bytes = elements for fp8; bf16 passes 2 K below
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bars + 8 * s, 1);
      mbar_init(bars + 8 * (STAGES + s), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  constexpr int kEl = Fp8 ? 1 : 2;  // bytes an element
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0) {
      for (int kt = 0; kt < kt_count; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar_wait(bars + 8 * (STAGES + s), ((kt / STAGES) - 1) & 1);
        const uint32_t full = bars + 8 * s, st = base + s * kStage;
        mbar_expect(full, kStage);
        tma_load(st, &ma, full, kt * (BKB / kEl), m0);
        tma_load(st + kStageA, &mb, full, kt * (BKB / kEl), n0);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1;  // this consumer's 64 rows of the tile
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    for (int kt = 0; kt < kt_count; ++kt) {
      const int s = kt % STAGES;
      mbar_wait(bars + 8 * s, (kt / STAGES) & 1);
      const uint32_t st = base + s * kStage;
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)  // 32 bytes of K a step
        wgmma_n256<Fp8>(d, sw128_desc(st + cw * 64 * BKB + kk * 32), sw128_desc(st + kStageA + kk * 32), 1);
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      if (kt > 0 && tid % 128 == 0) mbar_arrive(bars + 8 * (STAGES + (kt - 1) % STAGES));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    const int t = tid % 128, w = t / 32, l = t % 32;
    const int row = m0 + cw * 64 + w * 16 + l / 4;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int col = n0 + j * 8 + (l % 4) * 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row + 8 * h;
        if (r < M && col + 1 < N)
          *reinterpret_cast<__nv_bfloat162*>(c + int64_t(r) * N + col) =
              __floats2bfloat162_rn(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        else if (r < M && col < N)
          c[int64_t(r) * N + col] = __float2bfloat16_rn(d[4 * j + 2 * h]);
      }
    }
  }
}

// Reference: rows m = 0, step, 2 step ... of C in f32 on CUDA cores.
template <class T> __device__ float to_f(T v);
template <> __device__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ float to_f(__nv_fp8_e4m3 v) { return float(v); }
template <class T>
__global__ void gemm_ref(const T* a, const T* b, float* c, int M, int N, int K, int step) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, mi = blockIdx.y, m = mi * step;
  if (n >= N || m >= M) return;
  float s = 0.f;
  for (int k = 0; k < K; ++k) s = fmaf(to_f(a[int64_t(m) * K + k]), to_f(b[int64_t(n) * K + k]), s);
  c[int64_t(mi) * N + n] = s;
}
// Signed values: bf16 in (-1, 1); e4m3 codes with exponent field below 9 (|v| < 4), never NaN.
__global__ void fill_signed(uint8_t* p, int64_t n_el, uint32_t seed, int fp8) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n_el; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    if (fp8) {
      p[i] = uint8_t((h & 0x80) | ((h >> 8) % 72));
    } else {
      reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(float(int(h % 2001) - 1000) / 1000.f);
    }
  }
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiled encode_fn() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  if (!f) { printf("no cuTensorMapEncodeTiled\n"); exit(1); }
  return reinterpret_cast<EncodeTiled>(f);
}
CUtensorMap make_map(const void* p, int rows, int k, int box_rows, bool fp8) {
  static EncodeTiled enc = encode_fn();
  CUtensorMap m;
  const int el = fp8 ? 1 : 2;
  cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)}, strides[1] = {cuuint64_t(k) * el};
  cuuint32_t box[2] = {cuuint32_t(BKB / el), cuuint32_t(box_rows)}, es[2] = {1, 1};
  CUresult r = enc(&m, fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(p),
                   dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { printf("cuTensorMapEncodeTiled failed %d\n", int(r)); exit(1); }
  return m;
}

template <bool Fp8> void run(int M, int N, int K, cublasHandle_t h) {
  using T = std::conditional_t<Fp8, __nv_fp8_e4m3, __nv_bfloat16>;
  const int el = sizeof(T);
  uint8_t *a, *b; __nv_bfloat16* c; float* ref;
  const int step = 16, mr = (M + step - 1) / step;
  CK(cudaMalloc(&a, int64_t(M) * K * el)); CK(cudaMalloc(&b, int64_t(N) * K * el));
  CK(cudaMalloc(&c, int64_t(M) * N * 2)); CK(cudaMalloc(&ref, int64_t(mr) * N * 4));
  fill_signed<<<1024, 256>>>(a, int64_t(M) * K, 1234u, Fp8);
  fill_signed<<<1024, 256>>>(b, int64_t(N) * K, 987u, Fp8);
  CK(cudaMemset(c, 0, int64_t(M) * N * 2));
  const CUtensorMap ma = make_map(a, M, K, BM, Fp8), mb = make_map(b, N, K, BN, Fp8);
  auto kern = gemm_wgmma<Fp8>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  kern<<<grid, THREADS, kSmem>>>(ma, mb, c, M, N, K);
  CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
  gemm_ref<T><<<dim3((N + 255) / 256, mr), 256>>>(reinterpret_cast<T*>(a), reinterpret_cast<T*>(b), ref, M, N, K, step);
  CK(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> hc(int64_t(M) * N); std::vector<float> hr(int64_t(mr) * N);
  CK(cudaMemcpy(hc.data(), c, hc.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
  double maxerr = 0, ss = 0; int64_t bad = 0;
  for (int mi = 0; mi < mr; ++mi)
    for (int n = 0; n < N; ++n) {
      const double want = hr[int64_t(mi) * N + n], got = __bfloat162float(hc[int64_t(mi) * step * N + n]);
      ss += want * want;
      const double e = std::fabs(got - want) - std::fabs(want) * (1.0 / 256);
      maxerr = std::max(maxerr, e);
    }
  const double rms = std::sqrt(ss / (double(mr) * N));
  for (int mi = 0; mi < mr; ++mi)
    for (int n = 0; n < N; ++n) {
      const double want = hr[int64_t(mi) * N + n], got = __bfloat162float(hc[int64_t(mi) * step * N + n]);
      if (std::fabs(got - want) > std::fabs(want) / 256 + 1e-3 * rms) ++bad;
    }
  const double flops = 2.0 * M * N * K;
  const float us = time_it([&](int) { kern<<<grid, THREADS, kSmem>>>(ma, mb, c, M, N, K); });
  printf("%s %dx%dx%d: %.1f us %.0f TFLOP/s | check vs f32 rows (%d): bad %lld, max excess err %.3g, rms %.3g\n",
         Fp8 ? "e4m3" : "bf16", M, N, K, us, flops / us * 1e-6, mr, (long long)bad, maxerr, rms);
#ifdef BZ_CUBLAS
  if (!Fp8 && h) {
    const float one = 1.f, zero = 0.f;
    auto cub = [&](int) {
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_16BF, K, a, CUDA_R_16BF, K, &zero, c,
                   CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    const float cu = time_it(cub);
    printf("cublas bf16 %dx%dx%d: %.1f us %.0f TFLOP/s (braze/cublas time %.3f)\n", M, N, K, cu, flops / cu * 1e-6, us / cu);
  }
#endif
  CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(c)); CK(cudaFree(ref));
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  printf("%s, %d SMs\n", pr.name, pr.multiProcessorCount);
  cublasHandle_t h = nullptr;
#ifdef BZ_CUBLAS
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) h = nullptr;
#endif
  run<false>(4096, 4096, 14336, h);
  run<false>(4096, 14336, 4096, h);
  run<false>(1000, 1000, 1000, h);
  run<true>(4096, 4096, 14336, h);
  run<true>(4096, 14336, 4096, h);
  return 0;
}
