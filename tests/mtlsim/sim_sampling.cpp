// C entry for running the sampling ops in the simulator through the same
// launch plan the Metal executor uses (csrc/metal/plans/sampling.cpp).
// Buffers, red zones and copy-back: plan_run.h.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "plans/sampling.h"
#include "plan_run.h"

namespace {

using namespace braze::metal;

const char* const kRoleNames[kSampRoles] = {"logits", "out", "temperature", "top_k", "p", "min_p",
                                             "token_ids"};

std::string run(const SamplingArgs& a, void* const* ptrs, const std::uint64_t* extents,
                std::uint64_t seed, bool shuffle) {
  const Plan plan = plan_sampling(a);
  if (!plan.scratch_bytes.empty()) return "sampling plans use no scratch";
  bool present[kSampRoles], outputs[kSampRoles];
  for (int r = 0; r < kSampRoles; ++r) {
    present[r] = ptrs[r] != nullptr;
    outputs[r] = r == kSampY;
  }
  return mtlsim::run_plan(plan, kSampRoles, present, kRoleNames, ptrs, extents, outputs, seed, shuffle);
}

}  // namespace

// ints: op, dtype, row_temperature, row_k, row_p, row_min_p, in_place, top_k;
// sizes: rows, cols, ids_len, seed, offset; strides: x, y, ids (elements);
// floats: temperature, p, min_p, repetition, frequency, presence;
// ptrs / extents by SamplingRole (null = absent).
extern "C" int mtlsim_sampling(const int* ints, const unsigned long long* sizes, const long long* strides,
                               const float* floats, void* const* ptrs, const unsigned long long* extents,
                               unsigned long long seed, int shuffle, char* err, int errlen) {
  SamplingArgs a;
  a.op = SamplingOp(ints[0]);
  a.dtype = DType(ints[1]);
  a.row_temperature = ints[2] != 0;
  a.row_k = ints[3] != 0;
  a.row_p = ints[4] != 0;
  a.row_min_p = ints[5] != 0;
  a.in_place = ints[6] != 0;
  a.top_k = ints[7];
  a.rows = sizes[0];
  a.cols = sizes[1];
  a.ids_len = sizes[2];
  a.seed = sizes[3];
  a.offset = sizes[4];
  a.x_stride = strides[0];
  a.y_stride = strides[1];
  a.ids_stride = strides[2];
  a.temperature = floats[0];
  a.p = floats[1];
  a.min_p = floats[2];
  a.repetition = floats[3];
  a.frequency = floats[4];
  a.presence = floats[5];
  std::uint64_t ext[kSampRoles];
  for (int r = 0; r < kSampRoles; ++r) ext[r] = extents[r];
  std::string e = run(a, ptrs, ext, seed, shuffle != 0);
  std::snprintf(err, std::size_t(errlen), "%s", e.c_str());
  return e.empty() ? 0 : 1;
}
