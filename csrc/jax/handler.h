// The generic XLA FFI handler: the `op` attribute picks the table entry; the
// `present` bitmask says which of its array slots the call passes (the
// operands are the present inputs in order, the results the present outputs;
// an in-place slot is both, aliased by jax). Buffers become braze Tensors with
// no copy, and the entry runs prepare_* and the backend's launcher.
#pragma once
#include <string>

#include "jax/table.h"
#include "xla/ffi/api/ffi.h"

namespace braze::xla {

namespace ffi = ::xla::ffi;

inline DType dtype_of(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return DType::f32;
    case ffi::DataType::F16: return DType::f16;
    case ffi::DataType::BF16: return DType::bf16;
    case ffi::DataType::F64: return DType::f64;
    case ffi::DataType::S8: return DType::i8;
    case ffi::DataType::S16: return DType::i16;
    case ffi::DataType::S32: return DType::i32;
    case ffi::DataType::S64: return DType::i64;
    case ffi::DataType::U8: return DType::u8;
    case ffi::DataType::U16: return DType::u16;
    case ffi::DataType::U32: return DType::u32;
    case ffi::DataType::U64: return DType::u64;
    case ffi::DataType::PRED: return DType::b1;
    default: return DType::other;
  }
}

inline void to_tensor(Tensor& t, const ffi::AnyBuffer& b, Device device, int device_id) {
  auto dims = b.dimensions();
  if (dims.size() > size_t(kMaxDims)) throw ValueError(std::string(t.name) + " has too many axes");
  t.present = true;
  t.data = t.base = b.untyped_data();
  t.dtype = dtype_of(b.element_type());
  t.ndim = int(dims.size());
  int64_t s = 1;  // XLA hands custom calls row-major buffers
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.shape[d] = dims[d];
    t.stride[d] = s;
    s *= dims[d] > 0 ? dims[d] : 1;
  }
  t.device = device;
  t.device_id = device_id;
}

template <class T> T attr(const ffi::Dictionary& attrs, const std::string& name) {
  auto v = attrs.get<T>(name);
  if (!v.has_error()) return *v;
  throw ValueError("attribute " + name + ": " + v.error().message());
}

inline ffi::Error handle(const Launchers& launchers, Device device, int device_id, uintptr_t stream,
                         ffi::RemainingArgs args, ffi::RemainingRets rets, const ffi::Dictionary& attrs) {
  try {
    const Entry* e = find(attr<std::string_view>(attrs, "op"));
    if (!e) return ffi::Error::InvalidArgument("braze: no such op");
    const int64_t present = attr<int64_t>(attrs, "present");
    Call c;
    c.entry = e;
    c.launchers = &launchers;
    c.stream = stream;
    size_t ia = 0, ir = 0;
    for (size_t k = 0; k < e->arrays.size(); ++k) {
      const Slot& s = e->arrays[k];
      Tensor& t = c.arrays[k];
      t.name = s.name.c_str();
      if (!(present >> k & 1)) continue;
      if (s.input) {
        auto b = args.get<ffi::AnyBuffer>(ia++);
        if (b.has_error()) return b.error();
        to_tensor(t, *b, device, device_id);
        if (s.output) ++ir;  // the aliased result is this very buffer
      } else {
        auto r = rets.get<ffi::AnyBuffer>(ir++);
        if (r.has_error()) return r.error();
        to_tensor(t, **r, device, device_id);
      }
    }
    for (size_t k = 0; k < e->scalars.size(); ++k) {
      const Slot& s = e->scalars[k];
      Scalar& v = c.scalars[k];
      switch (s.kind) {
        case 'f': v.f = attr<double>(attrs, s.name); break;
        case 'i': v.i = attr<int64_t>(attrs, s.name); break;
        case 'b': v.i = attr<bool>(attrs, s.name); break;
        case 'u': v.i = attr<int64_t>(attrs, s.name); break;  // the uint64's bit pattern
        case 's': v.s = attr<std::string_view>(attrs, s.name); break;
      }
    }
    e->run(c);
  } catch (const std::exception& x) {
    return ffi::Error::InvalidArgument(std::string("braze: ") + x.what());
  }
  return ffi::Error::Success();
}

}  // namespace braze::xla
