// The sampling family's contract, shared by every backend: one argument block
// and the prepare_* checks that build it (TypeError / ValueError naming the
// argument, raised before anything is written).
//
// Row validity, the same everywhere: a row is samplable when it holds no NaN
// and its largest logit is finite. argmax and sample return -1 for any other
// row; the masks copy such a row unchanged.
#pragma once
#include "core/op_table.h"
#include "core/tensor.h"

namespace braze::sampling {

#define BRAZE_SAMPLING_OPS(X)                                                                       \
  X(softmax) X(log_softmax) X(logsumexp) X(argmax) X(top_k_mask) X(top_p_mask) X(min_p_mask) \
  X(apply_penalties) X(sample) X(philox_uniform)
BRAZE_DECLARE_OPS(BRAZE_SAMPLING_OPS)

// A per-row parameter: an array [rows] or one value for every row.
template <class T> struct RowParam {
  const T* arr = nullptr;
  T value{};
  BRAZE_HD T at(int64_t r) const { return arr ? arr[r] : value; }
};

struct Args {
  Op op;
  DType dtype;                       // of logits (and of out for the masks / penalties)
  int64_t rows, cols;
  const void* x; int64_t x_stride;   // logits
  void* y; int64_t y_stride;         // out: [rows, cols] rows, or [rows] (int32 / float32)
  RowParam<float> temperature, p, min_p;
  RowParam<int32_t> top_k;
  const int32_t* ids; int64_t ids_len, ids_stride;  // apply_penalties: token_ids [rows, ids_len]
  float repetition, frequency, presence;
  uint64_t seed, offset;
  bool in_place;                     // out is logits (masks, penalties)
  Device device;
  int device_id;
};

// A per-row parameter as it arrives: an array (when present) or a scalar.
struct ParamIn {
  const Tensor* arr;
  double value;
};

// softmax / log_softmax: out float32 [B, V]; logsumexp: out float32 [B].
Args prepare_normalize(Op op, const Tensor& x, const Tensor& out, ParamIn temperature);
Args prepare_argmax(const Tensor& x, const Tensor& out);
Args prepare_top_k_mask(const Tensor& x, const Tensor& out, ParamIn k);
// top_p_mask / min_p_mask.
Args prepare_prob_mask(Op op, const Tensor& x, const Tensor& out, ParamIn p, ParamIn temperature);
Args prepare_apply_penalties(const Tensor& x, const Tensor& ids, const Tensor& out, double repetition,
                             double frequency, double presence);
Args prepare_sample(const Tensor& x, const Tensor& out, ParamIn temperature, ParamIn top_k, ParamIn top_p,
                    ParamIn min_p, uint64_t seed, uint64_t offset);
// out float32 [n]: the uniform each row n of sample draws.
Args prepare_philox_uniform(const Tensor& out, uint64_t seed, uint64_t offset);

}  // namespace braze::sampling
