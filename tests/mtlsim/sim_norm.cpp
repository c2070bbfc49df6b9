// C entry for running a norm op in the simulator through the same launch plan
// the Metal executor uses (csrc/metal/plans/norm.cpp).
// Buffers, red zones and copy-back: plan_run.h.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "plans/norm.h"
#include "plan_run.h"

namespace {

using namespace braze::metal;

const char* const kRoleNames[kNormRoles] = {"x",   "weight",       "bias",    "aux",
                                            "out", "residual_out", "dweight", "dbias"};

std::string run(const NormArgs& a, void* const* ptrs, const std::uint64_t* extents,
                std::uint64_t seed, bool shuffle) {
  const Plan plan = plan_norm(a);
  bool present[kNormRoles], outputs[kNormRoles];
  for (int r = 0; r < kNormRoles; ++r) {
    present[r] = a.present[r];
    outputs[r] = r == kNormOut || r == kNormAuxOut || r == kNormDWeight || r == kNormDBias;
  }
  return mtlsim::run_plan(plan, kNormRoles, present, kRoleNames, ptrs, extents, outputs, seed, shuffle);
}

}  // namespace

extern "C" int mtlsim_norm(int op, int dtype, unsigned long long rows, unsigned long long n,
                           const long long* strides, const int* present, float eps,
                           float weight_offset, unsigned long long group_size, void* const* ptrs,
                           const unsigned long long* extents, unsigned long long seed, int shuffle,
                           char* err, int errlen) {
  NormArgs a;
  a.op = NormOp(op);
  a.dtype = DType(dtype);
  a.rows = rows;
  a.n = n;
  std::uint64_t ext[kNormRoles];
  for (int r = 0; r < kNormRoles; ++r) {
    a.row_stride[r] = strides[r];
    a.present[r] = present[r] != 0;
    ext[r] = extents[r];
  }
  a.eps = eps;
  a.weight_offset = weight_offset;
  a.group_size = group_size;
  std::string e = run(a, ptrs, ext, seed, shuffle != 0);
  std::snprintf(err, std::size_t(errlen), "%s", e.c_str());
  return e.empty() ? 0 : 1;
}
