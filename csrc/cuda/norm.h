// CUDA entries of the norm family: run validated arguments on the arrays'
// device, on `stream` (the producer's cudaStream_t; 0 = the legacy default
// stream).
#pragma once
#include <cstdint>

#include "core/norm.h"

namespace braze::cuda {
void norm_run(const norm::NormArgs& a, uintptr_t stream);
void norm_vjp_run(const norm::NormVjpArgs& a, uintptr_t stream);
// Bytes of workspace `op` (rms_norm_vjp or layer_norm_vjp) needs for `rows`
// x `cols` of `dtype` on `device` with `grads` parameter gradients (dweight,
// dbias): enough for any alignment of the arrays; 0 when it needs none.
int64_t norm_vjp_workspace_bytes(norm::Op op, DType dtype, int64_t rows, int64_t cols, int grads, int device);
}
