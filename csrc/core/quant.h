// The quant family's contract, shared by every backend: the weight formats of
// core/quant/formats.h, decoded (dequantize) and encoded (quantize) row by row.
// Each kernel kind has its typed argument block; prepare_* validate every array
// (TypeError / ValueError naming the argument) before anything is written.
#pragma once
#include <string>

#include "core/op_table.h"
#include "core/quant/formats.h"
#include "core/tensor.h"

namespace braze::quant {

#define BRAZE_QUANT_OPS(X) X(dequantize) X(quantize) X(matmul) X(matmul_w8a8)
BRAZE_DECLARE_OPS(BRAZE_QUANT_OPS)

// Whether this build has the format's kernels (its group registered in core/quant.cpp).
bool dequantize_built(QFormat f);
bool quantize_built(QFormat f);
// "'q8_0', 'q4_0', ...": every format of the table, for messages.
std::string known_formats();
// The format called `name`; ValueError naming `arg` (listing the known ones) otherwise.
QFormat format_named(const std::string& name, const char* arg = "format");

// out[n, k] = the decoded weight, rows of `cols` = K logical elements. data
// holds each row's packed bytes (`data_stride` bytes apart). The split layouts
// (csrc/core/quant/formats.h) also read scales / biases ([rows, groups] with
// a row stride in elements, `group` elements per scale) and a f32 tensor scale.
struct DequantArgs {
  QFormat format;
  DType dtype;                               // of out: f32, f16, bf16
  int64_t rows, cols;
  const uint8_t* data; int64_t data_stride;  // bytes
  const void* scales; DType scales_dtype; int64_t scales_rows, scales_cols, scales_stride;
  const void* biases; int64_t biases_stride;
  const float* tensor_scale;
  int64_t group;                             // elements per scale of a split layout; 0 for blocks
  void* out; int64_t out_stride;             // elements
  Device device;
  int device_id;
};

// The inverse: x[n, k] float -> data (and, for split layouts, scales / biases
// / tensor scale written alongside).
struct QuantArgs {
  QFormat format;
  DType dtype;                               // of x
  int64_t rows, cols;
  const void* x; int64_t x_stride;           // elements
  uint8_t* data; int64_t data_stride;        // bytes
  void* scales; DType scales_dtype; int64_t scales_rows, scales_cols, scales_stride;
  void* biases; int64_t biases_stride;
  float* tensor_scale;
  int64_t group;
  int scale_rule;                            // split layouts' rule (0 floor, 1 ceil, 2 round)
  Device device;
  int device_id;
};

// out[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]), float32 accumulation, one
// rounding to `dtype`. W [N, K] is `w` (a quantized weight exactly as
// dequantize reads it; w.out is null, w.dtype is `dtype`) or, when `dense`, a
// float array of `dtype` (w.data / w.data_stride in bytes; w.format unused).
// Kernels pick a GEMV path for few rows (m <= 16) and a GEMM path otherwise.
struct MatmulArgs {
  DequantArgs w;
  bool dense;
  DType dtype;                               // of x, bias and out: f32, f16, bf16
  int64_t m;                                 // rows of x and out; n = w.rows, k = w.cols
  const void* x; int64_t x_stride;           // elements
  const void* bias;                          // [N] contiguous, or null
  void* out; int64_t out_stride;             // elements
  Device device;
  int device_id;
};

// data [N, bytes of K] (uint8; uint32 words for affine), out [N, K] float32 /
// float16 / bfloat16. scales / biases / tensor_scale: the split layouts' arrays,
// absent (None) for the block layouts.
DequantArgs prepare_dequantize(const std::string& format, int64_t k, const Tensor& data, const Tensor& scales,
                               const Tensor& biases, const Tensor& tensor_scale, const Tensor& out, int64_t group);
// x [M, K] float (rows with a stride, last axis contiguous), out [M, N] of x's
// dtype, bias [N] of x's dtype or None. format "" is a dense weight: data is
// [N, K] of x's dtype; otherwise data / scales / biases / tensor_scale / group
// are dequantize's.
MatmulArgs prepare_matmul(const std::string& format, const Tensor& x, const Tensor& data, const Tensor& scales,
                          const Tensor& biases, const Tensor& tensor_scale, const Tensor& bias, const Tensor& out,
                          int64_t group);
QuantArgs prepare_quantize(const std::string& format, const Tensor& x, const Tensor& data, const Tensor& scales,
                           const Tensor& biases, const Tensor& tensor_scale, int64_t group, int scale_rule);

}  // namespace braze::quant
