// The norm family's contract, shared by every backend: one argument block and
// the checks that build it. Each op's prepare_* validates its tensors (raising
// TypeError / ValueError naming the argument) before anything is written.
#pragma once
#include "core/op_table.h"
#include "core/tensor.h"

namespace braze::norm {

#define BRAZE_NORM_OPS(X) \
  X(rms_norm) X(layer_norm) X(add_rms_norm) X(rms_norm_gated) X(rms_norm_vjp) X(layer_norm_vjp)
BRAZE_DECLARE_OPS(BRAZE_NORM_OPS)

struct Args {
  Op op;
  DType dtype;           // of x and every row-shaped array
  DType wdtype;          // of weight / bias / dweight / dbias
  int64_t rows, cols;
  const void* x; int64_t x_stride;
  const void* r; int64_t r_stride;  // residual (add_rms_norm), gate (gated) or dy (vjp)
  const void* w;                    // weight or null (= ones)
  const void* b;                    // bias or null (= zeros)
  void* y; int64_t y_stride;        // out (or dx for the vjps)
  void* h; int64_t h_stride;        // residual_out (add_rms_norm)
  void* dw;                         // dweight or null
  void* db;                         // dbias or null
  float eps, w_offset;
  int64_t group;                    // rms_norm_gated: group length (divides cols)
  void* ws = nullptr;               // vjps: caller-provided scratch (CUDA), or null
  int64_t ws_bytes = 0;
  Device device;
  int device_id;
};

Args prepare_rms_norm(const Tensor& x, const Tensor& w, const Tensor& out, double eps, double w_offset);
Args prepare_layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out, double eps);
Args prepare_add_rms_norm(const Tensor& x, const Tensor& res, const Tensor& w, const Tensor& out,
                          const Tensor& res_out, double eps, double w_offset);
Args prepare_rms_norm_gated(const Tensor& x, const Tensor& gate, const Tensor& w, const Tensor& out,
                            double eps, int64_t group_size);
Args prepare_rms_norm_vjp(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                          const Tensor& dw, double eps, double w_offset);
Args prepare_layer_norm_vjp(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy,
                            const Tensor& dx, const Tensor& dw, const Tensor& db, double eps);

}  // namespace braze::norm
