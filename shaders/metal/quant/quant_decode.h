// One 8-element chunk of a quantized weight row as f32, for every format of
// the table: the decode that dequantize.metal and matmul.metal share, written
// on quant_codec.h's codecs (so both read W exactly as the CPU does).
#pragma once
#include <metal_stdlib>

#include "quant_codec.h"

using namespace metal;

// Formats whose K is free (block of 1 element): the last chunk of a row may be partial.
template <int F> struct QAnyK {
  enum { v = F == QF_FP8_E4M3 || F == QF_FP8_E5M2 || F == QF_INT8 };
};

// Elements k0 .. k0 + n - 1 of row r into v[0 .. n): n is 8 except in the last
// chunk of an fp8 / int8 row. Split formats read scales / biases / tensor scale
// (the plans bind `data` in an absent one's slot; it is then never read).
template <int F>
inline void qdecode_chunk(device const uchar* data, device const uchar* scales, device const uchar* biases,
                          device const float* tensor_scale, constant QuantParams& p, uint r, ulong k0, uint n,
                          thread float* v) {
  device const uchar* row = data + ulong(r) * p.data_stride;
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
  } else if (QAnyK<F>::v) {
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
}
