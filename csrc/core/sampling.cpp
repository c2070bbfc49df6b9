#include "core/sampling.h"

#include <cmath>
#include <string>
#include <type_traits>

#include "core/format.h"

namespace braze::sampling {
namespace {

// A parameter's value as the user gave it: int32 parameters as integers.
template <class T> std::string num(double v, bool from_array = false) {
  if constexpr (std::is_integral_v<T>) return repr_int(v);
  return repr_float(v, from_array);
}

// logits: a float [B, V] array whose last axis is contiguous.
template <class A> A base(const Tensor& x) {
  require_float(x);
  if (x.ndim != 2) throw ValueError(std::string(x.name) + " must be 2-D [batch, vocab], got shape " + shape_str(x));
  Rows r = as_rows(x, Role::input);
  A a{};
  a.dtype = x.dtype;
  a.rows = r.rows;
  a.cols = r.cols;
  a.x = x.data;
  a.x_stride = r.stride;
  a.device = x.device;
  a.device_id = x.device_id;
  if (a.cols == 0 && a.rows > 0)
    throw ValueError(std::string(x.name) + " must have at least one column (vocab >= 1), got shape " + shape_str(x));
  return a;
}

// out [B, V] of `dtype`; may be x itself where `in_place_ok`.
template <class A> void row_out(A& a, const Tensor& out, const Tensor& x, DType dtype, bool in_place_ok) {
  require_dtype(out, dtype);
  require_shape(out, x);
  a.out = static_cast<decltype(a.out)>(out.data);
  a.out_stride = as_rows(out, Role::output).stride;
  if constexpr (!std::is_same_v<A, NormalizeArgs>) a.in_place = in_place_ok && same_view(out, x);
  if (!in_place_ok || !same_view(out, x)) require_disjoint(out, x);
}

// out [rows] of `dtype`, contiguous.
template <class O> O* vec_out(const Tensor& out, int64_t rows, DType dtype, const Tensor* x) {
  require_dtype(out, dtype);
  require_vector(out, rows, "one entry per row of logits");
  if (x) require_disjoint(out, *x);
  return static_cast<O*>(out.data);
}

bool host_readable(const Tensor& t) { return t.device == Device::cpu; }

// ok(v) says whether a value is allowed; `rule` says which values are.
template <class T, class Ok>
RowParam<T> param(const char* name, ParamIn in, const Logits& a, DType dtype, Ok ok, const char* rule) {
  RowParam<T> p;
  if (in.arr && in.arr->defined()) {
    const Tensor& t = *in.arr;
    require_dtype(t, dtype);
    require_vector(t, a.rows, "one value per row of logits");
    if (t.device != a.device || t.device_id != a.device_id)
      throw ValueError(std::string(name) + " is on a different device than logits");
    p.arr = static_cast<const T*>(t.data);
    if (host_readable(t)) {  // device arrays are clamped by the kernels instead of read back here
      for (int64_t r = 0; r < a.rows; ++r)
        if (!ok(double(p.arr[r])))
          throw ValueError(std::string(name) + "[" + std::to_string(r) + "] must be " + rule + ", got " +
                           num<T>(double(p.arr[r]), true));
    }
    return p;
  }
  if (!ok(in.value)) throw ValueError(std::string(name) + " must be " + rule + ", got " + num<T>(in.value));
  p.value = T(in.value);
  return p;
}

bool positive(double v) { return v > 0 && std::isfinite(v); }
bool non_negative(double v) { return v >= 0 && std::isfinite(v); }
bool open_unit(double v) { return v > 0 && v <= 1; }
bool unit(double v) { return v >= 0 && v <= 1; }
bool count(double v) { return v >= 0 && v <= 2147483647.0 && v == std::floor(v); }

void same_device(const Tensor& a, const Tensor& b) { require_same_device({&a, &b}); }

}  // namespace

NormalizeArgs prepare_normalize(Op op, const Tensor& x, const Tensor& out, ParamIn temperature) {
  auto a = base<NormalizeArgs>(x);
  a.op = op;
  a.temperature = param<float>("temperature", temperature, a, DType::f32, positive, "a finite number > 0");
  if (op == Op::logsumexp) {
    a.out = vec_out<float>(out, a.rows, DType::f32, &x);
    a.out_stride = 1;
  } else {
    row_out(a, out, x, DType::f32, false);
  }
  same_device(x, out);
  return a;
}

ArgmaxArgs prepare_argmax(const Tensor& x, const Tensor& out) {
  auto a = base<ArgmaxArgs>(x);
  a.out = vec_out<int32_t>(out, a.rows, DType::i32, &x);
  same_device(x, out);
  return a;
}

// A mask with every parameter at its "keeps everything" value.
static MaskArgs mask_base(Op op, const Tensor& x) {
  auto a = base<MaskArgs>(x);
  a.op = op;
  a.top_k.value = 0;
  a.top_p.value = 1.f;
  a.min_p.value = 0.f;
  a.temperature.value = 1.f;
  return a;
}

MaskArgs prepare_top_k_mask(const Tensor& x, const Tensor& out, ParamIn k) {
  MaskArgs a = mask_base(Op::top_k_mask, x);
  a.top_k = param<int32_t>("k", k, a, DType::i32, count, "an integer >= 0 (0 keeps every logit)");
  row_out(a, out, x, x.dtype, true);
  same_device(x, out);
  return a;
}

MaskArgs prepare_prob_mask(Op op, const Tensor& x, const Tensor& out, ParamIn p, ParamIn temperature) {
  MaskArgs a = mask_base(op, x);
  if (op == Op::top_p_mask) a.top_p = param<float>("p", p, a, DType::f32, open_unit, "in (0, 1]");
  else a.min_p = param<float>("p", p, a, DType::f32, unit, "in [0, 1]");
  a.temperature = param<float>("temperature", temperature, a, DType::f32, positive, "a finite number > 0");
  row_out(a, out, x, x.dtype, true);
  same_device(x, out);
  return a;
}

PenaltyArgs prepare_apply_penalties(const Tensor& x, const Tensor& ids, const Tensor& out, double repetition,
                                    double frequency, double presence) {
  auto a = base<PenaltyArgs>(x);
  if (!positive(repetition)) throw ValueError("repetition must be a finite number > 0, got " + repr_float(repetition));
  if (!std::isfinite(frequency)) throw ValueError("frequency must be finite, got " + repr_float(frequency));
  if (!std::isfinite(presence)) throw ValueError("presence must be finite, got " + repr_float(presence));
  require_dtype(ids, DType::i32);
  if (ids.ndim != 2 || ids.shape[0] != a.rows)
    throw ValueError(std::string(ids.name) + " must have shape (" + std::to_string(a.rows) +
                     ", L) (one row per row of logits), got " + shape_str(ids));
  Rows ri = as_rows(ids, Role::input);
  a.token_ids = static_cast<const int32_t*>(ids.data);
  a.ids_len = ri.cols;
  a.ids_stride = ri.stride;
  same_device(x, ids);
  if (host_readable(ids)) {
    for (int64_t r = 0; r < a.rows; ++r)
      for (int64_t j = 0; j < a.ids_len; ++j) {
        int32_t t = a.token_ids[r * a.ids_stride + j];
        if (t < -1 || t >= a.cols)
          throw ValueError(std::string(ids.name) + "[" + std::to_string(r) + ", " + std::to_string(j) +
                           "] = " + std::to_string(t) + " is not a token of a vocabulary of " +
                           std::to_string(a.cols) + " (use -1 for padding)");
      }
  }
  row_out(a, out, x, x.dtype, true);
  require_disjoint(out, ids);
  same_device(x, out);
  a.repetition = float(repetition);
  a.frequency = float(frequency);
  a.presence = float(presence);
  return a;
}

SampleArgs prepare_sample(const Tensor& x, const Tensor& out, ParamIn temperature, ParamIn top_k, ParamIn top_p,
                          ParamIn min_p, uint64_t seed, uint64_t offset) {
  auto a = base<SampleArgs>(x);
  a.temperature = param<float>("temperature", temperature, a, DType::f32, non_negative,
                               "a finite number >= 0 (0 is greedy)");
  a.top_k = param<int32_t>("top_k", top_k, a, DType::i32, count, "an integer >= 0 (0 disables it)");
  a.top_p = param<float>("top_p", top_p, a, DType::f32, open_unit, "in (0, 1] (1 disables it)");
  a.min_p = param<float>("min_p", min_p, a, DType::f32, unit, "in [0, 1] (0 disables it)");
  a.out = vec_out<int32_t>(out, a.rows, DType::i32, &x);
  same_device(x, out);
  a.seed = seed;
  a.offset = offset;
  return a;
}

PhiloxArgs prepare_philox_uniform(const Tensor& out, uint64_t seed, uint64_t offset) {
  PhiloxArgs a{};
  if (out.ndim != 1) throw ValueError(std::string(out.name) + " must be 1-D, got shape " + shape_str(out));
  a.n = out.shape[0];
  a.out = vec_out<float>(out, a.n, DType::f32, nullptr);
  a.seed = seed;
  a.offset = offset;
  a.device = out.device;
  a.device_id = out.device_id;
  return a;
}

}  // namespace braze::sampling
