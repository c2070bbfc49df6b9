// The quant family's split-layout formats (MX, nvfp4, fp8, int8, MLX affine),
// whose scales / biases / tensor scale are arrays beside `data`, and
// quantize_activations. The checks here complete prepare_dequantize /
// prepare_quantize (core/quant.h) for those formats; every one raises
// TypeError / ValueError naming the argument before anything is written.
#pragma once
#include "core/quant.h"

namespace braze::quant {

// Scale granularity of fp8 weights, carried in Args::group (the element count
// a scale covers along a row: the whole tensor, one row, 128 x 128 blocks).
constexpr int64_t kFp8GroupTensor = 0, kFp8GroupRow = 1, kFp8GroupBlock = 128;

// Split layouts: checks scales / biases / tensor_scale against the format and
// [n, k] and fills those fields of `a` (DequantArgs or QuantArgs). group: the
// affine group size (32, 64, 128); ignored otherwise. `role`: output when
// quantize writes them.
void prepare_split(QFormat f, int64_t n, int64_t k, const Tensor& scales, const Tensor& biases,
                   const Tensor& tensor_scale, int64_t group, Role role, DequantArgs& a);
void prepare_split(QFormat f, int64_t n, int64_t k, const Tensor& scales, const Tensor& biases,
                   const Tensor& tensor_scale, int64_t group, Role role, QuantArgs& a);

// quantize_activations: x [M, K] f32 / f16 / bf16 -> (xq, sx), one pass.
//   fp8_e4m3, int8: per token, sx f32 [M] = amax / fmax (fp8: 448, int8: 127);
//                   xq uint8 fp8 codes / int8 [M, K];
//   mxfp8_e4m3:     blocks of 32, sx uint8 e8m0 [M, K / 32] (floor rule), xq uint8 [M, K];
//   nvfp4:          blocks of 16, sx uint8 e4m3 [M, K / 16] with tensor scale 1,
//                   xq uint8 [M, K / 2] (two e2m1 codes a byte).
enum class ActFormat : uint8_t { fp8_e4m3, int8, mxfp8_e4m3, nvfp4 };

struct ActQuantArgs {
  ActFormat format;
  DType dtype;                            // of x
  int64_t rows, cols;
  const void* x; int64_t x_stride;        // elements
  void* xq; int64_t xq_stride;            // elements of xq's dtype
  void* sx; int64_t sx_stride;            // elements (0 for a [M] vector)
  Device device;
  int device_id;
};

ActQuantArgs prepare_quantize_activations(const std::string& format, const Tensor& x, const Tensor& xq,
                                          const Tensor& sx);
// "'fp8_e4m3', 'int8', ..." for messages.
std::string act_formats();

}  // namespace braze::quant
