// Included once per extension module: maps braze::TypeError / ValueError.
#pragma once
#include "bindings/common.h"

namespace braze::bind {
inline void register_exceptions(nb::module_&) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const braze::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const braze::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}
}  // namespace braze::bind
