#include "core/norm.h"

#include <cmath>
#include <type_traits>

#include "core/format.h"

namespace braze::norm {
namespace {

void check_eps(double eps) {
  if (!(eps >= 0.0) || !std::isfinite(eps))
    throw ValueError("eps must be a finite number >= 0, got " + repr_float(eps));
}

// x is the row-shaped input that fixes rows, cols and dtype.
template <class A> A base(Op op, const Tensor& x, double eps) {
  require_float(x);
  check_eps(eps);
  Rows rx = as_rows(x, Role::input);
  A a{};
  a.op = op;
  a.dtype = x.dtype;
  a.rows = rx.rows;
  a.cols = rx.cols;
  a.x = x.data;
  a.x_stride = rx.stride;
  a.eps = float(eps);
  a.device = x.device;
  a.device_id = x.device_id;
  if constexpr (std::is_same_v<A, NormArgs>) a.group = a.cols;  // rms_norm_gated narrows it
  return a;
}

// Another row-shaped array: same shape and dtype as x; returns its row stride.
int64_t rows_like(const Tensor& t, const Tensor& x, Role role) {
  require_dtype(t, x.dtype);
  require_shape(t, x);
  return as_rows(t, role).stride;
}

// weight-like vector of length cols, dtype of x.
void vector_like(const Tensor& t, const Tensor& x, int64_t cols) {
  if (!t.defined()) return;
  require_dtype(t, x.dtype);
  require_vector(t, cols, "the last axis of x");
}

void outputs_disjoint(const Tensor& out, std::initializer_list<const Tensor*> ins) {
  for (const Tensor* in : ins) require_disjoint(out, *in);
}

}  // namespace

NormArgs prepare_rms_norm(const Tensor& x, const Tensor& w, const Tensor& out, double eps, double w_offset) {
  NormArgs a = base<NormArgs>(Op::rms_norm, x, eps);
  vector_like(w, x, a.cols);
  a.out_stride = rows_like(out, x, Role::output);
  require_same_device({&x, &w, &out});
  outputs_disjoint(out, {&x, &w});
  a.weight = w.data;
  a.out = out.data;
  a.weight_offset = float(w_offset);
  return a;
}

NormArgs prepare_layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out, double eps) {
  NormArgs a = base<NormArgs>(Op::layer_norm, x, eps);
  vector_like(w, x, a.cols);
  vector_like(b, x, a.cols);
  a.out_stride = rows_like(out, x, Role::output);
  require_same_device({&x, &w, &b, &out});
  outputs_disjoint(out, {&x, &w, &b});
  a.weight = w.data;
  a.bias = b.data;
  a.out = out.data;
  return a;
}

NormArgs prepare_add_rms_norm(const Tensor& x, const Tensor& res, const Tensor& w, const Tensor& out,
                              const Tensor& res_out, double eps, double w_offset) {
  NormArgs a = base<NormArgs>(Op::add_rms_norm, x, eps);
  a.residual_stride = rows_like(res, x, Role::input);
  vector_like(w, x, a.cols);
  a.out_stride = rows_like(out, x, Role::output);
  a.residual_out_stride = rows_like(res_out, x, Role::output);
  require_same_device({&x, &res, &w, &out, &res_out});
  outputs_disjoint(out, {&x, &res, &w, &res_out});
  // residual_out may be residual itself (in place), or be apart from it.
  if (!same_view(res_out, res)) require_disjoint(res_out, res);
  outputs_disjoint(res_out, {&x, &w});
  a.residual = res.data;
  a.weight = w.data;
  a.out = out.data;
  a.residual_out = res_out.data;
  a.weight_offset = float(w_offset);
  return a;
}

NormArgs prepare_rms_norm_gated(const Tensor& x, const Tensor& gate, const Tensor& w, const Tensor& out,
                                double eps, int64_t group_size) {
  NormArgs a = base<NormArgs>(Op::rms_norm_gated, x, eps);
  a.gate_stride = rows_like(gate, x, Role::input);
  vector_like(w, x, a.cols);
  a.out_stride = rows_like(out, x, Role::output);
  if (group_size < 0 || (group_size > 0 && a.cols % group_size != 0))
    throw ValueError("group_size must divide the last axis of x (" + std::to_string(a.cols) + "), got " +
                     std::to_string(group_size));
  require_same_device({&x, &gate, &w, &out});
  outputs_disjoint(out, {&x, &gate, &w});
  a.gate = gate.data;
  a.weight = w.data;
  a.out = out.data;
  a.group = group_size == 0 ? a.cols : group_size;
  return a;
}

NormVjpArgs prepare_rms_norm_vjp(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                                 const Tensor& dw, double eps, double w_offset) {
  NormVjpArgs a = base<NormVjpArgs>(Op::rms_norm_vjp, x, eps);
  vector_like(w, x, a.cols);
  a.dy_stride = rows_like(dy, x, Role::input);
  a.dx_stride = rows_like(dx, x, Role::output);
  if (dw.defined() != w.defined())
    throw ValueError(w.defined() ? "dweight is required when weight is given"
                                 : "dweight must be None when weight is None");
  vector_like(dw, x, a.cols);
  require_same_device({&x, &w, &dy, &dx, &dw});
  outputs_disjoint(dx, {&x, &w, &dy, &dw});
  outputs_disjoint(dw, {&x, &w, &dy});
  a.weight = w.data;
  a.dy = dy.data;
  a.dx = dx.data;
  a.dweight = dw.data;
  a.weight_offset = float(w_offset);
  return a;
}

NormVjpArgs prepare_layer_norm_vjp(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy,
                                   const Tensor& dx, const Tensor& dw, const Tensor& db, double eps) {
  NormVjpArgs a = base<NormVjpArgs>(Op::layer_norm_vjp, x, eps);
  vector_like(w, x, a.cols);
  vector_like(b, x, a.cols);
  a.dy_stride = rows_like(dy, x, Role::input);
  a.dx_stride = rows_like(dx, x, Role::output);
  if (dw.defined() != w.defined())
    throw ValueError(w.defined() ? "dweight is required when weight is given"
                                 : "dweight must be None when weight is None");
  if (db.defined() != b.defined())
    throw ValueError(b.defined() ? "dbias is required when bias is given" : "dbias must be None when bias is None");
  vector_like(dw, x, a.cols);
  vector_like(db, x, a.cols);
  require_same_device({&x, &w, &b, &dy, &dx, &dw, &db});
  outputs_disjoint(dx, {&x, &w, &b, &dy, &dw, &db});
  outputs_disjoint(dw, {&x, &w, &b, &dy, &db});
  outputs_disjoint(db, {&x, &w, &b, &dy});
  a.weight = w.data;
  a.bias = b.data;
  a.dy = dy.data;
  a.dx = dx.data;
  a.dweight = dw.data;
  a.dbias = db.data;
  return a;
}

}  // namespace braze::norm
