// CUDA entry of the sampling family: runs validated Args on the arrays' device,
// on `stream` (the producer's cudaStream_t; 0 = the legacy default stream).
#pragma once
#include <cstdint>

#include "core/sampling.h"

namespace braze::cuda {
void sampling_run(const sampling::Args& a, uintptr_t stream);
}
