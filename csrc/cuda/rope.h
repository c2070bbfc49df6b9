// CUDA entry of the rope family: runs validated Args on the arrays' device,
// on `stream` (the producer's cudaStream_t; 0 = the legacy default stream).
#pragma once
#include <cstdint>

#include "core/rope.h"

namespace braze::cuda {
void rope_run(const rope::Args& a, uintptr_t stream);
}
