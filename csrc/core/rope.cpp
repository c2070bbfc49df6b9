#include "core/rope.h"

#include <algorithm>
#include <cmath>

#include "core/format.h"

namespace braze::rope {
namespace {

// x[..., H, D] seen as tokens x heads x dim: the token axes collapse into one
// stride (as rows do), the head axis keeps its own, D must be contiguous.
struct Layout {
  int64_t tokens = 1, tok_stride = 0, heads = 0, head_stride = 0, dim = 0;
};

Layout layout(const Tensor& t, Role role) {
  require_float(t);
  if (t.ndim < 2)
    throw ValueError(std::string(t.name) + " must have shape [..., heads, head_dim], got " + shape_str(t));
  Layout l;
  const Run run = collapse_axes(t, t.ndim - 2, "token axes");
  l.tokens = run.count;
  l.tok_stride = run.stride;
  l.heads = t.shape[t.ndim - 2];
  l.head_stride = t.stride[t.ndim - 2];
  l.dim = t.shape[t.ndim - 1];
  if (l.tokens * l.heads > 0 && l.dim > 1 && t.stride[t.ndim - 1] != 1)
    throw ValueError(std::string(t.name) + ": the last axis (head_dim) must be contiguous (stride 1), got stride " +
                     std::to_string(t.stride[t.ndim - 1]));
  // Inputs may repeat memory (broadcast tokens); two rows of an output may not.
  if (role == Role::output && may_self_overlap({{l.tokens, l.tok_stride}, {l.heads, l.head_stride}, {l.dim, 1}}))
    throw ValueError(std::string(t.name) + ": rows overlap (token stride " + std::to_string(l.tok_stride) +
                     ", head stride " + std::to_string(l.head_stride) + ", head_dim " + std::to_string(l.dim) +
                     "); an output needs its rows apart in memory (a broadcast view cannot be written)");
  return l;
}

bool empty(const Layout& l) { return l.tokens == 0 || l.heads == 0 || l.dim == 0; }

// Whether two [tokens, heads, dim] views may share an element. Views with one
// token stride occupy the same window of every period of that stride, so q and
// k slices of one fused qkv buffer are told apart exactly; other layouts fall
// back to comparing address ranges (which can only err towards "overlaps").
bool may_overlap(const Tensor& a, const Layout& la, const Tensor& b, const Layout& lb) {
  if (empty(la) || empty(lb)) return false;
  auto range = [](const Tensor& t, const Layout& l, intptr_t& lo, intptr_t& hi) {
    intptr_t sz = dtype_size(t.dtype), s0 = 0, s1 = 0;
    for (int64_t d : {l.tok_stride * (l.tokens - 1), l.head_stride * (l.heads - 1)}) (d < 0 ? s0 : s1) += d;
    lo = intptr_t(t.data) + s0 * sz;
    hi = intptr_t(t.data) + (s1 + l.dim) * sz;
  };
  intptr_t a0, a1, b0, b1;
  range(a, la, a0, a1);
  range(b, lb, b0, b1);
  if (a1 <= b0 || b1 <= a0) return false;
  const intptr_t sa = dtype_size(a.dtype), sb = dtype_size(b.dtype);
  const intptr_t period = la.tok_stride * sa;
  if (la.tokens < 2 || lb.tokens < 2 || period <= 0 || lb.tok_stride * sb != period || la.head_stride < 0 ||
      lb.head_stride < 0)
    return true;
  const intptr_t wa = (la.head_stride * (la.heads - 1) + la.dim) * sa;
  const intptr_t wb = (lb.head_stride * (lb.heads - 1) + lb.dim) * sb;
  if (wa > period || wb > period) return true;
  auto mod = [period](intptr_t v) { return ((v % period) + period) % period; };
  return mod(intptr_t(b.data) - intptr_t(a.data)) < wa || mod(intptr_t(a.data) - intptr_t(b.data)) < wb;
}

void check_disjoint(const Tensor& out, const Layout& lo, const Tensor& in, const Layout& li) {
  if (may_overlap(out, lo, in, li))
    throw ValueError(std::string(out.name) + " overlaps " + in.name + ", which this op does not allow");
}

// An output: the shape and dtype of its input, and either that very view
// (in place) or apart from it.
Layout output(const Tensor& out, const Tensor& in, const Layout& li) {
  require_dtype(out, in.dtype);
  require_shape(out, in);
  Layout lo = layout(out, Role::output);
  if (!same_view(out, in)) check_disjoint(out, lo, in, li);
  return lo;
}

Part part(const Tensor& x, const Layout& lx, const Tensor& y, const Layout& ly) {
  Part p;
  p.x = x.data;
  p.y = y.data;
  p.heads = lx.heads;
  p.x_tok = lx.tok_stride;
  p.x_head = lx.head_stride;
  p.y_tok = ly.tok_stride;
  p.y_head = ly.head_stride;
  return p;
}

Args common(const Tensor& x, const Layout& lx, const Tensor& pos, const Tensor& inv_freq, const Options& o) {
  Args a{};
  a.dtype = x.dtype;
  a.tokens = lx.tokens;
  a.dim = lx.dim;
  a.rot = o.rotary_dim < 0 ? lx.dim : o.rotary_dim;
  if (o.rotary_dim >= 0 && (a.rot % 2 != 0 || a.rot == 0 || a.rot > lx.dim))
    throw ValueError("rotary_dim must be a positive even number <= head_dim (" + std::to_string(lx.dim) +
                     "), got " + std::to_string(o.rotary_dim));
  if (o.rotary_dim < 0 && lx.dim % 2 != 0)
    throw ValueError("head_dim (" + std::to_string(lx.dim) + ", the last axis of " + x.name +
                     ") is odd; pass an even rotary_dim");
  if (!pos.defined()) throw TypeError("positions is required");
  if (pos.dtype != DType::i32 && pos.dtype != DType::i64)
    throw TypeError(std::string("positions must be int32 or int64, got ") + dtype_name(pos.dtype));
  if (pos.ndim == x.ndim - 1 && std::equal(pos.shape, pos.shape + pos.ndim, x.shape)) {
    // positions cover every axis of x but head_dim: x was given as [tokens, head_dim]
    throw ValueError(std::string(x.name) + " of shape " + shape_str(x) + " has no heads axis: rope takes " + x.name +
                     "[..., heads, head_dim] and positions of its token axes, here " + shape_str(pos) +
                     "; for one head, add the axis (" + x.name + "[..., None, :])");
  }
  std::string what = std::string("the token axes of ") + x.name + ", " + shape_str(x) + "[:-2]";
  require_shape(pos, x.shape, x.ndim - 2, what.c_str());
  a.pos_stride = collapse_axes(pos, pos.ndim, "axes").stride;
  a.pos_dtype = pos.dtype;
  a.pos = pos.data;
  if (inv_freq.defined()) {
    require_dtype(inv_freq, DType::f32);
    require_vector(inv_freq, a.rot / 2, "rotary_dim // 2");
    a.inv_freq = static_cast<const float*>(inv_freq.data);
  } else if (!(o.base > 0.0) || !std::isfinite(o.base)) {
    throw ValueError("base must be a finite number > 0, got " + repr_float(o.base));
  }
  if (!std::isfinite(o.scale)) throw ValueError("attention_scale must be finite, got " + repr_float(o.scale));
  a.base = o.base;
  a.scale = float(o.scale);
  a.interleaved = o.interleaved;
  a.inverse = o.inverse;
  a.device = x.device;
  a.device_id = x.device_id;
  return a;
}

void outputs_apart_from_vectors(const Tensor& out, const Tensor& pos, const Tensor& inv_freq) {
  require_disjoint(out, pos);
  require_disjoint(out, inv_freq);
}

}  // namespace

Args prepare_rope(const Tensor& x, const Tensor& pos, const Tensor& inv_freq, const Tensor& out,
                  const Options& o) {
  Layout lx = layout(x, Role::input);
  Args a = common(x, lx, pos, inv_freq, o);
  Layout ly = output(out, x, lx);
  require_same_device({&x, &pos, &inv_freq, &out});
  outputs_apart_from_vectors(out, pos, inv_freq);
  a.q = part(x, lx, out, ly);
  return a;
}

Args prepare_rope_qk(const Tensor& q, const Tensor& k, const Tensor& pos, const Tensor& inv_freq,
                     const Tensor& q_out, const Tensor& k_out, const Options& o) {
  Layout lq = layout(q, Role::input), lk = layout(k, Role::input);
  require_dtype(k, q.dtype);
  if (k.ndim != q.ndim || lk.dim != lq.dim)
    throw ValueError("k must have shape [..., heads, " + std::to_string(lq.dim) + "] with the token axes of q " +
                     shape_str(q) + ", got " + shape_str(k));
  for (int i = 0; i < q.ndim - 2; ++i)
    if (k.shape[i] != q.shape[i])
      throw ValueError("k must have the token axes of q " + shape_str(q) + ", got " + shape_str(k));
  Args a = common(q, lq, pos, inv_freq, o);
  Layout lqo = output(q_out, q, lq), lko = output(k_out, k, lk);
  require_same_device({&q, &k, &pos, &inv_freq, &q_out, &k_out});
  check_disjoint(q_out, lqo, k, lk);
  check_disjoint(k_out, lko, q, lq);
  check_disjoint(k_out, lko, q_out, lqo);
  outputs_apart_from_vectors(q_out, pos, inv_freq);
  outputs_apart_from_vectors(k_out, pos, inv_freq);
  a.q = part(q, lq, q_out, lqo);
  a.k = part(k, lk, k_out, lko);
  return a;
}

}  // namespace braze::rope
