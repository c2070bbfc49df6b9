// The Python entry points of every family, shared by every backend module
// (CPU, CUDA, Metal and the simulated Metal of the tests): each module passes
// the launcher that runs a family's validated Args on its device.
#pragma once
#include "bindings/common.h"
#include "core/attention.h"
#include "core/norm.h"
#include "core/ops.h"
#include "core/quant.h"
#include "core/quant_mx.h"
#include "core/quant_w8a8.h"
#include "core/rope.h"
#include "core/sampling.h"

namespace braze::bind {

void bind_rope(nb::module_& m, const Launcher<rope::Args>& ctx);

// A family with several kernel kinds has one typed argument block, and so one
// launcher, per kind.
struct NormLaunchers {
  Launcher<norm::NormArgs> forward;  // rms_norm, layer_norm, add_rms_norm, rms_norm_gated
  Launcher<norm::NormVjpArgs> vjp;   // rms_norm_vjp, layer_norm_vjp
};
void bind_norm(nb::module_& m, const NormLaunchers& l);

struct SamplingLaunchers {
  Launcher<sampling::NormalizeArgs> normalize;  // softmax, log_softmax, logsumexp
  Launcher<sampling::ArgmaxArgs> argmax;
  Launcher<sampling::MaskArgs> mask;            // top_k_mask, top_p_mask, min_p_mask
  Launcher<sampling::PenaltyArgs> penalties;    // apply_penalties
  Launcher<sampling::SampleArgs> sample;
  Launcher<sampling::PhiloxArgs> philox;        // philox_uniform
};
void bind_sampling(nb::module_& m, const SamplingLaunchers& l);

struct OpsLaunchers {
  Launcher<ops::ActArgs> act;
  Launcher<ops::EmbeddingArgs> embedding;
  Launcher<ops::HadamardArgs> hadamard;
};
void bind_ops(nb::module_& m, const OpsLaunchers& l);

// The attention family: one argument block per kernel kind (prefill and
// prefill_paged share one). A backend leaves a launcher empty where it has no
// kernel yet, and bind_attention binds no entry for it.
struct AttentionLaunchers {
  Launcher<attention::AppendKvArgs> append_kv;
  Launcher<attention::DecodeArgs> decode;
  Launcher<attention::PrefillArgs> prefill;
  Launcher<attention::MergeArgs> merge;
};
void bind_attention(nb::module_& m, const AttentionLaunchers& l);

// The quant family: one argument block per kernel kind; a backend without a
// matmul kernel yet leaves it empty and bind_quant binds no `matmul` (the same
// for `matmul_w8a8`, the product of quantized x and an int8 / fp8 weight).
struct QuantLaunchers {
  Launcher<quant::DequantArgs> dequantize;
  Launcher<quant::QuantArgs> quantize;
  Launcher<quant::MatmulArgs> matmul = {};
  Launcher<quant::W8A8Args> matmul_w8a8 = {};
};
void bind_quant(nb::module_& m, const QuantLaunchers& l);
void bind_quant_activations(nb::module_& m, const Launcher<quant::ActQuantArgs>& l);

// Every module: the exception translator, and as_bfloat16 (numpy has no
// bfloat16 in DLPack: an ml_dtypes.bfloat16 array's uint16 view relabelled).
void bind_common(nb::module_& m);

}  // namespace braze::bind
