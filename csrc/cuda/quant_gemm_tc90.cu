// The Hopper GEMM's launcher: tensor maps for x and W (the driver's
// cuTensorMapEncodeTiled, found through the runtime: cuda/tc90.h), the kernel's shared
// memory, the grid of 128 x 256 tiles (128 x 128 promoted). Built for sm_90a only (CMakeLists.txt).
#include <cuda.h>

#include "cuda/quant/gemm_tc90.cuh"
#include "cuda/quant_tc90.h"
#include "cuda/runtime.cuh"
#include "core/error.h"

namespace braze::cuda {
namespace {

using quant::kTc90BM;
using quant::kTc90KBytes;

int elem_bytes(Tc90In in) { return (in == Tc90In::e4m3 || in == Tc90In::e5m2) ? 1 : 2; }

// rows x k elements, row stride in bytes; boxes of box_rows rows by 128 bytes, 128-byte swizzle.
CUtensorMap tensor_map(Tc90In in, const void* p, int64_t rows, int64_t k, int64_t stride, int box_rows) {
  CUtensorMap map;
  const int el = elem_bytes(in);
  const CUtensorMapDataType t = el == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                : in == Tc90In::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                     : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)}, strides[1] = {cuuint64_t(stride)};
  const cuuint32_t box[2] = {cuuint32_t(kTc90KBytes / el), cuuint32_t(box_rows)}, step[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(&map, t, 2, const_cast<void*>(p), dims, strides, box, step,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw std::runtime_error("braze CUDA backend: cuTensorMapEncodeTiled failed (" +
                                                  std::to_string(int(r)) + ")");
  return map;
}

template <class In, class Out, bool Promote> void launch(const Tc90Args& a, int device, cudaStream_t s) {
  using Tile = quant::Tc90Tile<Promote>;
  auto kernel = quant::gemm_tc90_kernel<In, Out, Promote>;
  allow_smem(reinterpret_cast<const void*>(kernel), Tile::smem, device, "quant matmul (wgmma GEMM)");
  const CUtensorMap mx = tensor_map(a.in, a.x, a.m, a.k, a.x_stride, kTc90BM);
  const CUtensorMap mw = tensor_map(a.in, a.w, a.n, a.k, a.w_stride, Tile::bn);
  const int64_t es = int64_t(sizeof(Out));
  quant::Tc90Epilogue e{a.out, a.out_stride, a.bias, a.row_scale, a.col_scale, a.col_scale_stride, a.m, a.n, a.k,
                        (reinterpret_cast<uintptr_t>(a.out) % (2 * es)) == 0 && a.out_stride % 2 == 0};
  const dim3 grid(unsigned((a.n + Tile::bn - 1) / Tile::bn), unsigned((a.m + kTc90BM - 1) / kTc90BM));
  kernel<<<grid, quant::kTc90Threads, Tile::smem, s>>>(mx, mw, e);
}

template <class In> void by_out(const Tc90Args& a, int device, cudaStream_t s) {
  switch (a.out_dtype) {
    case DType::f32: return a.promote ? launch<In, float, true>(a, device, s) : launch<In, float, false>(a, device, s);
    case DType::f16: return a.promote ? launch<In, __half, true>(a, device, s) : launch<In, __half, false>(a, device, s);
    case DType::bf16:
      return a.promote ? launch<In, __nv_bfloat16, true>(a, device, s) : launch<In, __nv_bfloat16, false>(a, device, s);
    default: throw ValueError("matmul: the Hopper GEMM writes f32, f16 or bf16");
  }
}

}  // namespace

bool tc90_usable(const Tc90Args& a, int device) {
  if (!tc90_device(device)) return false;
  const int el = elem_bytes(a.in);
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool dims_ok = a.k * el >= 16 && a.k < (int64_t(1) << 31) && a.m < (int64_t(1) << 31) &&
                       a.n < (int64_t(1) << 31) &&
                       (a.m + kTc90BM - 1) / kTc90BM <= 65535;
  const bool strides_ok = a.x_stride % 16 == 0 && a.w_stride % 16 == 0 && a.x_stride < (int64_t(1) << 40) &&
                          a.w_stride < (int64_t(1) << 40);
  return dims_ok && strides_ok && al(a.x) && (!a.w || al(a.w));
}

void gemm_tc90_run(const Tc90Args& a, int device, cudaStream_t s) {
  switch (a.in) {
    case Tc90In::bf16: return by_out<tc90::Bf16In>(a, device, s);
    case Tc90In::f16: return by_out<tc90::F16In>(a, device, s);
    case Tc90In::e4m3: return by_out<tc90::E4m3In>(a, device, s);
    case Tc90In::e5m2: return by_out<tc90::E5m2In>(a, device, s);
  }
}

}  // namespace braze::cuda
