// Host launchers of the quant family on CUDA (kernels in shaders/cuda/quant/).
// This translation unit is compiled with -fmad=false (csrc/cuda/CMakeLists.txt):
// the codecs' products and sums round one at a time, as the CPU's
// (-ffp-contract=off), so every byte and every float matches the CPU backend.
#include "cuda/quant.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/quant/act.cuh"
#include "cuda/quant/dequant.cuh"
#include "cuda/quant/quantize.cuh"
#include "cuda/runtime.cuh"

namespace braze::cuda {
namespace {

using namespace braze::cuda::quant;
using braze::quant::ActFormat;
using braze::quant::ActQuantArgs;
using braze::quant::DequantArgs;
using braze::quant::QFormat;
using braze::quant::QuantArgs;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool aligned(const void* p, unsigned n) { return (reinterpret_cast<uintptr_t>(p) & (n - 1)) == 0; }

template <class F> void by_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    default: throw TypeError(std::string("unsupported dtype ") + dtype_name(t));
  }
}

// A grid of `work` CTAs of `threads`, at most `waves` times as many as are resident at once.
template <class K> unsigned grid_for(K kernel, int64_t work, int threads, int device, int waves = 1) {
  const int64_t resident = int64_t(sm_count(device)) * blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, device);
  return unsigned(std::max<int64_t>(1, std::min(work, waves * resident)));
}

// ------------------------------------------------------------------ dequantize
template <QFormat F, class T> void dequantize_launch(const DequantArgs& a, cudaStream_t s) {
  DeqParams p{a.data, a.data_stride, a.scales, a.scales_stride, a.scales_dtype, a.biases, a.biases_stride,
              a.tensor_scale, a.group, a.out, a.out_stride, a.rows, a.cols, ceil_div(a.cols, kDeqSpan), false};
  p.vec_out = aligned(a.out, 16) && (a.rows == 1 || (a.out_stride * int64_t(sizeof(T))) % 16 == 0);
  auto k = dequantize_kernel<F, T>;
  // four waves: on an H100 eight were 1-3% faster at 4096 x 14336 but 9% slower at 4096 x 4096, one
  // slower still (scripts/cuda_dequant_bw.cu)
  k<<<grid_for(k, a.rows * p.tiles, kDeqThreads, a.device_id, 4), kDeqThreads, 0, s>>>(p);
}

template <class T> void dequantize_format(const DequantArgs& a, cudaStream_t s) {
  switch (a.format) {
#define BRAZE_CASE(name, block, bytes, layout, group) \
  case QFormat::name: return dequantize_launch<QFormat::name, T>(a, s);
    BRAZE_QUANT_FORMATS(BRAZE_CASE)
#undef BRAZE_CASE
  }
  throw ValueError("dequantize: unknown format");
}

// ------------------------------------------------------------------ quantize
QParams qparams(const QuantArgs& a) {
  return QParams{a.x, a.x_stride, a.data, a.data_stride, a.scales, a.scales_stride, a.scales_dtype, a.biases,
                 a.biases_stride, a.tensor_scale, a.group, a.scale_rule, a.rows, a.cols};
}

template <class K> void launch_threads(K kernel, const QParams& p, int64_t work, int threads, int device,
                                       cudaStream_t s) {
  kernel<<<grid_for(kernel, ceil_div(work, threads), threads, device), threads, 0, s>>>(p);
}

// *slot <- the tensor's amax bits, then the scale they give (Kind: amax_to_scale_kernel's).
template <int Kind, class T> void tensor_scale_into(const QParams& p, float* slot, int device, cudaStream_t s) {
  check(cudaMemsetAsync(slot, 0, sizeof(float), s), "cudaMemsetAsync");
  auto k = amax_kernel<T>;
  k<<<grid_for(k, ceil_div(p.rows * p.cols, 256), 256, device), 256, 0, s>>>(p, reinterpret_cast<uint32_t*>(slot));
  amax_to_scale_kernel<Kind><<<1, 1, 0, s>>>(slot);
}

RowParams row_params(const void* x, int64_t x_stride, void* q, int64_t q_stride, void* sx, int64_t sx_stride,
                     int64_t rows, int64_t cols) {
  return RowParams{x, x_stride, static_cast<uint8_t*>(q), q_stride, sx, sx_stride, rows, cols};
}

// A persistent grid of row_held_kernel<C, T, NT, H>: one wave of CTAs, each taking rows in turn.
template <RowCode C, class T, int NT, int H, int MinB> void row_held(const RowParams& p, int device, cudaStream_t s) {
  auto k = row_held_kernel<C, T, NT, H, true, MinB>;
  k<<<grid_for(k, p.rows, NT, device), NT, 0, s>>>(p);
}

// Per-row fp8 / int8 (weights and activations). Vectors where x's rows are 16-byte aligned and q's 8.
// bf16 / f16 rows of whole vectors: row_held_kernel, NT x H vectors of 8 covering the row where it
// can (an H100, bf16 4096 rows, scripts/cuda_act_bw.cu: 4096 cols 256x2 75% of a copy, 8192 512x2
// 90%, 14336 512x4 92%, where row_quant_kernel moved 35-41%); otherwise one CTA per row.
template <RowCode C, class T> void row_quant(const RowParams& p, int device, cudaStream_t s) {
  const bool vec = aligned(p.x, 16) && aligned(p.q, 8) &&
                   (p.rows == 1 || ((p.x_stride * int64_t(sizeof(T))) % 16 == 0 && p.q_stride % 8 == 0));
  if constexpr (sizeof(T) == 2) {
    if (vec && p.cols % 8 == 0 && p.cols <= INT32_MAX) {
      if (p.cols <= 4096) return row_held<C, T, 256, 2, 6>(p, device, s);
      if (p.cols <= 8192) return row_held<C, T, 512, 2, 3>(p, device, s);
      return row_held<C, T, 512, 4, 2>(p, device, s);  // past 16384 the rest is read again
    }
  }
  auto k = vec ? row_quant_kernel<C, T, true> : row_quant_kernel<C, T, false>;
  k<<<grid_for(k, p.rows, kRowThreads, device), kRowThreads, 0, s>>>(p);
}

template <int Bits, class T> void affine_launch(const QParams& p, int device, cudaStream_t s) {
  launch_threads(quantize_affine_kernel<Bits, T>, p, p.rows * (p.cols / p.group), kQThreads, device, s);
}

template <Elem E, class T> void fp8_weights(const QuantArgs& a, const QParams& p, cudaStream_t s) {
  constexpr RowCode C = E == Elem::e4m3 ? RowCode::e4m3 : RowCode::e5m2;
  if (a.group == braze::quant::kFp8GroupRow) {
    return row_quant<C, T>(row_params(a.x, a.x_stride, a.data, a.data_stride, a.scales, 0, a.rows, a.cols),
                           a.device_id, s);
  }
  if (a.group == braze::quant::kFp8GroupTensor) {
    tensor_scale_into<E == Elem::e4m3 ? 1 : 2, T>(p, static_cast<float*>(a.scales), a.device_id, s);
  } else {
    const int64_t blocks = ceil_div(a.rows, 128) * ceil_div(a.cols, 128);
    fp8_block_scale_kernel<E, T><<<unsigned(blocks), dim3(32, 8), 0, s>>>(p);
  }
  launch_threads(fp8_encode_kernel<E, T>, p, a.rows * a.cols, 256, a.device_id, s);
}

template <class T> void quantize_typed(const QuantArgs& a, cudaStream_t s) {
  const QParams p = qparams(a);
  const int dev = a.device_id;
  switch (a.format) {
#define BRAZE_CASE(name)                                                                                   \
  case QFormat::name:                                                                                      \
    return launch_threads(quantize_blocks_kernel<QFormat::name, T>, p,                                     \
                          a.rows * (a.cols / braze::quant::info(QFormat::name).blocks.block), kQThreads, dev, s);
    BRAZE_QUANT_GGML_FORMATS(BRAZE_CASE)
    BRAZE_QUANT_KQUANTS_FORMATS(BRAZE_CASE)
    BRAZE_QUANT_IQUANTS_FORMATS(BRAZE_CASE)
#undef BRAZE_CASE
    case QFormat::mxfp4: return launch_threads(quantize_mx_kernel<Elem::e2m1, T>, p, a.rows * (a.cols / 32), kQThreads, dev, s);
    case QFormat::mxfp6_e2m3: return launch_threads(quantize_mx_kernel<Elem::e2m3, T>, p, a.rows * (a.cols / 32), kQThreads, dev, s);
    case QFormat::mxfp6_e3m2: return launch_threads(quantize_mx_kernel<Elem::e3m2, T>, p, a.rows * (a.cols / 32), kQThreads, dev, s);
    case QFormat::mxfp8_e4m3: return launch_threads(quantize_mx_kernel<Elem::e4m3, T>, p, a.rows * (a.cols / 32), kQThreads, dev, s);
    case QFormat::mxfp8_e5m2: return launch_threads(quantize_mx_kernel<Elem::e5m2, T>, p, a.rows * (a.cols / 32), kQThreads, dev, s);
    case QFormat::nvfp4:
      tensor_scale_into<0, T>(p, a.tensor_scale, dev, s);
      return launch_threads(quantize_nvfp4_kernel<T>, p, a.rows * (a.cols / 16), kQThreads, dev, s);
    case QFormat::fp8_e4m3: return fp8_weights<Elem::e4m3, T>(a, p, s);
    case QFormat::fp8_e5m2: return fp8_weights<Elem::e5m2, T>(a, p, s);
    case QFormat::int8:
      return row_quant<RowCode::int8, T>(row_params(a.x, a.x_stride, a.data, a.data_stride, a.scales, 0, a.rows,
                                                    a.cols), dev, s);
    case QFormat::affine2: return affine_launch<2, T>(p, dev, s);
    case QFormat::affine3: return affine_launch<3, T>(p, dev, s);
    case QFormat::affine4: return affine_launch<4, T>(p, dev, s);
    case QFormat::affine5: return affine_launch<5, T>(p, dev, s);
    case QFormat::affine6: return affine_launch<6, T>(p, dev, s);
    case QFormat::affine8: return affine_launch<8, T>(p, dev, s);
    default: break;
  }
  throw ValueError(std::string("quantize: no CUDA kernel for ") + braze::quant::info(a.format).name);
}

// ------------------------------------------------------------------ activations
template <class T> void activations_typed(const ActQuantArgs& a, cudaStream_t s) {
  const RowParams p = row_params(a.x, a.x_stride, a.xq, a.xq_stride, a.sx, a.sx_stride, a.rows, a.cols);
  const int dev = a.device_id;
  if (a.format == ActFormat::fp8_e4m3) return row_quant<RowCode::e4m3, T>(p, dev, s);
  if (a.format == ActFormat::int8) return row_quant<RowCode::int8, T>(p, dev, s);
  // one thread per block: rows 16-byte aligned in and out for the vector forms
  const bool vec = aligned(a.x, 16) && aligned(a.xq, 16) &&
                   (a.rows == 1 || ((a.x_stride * int64_t(sizeof(T))) % 16 == 0 && a.xq_stride % 16 == 0));
  const int64_t blocks = a.rows * (a.cols / (a.format == ActFormat::mxfp8_e4m3 ? 32 : 16));
  if (a.format == ActFormat::mxfp8_e4m3) {
    auto k = vec ? act_mxfp8_kernel<T, true> : act_mxfp8_kernel<T, false>;
    k<<<grid_for(k, ceil_div(blocks, kRowThreads), kRowThreads, dev), kRowThreads, 0, s>>>(p);
  } else {
    auto k = vec ? act_nvfp4_kernel<T, true> : act_nvfp4_kernel<T, false>;
    k<<<grid_for(k, ceil_div(blocks, kRowThreads), kRowThreads, dev), kRowThreads, 0, s>>>(p);
  }
}

}  // namespace

void dequantize_run(const DequantArgs& a, uintptr_t stream) {
  if (a.rows == 0 || a.cols == 0) return;
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  by_dtype(a.dtype, [&](auto t) { dequantize_format<decltype(t)>(a, s); });
  check_launch("dequantize");
}

void quantize_run(const QuantArgs& a, uintptr_t stream) {
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (a.rows == 0 || a.cols == 0) {
    // nothing to encode, but scales are still written as the CPU writes them for no
    // elements: amax 0 (a tensor-wide scale from it; per-row scales 0)
    const bool fp8 = a.format == QFormat::fp8_e4m3 || a.format == QFormat::fp8_e5m2;
    if (a.format == QFormat::nvfp4 || (fp8 && a.group == braze::quant::kFp8GroupTensor)) {
      float* slot = a.format == QFormat::nvfp4 ? a.tensor_scale : static_cast<float*>(a.scales);
      check(cudaMemsetAsync(slot, 0, sizeof(float), s), "cudaMemsetAsync");
      if (a.format == QFormat::nvfp4) amax_to_scale_kernel<0><<<1, 1, 0, s>>>(slot);
      else if (a.format == QFormat::fp8_e4m3) amax_to_scale_kernel<1><<<1, 1, 0, s>>>(slot);
      else amax_to_scale_kernel<2><<<1, 1, 0, s>>>(slot);
      check_launch("quantize");
    } else if (a.rows > 0 && ((fp8 && a.group == braze::quant::kFp8GroupRow) || a.format == QFormat::int8)) {
      check(cudaMemsetAsync(a.scales, 0, size_t(a.rows) * sizeof(float), s), "cudaMemsetAsync");
    }
    return;
  }
  by_dtype(a.dtype, [&](auto t) { quantize_typed<decltype(t)>(a, s); });
  check_launch("quantize");
}

void quantize_activations_run(const ActQuantArgs& a, uintptr_t stream) {
  if (a.rows == 0 || a.cols == 0) {
    if (a.rows > 0 && (a.format == ActFormat::fp8_e4m3 || a.format == ActFormat::int8)) {
      // empty rows: amax 0, scale 0 (as the CPU writes)
      DeviceGuard guard(a.device_id);
      check(cudaMemsetAsync(a.sx, 0, size_t(a.rows) * sizeof(float), reinterpret_cast<cudaStream_t>(stream)),
            "cudaMemsetAsync");
    }
    return;
  }
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  by_dtype(a.dtype, [&](auto t) { activations_typed<decltype(t)>(a, s); });
  check_launch("quantize_activations");
}

}  // namespace braze::cuda
