// Host launcher of the tensor-core GEMV (shaders/cuda/quant/gemv_mma.cuh): the
// applicability checks and the tile choice, R = 16 or 32 rows of W a CTA.
#include "cuda/quant_gemv_mma.h"

#include <atomic>
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

// The shared memory a CTA may opt into on `device` (queried once per device): 227 KB on sm_90, 163 KB on
// sm_80, 99 KB on sm_86 / sm_89, where the largest tiles do not fit.
int smem_optin(int device) {
  static std::atomic<int> cache[64];
  if (device < 0 || device >= 64) return 0;
  int v = cache[device].load(std::memory_order_relaxed);
  if (v == 0) {
    check(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
    cache[device].store(v, std::memory_order_relaxed);
  }
  return v;
}

template <QFormat F, class T, int R, int NT> void launch(const MmParams& p, int device, cudaStream_t s) {
  auto k = quant::gemv_mma_kernel<F, T, R, NT>;
  constexpr int bytes = quant::gemv_mma_smem_bytes<F, R, NT>();
  allow_smem_once(reinterpret_cast<const void*>(k), bytes, device);
  k<<<unsigned((p.w.rows + R - 1) / R), quant::kGemvMmaThreads, bytes, s>>>(p);
}

// R: the rows of W a CTA owns. An SM's time goes with the rows it is given
// (its CTAs share its bandwidth), ceil(CTAs / SMs) R; R = 32 halves the reads
// of x from L2 and wins ties (N = 4096 on 132 SMs: 128 CTAs of 32 rows, or 256 of
// 16, both 32 rows an SM), R = 16 evens out the rest (N = 14336: 7 x 16 = 112
// rows an SM against 4 x 32 = 128).
// A tile whose shared memory the GPU cannot give a CTA is not taken (false: nothing launched).
template <QFormat F, class T, int NT> bool launch_rows(const MmParams& p, int device, cudaStream_t s) {
  const int64_t sms = sm_count(device), n = p.w.rows;
  const int64_t c32 = ((n + 31) / 32 + sms - 1) / sms * 32, c16 = ((n + 15) / 16 + sms - 1) / sms * 16;
  const int optin = smem_optin(device);
  if (c32 <= c16 && quant::gemv_mma_smem_bytes<F, 32, NT>() <= optin) {
    launch<F, T, 32, NT>(p, device, s);
    return true;
  }
  if (quant::gemv_mma_smem_bytes<F, 16, NT>() > optin) return false;
  launch<F, T, 16, NT>(p, device, s);
  return true;
}

template <QFormat F, class T> bool launch_format(const MmParams& p, int device, cudaStream_t s) {
  if (p.m <= 8) return launch_rows<F, T, 1>(p, device, s);
  return launch_rows<F, T, 2>(p, device, s);
}

}  // namespace

template <class T> bool gemv_mma_run(const MmParams& p, QFormat format, int device, cudaStream_t s) {
  if (p.m < 2 || p.m > 16 || !gemv_mma_enabled()) return false;
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
