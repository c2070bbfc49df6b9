// The typed body of braze.quant.matmul on CUDA (kernels in shaders/cuda/quant/
// gemv.cuh and gemm.cuh): the GEMV for m <= 16 rows of x (one M tile of 1, 2,
// 4, 8 or 16 rows, so W is read once; from 2 rows (q4_0) or 3 (q4_K) of f16 / bf16 x
// the tensor-core GEMV of quant_gemv_mma.cu takes over), the GEMM otherwise (tensor cores for
// f16 / bf16 x, CUDA cores for f32 x). matmul_typed<T> is instantiated once per
// activation dtype in its own unit (quant_matmul.cu, quant_matmul_f16.cu,
// quant_matmul_bf16.cu), so the three compile in parallel. Unlike quant.cu these
// units keep fused multiply-adds: the matmul's sums are f32 accumulations, not
// the codecs' reference arithmetic (W itself still decodes through the codecs).
#pragma once
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "core/quant_mx.h"
#include "cuda/quant.h"
#include "cuda/quant/gemm.cuh"
#include "cuda/quant/gemv.cuh"
#include "cuda/quant_gemv_mma.h"
#include "cuda/runtime.cuh"
#if BRAZE_CUDA_TC90
#include "cuda/quant_tc90.h"
#endif

namespace braze::cuda::matmul_impl {

using namespace braze::cuda::quant;
using braze::quant::MatmulArgs;
using braze::quant::QFormat;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline bool aligned(const void* p, unsigned n) { return (reinterpret_cast<uintptr_t>(p) & (n - 1)) == 0; }

template <class Wt, class T, int MT> void gemv_launch(const MmParams& p, int device, cudaStream_t s) {
  auto k = gemv_kernel<Wt, T, MT>;
  constexpr int bytes = gemv_smem_bytes<Wt, T, MT>();
  allow_smem(reinterpret_cast<const void*>(k), bytes, device, "quant.matmul (GEMV)");
  k<<<unsigned(ceil_div(p.w.rows, kGemvRows)), kGemvThreads, bytes, s>>>(p);
}

template <class Wt, class T> void gemv_rows(const MmParams& p, int device, cudaStream_t s) {
  if (p.m <= 1) return gemv_launch<Wt, T, 1>(p, device, s);
  if (p.m <= 2) return gemv_launch<Wt, T, 2>(p, device, s);
  if (p.m <= 4) return gemv_launch<Wt, T, 4>(p, device, s);
  if (p.m <= 8) return gemv_launch<Wt, T, 8>(p, device, s);
  return gemv_launch<Wt, T, 16>(p, device, s);
}

// VecW (GEMMs): dense W rows 16-byte aligned (the GEMV stages rows with whatever alignment they have).
template <class Wt, class T, bool VecW> void matmul_paths(MmParams p, int device, cudaStream_t s) {
  const int64_t es = int64_t(sizeof(T));
  if (p.m <= 16) {
    p.vec_x = aligned(p.x, unsigned(8 * es)) && (p.m == 1 || (p.x_stride * es) % (8 * es) == 0);
    if constexpr (!VecW) return gemv_rows<Wt, T>(p, device, s);  // VecW is chosen for m > 16 only
  }
  const unsigned gy = unsigned(ceil_div(p.m, std::is_same_v<T, float> ? kSimtTile : kMmaBM));
  if (gy > 65535u) throw ValueError("matmul: x has too many rows for one launch (" + std::to_string(p.m) + ")");
  if constexpr (std::is_same_v<T, float>) {
    const dim3 grid(unsigned(ceil_div(p.w.rows, kSimtTile)), gy);
    gemm_simt_kernel<Wt, T, VecW><<<grid, kSimtThreads, 0, s>>>(p);
  } else {
    p.vec_x = aligned(p.x, 16) && (p.x_stride * es) % 16 == 0;
    const dim3 grid(unsigned(ceil_div(p.w.rows, kMmaBN)), gy);
    gemm_mma_kernel<Wt, T, VecW><<<grid, kMmaThreads, 0, s>>>(p);
  }
}

#if BRAZE_CUDA_TC90
// Many rows of f16 / bf16 x on a Hopper GPU: the wgmma GEMM (quant_tc90.h). A
// dense W is read in place; a quantized one is first dequantized to x's dtype
// into a stream-ordered scratch of N K 2 bytes (cudaMallocAsync, freed on the
// stream after the GEMM; at most kTc90Scratch, else the mma.sync GEMM runs).
constexpr int64_t kTc90Scratch = int64_t(1) << 30;

template <class T> bool matmul_tc90(const MatmulArgs& a, cudaStream_t s) {
  if (!tc90_enabled()) return false;
  const int64_t es = int64_t(sizeof(T)), n = a.w.rows, k = a.w.cols;
  Tc90Args t{std::is_same_v<T, __half> ? Tc90In::f16 : Tc90In::bf16, a.dtype, a.x, a.x_stride * es, a.w.data,
             a.w.data_stride, a.m, n, k, a.out, a.out_stride, a.bias, nullptr, nullptr, 0};
  if (a.dense) {
    if (!tc90_usable(t, a.device_id)) return false;
    gemm_tc90_run(t, a.device_id, s);
    return true;
  }
  if (n * k * es > kTc90Scratch || (k * es) % 16 != 0) return false;
  t.w = nullptr;  // the scratch, allocated once the rest is known to fit
  t.w_stride = k * es;
  if (!tc90_usable(t, a.device_id)) return false;
  void* scratch = nullptr;
  check(cudaMallocAsync(&scratch, size_t(n * k * es), s), "cudaMallocAsync");
  braze::quant::DequantArgs d = a.w;
  d.dtype = a.dtype;
  d.out = scratch;
  d.out_stride = k;
  dequantize_run(d, reinterpret_cast<uintptr_t>(s));
  t.w = scratch;
  gemm_tc90_run(t, a.device_id, s);
  check(cudaFreeAsync(scratch, s), "cudaFreeAsync");
  return true;
}
#endif

template <class T> void matmul_typed(const MatmulArgs& a, cudaStream_t s) {
#if BRAZE_CUDA_TC90
  if constexpr (!std::is_same_v<T, float>)
    if (a.m > 16 && matmul_tc90<T>(a, s)) return;
#endif
  const auto& w = a.w;
  MmParams p{};
  p.w = DeqParams{w.data, w.data_stride, w.scales, w.scales_stride, w.scales_dtype, w.biases, w.biases_stride,
                  w.tensor_scale, w.group, nullptr, 0, w.rows, w.cols, 0, false};
  p.x = a.x;
  p.x_stride = a.x_stride;
  p.bias = a.bias;
  p.out = a.out;
  p.out_stride = a.out_stride;
  p.m = a.m;
  const int dev = a.device_id;
  // 2..16 rows of f16 / bf16 x on q4_0 / q4_K: the tensor-core GEMV where it applies (quant_gemv_mma.h)
  if constexpr (!std::is_same_v<T, float>)
    if (!a.dense && gemv_mma_run<T>(p, w.format, dev, s)) return;  // it checks the row count itself
  if (a.dense) {
    if (a.m > 16 && aligned(w.data, 16) && (w.rows == 1 || w.data_stride % 16 == 0))
      return matmul_paths<Dense, T, true>(p, dev, s);
    return matmul_paths<Dense, T, false>(p, dev, s);
  }
  switch (w.format) {
#define BRAZE_CASE(name, block, bytes, layout, group) \
  case QFormat::name: return matmul_paths<Quant<QFormat::name>, T, false>(p, dev, s);
    BRAZE_QUANT_FORMATS(BRAZE_CASE)
#undef BRAZE_CASE
  }
  throw ValueError("matmul: unknown format");
}


extern template void matmul_typed<float>(const MatmulArgs&, cudaStream_t);
extern template void matmul_typed<__half>(const MatmulArgs&, cudaStream_t);
extern template void matmul_typed<__nv_bfloat16>(const MatmulArgs&, cudaStream_t);

}  // namespace braze::cuda::matmul_impl
