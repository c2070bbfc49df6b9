// CUDA entry of the norm family: runs validated Args on the arrays' device,
// on `stream` (the producer's cudaStream_t; 0 = the legacy default stream).
#pragma once
#include <cstdint>

#include "core/norm.h"

namespace braze::cuda {
void norm_run(const norm::Args& a, uintptr_t stream);
}
