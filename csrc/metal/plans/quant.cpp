#include "quant.h"

#include <algorithm>
#include <string>

#include "quant/quant_params.h"

namespace braze::metal {
namespace {

using quant::Group;
using quant::QFormat;

// The shaders' format ids are the table's order.
#define BRAZE_CHECK_ID(name, id) static_assert(int(QFormat::name) == id, "quant_params.h out of date: " #name);
BRAZE_CHECK_ID(q8_0, QF_Q8_0) BRAZE_CHECK_ID(q4_0, QF_Q4_0) BRAZE_CHECK_ID(q4_1, QF_Q4_1)
BRAZE_CHECK_ID(q5_0, QF_Q5_0) BRAZE_CHECK_ID(q5_1, QF_Q5_1) BRAZE_CHECK_ID(q2_K, QF_Q2_K)
BRAZE_CHECK_ID(q3_K, QF_Q3_K) BRAZE_CHECK_ID(q4_K, QF_Q4_K) BRAZE_CHECK_ID(q5_K, QF_Q5_K)
BRAZE_CHECK_ID(q6_K, QF_Q6_K) BRAZE_CHECK_ID(q8_K, QF_Q8_K) BRAZE_CHECK_ID(iq4_nl, QF_IQ4_NL)
BRAZE_CHECK_ID(iq4_xs, QF_IQ4_XS) BRAZE_CHECK_ID(mxfp4, QF_MXFP4) BRAZE_CHECK_ID(mxfp6_e2m3, QF_MXFP6_E2M3)
BRAZE_CHECK_ID(mxfp6_e3m2, QF_MXFP6_E3M2) BRAZE_CHECK_ID(mxfp8_e4m3, QF_MXFP8_E4M3)
BRAZE_CHECK_ID(mxfp8_e5m2, QF_MXFP8_E5M2) BRAZE_CHECK_ID(mxfp4_gguf, QF_MXFP4_GGUF) BRAZE_CHECK_ID(nvfp4, QF_NVFP4)
BRAZE_CHECK_ID(nvfp4_gguf, QF_NVFP4_GGUF) BRAZE_CHECK_ID(fp8_e4m3, QF_FP8_E4M3) BRAZE_CHECK_ID(fp8_e5m2, QF_FP8_E5M2)
BRAZE_CHECK_ID(int8, QF_INT8) BRAZE_CHECK_ID(affine2, QF_AFFINE2) BRAZE_CHECK_ID(affine3, QF_AFFINE3)
BRAZE_CHECK_ID(affine4, QF_AFFINE4) BRAZE_CHECK_ID(affine5, QF_AFFINE5) BRAZE_CHECK_ID(affine6, QF_AFFINE6)
BRAZE_CHECK_ID(affine8, QF_AFFINE8)
#undef BRAZE_CHECK_ID
static_assert(quant::kNumFormats == 30, "a format was added: give it a shader id");

bool float_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

std::uint32_t sdt_code(DType t) {
  return t == DType::f16 ? QUANT_SDT_F16 : t == DType::bf16 ? QUANT_SDT_BF16 : QUANT_SDT_F32;
}

// Bytes of a [rows, cols] array of `t` with row stride `stride` elements;
// stride 0 with rows > 1 is a contiguous vector of one element per row.
std::uint64_t extent(std::int64_t rows, std::int64_t cols, std::int64_t stride, DType t) {
  if (stride == 0 && cols == 1) return row_bytes(1, rows, 1, t);
  return row_bytes(rows, cols, stride, t);
}

// One thread per unit (a chunk of 8, a block) of every row: grid x covers a row's units,
// in threadgroups of up to max_threads (a multiple of 32).
void unit_grid(Dispatch& d, std::int64_t units, std::int64_t rows, std::uint64_t max_threads = QUANT_THREADS) {
  const std::uint64_t threads = std::min<std::uint64_t>(max_threads, (std::uint64_t(units) + 31) / 32 * 32);
  d.threads[0] = std::uint32_t(threads);
  d.threadgroups[0] = std::uint32_t((std::uint64_t(units) + threads - 1) / threads);
  d.threadgroups[1] = std::uint32_t(rows);
}

bool fits(std::initializer_list<std::int64_t> vs) {
  for (std::int64_t v : vs)
    if (!fits_u32(v)) return false;
  return true;
}

BufferRef absent_or(Plan& plan, const void* ptr, std::uint64_t bytes, bool output, BufferRef fallback) {
  return ptr ? plan.array(ptr, bytes, output) : fallback;
}

// The weight's four slots (data, scales, biases, tensor scale) as dequantize
// and matmul bind them: an absent array's slot holds `data` (never read).
struct WeightRefs {
  BufferRef data, scales, biases, tensor_scale;
};
WeightRefs weight_refs(Plan& plan, const quant::DequantArgs& a, std::int64_t row_bytes_of_data) {
  WeightRefs w;
  w.data = plan.array(a.data, row_bytes(a.rows, row_bytes_of_data, a.data_stride, DType::u8));
  w.scales =
      absent_or(plan, a.scales, extent(a.scales_rows, a.scales_cols, a.scales_stride, a.scales_dtype), false, w.data);
  w.biases =
      absent_or(plan, a.biases, extent(a.scales_rows, a.scales_cols, a.biases_stride, a.scales_dtype), false, w.data);
  w.tensor_scale = absent_or(plan, a.tensor_scale, 4, false, w.data);
  return w;
}

// The QuantParams of a weight that dequantize and matmul read.
QuantParams weight_params(const quant::DequantArgs& a) {
  QuantParams p{};
  p.rows = std::uint32_t(a.rows);
  p.cols = std::uint32_t(a.cols);
  p.data_stride = std::uint32_t(a.data_stride);
  p.scales_stride = std::uint32_t(a.scales_stride);
  p.biases_stride = std::uint32_t(a.biases_stride);
  p.group = std::uint32_t(a.group);
  p.scales_dtype = sdt_code(a.scales_dtype);
  return p;
}

}  // namespace

bool metal_quantizes(QFormat f) {
  const Group g = quant::info(f).group;
  return g == Group::ggml || g == Group::kquants || g == Group::iquants ||
         quant::info(f).layout == quant::Layout::split;
}

Plan plan_dequantize(const quant::DequantArgs& a) {
  Plan plan;
  if (!float_dtype(a.dtype)) plan.error = "no Metal dequantize kernel for this output dtype";
  else if (!fits({a.rows, a.cols, a.data_stride, a.out_stride, a.scales_stride, a.biases_stride, a.group}))
    plan.error = "sizes or strides out of range (the Metal kernels take them in [0, 2^32))";
  if (!plan.error.empty() || a.rows == 0 || a.cols == 0) return plan;

  const quant::FormatInfo& fi = quant::info(a.format);
  QuantParams p = weight_params(a);
  p.x_stride = std::uint32_t(a.out_stride);

  Dispatch d;
  d.kernel = std::string("dequantize_") + fi.name + "_" + dtype_suffix(a.dtype);
  unit_grid(d, (a.cols + QUANT_CHUNK - 1) / QUANT_CHUNK, a.rows);
  const WeightRefs w = weight_refs(plan, a, fi.blocks.bytes(a.cols));
  const BufferRef out = plan.array(a.out, row_bytes(a.rows, a.cols, a.out_stride, a.dtype), true);
  d.buffers = {w.data, w.scales, w.biases, w.tensor_scale, out};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan plan_quantize(const quant::QuantArgs& a) {
  Plan plan;
  const quant::FormatInfo& fi = quant::info(a.format);
  if (!metal_quantizes(a.format))
    plan.error = std::string("quantize of format '") + fi.name +
                 "' has no Metal kernel (Metal quantizes the GGML legacy formats, the K-quants, iq4_nl, iq4_xs, "
                 "the MX formats, nvfp4, fp8_e4m3, fp8_e5m2, int8 and affine2..8)";
  else if (!float_dtype(a.dtype)) plan.error = "no Metal quantize kernel for this input dtype";
  else if (fi.group == Group::affine && a.scales_dtype != a.dtype)
    plan.error = "affine quantize on Metal writes scales and biases in w's dtype; got scales of another dtype";
  else if (!fits({a.rows, a.cols, a.x_stride, a.data_stride, a.scales_stride, a.biases_stride, a.group}))
    plan.error = "sizes or strides out of range (the Metal kernels take them in [0, 2^32))";
  if (!plan.error.empty() || a.rows == 0 || a.cols == 0) return plan;

  QuantParams p{};
  p.rows = std::uint32_t(a.rows);
  p.cols = std::uint32_t(a.cols);
  p.x_stride = std::uint32_t(a.x_stride);
  p.data_stride = std::uint32_t(a.data_stride);
  p.scales_stride = std::uint32_t(a.scales_stride);
  p.biases_stride = std::uint32_t(a.biases_stride);
  p.group = std::uint32_t(a.group);
  p.rule = std::uint32_t(a.scale_rule);
  const std::string suffix = std::string("_") + dtype_suffix(a.dtype);
  const std::string name = std::string("quantize_") + fi.name + suffix;

  const BufferRef x = plan.array(a.x, row_bytes(a.rows, a.cols, a.x_stride, a.dtype));
  const BufferRef data =
      plan.array(a.data, row_bytes(a.rows, fi.blocks.bytes(a.cols), a.data_stride, DType::u8), true);
  const BufferRef scales =
      absent_or(plan, a.scales, extent(a.scales_rows, a.scales_cols, a.scales_stride, a.scales_dtype), true, data);
  const BufferRef biases =
      absent_or(plan, a.biases, extent(a.scales_rows, a.scales_cols, a.biases_stride, a.scales_dtype), true, data);
  const BufferRef ts = absent_or(plan, a.tensor_scale, 4, true, data);
  const Group g = fi.group;

  if (g == Group::fp8 || g == Group::int8 || g == Group::nvfp4) {
    // The scales first: one threadgroup per region (a row, a 128 x 128 block, the tensor).
    QuantParams s = p;
    std::int64_t gx = 1, gy = 1;
    if (g == Group::nvfp4 || a.group == quant::kFp8GroupTensor) {
      s.region_rows = p.rows;
      s.region_cols = p.cols;
      s.scales_stride = 0;
    } else if (a.group == quant::kFp8GroupRow) {
      s.region_rows = 1;
      s.region_cols = p.cols;
      s.scales_stride = 1;
      gy = a.rows;
    } else {
      s.region_rows = s.region_cols = 128;
      gx = (a.cols + 127) / 128;
      gy = (a.rows + 127) / 128;
    }
    s.mode = g == Group::nvfp4 ? QUANT_SCALE_NVFP4 : g == Group::int8 ? QUANT_SCALE_INT8
           : a.format == QFormat::fp8_e4m3 ? QUANT_SCALE_FP8_E4M3 : QUANT_SCALE_FP8_E5M2;
    Dispatch d;
    d.kernel = std::string("quant_amax") + suffix;
    d.threads[0] = QUANT_THREADS;
    d.threadgroups[0] = std::uint32_t(gx);
    d.threadgroups[1] = std::uint32_t(gy);
    d.buffers = {x, g == Group::nvfp4 ? ts : scales};
    d.params = param_bytes(s);
    plan.dispatches.push_back(d);
  }

  Dispatch d;
  d.kernel = name;
  if (g == Group::fp8 || g == Group::int8) {
    unit_grid(d, (a.cols + QUANT_CHUNK - 1) / QUANT_CHUNK, a.rows);
    d.buffers = {x, data, scales};
  } else if (g == Group::kquants || g == Group::iquants) {
    // quantize_search.metal: a thread searches one block with ~1.5 KiB of thread arrays; one
    // simdgroup to a threadgroup (a 4096-wide row has only 16 super-blocks).
    unit_grid(d, a.cols / fi.blocks.block, a.rows, 32);
    d.buffers = {x, data};
  } else {
    const std::int64_t block = g == Group::affine ? a.group : g == Group::nvfp4 ? 16 : 32;
    unit_grid(d, a.cols / block, a.rows);
    d.buffers = {x, data, scales, biases, ts};
  }
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan plan_quantize_activations(const quant::ActQuantArgs& a) {
  Plan plan;
  if (!float_dtype(a.dtype)) plan.error = "no Metal quantize_activations kernel for this input dtype";
  else if (!fits({a.rows, a.cols, a.x_stride, a.xq_stride, a.sx_stride}))
    plan.error = "sizes or strides out of range (the Metal kernels take them in [0, 2^32))";
  if (!plan.error.empty() || a.rows == 0 || a.cols == 0) return plan;

  static const char* names[] = {"fp8_e4m3", "int8", "mxfp8_e4m3", "nvfp4"};
  QuantParams p{};
  p.rows = std::uint32_t(a.rows);
  p.cols = std::uint32_t(a.cols);
  p.x_stride = std::uint32_t(a.x_stride);
  p.data_stride = std::uint32_t(a.xq_stride);
  p.scales_stride = std::uint32_t(a.sx_stride);
  const bool per_token = a.format == quant::ActFormat::fp8_e4m3 || a.format == quant::ActFormat::int8;
  const std::int64_t block = a.format == quant::ActFormat::nvfp4 ? 16 : 32;
  const std::int64_t xq_cols = a.format == quant::ActFormat::nvfp4 ? a.cols / 2 : a.cols;

  Dispatch d;
  d.kernel = std::string("quantize_activations_") + names[int(a.format)] + "_" + dtype_suffix(a.dtype);
  const BufferRef x = plan.array(a.x, row_bytes(a.rows, a.cols, a.x_stride, a.dtype));
  const BufferRef xq = plan.array(a.xq, row_bytes(a.rows, xq_cols, a.xq_stride, DType::u8), true);
  const BufferRef sx = per_token ? plan.array(a.sx, row_bytes(1, a.rows, 1, DType::f32), true)
                                 : plan.array(a.sx, row_bytes(a.rows, a.cols / block, a.sx_stride, DType::u8), true);
  if (per_token) {
    // One threadgroup per token: threads for the row's elements, a power of two (the max tree).
    std::uint32_t t = 32;
    while (t < QUANT_THREADS && std::int64_t(t) < a.cols) t *= 2;
    d.threads[0] = t;
    d.threadgroups[1] = std::uint32_t(a.rows);
  } else {
    unit_grid(d, a.cols / block, a.rows);
  }
  d.buffers = {x, xq, sx};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan plan_matmul(const quant::MatmulArgs& a) {
  Plan plan;
  const quant::DequantArgs& w = a.w;
  if (!float_dtype(a.dtype)) plan.error = "no Metal matmul kernel for this dtype";
  else if (!fits({a.m, w.rows, w.cols, a.x_stride, a.out_stride, w.data_stride, w.scales_stride, w.biases_stride,
                  w.group}))
    plan.error = "sizes or strides out of range (the Metal kernels take them in [0, 2^32))";
  if (!plan.error.empty() || a.m == 0 || w.rows == 0) return plan;

  MatmulParams p{};
  p.w = weight_params(w);
  p.m = std::uint32_t(a.m);
  p.x_stride = std::uint32_t(a.x_stride);
  p.out_stride = std::uint32_t(a.out_stride);
  p.has_bias = a.bias ? 1u : 0u;

  const bool gemv = a.m <= QMM_GEMV_MAX_ROWS;
  Dispatch d;
  d.kernel = std::string(gemv ? "matmul_" : "matmul_gemm_") + (a.dense ? "dense" : quant::info(w.format).name) +
             "_" + dtype_suffix(a.dtype);
  if (gemv) {
    d.threads[0] = 32 * QMM_GEMV_SIMDGROUPS;
    d.threadgroups[0] = std::uint32_t((w.rows + QMM_GEMV_SIMDGROUPS - 1) / QMM_GEMV_SIMDGROUPS);
  } else {
    d.threads[0] = QMM_GEMM_THREADS;
    d.threadgroups[0] = std::uint32_t((w.rows + QMM_TILE - 1) / QMM_TILE);
    d.threadgroups[1] = std::uint32_t((a.m + QMM_TILE - 1) / QMM_TILE);
  }
  const std::int64_t w_row_bytes =
      a.dense ? Format(a.dtype).bytes(w.cols) : quant::info(w.format).blocks.bytes(w.cols);
  const WeightRefs wr = weight_refs(plan, w, w_row_bytes);
  const BufferRef x = plan.array(a.x, row_bytes(a.m, w.cols, a.x_stride, a.dtype));
  const BufferRef bias = a.bias ? plan.array(a.bias, row_bytes(1, w.rows, 1, a.dtype)) : x;
  const BufferRef out = plan.array(a.out, row_bytes(a.m, w.rows, a.out_stride, a.dtype), true);
  d.buffers = {wr.data, wr.scales, wr.biases, wr.tensor_scale, x, bias, out};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

}  // namespace braze::metal

namespace braze::metal {

Plan plan_matmul_w8a8(const quant::W8A8Args& a) {
  Plan plan;
  const quant::DequantArgs& w = a.w;
  if (!float_dtype(a.dtype)) plan.error = "no Metal matmul_w8a8 kernel for this out dtype";
  else if (!fits({a.m, w.rows, w.cols, a.x_stride, w.data_stride, a.out_stride}))
    plan.error = "sizes or strides out of range (the Metal kernels take them in [0, 2^32))";
  if (!plan.error.empty() || a.m == 0 || w.rows == 0) return plan;

  W8A8Params p{};
  p.m = std::uint32_t(a.m);
  p.n = std::uint32_t(w.rows);
  p.k = std::uint32_t(w.cols);
  p.x_stride = std::uint32_t(a.x_stride);
  p.w_stride = std::uint32_t(w.data_stride);
  p.out_stride = std::uint32_t(a.out_stride);
  p.w_group = w.group == quant::kFp8GroupTensor ? QUANT_FP8_TENSOR : QUANT_FP8_ROW;
  p.has_bias = a.bias ? 1u : 0u;

  const bool gemv = a.m <= QMM_GEMV_MAX_ROWS;
  Dispatch d;
  d.kernel = std::string(gemv ? "matmul_w8a8_" : "matmul_w8a8_gemm_") + quant::info(w.format).name + "_" +
             dtype_suffix(a.dtype);
  if (gemv) {
    d.threads[0] = 32 * QMM_GEMV_SIMDGROUPS;
    d.threadgroups[0] = std::uint32_t((w.rows + QMM_GEMV_SIMDGROUPS - 1) / QMM_GEMV_SIMDGROUPS);
  } else {
    d.threads[0] = QMM_GEMM_THREADS;
    d.threadgroups[0] = std::uint32_t((w.rows + QMM_TILE - 1) / QMM_TILE);
    d.threadgroups[1] = std::uint32_t((a.m + QMM_TILE - 1) / QMM_TILE);
  }
  const BufferRef x = plan.array(a.x, row_bytes(a.m, w.cols, a.x_stride, DType::u8));
  const BufferRef xs = plan.array(a.x_scale, row_bytes(1, a.m, 1, DType::f32));
  const BufferRef data = plan.array(w.data, row_bytes(w.rows, w.cols, w.data_stride, DType::u8));
  const std::int64_t nscales = w.group == quant::kFp8GroupTensor ? 1 : w.rows;
  const BufferRef scales = plan.array(w.scales, row_bytes(1, nscales, 1, DType::f32));
  const BufferRef bias = a.bias ? plan.array(a.bias, row_bytes(1, w.rows, 1, a.dtype)) : xs;
  const BufferRef out = plan.array(a.out, row_bytes(a.m, w.rows, a.out_stride, a.dtype), true);
  d.buffers = {x, xs, data, scales, bias, out};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

}  // namespace braze::metal
