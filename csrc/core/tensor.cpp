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

Rows as_rows(const Tensor& t) {
  if (t.ndim < 1) throw ValueError(std::string(t.name) + " must have at least one axis, got a scalar");
  Rows r;
  r.cols = t.shape[t.ndim - 1];
  r.rows = 1;
  for (int i = 0; i < t.ndim - 1; ++i) r.rows *= t.shape[i];
  if (r.rows == 0 || r.cols == 0) {  // nothing is read or written: strides do not matter
    r.stride = r.cols;
    return r;
  }
  if (t.stride[t.ndim - 1] != 1 && r.cols > 1)
    throw ValueError(std::string(t.name) + ": the last axis must be contiguous (stride 1), got stride " +
                     std::to_string(t.stride[t.ndim - 1]));
  // The leading axes must form one arithmetic sequence of rows: walking from the
  // innermost leading axis outwards, each stride is the next one's span.
  int64_t stride = 0, span = 0;
  for (int i = t.ndim - 2; i >= 0; --i) {
    if (t.shape[i] == 1) continue;
    if (span == 0) {
      stride = t.stride[i];
      span = t.stride[i] * t.shape[i];
    } else if (t.stride[i] == span) {
      span *= t.shape[i];
    } else {
      throw ValueError(std::string(t.name) + ": the leading axes of shape " + shape_str(t) +
                       " cannot be viewed as rows with one stride; make it contiguous first");
    }
  }
  r.stride = span == 0 ? r.cols : stride;
  if (r.rows > 1 && r.stride < r.cols && r.cols > 0)
    throw ValueError(std::string(t.name) + ": rows overlap (row stride " + std::to_string(r.stride) +
                     " < row length " + std::to_string(r.cols) + ")");
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
