// Python entry points of the sampling family, shared by every backend module:
// the module passes the launcher that runs validated Args on its device.
#pragma once
#include "bindings/common.h"
#include "core/sampling.h"

namespace braze::bind {

// launch(args, stream): stream is the producer's stream handle (CUDA), 0 elsewhere.
using SamplingLaunch = void (*)(const sampling::Args&, uintptr_t stream);

void bind_sampling(nb::module_& m, SamplingLaunch launch, Device device, const char* backend);

}  // namespace braze::bind
