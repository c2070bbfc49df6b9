// The Python entry points of every family, shared by every backend module
// (CPU, CUDA, Metal and the simulated Metal of the tests): each module passes
// the launcher that runs a family's validated Args on its device.
#pragma once
#include "bindings/common.h"
#include "core/norm.h"
#include "core/ops.h"
#include "core/quant.h"
#include "core/quant_mx.h"
#include "core/rope.h"
#include "core/sampling.h"

namespace braze::bind {

void bind_norm(nb::module_& m, const Launcher<norm::Args>& ctx);
void bind_rope(nb::module_& m, const Launcher<rope::Args>& ctx);
void bind_sampling(nb::module_& m, const Launcher<sampling::Args>& ctx);

// The ops family has one typed argument block per kernel kind.
struct OpsLaunchers {
  Launcher<ops::ActArgs> act;
  Launcher<ops::EmbeddingArgs> embedding;
  Launcher<ops::HadamardArgs> hadamard;
};
void bind_ops(nb::module_& m, const OpsLaunchers& l);

// The quant family: one argument block per direction.
struct QuantLaunchers {
  Launcher<quant::DequantArgs> dequantize;
  Launcher<quant::QuantArgs> quantize;
};
void bind_quant(nb::module_& m, const QuantLaunchers& l);
void bind_quant_activations(nb::module_& m, const Launcher<quant::ActQuantArgs>& l);

// Every module: the exception translator, and as_bfloat16 (numpy has no
// bfloat16 in DLPack: an ml_dtypes.bfloat16 array's uint16 view relabelled).
void bind_common(nb::module_& m);

}  // namespace braze::bind
