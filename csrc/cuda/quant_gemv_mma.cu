// Host launcher of the tensor-core GEMV (shaders/cuda/quant/gemv_mma.cuh): the
// applicability checks and the launch (16 rows of W a CTA).
#include "cuda/quant_gemv_mma.h"

#include "cuda/quant/gemv_mma.cuh"
#include "cuda/runtime.cuh"

namespace braze::cuda {

namespace {

using braze::quant::QFormat;
using quant::MmParams;

template <QFormat F, class T, int NT, int S, int KS> void launch(const MmParams& p, int device, cudaStream_t s) {
  auto k = quant::gemv_mma_kernel<F, T, 16, NT, S, KS>;
  constexpr int bytes = quant::gemv_mma_smem_bytes<F, 16, NT, S, KS>();
  allow_smem(reinterpret_cast<const void*>(k), bytes, device, "quant.matmul (tensor-core GEMV)");
  k<<<unsigned((p.w.rows + 15) / 16), quant::kGemvMmaThreads, bytes, s>>>(p);
}

// A CTA owns 16 rows of W (a 32-row tile was slower at every shape but one on an H100,
// 2026-12-06). Two forms of the pipeline:
//   - two stages of 2048 elements where the GPU's per-CTA shared memory holds them (104 KB
//     for 1-8 rows of x, 171 KB for 9-16: sm_90 holds both, sm_80 the first): a warp does 8
//     q4_0 units (4 q4_K pairs) between two CTA barriers. H100, 4096 x 14336 bf16 (scripts/cuda_gemv_mma_bw.cu, 2026-12-07,
//     docs/bench/h100-0408-gemvmma-ks.txt), SIMT / 4 x 512 / 2 x 2048 us: q4_0 2 rows 29.3 /
//     40.7 / 25.3, 3 rows 38.4 / 42.6 / 26.0, 8 rows 57.6 / 46.2 / 28.3, 16 rows 208.6 / 50.9 /
//     45.0; q4_K 2 rows 28.1 / 46.5 / 30.7, 3 rows 36.2 / 47.1 / 31.0, 8 rows 57.9 / 51.3 /
//     33.2. Taken from 2 rows on q4_0, 3 on q4_K (the SIMT GEMV keeps q4_K's 2 rows);
//   - else four stages of 512 (the first form; up to 93 KB), from 5 rows (the SIMT GEMV was
//     ahead of it at 3-4 rows of N 4096 on an H100, 2026-12-06).
// Neither fits: false, nothing launched.
template <QFormat F, class T, int NT> bool launch_rows(const MmParams& p, int device, cudaStream_t s) {
  const int optin = smem_optin(device);
  if (quant::gemv_mma_smem_bytes<F, 16, NT, 2, 2048>() <= optin) {
    if (p.m < (F == QFormat::q4_0 ? 2 : 3)) return false;
    launch<F, T, NT, 2, 2048>(p, device, s);
    return true;
  }
  if (p.m < 5 || quant::gemv_mma_smem_bytes<F, 16, NT, 4, 512>() > optin) return false;
  launch<F, T, NT, 4, 512>(p, device, s);
  return true;
}

template <QFormat F, class T> bool launch_format(const MmParams& p, int device, cudaStream_t s) {
  if (p.m <= 8) return launch_rows<F, T, 1>(p, device, s);
  return launch_rows<F, T, 2>(p, device, s);
}

}  // namespace

// The row counts each form takes: launch_rows above.
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
