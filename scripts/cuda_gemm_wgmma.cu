// Issue 15's prefill GEMM on Hopper (shaders/cuda/quant/gemm_tc90.cuh, the library's kernel):
// C[M, N] = A[M, K] B[N, K]^T, bf16 or fp8 e4m3 in, bf16 out, checked against an f32 CUDA-core
// product over every 16th row and timed beside cuBLAS (bf16, where its header is there).
//
// nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I csrc -I shaders -I scripts \
//   scripts/cuda_gemm_wgmma.cu [-lcublas]
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

#include "cuda/quant/gemm_tc90.cuh"
#include "cuda_bw.cuh"

namespace {

using namespace braze::cuda::quant;
namespace tc90 = braze::cuda::tc90;
constexpr int BM = kTc90BM, BKB = kTc90KBytes, THREADS = kTc90Threads;

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

// Promote: the kernel's promoted form (fp8: f32 sums every 128 products, as W8A8 runs it; checked
// with 2e-3 rms of slack beside bf16's 1e-3: on an H100 the promoted e4m3 sums came within 1.1e-3). The
// unpromoted e4m3 form is timed but not checked ("excess" instead of "bad"): its tensor-core sums
// keep fewer bits than f32, and the library never runs it.
template <bool Fp8, bool Promote = false> void run(int M, int N, int K, cublasHandle_t h) {
  using T = std::conditional_t<Fp8, __nv_fp8_e4m3, __nv_bfloat16>;
  using Tile = Tc90Tile<Promote>;
  constexpr int BN = Tile::bn, kSmem = Tile::smem;
  const int el = sizeof(T);
  uint8_t *a, *b; __nv_bfloat16* c; float* ref;
  const int step = 16, mr = (M + step - 1) / step;
  CK(cudaMalloc(&a, int64_t(M) * K * el)); CK(cudaMalloc(&b, int64_t(N) * K * el));
  CK(cudaMalloc(&c, int64_t(M) * N * 2)); CK(cudaMalloc(&ref, int64_t(mr) * N * 4));
  fill_signed<<<1024, 256>>>(a, int64_t(M) * K, 1234u, Fp8);
  fill_signed<<<1024, 256>>>(b, int64_t(N) * K, 987u, Fp8);
  CK(cudaMemset(c, 0, int64_t(M) * N * 2));
  const CUtensorMap ma = make_map(a, M, K, BM, Fp8), mb = make_map(b, N, K, BN, Fp8);
  auto kern = gemm_tc90_kernel<std::conditional_t<Fp8, tc90::E4m3In, tc90::Bf16In>, __nv_bfloat16, Promote>;
  Tc90Epilogue ep{c, N, nullptr, nullptr, nullptr, 0, M, N, K, N % 2 == 0};
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  kern<<<grid, THREADS, kSmem>>>(ma, mb, ep);
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
      if (std::fabs(got - want) > std::fabs(want) / 256 + (Fp8 ? 2e-3 : 1e-3) * rms) ++bad;
    }
  const double flops = 2.0 * M * N * K;
  const float us = time_it([&](int) { kern<<<grid, THREADS, kSmem>>>(ma, mb, ep); });
  printf("%s%s %dx%dx%d: %.1f us %.0f TFLOP/s | check vs f32 rows (%d): %s %lld, max excess err %.3g, rms %.3g\n",
         Fp8 ? "e4m3" : "bf16", Promote ? " promoted" : "", M, N, K, us, flops / us * 1e-6, mr,
         Fp8 && !Promote ? "excess" : "bad", (long long)bad, maxerr, rms);
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
  run<true, true>(4096, 4096, 14336, h);
  run<true, true>(4096, 14336, 4096, h);
  run<true, true>(1000, 1000, 1024, h);  // fp8 rows of K bytes: the tensor map needs K % 16 == 0
  return 0;
}
