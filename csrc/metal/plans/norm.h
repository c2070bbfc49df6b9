// Launch plans of the norm family (shaders/metal/norm/).
#pragma once
#include <cstdint>

#include "plan.h"

namespace braze::metal {

enum class NormOp : int {
  rms_norm = 0,
  layer_norm = 1,
  add_rms_norm = 2,
  rms_norm_gated = 3,
  rms_norm_vjp = 4,
  layer_norm_vjp = 5,
};
const char* norm_op_name(NormOp op);

// The array arguments of the six ops, by role. Row-shaped roles are
// [rows, n] with a row stride; weight, bias, dweight, dbias are [n].
enum NormRole : int {
  kNormX = 0,
  kNormWeight,
  kNormBias,
  kNormAux,     // residual (add_rms_norm), gate (rms_norm_gated), dy (VJPs)
  kNormOut,     // out, or dx (VJPs)
  kNormAuxOut,  // residual_out (add_rms_norm); may be the residual itself
  kNormDWeight,
  kNormDBias,
  kNormRoles
};
bool norm_role_is_row(int role);

struct NormArgs {
  NormOp op = NormOp::rms_norm;
  DType dtype = DType::f32;
  std::uint64_t rows = 0;  // product of the leading dims
  std::uint64_t n = 0;     // last dim
  std::int64_t row_stride[kNormRoles] = {};  // elements; used for row roles
  bool present[kNormRoles] = {};
  float eps = 1e-6f;
  float weight_offset = 0.0f;
  std::uint64_t group_size = 0;  // rms_norm_gated; 0 = whole row
};

// Plan::error is set (and nothing planned) for arguments no kernel handles.
Plan plan_norm(const NormArgs& a);

}  // namespace braze::metal
