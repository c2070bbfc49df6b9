// CUDA entries of the ops family: each runs validated Args on the arrays'
// device, on `stream` (the producer's cudaStream_t; 0 = the legacy default
// stream). They never synchronize and allocate nothing.
#pragma once
#include <cstdint>

#include "core/ops.h"

namespace braze::cuda {
void act_run(const ops::ActArgs& a, uintptr_t stream);
void embedding_run(const ops::EmbeddingArgs& a, uintptr_t stream);
void hadamard_run(const ops::HadamardArgs& a, uintptr_t stream);
}  // namespace braze::cuda
