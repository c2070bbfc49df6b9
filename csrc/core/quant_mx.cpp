#include "core/quant_mx.h"

#include "core/quant/mx.h"

namespace braze::quant {
namespace {

void require_none(QFormat f, const Tensor& t, const char* why) {
  if (t.defined()) throw ValueError(std::string(t.name) + " must be None for " + info(f).name + ": " + why);
}

// A 2-D [rows, cols] array with a contiguous last axis: its row stride in elements.
int64_t matrix_of(const Tensor& t, int64_t rows, int64_t cols, const char* what, Role role) {
  const int64_t want[2] = {rows, cols};
  require_shape(t, want, 2, what);
  return as_rows(t, role).stride;
}

template <class A>
void fill_split(QFormat f, int64_t n, int64_t k, const Tensor& scales, const Tensor& biases,
                const Tensor& tensor_scale, int64_t group, Role role, A& a) {
  const Group g = info(f).group;
  if (!scales.defined()) throw ValueError(std::string(scales.name) + " is required for " + info(f).name);
  a.scales = scales.data;
  a.scales_dtype = scales.dtype;
  a.scales_rows = scales.ndim ? scales.shape[0] : 1;
  a.scales_cols = scales.ndim > 1 ? scales.shape[1] : 1;
  a.scales_stride = 0;
  a.biases = nullptr;
  a.biases_stride = 0;
  a.tensor_scale = nullptr;
  if (g == Group::mx || g == Group::nvfp4) {
    const int64_t block = g == Group::mx ? 32 : 16;
    require_dtype(scales, DType::u8);
    const std::string what = std::string("[N, K / ") + std::to_string(block) + "] (one " +
                             (g == Group::mx ? "e8m0" : "e4m3") + " byte per block)";
    a.scales_stride = matrix_of(scales, n, k / block, what.c_str(), role);
    require_none(f, biases, "it has no biases");
    a.group = block;
    if (g == Group::mx) {
      require_none(f, tensor_scale, "its scales are e8m0 powers of two, one per block");
    } else {
      if (!tensor_scale.defined())
        throw ValueError(std::string(tensor_scale.name) + " (the f32 tensor scale) is required for nvfp4");
      require_dtype(tensor_scale, DType::f32);
      if (tensor_scale.numel() != 1)
        throw ValueError(std::string(tensor_scale.name) + " must hold one float32, got shape " +
                         shape_str(tensor_scale));
      a.tensor_scale = static_cast<float*>(tensor_scale.data);
    }
  } else if (g == Group::fp8 || g == Group::int8) {
    require_dtype(scales, DType::f32);
    require_none(f, biases, "it has no biases");
    require_none(f, tensor_scale, "its scales hold the tensor scale");
    const int64_t nb = (n + 127) / 128, kb = (k + 127) / 128;
    if (g == Group::int8 || scales.ndim == 1) {
      if (g == Group::fp8 && scales.shape[0] == 1 && n != 1) {
        a.group = kFp8GroupTensor;
      } else {
        require_vector(scales, n, g == Group::int8 ? "[N] (one scale per row)"
                                                   : "[1] (per tensor), [N] (per row) or [ceil(N/128), ceil(K/128)]");
        a.group = kFp8GroupRow;
      }
    } else {
      a.scales_stride = matrix_of(scales, nb, kb, "[ceil(N/128), ceil(K/128)] (one scale per 128 x 128 block)", role);
      a.group = kFp8GroupBlock;
    }
    if (role == Role::output && a.group != kFp8GroupBlock) as_rows(scales, role);
  } else if (g == Group::affine) {
    if (group != 32 && group != 64 && group != 128)
      throw ValueError("group_size must be 32, 64 or 128, got " + std::to_string(group));
    if (k % group)
      throw ValueError("K (the row length, " + std::to_string(k) + ") must be a multiple of group_size " +
                       std::to_string(group));
    require_float(scales);
    if (!biases.defined()) throw ValueError(std::string(biases.name) + " is required for affine formats");
    require_dtype(biases, scales.dtype);
    require_none(f, tensor_scale, "it has per-group scales and biases");
    a.scales_stride = matrix_of(scales, n, k / group, "[N, K / group_size]", role);
    a.biases = biases.data;
    a.biases_stride = matrix_of(biases, n, k / group, "[N, K / group_size]", role);
    a.group = group;
  } else {
    throw ValueError(std::string(info(f).name) + " is not a split-layout format");
  }
}

}  // namespace

void prepare_split(QFormat f, int64_t n, int64_t k, const Tensor& scales, const Tensor& biases,
                   const Tensor& tensor_scale, int64_t group, Role role, DequantArgs& a) {
  fill_split(f, n, k, scales, biases, tensor_scale, group, role, a);
}
void prepare_split(QFormat f, int64_t n, int64_t k, const Tensor& scales, const Tensor& biases,
                   const Tensor& tensor_scale, int64_t group, Role role, QuantArgs& a) {
  fill_split(f, n, k, scales, biases, tensor_scale, group, role, a);
}

std::string act_formats() { return "'fp8_e4m3', 'int8', 'mxfp8_e4m3', 'nvfp4'"; }

ActQuantArgs prepare_quantize_activations(const std::string& format, const Tensor& x, const Tensor& xq,
                                          const Tensor& sx) {
  ActQuantArgs a{};
  if (format == "fp8_e4m3") a.format = ActFormat::fp8_e4m3;
  else if (format == "int8") a.format = ActFormat::int8;
  else if (format == "mxfp8_e4m3") a.format = ActFormat::mxfp8_e4m3;
  else if (format == "nvfp4") a.format = ActFormat::nvfp4;
  else throw ValueError("format must be one of " + act_formats() + "; got '" + format + "'");
  require_float(x);
  if (x.ndim != 2) throw ValueError(std::string(x.name) + " must have 2 axes [M, K], got shape " + shape_str(x));
  const int64_t m = x.shape[0], k = x.shape[1];
  const int64_t block = a.format == ActFormat::mxfp8_e4m3 ? 32 : a.format == ActFormat::nvfp4 ? 16 : 1;
  if (k % block)
    throw ValueError("x: K (" + std::to_string(k) + ") must be a multiple of " + format + "'s block of " +
                     std::to_string(block));
  const Rows rx = as_rows(x, Role::input);
  require_dtype(xq, a.format == ActFormat::int8 ? DType::i8 : DType::u8);
  const int64_t xq_cols = a.format == ActFormat::nvfp4 ? k / 2 : k;
  const int64_t want[2] = {m, xq_cols};
  require_shape(xq, want, 2, a.format == ActFormat::nvfp4 ? "[M, K / 2]" : "[M, K]");
  const Rows rq = as_rows(xq, Role::output);
  if (block == 1) {
    require_dtype(sx, DType::f32);
    require_vector(sx, m, "[M] (one scale per token)");
    a.sx_stride = 0;
  } else {
    require_dtype(sx, DType::u8);
    const int64_t ws[2] = {m, k / block};
    require_shape(sx, ws, 2, block == 32 ? "[M, K / 32]" : "[M, K / 16]");
    a.sx_stride = as_rows(sx, Role::output).stride;
  }
  require_same_device({&x, &xq, &sx});
  require_disjoint(xq, x);
  require_disjoint(sx, x);
  require_disjoint(sx, xq);
  a.dtype = x.dtype;
  a.rows = m;
  a.cols = k;
  a.x = x.data;
  a.x_stride = rx.stride;
  a.xq = xq.data;
  a.xq_stride = rq.stride;
  a.sx = sx.data;
  a.device = x.device;
  a.device_id = x.device_id;
  return a;
}

}  // namespace braze::quant
