// Python entry points of the rope family, shared by every backend module: the
// module passes the launcher that runs validated Args on its device.
#pragma once
#include "bindings/common.h"
#include "core/rope.h"

namespace braze::bind {

// launch(args, stream): stream is the producer's stream handle (CUDA), 0 elsewhere.
using RopeLaunch = void (*)(const rope::Args&, uintptr_t stream);

void bind_rope(nb::module_& m, RopeLaunch launch, Device device, const char* backend);

}  // namespace braze::bind
