// Launch plans of the sampling family (shaders/metal/sampling/).
#pragma once
#include <cstdint>

#include "plan.h"

namespace braze::metal {

enum class SamplingOp : int {
  softmax = 0, log_softmax, logsumexp, argmax, top_k_mask, top_p_mask, min_p_mask, apply_penalties, sample,
  philox_uniform
};

// The array arguments, by role (bound in this order: sampling_params.h).
enum SamplingRole : int {
  kSampX = 0,      // logits [rows, cols], row stride x_stride (absent for philox_uniform)
  kSampY,          // out
  kSampTemperature,  // float [rows], optional
  kSampTopK,       // int [rows], optional
  kSampP,          // float [rows], optional: top_p (sample, top_p_mask) or p of min_p_mask
  kSampMinP,       // float [rows], optional: min_p of sample
  kSampIds,        // int [rows, ids_len], apply_penalties
  kSampRoles
};

// Arguments as checked by braze::sampling::prepare_* (csrc/core/sampling.cpp);
// the plan checks only what its kernels need (sizes fit in 32 bits).
struct SamplingArgs {
  SamplingOp op = SamplingOp::softmax;
  DType dtype = DType::f32;        // of logits (and of out for the masks / penalties)
  std::uint64_t rows = 0, cols = 0;
  std::int64_t x_stride = 0, y_stride = 0;  // elements
  bool row_temperature = false, row_k = false, row_p = false, row_min_p = false;  // arrays bound
  float temperature = 1.0f;
  std::int32_t top_k = 0;
  float p = 1.0f;                  // top_p, or p of min_p_mask
  float min_p = 0.0f;              // sample
  std::uint64_t ids_len = 0;
  std::int64_t ids_stride = 0;
  float repetition = 1.0f, frequency = 0.0f, presence = 0.0f;
  std::uint64_t seed = 0, offset = 0;
  bool in_place = false;           // out is logits (masks, penalties)
};

const char* sampling_op_name(SamplingOp op);

// Plan::error is set (and nothing planned) for arguments no kernel handles.
Plan plan_sampling(const SamplingArgs& a);

}  // namespace braze::metal
