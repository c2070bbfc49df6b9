#include "core/quant_w8a8.h"

#include "core/format.h"

namespace braze::quant {

W8A8Args prepare_matmul_w8a8(const std::string& format, const Tensor& x, const Tensor& x_scale, const Tensor& data,
                             const Tensor& scales, const Tensor& bias, const Tensor& out) {
  const QFormat f = format_named(format);
  if (f != QFormat::int8 && f != QFormat::fp8_e4m3 && f != QFormat::fp8_e5m2)
    throw ValueError("format: quantized x (W8A8) multiplies weights of format 'int8', 'fp8_e4m3' or 'fp8_e5m2', got '" +
                     format + "'");
  W8A8Args a{};
  if (x.dtype == DType::i8) a.x_format = ActFormat::int8;
  else if (x.dtype == DType::u8) a.x_format = ActFormat::fp8_e4m3;
  else
    throw TypeError(std::string(x.name) + " must hold int8 levels or uint8 e4m3 codes (quantize_activations), got " +
                    dtype_name(x.dtype));
  if (x.ndim != 2) throw ValueError(std::string(x.name) + " must have 2 axes [M, K], got shape " + shape_str(x));
  const bool int8 = f == QFormat::int8;
  if (int8 != (a.x_format == ActFormat::int8))
    throw ValueError(std::string(x.name) + ": " + (a.x_format == ActFormat::int8 ? "int8" : "e4m3 (uint8)") +
                     " x does not pair with a " + format + " weight (pairs: int8 x with int8 W, " +
                     "e4m3 x with fp8_e4m3 or fp8_e5m2 W)");
  const int64_t m = x.shape[0], k = x.shape[1];
  if (int8 && k > kW8A8Int8MaxK)
    throw ValueError(std::string(x.name) + ": K = " + std::to_string(k) + " is above " +
                     std::to_string(kW8A8Int8MaxK) + ", where an int8 sum of K products could leave int32");
  require_dtype(data, int8 ? DType::i8 : DType::u8);
  if (data.ndim != 2 || data.shape[1] != k)
    throw ValueError(std::string(data.name) + " must be [N, " + std::to_string(k) + "] (K of x), got shape " +
                     shape_str(data));
  const int64_t n = data.shape[0];
  const Rows rd = as_rows(data, Role::input);
  const Tensor none{};
  a.w.format = f;
  a.w.rows = n;
  a.w.cols = k;
  a.w.data = static_cast<const uint8_t*>(data.data);
  a.w.data_stride = rd.stride;
  prepare_split(f, n, k, scales, none, none, 0, Role::input, a.w);
  if (a.w.group == kFp8GroupBlock)
    throw ValueError(std::string(scales.name) + ": block-scaled fp8 weights (128 x 128) with quantized x need " +
                     "per-group activation scales, which W8A8 does not take yet; use per-tensor or per-row scales " +
                     "or float x");
  require_dtype(x_scale, DType::f32);
  require_vector(x_scale, m, "[M] (one scale per row of x)");
  require_float(out);
  a.dtype = a.w.dtype = out.dtype;
  if (bias.defined()) {
    require_dtype(bias, out.dtype);
    require_vector(bias, n, "[N] (rows of the weight)");
  }
  const int64_t want[2] = {m, n};
  require_shape(out, want, 2, "[M, N] (rows of x, rows of the weight)");
  const Rows rx = as_rows(x, Role::input), ro = as_rows(out, Role::output);
  require_same_device({&x, &x_scale, &data, &scales, &bias, &out});
  for (const Tensor* t : {&x, &x_scale, &data, &scales, &bias})
    if (t->defined()) require_disjoint(out, *t);
  a.m = m;
  a.x = static_cast<const uint8_t*>(x.data);
  a.x_stride = rx.stride;
  a.x_scale = static_cast<const float*>(x_scale.data);
  a.bias = bias.defined() ? bias.data : nullptr;
  a.out = out.data;
  a.out_stride = ro.stride;
  a.device = a.w.device = out.device;
  a.device_id = a.w.device_id = out.device_id;
  return a;
}

}  // namespace braze::quant
