// braze._cuda: the CUDA backend (built when a CUDA toolkit is found). It
// imports without a driver or GPU; usable() says whether it can run here.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "bindings/exceptions.h"
#include "bindings/norm.h"
#include "bindings/sampling.h"
#include "bindings/rope.h"
#include "cuda/norm.h"
#include "cuda/rope.h"
#include "cuda/runtime.h"
#include "cuda/sampling.h"

namespace nb = nanobind;
using namespace braze;

NB_MODULE(_cuda, m) {
  bind::register_exceptions(m);
  bind::bind_norm(m, cuda::norm_run, Device::cuda, "cuda");
  bind::bind_sampling(m, cuda::sampling_run, Device::cuda, "cuda");
  bind::bind_rope(m, cuda::rope_run, Device::cuda, "cuda");
  m.def("usable", [] { return cuda::device_status(); },
        "(True, '') when a CUDA driver and a GPU of compute capability >= 8.0 are present, else (False, why).");
}
