// nanobind glue shared by every family and backend module: DLPack arrays in,
// core Tensors out (no copies), and core exceptions mapped to Python ones.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>

#include <optional>

#include "core/tensor.h"

namespace braze::bind {

namespace nb = nanobind;

// Read-only views are accepted for inputs (JAX arrays are read-only); outputs
// are checked for writability in Python, where the message can name them.
using Array = nb::ndarray<nb::ro>;
using OptArray = std::optional<Array>;

inline DType dtype_of(const nb::dlpack::dtype& d, bool u16_is_bf16) {
  using C = nb::dlpack::dtype_code;
  switch (C(d.code)) {
    case C::Float: return d.bits == 32 ? DType::f32 : d.bits == 16 ? DType::f16 : d.bits == 64 ? DType::f64 : DType::other;
    case C::Bfloat: return d.bits == 16 ? DType::bf16 : DType::other;
    case C::Int:
      return d.bits == 32 ? DType::i32 : d.bits == 64 ? DType::i64 : d.bits == 8 ? DType::i8 : d.bits == 16 ? DType::i16 : DType::other;
    case C::UInt:
      if (d.bits == 16) return u16_is_bf16 ? DType::bf16 : DType::u16;
      return d.bits == 8 ? DType::u8 : d.bits == 32 ? DType::u32 : d.bits == 64 ? DType::u64 : DType::other;
    case C::Bool: return DType::b1;
    default: return DType::other;
  }
}

inline Device device_of(int type) {
  switch (type) {
    case 1: case 3: return Device::cpu;  // kDLCPU, kDLCUDAHost
    case 2: return Device::cuda;
    case 8: return Device::metal;
    default: return Device::none;
  }
}

// `u16_is_bf16`: numpy has no bfloat16 DLPack dtype, so braze passes
// ml_dtypes.bfloat16 arrays as uint16 views and says so with this flag.
inline Tensor tensor(const char* name, const OptArray& a, bool u16_is_bf16) {
  Tensor t;
  t.name = name;
  if (!a) return t;
  if (a->ndim() > size_t(kMaxDims))
    throw ValueError(std::string(name) + " has " + std::to_string(a->ndim()) + " axes; at most " +
                     std::to_string(kMaxDims) + " are supported");
  t.present = true;
  t.data = const_cast<void*>(a->data());
  t.dtype = dtype_of(a->dtype(), u16_is_bf16);
  t.ndim = int(a->ndim());
  for (int i = 0; i < t.ndim; ++i) {
    t.shape[i] = int64_t(a->shape(i));
    t.stride[i] = int64_t(a->stride(i));
  }
  t.device = device_of(a->device_type());
  t.device_id = a->device_id();
  return t;
}

// The backend's own device type; anything else is a clear error, not a copy.
inline void require_device(const Tensor& t, Device want, const char* backend) {
  if (t.defined() && t.device != want)
    throw ValueError(std::string(t.name) + " is not on the device of the " + backend + " backend");
}



// What every family's entry points share: the backend's launcher for that
// family's Args, and the device its arrays must be on. run() checks devices,
// then launches with the GIL released.
template <class Args> struct Launcher {
  using Fn = void (*)(const Args&, uintptr_t stream);
  Fn launch;
  Device device;
  const char* backend;

  void run(const Args& a, std::initializer_list<const Tensor*> ts, uintptr_t stream) const {
    for (const Tensor* t : ts) require_device(*t, device, backend);
    nb::gil_scoped_release nogil;
    launch(a, stream);
  }
};

}  // namespace braze::bind
