// Launch plans of the rope family (shaders/metal/rope/).
#pragma once
#include <cstdint>

#include "plan.h"

namespace braze::metal {

// The array arguments of rope / rope_qk, by role. rope uses q (x) and q_out
// (out) only. Row roles hold `heads` rows of `dim` contiguous elements per
// token, with token and head strides in elements.
enum RopeRole : int {
  kRopeQ = 0,   // x of rope, q of rope_qk
  kRopeK,       // k of rope_qk
  kRopePos,     // positions [tokens], int32 or int64, with a stride
  kRopeInvFreq, // [rot / 2] f32; required: the executor passes the default
                // table (braze::rope::default_inv_freq) when none is given
  kRopeQOut,    // out of rope, q_out of rope_qk; may be q (in place)
  kRopeKOut,    // k_out; may be k
  kRopeRoles
};

struct RopeArgs {
  bool qk = false;             // rope_qk (q and k) or rope (q only)
  DType dtype = DType::f32;    // of q / k and their outputs
  bool pos64 = false;          // positions are int64 (else int32)
  std::uint64_t tokens = 0;
  std::uint64_t dim = 0;       // head_dim
  std::uint64_t rot = 0;       // rotary_dim: even, <= dim
  std::int64_t pos_stride = 1; // elements
  std::uint64_t q_heads = 0, k_heads = 0;
  std::int64_t q_tok = 0, q_head = 0, q_out_tok = 0, q_out_head = 0;  // strides in elements
  std::int64_t k_tok = 0, k_head = 0, k_out_tok = 0, k_out_head = 0;
  bool interleaved = false;
  bool inverse = false;
  float scale = 1.0f;          // attention_scale
  bool in_place_q = false;     // q_out is q (same buffer and strides)
  bool in_place_k = false;     // k_out is k
};

// Plan::error is set (and nothing planned) for arguments no kernel handles.
Plan plan_rope(const RopeArgs& a);

}  // namespace braze::metal
