// nanobind glue shared by every family and backend module: DLPack arrays in,
// core Tensors out (no copies), and the launcher each backend module hands to
// a family's bindings.
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

// The logical dtype travels with each array: numpy's ml_dtypes.bfloat16
// arrays arrive as DLPack bfloat16 (braze._<backend>.as_bfloat16 relabels
// their uint16 view), so a uint16 array is always uint16.
inline DType dtype_of(const nb::dlpack::dtype& d) {
  using C = nb::dlpack::dtype_code;
  switch (C(d.code)) {
    case C::Float: return d.bits == 32 ? DType::f32 : d.bits == 16 ? DType::f16 : d.bits == 64 ? DType::f64 : DType::other;
    case C::Bfloat: return d.bits == 16 ? DType::bf16 : DType::other;
    case C::Int:
      return d.bits == 32 ? DType::i32 : d.bits == 64 ? DType::i64 : d.bits == 8 ? DType::i8 : d.bits == 16 ? DType::i16 : DType::other;
    case C::UInt:
      return d.bits == 8 ? DType::u8 : d.bits == 16 ? DType::u16 : d.bits == 32 ? DType::u32 : d.bits == 64 ? DType::u64 : DType::other;
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

inline Tensor tensor(const char* name, const OptArray& a) {
  Tensor t;
  t.name = name;
  if (!a) return t;
  if (a->ndim() > size_t(kMaxDims))
    throw ValueError(std::string(name) + " has " + std::to_string(a->ndim()) + " axes; at most " +
                     std::to_string(kMaxDims) + " are supported");
  t.present = true;
  t.data = const_cast<void*>(a->data());  // DLPack's data + byte_offset
  t.base = a->data_handle();
  t.dtype = dtype_of(a->dtype());
  t.ndim = int(a->ndim());
  for (int i = 0; i < t.ndim; ++i) {
    t.shape[i] = int64_t(a->shape(i));
    t.stride[i] = int64_t(a->stride(i));
  }
  t.device = device_of(a->device_type());
  t.device_id = a->device_id();
  return t;
}

// What a backend module gives every family's bindings: the launcher that runs
// validated Args on its device, and the devices its arrays may live on (Metal
// takes host arrays too: unified memory). `launch` gets the producer's stream
// (CUDA; 0 elsewhere); `launch_arrays` gets the call's arrays instead (Metal
// binds each one's buffer handle).
template <class Args> struct Launcher {
  void (*launch)(const Args&, uintptr_t stream) = nullptr;
  void (*launch_arrays)(const Args&, TensorList arrays) = nullptr;
  const char* backend = "";
  Device device = Device::none;
  Device host_device = Device::none;  // a second accepted device (Metal: the CPU)

  // Checks devices, then launches with the GIL released.
  void run(const Args& a, TensorList ts, uintptr_t stream) const {
    for (const Tensor* t : ts)
      if (t->defined() && t->device != device && t->device != host_device)
        throw ValueError(std::string(t->name) + " is not on the device of the " + backend + " backend");
    nb::gil_scoped_release nogil;
    if (launch) launch(a, stream);
    else launch_arrays(a, ts);
  }
};

}  // namespace braze::bind
