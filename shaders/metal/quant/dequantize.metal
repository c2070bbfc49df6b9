// dequantize: out[n, k] = the decoded weight, for every format of the table,
// from one template dequantize_kernel<T, F> (T the output type, F the format id).
//
// Grid: (chunk blocks, rows); thread (x, row) owns the 8 consecutive elements
// of chunk x of its row (fewer in the last chunk of fp8 / int8, whose K is free) (adjacent threads, adjacent chunks: coalesced). f32
// math, one cast per store. Split formats read their scales / biases / tensor
// scale from buffers 1..3 (the plan binds `data` there when absent).
#include <metal_stdlib>

#include "quant_decode.h"

using namespace metal;

template <typename T, int F>
[[kernel]] void dequantize_kernel(device const uchar* data [[buffer(0)]],
                                  device const uchar* scales [[buffer(1)]],
                                  device const uchar* biases [[buffer(2)]],
                                  device const float* tensor_scale [[buffer(3)]],
                                  device T* out [[buffer(4)]],
                                  constant QuantParams& p [[buffer(5)]],
                                  uint2 gid [[thread_position_in_grid]]) {
  const uint chunk = gid.x, r = gid.y;
  const bool scaled = QAnyK<F>::v;  // any K: a last partial chunk
  if (r >= p.rows || chunk >= (p.cols + QUANT_CHUNK - 1) / QUANT_CHUNK) return;
  const ulong k0 = ulong(chunk) * QUANT_CHUNK;
  const uint n = scaled ? min(uint(QUANT_CHUNK), p.cols - uint(k0)) : uint(QUANT_CHUNK);
  float v[8];
  qdecode_chunk<F>(data, scales, biases, tensor_scale, p, r, k0, n, v);
  device T* o = out + ulong(r) * p.x_stride + k0;
  for (uint j = 0; j < n; ++j) o[j] = static_cast<T>(v[j]);
}

// Host names: dequantize_<format>_<f32|f16|bf16>.
#define DEQ_INSTANCE(name, T, F) \
  template [[host_name(name)]] [[kernel]] decltype(dequantize_kernel<T, F>) dequantize_kernel<T, F>;
#define DEQ_FORMAT(fmt, F)                        \
  DEQ_INSTANCE("dequantize_" fmt "_f32", float, F) \
  DEQ_INSTANCE("dequantize_" fmt "_f16", half, F)  \
  DEQ_INSTANCE("dequantize_" fmt "_bf16", bfloat, F)

DEQ_FORMAT("q8_0", QF_Q8_0)
DEQ_FORMAT("q4_0", QF_Q4_0)
DEQ_FORMAT("q4_1", QF_Q4_1)
DEQ_FORMAT("q5_0", QF_Q5_0)
DEQ_FORMAT("q5_1", QF_Q5_1)
DEQ_FORMAT("q2_K", QF_Q2_K)
DEQ_FORMAT("q3_K", QF_Q3_K)
DEQ_FORMAT("q4_K", QF_Q4_K)
DEQ_FORMAT("q5_K", QF_Q5_K)
DEQ_FORMAT("q6_K", QF_Q6_K)
DEQ_FORMAT("q8_K", QF_Q8_K)
DEQ_FORMAT("iq4_nl", QF_IQ4_NL)
DEQ_FORMAT("iq4_xs", QF_IQ4_XS)
DEQ_FORMAT("mxfp4", QF_MXFP4)
DEQ_FORMAT("mxfp6_e2m3", QF_MXFP6_E2M3)
DEQ_FORMAT("mxfp6_e3m2", QF_MXFP6_E3M2)
DEQ_FORMAT("mxfp8_e4m3", QF_MXFP8_E4M3)
DEQ_FORMAT("mxfp8_e5m2", QF_MXFP8_E5M2)
DEQ_FORMAT("mxfp4_gguf", QF_MXFP4_GGUF)
DEQ_FORMAT("nvfp4", QF_NVFP4)
DEQ_FORMAT("nvfp4_gguf", QF_NVFP4_GGUF)
DEQ_FORMAT("fp8_e4m3", QF_FP8_E4M3)
DEQ_FORMAT("fp8_e5m2", QF_FP8_E5M2)
DEQ_FORMAT("int8", QF_INT8)
DEQ_FORMAT("affine2", QF_AFFINE2)
DEQ_FORMAT("affine3", QF_AFFINE3)
DEQ_FORMAT("affine4", QF_AFFINE4)
DEQ_FORMAT("affine5", QF_AFFINE5)
DEQ_FORMAT("affine6", QF_AFFINE6)
DEQ_FORMAT("affine8", QF_AFFINE8)
