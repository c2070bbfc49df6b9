// The ops family's contract, shared by every backend: elementwise activations
// (gated or not), the embedding gather and the Hadamard transform. Each kernel
// kind has its own typed argument block; prepare_* validate the tensors
// (TypeError / ValueError naming the argument) before anything is written.
#pragma once
#include "core/op_table.h"
#include "core/tensor.h"

namespace braze::ops {

#define BRAZE_OPS_OPS(X) \
  X(silu_and_mul) X(gelu_and_mul) X(swiglu_clamped) X(silu) X(gelu) X(embedding) X(hadamard) \
  X(silu_and_mul_vjp) X(gelu_and_mul_vjp) X(swiglu_clamped_vjp) X(silu_vjp) X(gelu_vjp)
BRAZE_DECLARE_OPS(BRAZE_OPS_OPS)

// The activation an elementwise kernel applies.
//   silu(g) = g * sigmoid(g); gelu_erf(g) = g/2 (1 + erf(g/sqrt 2));
//   gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)));
//   swiglu_clamped: min(g, limit) * sigmoid(alpha min(g, limit)) * (clamp(u, -limit, limit) + 1).
enum class Act : int { silu = 0, gelu_erf = 1, gelu_tanh = 2, swiglu_clamped = 3 };

// silu, gelu (gated = false): y[r, j] = act(x[r, j]), rows of `cols`.
// silu_and_mul, gelu_and_mul, swiglu_clamped (gated = true): input rows of
// 2 * cols; gate g and up u are x[r, j] and x[r, cols + j], or with
// `interleaved` x[r, 2j] and x[r, 2j + 1]; y[r, j] = act(g) * u (swiglu_clamped:
// its own formula above). f32 math, one cast to the output dtype.
// The *_vjp ops (dy non-null) run the same kernel backward: dy [rows, cols]
// (the forward output's shape), y is dx (x's shape). Not gated: dx = dy act'(x);
// gated: dg = dy u act'(g), du = dy act(g); swiglu_clamped: with gc = min(g, limit),
// dg = dy (clamp(u) + 1) act'(gc) [g < limit], du = dy act(gc) [-limit < u < limit].
struct ActArgs {
  Op op;
  Act act;
  bool gated, interleaved;
  DType dtype;                     // of x and y
  int64_t rows, cols;              // cols: the OUTPUT row length
  const void* x; int64_t x_stride; // elements
  void* y; int64_t y_stride;
  const void* dy; int64_t dy_stride;  // the VJP ops; null in the forward
  float alpha, limit;              // swiglu_clamped
  Device device;
  int device_id;
};

// y[t, :] = table[ids[t], :] for t < tokens; an id outside [0, vocab) writes
// a row of zeros (never reads out of bounds). ids int32 / int64.
struct EmbeddingArgs {
  DType dtype;                     // of table and y
  DType id_dtype;                  // i32 or i64
  int64_t tokens, vocab, dim;
  const void* ids; int64_t ids_stride;
  const void* table; int64_t table_stride;  // row stride of table, elements
  void* y; int64_t y_stride;
  Device device;
  int device_id;
};

// y[r] = scale * (H_m (x) H_{2^k}) x[r] over rows of n = m * 2^k elements
// (m in {1, 12, 20, 28}, n <= 32768): x[r] viewed as [m, 2^k] row-major, the
// Sylvester transform of size 2^k along its last axis, then H_m (the order-m
// Hadamard matrix of core/hadamard.h) along its first. f32 math.
struct HadamardArgs {
  DType dtype;
  int64_t rows, n;
  int m, log2;                     // n = m << log2
  const void* x; int64_t x_stride;
  void* y; int64_t y_stride;       // may be x itself (in place)
  float scale;
  Device device;
  int device_id;
};

// approximate: "none" (erf) or "tanh" for the gelu ops; ignored otherwise.
// dy: the VJP ops' cotangent (null for the forward ops).
ActArgs prepare_act(Op op, const Tensor& x, const Tensor& out, bool approximate_tanh, bool interleaved,
                    double alpha, double limit, const Tensor* dy = nullptr);
EmbeddingArgs prepare_embedding(const Tensor& ids, const Tensor& table, const Tensor& out);
// scale: NaN means 1 / sqrt(n).
HadamardArgs prepare_hadamard(const Tensor& x, const Tensor& out, double scale);

}  // namespace braze::ops
