// A backend-neutral view of one array argument (what DLPack describes), and the
// checks every family runs on its arguments before launching.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace braze {

constexpr int kMaxDims = 8;

enum class Device : int { none = 0, cpu = 1, cuda = 2, metal = 8 };

struct Tensor {
  const char* name = "";  // the Python argument name, for messages
  void* data = nullptr;   // the first element (null when absent)
  void* base = nullptr;   // the allocation's handle: an id<MTLBuffer> for Metal arrays, else data
  DType dtype = DType::other;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};  // in elements
  Device device = Device::none;
  int device_id = 0;

  bool present = false;   // false = the argument was None

  bool defined() const { return present; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  int64_t last() const { return ndim ? shape[ndim - 1] : 1; }
};

// The arrays of one call, for backends that need more than the validated
// arguments (Metal binds each array's buffer handle and byte offset).
using TensorList = std::initializer_list<const Tensor*>;

// Whether an op reads an array or writes it. The caller says which: inputs may
// repeat memory (broadcast rows), outputs may not, or two rows would race.
enum class Role { input, output };

// Axes [0, n) of a tensor walked as one index: `count` entries `stride`
// elements apart. Axes of size 1 are skipped; stride 0 (a broadcast axis) is
// a valid run of identical entries. stride is 0 when count <= 1.
struct Run {
  int64_t count = 1, stride = 0;
};
// ValueError naming t when the axes do not form one arithmetic sequence;
// `what` names the axes in that message ("leading axes", "token axes").
Run collapse_axes(const Tensor& t, int n, const char* what);

// One axis of a strided layout, for may_self_overlap.
struct Axis {
  int64_t size, stride;
};
// Whether two distinct indices of the layout may address one element: sorted
// by |stride|, each axis must step past the extent of the axes inside it.
// Exact for stride 0 and for the row layouts here; otherwise it errs only
// towards "overlaps".
bool may_self_overlap(std::initializer_list<Axis> axes);

// Rows over the last axis: the leading axes must collapse into one row index
// with a single row stride (views such as per-head slices qualify, and
// broadcast rows with stride 0 as inputs). An output whose rows overlap is a
// ValueError. stride is cols when there is at most one row.
struct Rows {
  int64_t rows = 0, cols = 0, stride = 0;
};

std::string shape_str(const Tensor& t);
Rows as_rows(const Tensor& t, Role role);
// Same shape as `ref`, else ValueError naming both.
void require_shape(const Tensor& t, const Tensor& ref);
void require_shape(const Tensor& t, const int64_t* shape, int ndim, const char* what);
void require_dtype(const Tensor& t, DType want);
void require_float(const Tensor& t);
// 1-D, length n, contiguous.
void require_vector(const Tensor& t, int64_t n, const char* what);
// All present tensors on one device.
void require_same_device(std::initializer_list<const Tensor*> ts);
// Outputs must not overlap inputs unless identical (same data and layout) and allowed.
void require_disjoint(const Tensor& out, const Tensor& in);
bool same_view(const Tensor& a, const Tensor& b);

}  // namespace braze
