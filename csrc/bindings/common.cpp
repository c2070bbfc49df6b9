#include <vector>

#include "bindings/families.h"

namespace braze::bind {

void bind_common(nb::module_& m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const braze::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const braze::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("as_bfloat16", [](nb::handle obj) {
    Array a = nb::cast<Array>(obj);
    if (dtype_of(a.dtype()) != DType::u16) throw TypeError("as_bfloat16 takes a uint16 array");
    std::vector<size_t> shape(a.ndim());
    std::vector<int64_t> strides(a.ndim());
    for (size_t i = 0; i < a.ndim(); ++i) {
      shape[i] = a.shape(i);
      strides[i] = a.stride(i);
    }
    const nb::dlpack::dtype bf16{uint8_t(nb::dlpack::dtype_code::Bfloat), 16, 1};
    return nb::ndarray<>(const_cast<void*>(a.data()), a.ndim(), shape.data(), obj, strides.data(), bf16,
                         a.device_type(), a.device_id());
  }, nb::arg("a"), "The same memory as a (uint16) labelled bfloat16, for DLPack: numpy has no bfloat16.");
}

}  // namespace braze::bind
