// The sampling family's contract, shared by every backend: a typed argument
// block per kernel kind and the prepare_* checks that build it (TypeError /
// ValueError naming the argument, raised before anything is written).
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

// The logits every kernel but philox_uniform reads: a float [rows, cols]
// array whose rows are contiguous.
struct Logits {
  DType dtype;
  int64_t rows, cols;
  const void* x; int64_t x_stride;
  Device device;
  int device_id;
};

// softmax, log_softmax: out float32 [rows, cols]; logsumexp: out float32
// [rows] (out_stride 1).
struct NormalizeArgs : Logits {
  Op op;
  float* out; int64_t out_stride;
  RowParam<float> temperature;
};

// out int32 [rows]: the first index of the row max, or -1.
struct ArgmaxArgs : Logits {
  int32_t* out;
};

// top_k_mask (top_k), top_p_mask (top_p, temperature), min_p_mask (min_p,
// temperature): out [rows, cols] in the logits' dtype, the logits with the
// tokens the mask drops set to -inf. A parameter the op does not take holds
// its "keeps everything" value (top_k 0, top_p 1, min_p 0, temperature 1).
struct MaskArgs : Logits {
  Op op;
  void* out; int64_t out_stride;
  bool in_place;                     // out is the logits
  RowParam<int32_t> top_k;
  RowParam<float> top_p, min_p, temperature;
};

// apply_penalties: out [rows, cols] in the logits' dtype.
struct PenaltyArgs : Logits {
  void* out; int64_t out_stride;
  bool in_place;                     // out is the logits
  const int32_t* token_ids; int64_t ids_len, ids_stride;  // [rows, ids_len], -1 pads
  float repetition, frequency, presence;
};

// out int32 [rows]: the token each row draws with its Philox uniform.
struct SampleArgs : Logits {
  int32_t* out;
  RowParam<float> temperature, top_p, min_p;
  RowParam<int32_t> top_k;
  uint64_t seed, offset;
};

// out float32 [n]: the uniform row r < n of sample(seed, offset) draws.
struct PhiloxArgs {
  int64_t n;
  float* out;
  uint64_t seed, offset;
  Device device;
  int device_id;
};

// A per-row parameter as it arrives: an array (when present) or a scalar.
struct ParamIn {
  const Tensor* arr;
  double value;
};

// softmax / log_softmax: out float32 [B, V]; logsumexp: out float32 [B].
NormalizeArgs prepare_normalize(Op op, const Tensor& x, const Tensor& out, ParamIn temperature);
ArgmaxArgs prepare_argmax(const Tensor& x, const Tensor& out);
MaskArgs prepare_top_k_mask(const Tensor& x, const Tensor& out, ParamIn k);
// top_p_mask / min_p_mask.
MaskArgs prepare_prob_mask(Op op, const Tensor& x, const Tensor& out, ParamIn p, ParamIn temperature);
PenaltyArgs prepare_apply_penalties(const Tensor& x, const Tensor& ids, const Tensor& out, double repetition,
                                    double frequency, double presence);
SampleArgs prepare_sample(const Tensor& x, const Tensor& out, ParamIn temperature, ParamIn top_k, ParamIn top_p,
                          ParamIn min_p, uint64_t seed, uint64_t offset);
PhiloxArgs prepare_philox_uniform(const Tensor& out, uint64_t seed, uint64_t offset);

}  // namespace braze::sampling
