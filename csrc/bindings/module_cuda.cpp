// braze._cuda: the CUDA backend (built when a CUDA toolkit is found). It
// imports without a driver or GPU; usable() says whether it can run here.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "bindings/families.h"
#include "cuda/norm.h"
#include "cuda/rope.h"
#include "cuda/runtime.h"
#include "cuda/sampling.h"

namespace nb = nanobind;
using namespace braze;

namespace {
template <class Args> bind::Launcher<Args> launcher(void (*run)(const Args&, uintptr_t stream)) {
  bind::Launcher<Args> l;
  l.launch = run;
  l.backend = "cuda";
  l.device = Device::cuda;
  return l;
}
}  // namespace

NB_MODULE(_cuda, m) {
  bind::bind_common(m);
  bind::bind_norm(m, launcher(cuda::norm_run));
  bind::bind_rope(m, launcher(cuda::rope_run));
  bind::bind_sampling(m, launcher(cuda::sampling_run));
  m.def("usable", [] { return cuda::device_status(); },
        "(True, '') when a CUDA driver and a GPU of compute capability >= 8.0 are present, else (False, why).");
}
