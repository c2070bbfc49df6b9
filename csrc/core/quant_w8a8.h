// W8A8: out[m, n] = x_scale[m] * w_scale[n] * sum_k xq[m, k] wq[n, k] (+ bias[n]),
// both operands 8-bit codes (x from quantize_activations, per token; W an int8 or
// fp8 QuantizedTensor, per row or per tensor). The pairs with hardware products:
// int8 x int8 (exact int32 sums) and e4m3 x e4m3 / e4m3 x e5m2 (each product exact
// in f32, f32 sums). Epilogue on every backend: v = fma(float(acc), x_scale[m] *
// w_scale[n], bias[n] or 0) in f32, one rounding to the out dtype (docs/quant.md).
#pragma once
#include <string>

#include "core/quant.h"
#include "core/quant_mx.h"

namespace braze::quant {

// K above which an int8 sum of K products of levels in [-127, 127] could leave int32
// (2^31 / 127^2 = 133143.9, rounded down to a power of two).
constexpr int64_t kW8A8Int8MaxK = 131072;

struct W8A8Args {
  DequantArgs w;               // int8 (group kFp8GroupRow) or fp8_e4m3 / fp8_e5m2 (tensor or row); w.dtype = dtype
  ActFormat x_format;          // int8 or fp8_e4m3
  int64_t m;                   // rows of x and out; n = w.rows, k = w.cols
  const uint8_t* x;            // 1-byte codes (int8 levels or e4m3 codes)
  int64_t x_stride;            // bytes
  const float* x_scale;        // [M] contiguous
  DType dtype;                 // of out and bias: f32, f16, bf16
  const void* bias;            // [N] contiguous, or null
  void* out; int64_t out_stride;  // elements
  Device device;
  int device_id;
};

// The scale of W row n (per tensor: the one scale).
BRAZE_HD float w8a8_w_scale(const DequantArgs& w, int64_t n) {
  const float* s = static_cast<const float*>(w.scales);
  return w.group == kFp8GroupTensor ? s[0] : s[n];
}

// xq [M, K] int8 / uint8 (rows with a stride, last axis contiguous), x_scale f32 [M],
// data / scales of an int8 or fp8 weight as dequantize reads them, bias [N] and out
// [M, N] of out's dtype (f32 / f16 / bf16). Every check raises TypeError / ValueError
// naming the argument before anything is written.
W8A8Args prepare_matmul_w8a8(const std::string& format, const Tensor& x, const Tensor& x_scale, const Tensor& data,
                             const Tensor& scales, const Tensor& bias, const Tensor& out);

}  // namespace braze::quant
