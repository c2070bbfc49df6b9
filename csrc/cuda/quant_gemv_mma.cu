// Host launcher of the tensor-core GEMV (shaders/cuda/quant/gemv_mma.cuh): the
// applicability checks and the launch (16 rows of W a CTA).
#include "cuda/quant_gemv_mma.h"

#include <map>
#include <mutex>
#include <utility>

#include "cuda/quant/gemv_mma.cuh"
#include "cuda/runtime.cuh"

namespace braze::cuda {

namespace {

using braze::quant::QFormat;
using quant::MmParams;

void allow_smem_once(const void* kernel, int bytes, int device) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, bool> done;
  std::lock_guard<std::mutex> lock(mu);
  bool& d = done[{kernel, device}];
  if (d) return;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), "cudaFuncSetAttribute");
  d = true;
}

template <QFormat F, class T, int R, int NT> void launch(const MmParams& p, int device, cudaStream_t s) {
  auto k = quant::gemv_mma_kernel<F, T, R, NT>;
  constexpr int bytes = quant::gemv_mma_smem_bytes<F, R, NT>();
  allow_smem_once(reinterpret_cast<const void*>(k), bytes, device);
  k<<<unsigned((p.w.rows + R - 1) / R), quant::kGemvMmaThreads, bytes, s>>>(p);
}

// A CTA owns 16 rows of W. On an H100 (scripts/cuda_gemv_mma_bw.cu, 2026-12-06) the 32-row tile
// was slower at every shape but one (q4_K, N 14336, 16 rows: 51.5 us against 61.0): at N = 4096,
// 8 rows, 56.9 us against 46.7 for q4_0. A tile whose shared memory the GPU cannot give a CTA is
// not taken (false: nothing launched).
template <QFormat F, class T, int NT> bool launch_rows(const MmParams& p, int device, cudaStream_t s) {
  if (quant::gemv_mma_smem_bytes<F, 16, NT>() > smem_optin(device)) return false;
  launch<F, T, 16, NT>(p, device, s);
  return true;
}

template <QFormat F, class T> bool launch_format(const MmParams& p, int device, cudaStream_t s) {
  if (p.m <= 8) return launch_rows<F, T, 1>(p, device, s);
  return launch_rows<F, T, 2>(p, device, s);
}

}  // namespace

// From 5 rows. H100, bf16 x, scripts/cuda_gemv_mma_bw.cu after the SIMT GEMV's x prefetch (a260282),
// SIMT / mma us: 4096 x 14336, 3-4 rows q4_0 37.5-38.2 / 41.4-42.9, q4_K 36.0-36.5 / 46.7-48.1;
// 14336 x 4096 the mma kernel is ahead by 5-7% there (q4_0 39.1-40.5 / 36.7-37.5); 8 rows the mma
// kernel everywhere (q4_0 4096 x 14336 56.1 / 44.8; 14336 x 4096 64.1 / 40.0).
template <class T> bool gemv_mma_run(const MmParams& p, QFormat format, int device, cudaStream_t s) {
  if (p.m < 5 || p.m > 16 || !gemv_mma_enabled()) return false;
  if (format != QFormat::q4_0 && format != QFormat::q4_K) return false;
  if ((reinterpret_cast<uintptr_t>(p.x) & 15u) != 0 || p.x_stride % 8 != 0) return false;
  if (p.w.cols % 256 != 0 && format == QFormat::q4_K) return false;  // whole blocks (the codec's own rule)
  if (p.w.cols % 32 != 0) return false;
  if (cc_major(device) < 8) return false;
  if (format == QFormat::q4_0) return launch_format<QFormat::q4_0, T>(p, device, s);
  return launch_format<QFormat::q4_K, T>(p, device, s);
}

template bool gemv_mma_run<__half>(const MmParams&, QFormat, int, cudaStream_t);
template bool gemv_mma_run<__nv_bfloat16>(const MmParams&, QFormat, int, cudaStream_t);

}  // namespace braze::cuda
