#include "core/quant.h"

#include "core/format.h"
#include "core/quant_mx.h"

namespace braze::quant {

// Each group's kernels register here, one line per group, once they exist on every
// backend that builds the family (its codec header written, its CPU kernel wired).
bool dequantize_built(QFormat f) {
  switch (info(f).group) {
    case Group::ggml: return true;
    case Group::kquants: return true;
    case Group::iquants: return true;
    case Group::mx: case Group::nvfp4: case Group::fp8: case Group::int8: case Group::affine: return true;
    default: return false;
  }
}
bool quantize_built(QFormat f) {
  switch (info(f).group) {
    case Group::ggml: return true;
    case Group::kquants: return true;
    case Group::iquants: return true;
    default: return info(f).layout == Layout::split;  // quant-mx's formats (not GGUF's fp4 blocks)
  }
}

std::string known_formats() {
  std::string s;
  for (int i = 0; i < kNumFormats; ++i) s += std::string(i ? ", '" : "'") + kFormats[i].name + "'";
  return s;
}

QFormat format_named(const std::string& name, const char* arg) {
  QFormat f;
  if (!find_format(name.c_str(), f))
    throw ValueError(std::string(arg) + " must be one of " + known_formats() + "; got '" + name + "'");
  return f;
}

namespace {

// The dtype `data` holds for a format: MLX packs affine elements in uint32 words.
DType data_dtype(QFormat f) {
  return info(f).group == Group::affine ? DType::u32 : f == QFormat::int8 ? DType::i8 : DType::u8;
}

// A 2-D array [rows, n] whose last axis is contiguous: (rows, row stride in elements).
Rows matrix(const Tensor& t, Role role) {
  if (t.ndim != 2)
    throw ValueError(std::string(t.name) + " must have 2 axes [N, ...], got shape " + shape_str(t));
  return as_rows(t, role);
}

void require_k(QFormat f, int64_t k) {
  const Format& b = info(f).blocks;
  if (k < 0) throw ValueError("K must be >= 0, got " + std::to_string(k));
  if (k % b.block)
    throw ValueError("K (the row length, " + std::to_string(k) + ") must be a multiple of " + info(f).name +
                     "'s block of " + std::to_string(b.block) + " elements");
}

// data [n, bytes(K)]: a wrong byte count names what was expected.
void require_data(QFormat f, const Tensor& data, int64_t n, int64_t k) {
  require_dtype(data, data_dtype(f));
  const Format& b = info(f).blocks;
  const int64_t want = b.bytes(k) / dtype_size(data_dtype(f));
  if (data.ndim != 2 || (n >= 0 && data.shape[0] != n) || data.shape[1] != want)
    throw ValueError(std::string(data.name) + " must be [N, " + std::to_string(want) + "] (" + info(f).name +
                     ": " + std::to_string(b.block_bytes) + " bytes per " + std::to_string(b.block) +
                     " elements, K = " + std::to_string(k) + "), got shape " + shape_str(data));
}

void require_built(QFormat f, bool built, const char* what) {
  if (!built)
    throw ValueError(std::string(what) + " of format '" + info(f).name + "' (group " + group_name(info(f).group) +
                     ") is not built yet");
}

void require_absent_for_blocks(QFormat f, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined())
      throw ValueError(std::string(t->name) + " must be None for " + info(f).name +
                       ": its scales are inside its blocks");
}

}  // namespace

DequantArgs prepare_dequantize(const std::string& format, int64_t k, const Tensor& data, const Tensor& scales,
                               const Tensor& biases, const Tensor& tensor_scale, const Tensor& out, int64_t group) {
  const QFormat f = format_named(format);
  require_built(f, dequantize_built(f), "dequantize");
  require_k(f, k);
  require_data(f, data, -1, k);
  if (info(f).layout == Layout::blocks) require_absent_for_blocks(f, {&scales, &biases, &tensor_scale});
  require_float(out);
  const int64_t want[2] = {data.shape[0], k};
  require_shape(out, want, 2, "[N, K] of the quantized weight");
  const Rows rd = matrix(data, Role::input), ro = matrix(out, Role::output);
  require_same_device({&data, &scales, &biases, &tensor_scale, &out});
  require_disjoint(out, data);
  DequantArgs a{};
  a.format = f;
  a.dtype = out.dtype;
  a.rows = want[0];
  a.cols = k;
  a.data = static_cast<const uint8_t*>(data.data);
  a.data_stride = rd.stride * dtype_size(data.dtype);
  a.group = group;
  if (info(f).layout == Layout::split) prepare_split(f, a.rows, k, scales, biases, tensor_scale, group, Role::input, a);
  a.out = out.data;
  a.out_stride = ro.stride;
  a.device = out.device;
  a.device_id = out.device_id;
  return a;
}

MatmulArgs prepare_matmul(const std::string& format, const Tensor& x, const Tensor& data, const Tensor& scales,
                          const Tensor& biases, const Tensor& tensor_scale, const Tensor& bias, const Tensor& out,
                          int64_t group) {
  require_float(x);
  if (x.ndim != 2) throw ValueError(std::string(x.name) + " must have 2 axes [M, K], got shape " + shape_str(x));
  const int64_t m = x.shape[0], k = x.shape[1];
  MatmulArgs a{};
  a.dense = format.empty();
  a.dtype = x.dtype;
  if (a.dense) {
    require_dtype(data, x.dtype);
    if (data.ndim != 2 || data.shape[1] != k)
      throw ValueError(std::string(data.name) + " must be [N, " + std::to_string(k) + "] (K of x), got shape " +
                       shape_str(data));
    for (const Tensor* t : {&scales, &biases, &tensor_scale})
      if (t->defined()) throw ValueError(std::string(t->name) + " must be None for a dense weight");
    const Rows rd = matrix(data, Role::input);
    a.w.rows = data.shape[0];
    a.w.cols = k;
    a.w.data = static_cast<const uint8_t*>(data.data);
    a.w.data_stride = rd.stride * dtype_size(data.dtype);
  } else {
    const QFormat f = format_named(format);
    require_built(f, dequantize_built(f), "matmul");
    require_k(f, k);
    require_data(f, data, -1, k);
    if (info(f).layout == Layout::blocks) require_absent_for_blocks(f, {&scales, &biases, &tensor_scale});
    const Rows rd = matrix(data, Role::input);
    a.w.format = f;
    a.w.rows = data.shape[0];
    a.w.cols = k;
    a.w.data = static_cast<const uint8_t*>(data.data);
    a.w.data_stride = rd.stride * dtype_size(data.dtype);
    a.w.group = group;
    if (info(f).layout == Layout::split)
      prepare_split(f, a.w.rows, k, scales, biases, tensor_scale, group, Role::input, a.w);
  }
  a.w.dtype = x.dtype;
  const int64_t n = a.w.rows;
  if (bias.defined()) {
    require_dtype(bias, x.dtype);
    require_vector(bias, n, "[N] (rows of the weight)");
  }
  require_dtype(out, x.dtype);
  const int64_t want[2] = {m, n};
  require_shape(out, want, 2, "[M, N] (rows of x, rows of the weight)");
  const Rows rx = matrix(x, Role::input), ro = matrix(out, Role::output);
  require_same_device({&x, &data, &scales, &biases, &tensor_scale, &bias, &out});
  for (const Tensor* t : {&x, &data, &scales, &biases, &tensor_scale, &bias})
    if (t->defined()) require_disjoint(out, *t);
  a.m = m;
  a.x = x.data;
  a.x_stride = rx.stride;
  a.bias = bias.defined() ? bias.data : nullptr;
  a.out = out.data;
  a.out_stride = ro.stride;
  a.device = a.w.device = out.device;
  a.device_id = a.w.device_id = out.device_id;
  return a;
}

QuantArgs prepare_quantize(const std::string& format, const Tensor& x, const Tensor& data, const Tensor& scales,
                           const Tensor& biases, const Tensor& tensor_scale, int64_t group, int scale_rule) {
  const QFormat f = format_named(format);
  require_built(f, quantize_built(f), "quantize");
  require_float(x);
  if (x.ndim != 2) throw ValueError(std::string(x.name) + " must have 2 axes [N, K], got shape " + shape_str(x));
  const int64_t n = x.shape[0], k = x.shape[1];
  require_k(f, k);
  require_data(f, data, n, k);
  if (info(f).layout == Layout::blocks) require_absent_for_blocks(f, {&scales, &biases, &tensor_scale});
  const Rows rx = matrix(x, Role::input), rd = matrix(data, Role::output);
  require_same_device({&x, &data, &scales, &biases, &tensor_scale});
  require_disjoint(data, x);
  QuantArgs a{};
  a.format = f;
  a.dtype = x.dtype;
  a.rows = n;
  a.cols = k;
  a.x = x.data;
  a.x_stride = rx.stride;
  a.data = static_cast<uint8_t*>(data.data);
  a.data_stride = rd.stride * dtype_size(data.dtype);
  a.group = group;
  if (info(f).layout == Layout::split) {
    prepare_split(f, n, k, scales, biases, tensor_scale, group, Role::output, a);
    for (const Tensor* t : {&scales, &biases, &tensor_scale})
      if (t->defined()) {
        require_disjoint(*t, x);
        require_disjoint(*t, data);
      }
  }
  a.scale_rule = scale_rule;
  a.device = x.device;
  a.device_id = x.device_id;
  return a;
}

}  // namespace braze::quant
