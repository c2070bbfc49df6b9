// CUDA entries of the sampling family: run validated arguments on the arrays'
// device, on `stream` (the producer's cudaStream_t; 0 = the legacy default
// stream).
#pragma once
#include <cstdint>

#include "core/sampling.h"

namespace braze::cuda {
void normalize_run(const sampling::NormalizeArgs& a, uintptr_t stream);
void argmax_run(const sampling::ArgmaxArgs& a, uintptr_t stream);
void mask_run(const sampling::MaskArgs& a, uintptr_t stream);
void penalties_run(const sampling::PenaltyArgs& a, uintptr_t stream);
void sample_run(const sampling::SampleArgs& a, uintptr_t stream);
void philox_run(const sampling::PhiloxArgs& a, uintptr_t stream);
}
