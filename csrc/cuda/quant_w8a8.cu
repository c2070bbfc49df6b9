// Host launcher of W8A8 matmul on CUDA (kernels: shaders/cuda/quant/w8a8.cuh):
// the GEMV for m <= 16 rows of x (one slab: W read once); the tensor-core GEMM
// beyond (int8: mma s8, sm_80+; fp8: mma e4m3 / e5m2, sm_89+). fp8 on a GPU without
// fp8 mma (sm_80 .. sm_88) runs the GEMV kernel over slabs of 16 rows (CUDA cores:
// correct, W read once per slab). On Hopper, e4m3 x e4m3 beyond 16 rows takes the
// wgmma GEMM (quant_tc90.h) in its promoted form (f32 sums every 128 products);
// BRAZE_CUDA_GEMM=mma keeps the mma.sync GEMM. Never synchronizes, allocates nothing.
#include <mutex>
#include <string>

#include "cuda/quant.h"
#include "cuda/quant/w8a8.cuh"
#include "cuda/runtime.cuh"
#if BRAZE_CUDA_TC90
#include "cuda/quant_tc90.h"
#endif

namespace braze::cuda {
namespace {

using namespace braze::cuda::quant;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Compute capability * 10 + minor of `device`, asked once per device.
int arch_of(int device) {
  static std::mutex mu;
  static int cached[64] = {};
  std::lock_guard<std::mutex> lock(mu);
  if (device < 0 || device >= 64) throw ValueError("matmul_w8a8: device id out of range");
  if (!cached[device]) {
    int major = 0, minor = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
    cached[device] = major * 10 + minor;
  }
  return cached[device];
}

template <int Kind, class T, bool Vec, int MT> void gemv(const W8A8Params& p, int64_t slabs, cudaStream_t s) {
  if (slabs > 65535) throw ValueError("matmul_w8a8: x has too many rows for one launch (" + std::to_string(p.m) + ")");
  const dim3 grid(unsigned(ceil_div(p.n, kW8A8GemvWarps)), unsigned(slabs));
  w8a8_gemv_kernel<Kind, T, MT, Vec><<<grid, 32 * kW8A8GemvWarps, 0, s>>>(p);
}

#if BRAZE_CUDA_TC90
template <class T> bool gemm_tc90(const W8A8Params& p, int device, cudaStream_t s) {
  if (!tc90_enabled()) return false;
  const DType out = std::is_same_v<T, float> ? DType::f32 : std::is_same_v<T, __half> ? DType::f16 : DType::bf16;
  Tc90Args t{Tc90In::e4m3, out, p.x, p.x_stride, p.w, p.w_stride, p.m, p.n, p.k, p.out, p.out_stride, p.bias,
             p.x_scale, p.w_scale, p.w_per_row ? 1 : 0};
  t.promote = true;
  if (!tc90_usable(t, device)) return false;
  gemm_tc90_run(t, device, s);
  return true;
}
#endif

template <int Kind, class T, bool Vec> void paths(const W8A8Params& p, int device, cudaStream_t s) {
  if (p.m <= 1) return gemv<Kind, T, Vec, 1>(p, 1, s);
  if (p.m <= 2) return gemv<Kind, T, Vec, 2>(p, 1, s);
  if (p.m <= 4) return gemv<Kind, T, Vec, 4>(p, 1, s);
  if (p.m <= 8) return gemv<Kind, T, Vec, 8>(p, 1, s);
  if (p.m <= kW8A8GemvRows || (Kind != kW8A8Int8 && arch_of(device) < 89))
    return gemv<Kind, T, Vec, kW8A8GemvRows>(p, ceil_div(p.m, kW8A8GemvRows), s);
#if BRAZE_CUDA_TC90
  if constexpr (Kind == kW8A8E4M3)
    if (gemm_tc90<T>(p, device, s)) return;
#endif
  const int64_t gy = ceil_div(p.m, kW8A8BM);
  if (gy > 65535) throw ValueError("matmul_w8a8: x has too many rows for one launch (" + std::to_string(p.m) + ")");
  const dim3 grid(unsigned(ceil_div(p.n, kW8A8BN)), unsigned(gy));
  w8a8_gemm_kernel<Kind, T, Vec><<<grid, kW8A8Threads, 0, s>>>(p);
}

template <int Kind, class T> void run_kind(const W8A8Params& p, int device, cudaStream_t s) {
  const bool vec = p.k % 16 == 0 && aligned16(p.x) && aligned16(p.w) && (p.m == 1 || p.x_stride % 16 == 0) &&
                   (p.n == 1 || p.w_stride % 16 == 0);
  if (vec) return paths<Kind, T, true>(p, device, s);
  return paths<Kind, T, false>(p, device, s);
}

template <class T> void run_typed(const braze::quant::W8A8Args& a, const W8A8Params& p, cudaStream_t s) {
  switch (a.w.format) {
    case braze::quant::QFormat::int8: return run_kind<kW8A8Int8, T>(p, a.device_id, s);
    case braze::quant::QFormat::fp8_e4m3: return run_kind<kW8A8E4M3, T>(p, a.device_id, s);
    case braze::quant::QFormat::fp8_e5m2: return run_kind<kW8A8E4M3E5M2, T>(p, a.device_id, s);
    default: throw ValueError("matmul_w8a8: the weight must be int8, fp8_e4m3 or fp8_e5m2");
  }
}

}  // namespace

void matmul_w8a8_run(const braze::quant::W8A8Args& a, uintptr_t stream) {
  if (a.m == 0 || a.w.rows == 0) return;
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  W8A8Params p{};
  p.x = a.x;
  p.x_stride = a.x_stride;
  p.x_scale = a.x_scale;
  p.w = a.w.data;
  p.w_stride = a.w.data_stride;
  p.w_scale = static_cast<const float*>(a.w.scales);
  p.w_per_row = a.w.group == braze::quant::kFp8GroupTensor ? 0 : 1;
  p.bias = a.bias;
  p.out = a.out;
  p.out_stride = a.out_stride;
  p.m = a.m;
  p.n = a.w.rows;
  p.k = a.w.cols;
  switch (a.dtype) {
    case DType::f32: run_typed<float>(a, p, s); break;
    case DType::f16: run_typed<__half>(a, p, s); break;
    case DType::bf16: run_typed<__nv_bfloat16>(a, p, s); break;
    default: throw TypeError(std::string("matmul_w8a8: unsupported out dtype ") + dtype_name(a.dtype));
  }
  check_launch("matmul_w8a8");
}

}  // namespace braze::cuda
