#include "core/ops.h"

#include <cmath>

#include "core/format.h"

namespace braze::ops {
namespace {

// The forward op of a VJP op (itself for a forward op).
Op forward_of(Op op) {
  switch (op) {
    case Op::silu_and_mul_vjp: return Op::silu_and_mul;
    case Op::gelu_and_mul_vjp: return Op::gelu_and_mul;
    case Op::swiglu_clamped_vjp: return Op::swiglu_clamped;
    case Op::silu_vjp: return Op::silu;
    case Op::gelu_vjp: return Op::gelu;
    default: return op;
  }
}

bool is_gated(Op op) { return op == Op::silu_and_mul || op == Op::gelu_and_mul || op == Op::swiglu_clamped; }

Act act_of(Op op, bool approximate_tanh) {
  switch (op) {
    case Op::silu_and_mul: case Op::silu: return Act::silu;
    case Op::gelu_and_mul: case Op::gelu: return approximate_tanh ? Act::gelu_tanh : Act::gelu_erf;
    case Op::swiglu_clamped: return Act::swiglu_clamped;
    default: throw ValueError(std::string(op_name(op)) + " is not an activation");
  }
}

// out: when `in_place_ok`, out may be x itself (the same view); otherwise apart from it.
void require_apart(const Tensor& out, const Tensor& x, bool in_place_ok) {
  if (in_place_ok && same_view(out, x)) return;
  require_disjoint(out, x);
}

// The sizes hadamard supports: n = m * 2**k, m in {1, 12, 20, 28}, n <= 32768.
constexpr int64_t kMaxHadamard = 32768;

bool hadamard_size(int64_t n, int& m, int& log2) {
  for (int mm : {1, 12, 20, 28}) {
    if (n <= 0 || n % mm) continue;
    const int64_t p = n / mm;
    if (p & (p - 1)) continue;
    int k = 0;
    while ((int64_t(1) << k) < p) ++k;
    m = mm;
    log2 = k;
    return n <= kMaxHadamard;
  }
  return false;
}

}  // namespace

ActArgs prepare_act(Op op, const Tensor& x, const Tensor& out, bool approximate_tanh, bool interleaved,
                    double alpha, double limit, const Tensor* dy) {
  require_float(x);
  const Op fwd = forward_of(op);
  const bool vjp = fwd != op;
  if (vjp != (dy != nullptr)) throw ValueError(std::string(op_name(op)) + (vjp ? " needs dy" : " takes no dy"));
  const bool gated = is_gated(fwd);
  ActArgs a{};
  a.op = op;
  a.act = act_of(fwd, approximate_tanh);
  a.gated = gated;
  a.interleaved = gated && interleaved;
  a.dtype = x.dtype;
  const Rows rx = as_rows(x, Role::input);
  if (gated && rx.cols % 2)
    throw ValueError(std::string(x.name) + ": the last axis of a gated op holds the gate and up halves, so it must "
                     "be even, got " + std::to_string(rx.cols));
  if (fwd == Op::swiglu_clamped) {
    if (!std::isfinite(alpha)) throw ValueError("alpha must be a finite number, got " + repr_float(alpha));
    if (!(limit > 0)) throw ValueError("limit must be a number > 0, got " + repr_float(limit));
  }
  int64_t half[kMaxDims];  // the forward output's shape
  for (int i = 0; i < x.ndim; ++i) half[i] = x.shape[i];
  if (gated) half[x.ndim - 1] /= 2;
  const char* half_what = gated ? "x's shape with the last axis halved" : "that of x";
  Rows rd{};
  if (vjp) {
    require_dtype(*dy, x.dtype);
    require_shape(*dy, half, x.ndim, half_what);
    rd = as_rows(*dy, Role::input);
    require_dtype(out, x.dtype);
    require_shape(out, x);
  } else {
    require_dtype(out, x.dtype);
    require_shape(out, half, x.ndim, half_what);
  }
  const Rows ro = as_rows(out, Role::output);
  const Tensor none{};
  require_same_device({&x, &out, dy ? dy : &none});
  require_apart(out, x, !gated && !vjp);  // silu / gelu may run in place
  if (vjp) require_disjoint(out, *dy);
  a.rows = rx.rows;
  a.cols = vjp ? rd.cols : ro.cols;
  a.x = x.data;
  a.x_stride = rx.stride;
  a.y = out.data;
  a.y_stride = ro.stride;
  a.dy = vjp ? dy->data : nullptr;
  a.dy_stride = rd.stride;
  a.alpha = float(alpha);
  a.limit = float(limit);
  a.device = x.device;
  a.device_id = x.device_id;
  return a;
}

EmbeddingArgs prepare_embedding(const Tensor& ids, const Tensor& table, const Tensor& out) {
  if (ids.dtype != DType::i32 && ids.dtype != DType::i64)
    throw TypeError(std::string(ids.name) + " must be int32 or int64, got " + dtype_name(ids.dtype));
  require_float(table);
  if (table.ndim != 2)
    throw ValueError(std::string(table.name) + " must be 2-D [vocab, dim], got shape " + shape_str(table));
  const Rows rt = as_rows(table, Role::input);
  const Run run = collapse_axes(ids, ids.ndim, "axes");
  if (run.count > 1 && run.stride < 0)
    throw ValueError(std::string(ids.name) + ": negative strides are not supported; make it contiguous first");
  require_dtype(out, table.dtype);
  if (ids.ndim + 1 > kMaxDims)
    throw ValueError(std::string(ids.name) + " has " + std::to_string(ids.ndim) + " axes; at most " +
                     std::to_string(kMaxDims - 1) + " are supported");
  int64_t want[kMaxDims];
  for (int i = 0; i < ids.ndim; ++i) want[i] = ids.shape[i];
  want[ids.ndim] = table.shape[1];
  require_shape(out, want, ids.ndim + 1, "ids' shape + (dim,)");
  const Rows ro = as_rows(out, Role::output);
  require_same_device({&ids, &table, &out});
  require_disjoint(out, ids);
  require_disjoint(out, table);
  EmbeddingArgs a{};
  a.dtype = table.dtype;
  a.id_dtype = ids.dtype;
  a.tokens = run.count;
  a.vocab = table.shape[0];
  a.dim = table.shape[1];
  a.ids = ids.data;
  a.ids_stride = run.count > 1 ? run.stride : 1;
  a.table = table.data;
  a.table_stride = rt.stride;
  a.y = out.data;
  a.y_stride = ro.stride;
  a.device = table.device;
  a.device_id = table.device_id;
  return a;
}

HadamardArgs prepare_hadamard(const Tensor& x, const Tensor& out, double scale) {
  require_float(x);
  const Rows rx = as_rows(x, Role::input);
  HadamardArgs a{};
  if (!hadamard_size(rx.cols, a.m, a.log2))
    throw ValueError(std::string(x.name) + ": hadamard needs a last axis n = m * 2**k with m in {1, 12, 20, 28} "
                     "and n <= 32768 (1, 2, 4, ..., 32768; 12, 24, ..., 24576; 20, 40, ..., 20480; "
                     "28, 56, ..., 28672), got " + std::to_string(rx.cols));
  if (!std::isnan(scale) && !std::isfinite(scale))
    throw ValueError("scale must be a finite number (or None for 1/sqrt(n)), got " + repr_float(scale));
  require_dtype(out, x.dtype);
  require_shape(out, x);
  const Rows ro = as_rows(out, Role::output);
  require_same_device({&x, &out});
  require_apart(out, x, true);
  a.dtype = x.dtype;
  a.rows = rx.rows;
  a.n = rx.cols;
  a.x = x.data;
  a.x_stride = rx.stride;
  a.y = out.data;
  a.y_stride = ro.stride;
  a.scale = std::isnan(scale) ? float(1.0 / std::sqrt(double(rx.cols))) : float(scale);
  a.device = x.device;
  a.device_id = x.device_id;
  return a;
}

}  // namespace braze::ops
