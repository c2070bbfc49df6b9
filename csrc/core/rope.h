// The rope family's contract, shared by every backend: one argument block for
// rope and rope_qk (q and k rotated in one launch; rope alone leaves k empty)
// and the checks that build it, run before anything is written.
#pragma once
#include <cmath>

#include "core/tensor.h"

namespace braze::rope {

// One rotated array: `heads` rows of `dim` contiguous elements per token; the
// token and head axes may be strided (q / k slices of a fused qkv buffer).
struct Part {
  const void* x = nullptr;
  void* y = nullptr;
  int64_t heads = 0;
  int64_t x_tok = 0, x_head = 0;  // strides in elements
  int64_t y_tok = 0, y_head = 0;
};

struct Options {
  double base = 10000.0;
  int64_t rotary_dim = -1;  // -1 = the whole head
  bool interleaved = false;
  double scale = 1.0;       // attention_scale: multiplies cos and sin
  bool inverse = false;     // rotate by -angle
};

struct Args {
  DType dtype;               // of q / k and their outputs
  DType pos_dtype;           // i32 or i64
  int64_t tokens, dim, rot;  // rot = rotary_dim (even, <= dim)
  const void* pos; int64_t pos_stride;
  const float* inv_freq;     // [rot / 2], or null: base ** (-2i / rot)
  double base;
  float scale;
  bool interleaved, inverse;
  Part q, k;                 // k.heads == 0 for rope
  Device device;
  int device_id;
};

Args prepare_rope(const Tensor& x, const Tensor& pos, const Tensor& inv_freq, const Tensor& out,
                  const Options& o);
Args prepare_rope_qk(const Tensor& q, const Tensor& k, const Tensor& pos, const Tensor& inv_freq,
                     const Tensor& q_out, const Tensor& k_out, const Options& o);

// inv_freq[i] = base ** (-2i / rot), computed in double and rounded once to
// float, so the kernels and the reference agree on every bit of the angle.
inline float default_inv_freq(double base, int64_t i, int64_t rot) {
  return float(std::pow(base, -double(2 * i) / double(rot)));
}

}  // namespace braze::rope
