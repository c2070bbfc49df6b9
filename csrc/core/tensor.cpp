#include "core/tensor.h"

#include <algorithm>

namespace braze {

std::string shape_str(const Tensor& t) {
  std::string s = "(";
  for (int i = 0; i < t.ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(t.shape[i]);
  }
  if (t.ndim == 1) s += ",";
  return s + ")";
}

Run collapse_axes(const Tensor& t, int n, const char* what) {
  Run r;
  for (int i = 0; i < n; ++i) r.count *= t.shape[i];
  if (r.count <= 1) return r;  // no step is ever taken: strides do not matter
  // Walking from the innermost axis outwards, each stride must be the span of
  // the axes inside it. `seen` (not span != 0) marks the first axis, since a
  // broadcast axis has span 0.
  bool seen = false;
  int64_t span = 0;
  for (int i = n - 1; i >= 0; --i) {
    if (t.shape[i] == 1) continue;
    if (!seen) {
      seen = true;
      r.stride = t.stride[i];
      span = t.stride[i] * t.shape[i];
    } else if (t.stride[i] == span) {
      span *= t.shape[i];
    } else {
      throw ValueError(std::string(t.name) + ": the " + what + " of shape " + shape_str(t) +
                       " cannot be walked with one stride; make them contiguous first");
    }
  }
  return r;
}

bool may_self_overlap(std::initializer_list<Axis> axes) {
  Axis sorted[kMaxDims + 2];
  int n = 0;
  for (const Axis& a : axes) {
    if (a.size == 0) return false;  // no element at all
    if (a.size > 1 && n < kMaxDims + 2) sorted[n++] = {a.size, a.stride < 0 ? -a.stride : a.stride};
  }
  std::sort(sorted, sorted + n, [](const Axis& a, const Axis& b) { return a.stride < b.stride; });
  int64_t extent = 1;  // elements spanned by the axes inside the current one
  for (int i = 0; i < n; ++i) {
    if (sorted[i].stride < extent) return true;
    extent += sorted[i].stride * (sorted[i].size - 1);
  }
  return false;
}

Rows as_rows(const Tensor& t, Role role) {
  if (t.ndim < 1) throw ValueError(std::string(t.name) + " must have at least one axis, got a scalar");
  Rows r;
  r.cols = t.shape[t.ndim - 1];
  const Run run = collapse_axes(t, t.ndim - 1, "leading axes");
  r.rows = run.count;
  r.stride = run.count > 1 ? run.stride : r.cols;
  if (r.rows == 0 || r.cols == 0) {  // nothing is read or written: strides do not matter
    r.stride = r.cols;
    return r;
  }
  if (t.stride[t.ndim - 1] != 1 && r.cols > 1)
    throw ValueError(std::string(t.name) + ": the last axis must be contiguous (stride 1), got stride " +
                     std::to_string(t.stride[t.ndim - 1]));
  // The kernels walk rows forwards from data (and Metal's strides are unsigned).
  if (r.stride < 0)
    throw ValueError(std::string(t.name) + ": negative row strides are not supported (row stride " +
                     std::to_string(r.stride) + "); make it contiguous first");
  if (role == Role::output && may_self_overlap({{r.rows, r.stride}, {r.cols, 1}}))
    throw ValueError(std::string(t.name) + ": rows overlap (row stride " + std::to_string(r.stride) +
                     " < row length " + std::to_string(r.cols) +
                     "); an output needs its rows apart in memory (a broadcast view cannot be written)");
  return r;
}

void require_shape(const Tensor& t, const int64_t* shape, int ndim, const char* what) {
  bool ok = t.ndim == ndim;
  for (int i = 0; ok && i < ndim; ++i) ok = t.shape[i] == shape[i];
  if (!ok) {
    Tensor ref;
    ref.ndim = ndim;
    std::copy(shape, shape + ndim, ref.shape);
    throw ValueError(std::string(t.name) + " must have shape " + shape_str(ref) + " (" + what +
                     "), got " + shape_str(t));
  }
}

void require_shape(const Tensor& t, const Tensor& ref) {
  bool ok = t.ndim == ref.ndim;
  for (int i = 0; ok && i < ref.ndim; ++i) ok = t.shape[i] == ref.shape[i];
  if (ok) return;  // the message (and its allocation) only on failure
  const std::string what = std::string("that of ") + ref.name;
  require_shape(t, ref.shape, ref.ndim, what.c_str());
}

void require_dtype(const Tensor& t, DType want) {
  if (t.dtype != want)
    throw TypeError(std::string(t.name) + " must be " + dtype_name(want) + ", got " + dtype_name(t.dtype));
}

void require_float(const Tensor& t) {
  if (!is_float(t.dtype))
    throw TypeError(std::string(t.name) + " must be float32, float16 or bfloat16, got " +
                    dtype_name(t.dtype));
}

void require_vector(const Tensor& t, int64_t n, const char* what) {
  if (t.ndim != 1 || t.shape[0] != n)
    throw ValueError(std::string(t.name) + " must have shape (" + std::to_string(n) + ",) (" + what +
                     "), got " + shape_str(t));
  if (n > 1 && t.stride[0] != 1) throw ValueError(std::string(t.name) + " must be contiguous");
}

void require_same_device(std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
    } else if (t->device != first->device || t->device_id != first->device_id) {
      throw ValueError(std::string(t->name) + " is on a different device than " + first->name);
    }
  }
}

static void extent(const Tensor& t, uintptr_t& lo, uintptr_t& hi) {
  intptr_t a = 0, b = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) {
      lo = hi = 0;
      return;
    }
    intptr_t d = intptr_t(t.stride[i]) * (t.shape[i] - 1);
    (d < 0 ? a : b) += d;
  }
  int sz = dtype_size(t.dtype);
  lo = uintptr_t(t.data) + a * sz;
  hi = uintptr_t(t.data) + (b + 1) * sz;
}

bool same_view(const Tensor& a, const Tensor& b) {
  if (a.data != b.data || a.ndim != b.ndim || a.dtype != b.dtype) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i] || (a.shape[i] > 1 && a.stride[i] != b.stride[i])) return false;
  return true;
}

void require_disjoint(const Tensor& out, const Tensor& in) {
  if (!out.defined() || !in.defined()) return;
  uintptr_t a0, a1, b0, b1;
  extent(out, a0, a1);
  extent(in, b0, b1);
  if (a0 < b1 && b0 < a1)
    throw ValueError(std::string(out.name) + " overlaps " + in.name + ", which this op does not allow");
}

}  // namespace braze
