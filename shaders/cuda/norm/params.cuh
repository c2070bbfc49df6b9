// What the host passes to every norm kernel (by value).
#pragma once
#include <cstdint>

namespace braze::cuda::norm {

struct Params {
  // A "row" of a kernel is `cols` elements normalized together. rms_norm_gated
  // with groups splits each array row into `groups` such rows; every other op
  // has groups == 1.
  int64_t rows, cols, groups;
  const void* x; int64_t x_stride;
  const void* r; int64_t r_stride;  // residual, gate or dy
  const void* w;                    // weight or null (= ones)
  const void* b;                    // bias or null (= zeros)
  void* y; int64_t y_stride;        // out or dx
  void* h; int64_t h_stride;        // residual_out
  float eps, w_offset;
  float* part_w;                    // vjp: per-group partial sums [groups of the grid][cols], or null
  float* part_b;
};

}  // namespace braze::cuda::norm
