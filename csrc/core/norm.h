// The norm family's contract, shared by every backend: a typed argument block
// per kernel kind (the forward norms, the VJPs) and the checks that build it.
// Each op's prepare_* validates its tensors (raising TypeError / ValueError
// naming the argument) before anything is written.
#pragma once
#include "core/op_table.h"
#include "core/tensor.h"

namespace braze::norm {

#define BRAZE_NORM_OPS(X) \
  X(rms_norm) X(layer_norm) X(add_rms_norm) X(rms_norm_gated) X(rms_norm_vjp) X(layer_norm_vjp)
BRAZE_DECLARE_OPS(BRAZE_NORM_OPS)

// rms_norm, layer_norm, add_rms_norm, rms_norm_gated: each row of x (`cols`
// elements, or `group` of them for rms_norm_gated) normalized into out. The
// arrays an op does not take are null (their strides 0). Every array has
// x's dtype; strides in elements.
struct NormArgs {
  Op op;
  DType dtype;
  int64_t rows, cols;
  const void* x; int64_t x_stride;
  const void* residual; int64_t residual_stride;          // add_rms_norm: h = x + residual is normalized
  const void* gate; int64_t gate_stride;                  // rms_norm_gated: out *= silu(gate)
  const void* weight;                                     // [cols] or null (= ones)
  const void* bias;                                       // layer_norm: [cols] or null (= zeros)
  void* out; int64_t out_stride;
  void* residual_out; int64_t residual_out_stride;        // add_rms_norm: h as stored (may be residual)
  float eps;
  float weight_offset;                                    // rms norms: the scale is weight + weight_offset
  int64_t group;                                          // elements normalized together (divides cols)
  Device device;
  int device_id;
};

// rms_norm_vjp, layer_norm_vjp: dx from dy per row; dweight / dbias (when not
// null) summed over the rows. Every array has x's dtype.
struct NormVjpArgs {
  Op op;
  DType dtype;
  int64_t rows, cols;
  const void* x; int64_t x_stride;
  const void* dy; int64_t dy_stride;
  const void* weight;                                     // [cols] or null (= ones)
  const void* bias;                                       // layer_norm_vjp: [cols] or null
  void* dx; int64_t dx_stride;
  void* dweight;                                          // [cols], or null when weight is
  void* dbias;                                            // layer_norm_vjp: [cols], or null when bias is
  float eps;
  float weight_offset;                                    // rms_norm_vjp
  void* workspace = nullptr;                              // caller-provided scratch (CUDA), or null
  int64_t workspace_bytes = 0;
  Device device;
  int device_id;
};

NormArgs prepare_rms_norm(const Tensor& x, const Tensor& w, const Tensor& out, double eps, double w_offset);
NormArgs prepare_layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out, double eps);
NormArgs prepare_add_rms_norm(const Tensor& x, const Tensor& res, const Tensor& w, const Tensor& out,
                              const Tensor& res_out, double eps, double w_offset);
NormArgs prepare_rms_norm_gated(const Tensor& x, const Tensor& gate, const Tensor& w, const Tensor& out,
                                double eps, int64_t group_size);
NormVjpArgs prepare_rms_norm_vjp(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                                 const Tensor& dw, double eps, double w_offset);
NormVjpArgs prepare_layer_norm_vjp(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy,
                                   const Tensor& dx, const Tensor& dw, const Tensor& db, double eps);

}  // namespace braze::norm
