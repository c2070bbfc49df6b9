// dequantize: out[n, k] = the decoded weight, for every format of the table,
// from one template dequantize_kernel<T, F> (T the output type, F the format id).
//
// Grid: (chunk blocks, rows); thread (x, row) owns the 8 consecutive elements
// of chunk x of its row (fewer in the last chunk of fp8 / int8, whose K is free) (adjacent threads, adjacent chunks: coalesced). f32
// math, one cast per store. Split formats read their scales / biases / tensor
// scale from buffers 1..3 (the plan binds `data` there when absent).
#include <metal_stdlib>

#include "quant_codec.h"

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
  const bool scaled = F == QF_FP8_E4M3 || F == QF_FP8_E5M2 || F == QF_INT8;  // any K: a last partial chunk
  if (r >= p.rows || chunk >= (p.cols + QUANT_CHUNK - 1) / QUANT_CHUNK) return;
  const ulong k0 = ulong(chunk) * QUANT_CHUNK;
  const uint n = scaled ? min(uint(QUANT_CHUNK), p.cols - uint(k0)) : uint(QUANT_CHUNK);
  device const uchar* row = data + ulong(r) * p.data_stride;
  float v[8];
  if (F <= QF_IQ4_XS || F == QF_MXFP4_GGUF || F == QF_NVFP4_GGUF) {
    qdecode_blocks8<F>(row, k0, v);
  } else if (F >= QF_MXFP4 && F <= QF_MXFP8_E5M2) {
    const uint bits = F == QF_MXFP4 ? 4u : F <= QF_MXFP6_E3M2 ? 6u : 8u;
    uint c[8];
    if (bits == 4u) qunpack8<4>(row, k0, c);
    else if (bits == 6u) qunpack8<6>(row, k0, c);
    else qunpack8<8>(row, k0, c);
    const float x = qe8m0_to_f32(scales[ulong(r) * p.scales_stride + k0 / 32ul]);
    for (int j = 0; j < 8; ++j) v[j] = qdecode_elem<QMxElem<F>::e>(c[j]) * x;
  } else if (F == QF_NVFP4) {
    const float s = qdecode_elem<QE_E4M3>(scales[ulong(r) * p.scales_stride + k0 / 16ul]);
    const float t = tensor_scale[0];
    device const uchar* q = row + k0 / 2ul;
    for (int j = 0; j < 4; ++j) {
      v[2 * j] = qdecode_elem<QE_E2M1>(q[j] & 15u) * s * t;
      v[2 * j + 1] = qdecode_elem<QE_E2M1>(q[j] >> 4) * s * t;
    }
  } else if (scaled) {
    device const float* sc = (device const float*)scales;
    const float s = sc[qfp8_scale_index(p.group, r, k0, p.cols, p.scales_stride)];
    for (uint j = 0; j < n; ++j)
      v[j] = (F == QF_INT8 ? float(char(row[k0 + j])) : qdecode_elem<QMxElem<F>::e>(row[k0 + j])) * s;
  } else {  // affine
    const ulong gi = ulong(r) * p.scales_stride + k0 / ulong(p.group);
    const ulong bi = ulong(r) * p.biases_stride + k0 / ulong(p.group);
    const float s = qload_sdt(scales, gi, p.scales_dtype), bias = qload_sdt(biases, bi, p.scales_dtype);
    uint c[8];
    if (F == QF_AFFINE2) qunpack8<2>(row, k0, c);
    else if (F == QF_AFFINE3) qunpack8<3>(row, k0, c);
    else if (F == QF_AFFINE4) qunpack8<4>(row, k0, c);
    else if (F == QF_AFFINE5) qunpack8<5>(row, k0, c);
    else if (F == QF_AFFINE6) qunpack8<6>(row, k0, c);
    else qunpack8<8>(row, k0, c);
    for (int j = 0; j < 8; ++j) {
      const float q = s * float(c[j]);
      v[j] = q + bias;
    }
  }
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
