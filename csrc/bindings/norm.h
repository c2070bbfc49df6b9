// Python entry points of the norm family, shared by every backend module: the
// module passes the launcher that runs validated Args on its device.
#pragma once
#include "bindings/common.h"
#include "core/norm.h"

namespace braze::bind {

// launch(args, stream): stream is the producer's stream handle (CUDA), 0 elsewhere.
using NormLaunch = void (*)(const norm::Args&, uintptr_t stream);

void bind_norm(nb::module_& m, NormLaunch launch, Device device, const char* backend);

}  // namespace braze::bind
