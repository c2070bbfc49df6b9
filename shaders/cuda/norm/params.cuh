// What the host passes to the norm kernels (by value): one block per kernel
// kind, each field with one meaning.
#pragma once
#include <cstdint>

namespace braze::cuda::norm {

// A "row" of a kernel is `cols` elements normalized together. rms_norm_gated
// with groups splits each array row into `groups` such rows; every other op
// has groups == 1.
struct RowShape {
  int64_t rows, cols, groups;
};

// rms_norm, layer_norm, add_rms_norm, rms_norm_gated.
struct ForwardParams : RowShape {
  const void* x; int64_t x_stride;
  const void* residual; int64_t residual_stride;          // add_rms_norm
  const void* gate; int64_t gate_stride;                  // rms_norm_gated
  const void* w;                                          // weight or null (= ones)
  const void* b;                                          // bias or null (= zeros)
  void* out; int64_t out_stride;
  void* residual_out; int64_t residual_out_stride;        // add_rms_norm
  float eps, w_offset;
};

// rms_norm_vjp, layer_norm_vjp.
struct VjpParams : RowShape {
  const void* x; int64_t x_stride;
  const void* dy; int64_t dy_stride;
  const void* w;                                          // weight or null (= ones)
  void* dx; int64_t dx_stride;
  float eps, w_offset;
  float* part_w;                    // per-group partial sums [groups of the grid][cols], or null
  float* part_b;
};

}  // namespace braze::cuda::norm
