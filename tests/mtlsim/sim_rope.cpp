// C entry for running rope / rope_qk in the simulator through the same launch
// plan the Metal executor uses (csrc/metal/plans/rope.cpp).
// Buffers, red zones and copy-back: plan_run.h.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "plans/rope.h"
#include "plan_run.h"

namespace {

using namespace braze::metal;

const char* const kRoleNames[kRopeRoles] = {"q", "k", "positions", "inv_freq", "q_out", "k_out"};

std::string run(const RopeArgs& a, void* const* ptrs, const std::uint64_t* extents,
                std::uint64_t seed, bool shuffle) {
  const Plan plan = plan_rope(a);
  if (!plan.scratch_bytes.empty()) return "rope plans use no scratch";
  bool present[kRopeRoles], outputs[kRopeRoles];
  for (int r = 0; r < kRopeRoles; ++r) {
    present[r] = ptrs[r] != nullptr;
    outputs[r] = r == kRopeQOut || r == kRopeKOut;
  }
  return mtlsim::run_plan(plan, kRopeRoles, present, kRoleNames, ptrs, extents, outputs, seed, shuffle);
}

}  // namespace

// ints: qk, dtype, pos64, interleaved, inverse, in_place_q, in_place_k;
// sizes: tokens, dim, rot, q_heads, k_heads;
// strides: pos, q_tok, q_head, q_out_tok, q_out_head, k_tok, k_head, k_out_tok, k_out_head;
// ptrs / extents by RopeRole (null = absent).
extern "C" int mtlsim_rope(const int* ints, const unsigned long long* sizes, const long long* strides,
                           float scale, void* const* ptrs, const unsigned long long* extents,
                           unsigned long long seed, int shuffle, char* err, int errlen) {
  RopeArgs a;
  a.qk = ints[0] != 0;
  a.dtype = DType(ints[1]);
  a.pos64 = ints[2] != 0;
  a.interleaved = ints[3] != 0;
  a.inverse = ints[4] != 0;
  a.in_place_q = ints[5] != 0;
  a.in_place_k = ints[6] != 0;
  a.tokens = sizes[0];
  a.dim = sizes[1];
  a.rot = sizes[2];
  a.q_heads = sizes[3];
  a.k_heads = sizes[4];
  a.pos_stride = strides[0];
  a.q_tok = strides[1];
  a.q_head = strides[2];
  a.q_out_tok = strides[3];
  a.q_out_head = strides[4];
  a.k_tok = strides[5];
  a.k_head = strides[6];
  a.k_out_tok = strides[7];
  a.k_out_head = strides[8];
  a.scale = scale;
  std::uint64_t ext[kRopeRoles];
  for (int r = 0; r < kRopeRoles; ++r) ext[r] = extents[r];
  std::string e = run(a, ptrs, ext, seed, shuffle != 0);
  std::snprintf(err, std::size_t(errlen), "%s", e.c_str());
  return e.empty() ? 0 : 1;
}
