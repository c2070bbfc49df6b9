// quantize: x[n, k] (f32 / f16 / bf16) -> the format's bytes, for the formats
// cheap to encode on a GPU (GGML legacy, MX, nvfp4, fp8, int8, MLX affine).
//
// quantize_block_kernel<T, F>: grid (block groups, rows), one thread per block
// (32 elements: GGML, MX; 16: nvfp4; one affine group), which reads its
// elements to thread memory and writes its bytes and scale.
// quant_amax_kernel<T>: one threadgroup per scale region (a row, a 128 x 128
// block or the whole tensor): the region's amax -> its scale (fp8, int8) or
// nvfp4's tensor scale; quantize_scaled_kernel<T, MODE> then codes 8 elements
// a thread (fewer in a row's last chunk) against those scales (fp8, int8).
#include <metal_stdlib>

#include "quant_encode.h"

using namespace metal;

template <typename T, int F>
[[kernel]] void quantize_block_kernel(device const T* x [[buffer(0)]],
                                      device uchar* data [[buffer(1)]],
                                      device uchar* scales [[buffer(2)]],
                                      device T* biases [[buffer(3)]],
                                      device const float* tensor_scale [[buffer(4)]],
                                      constant QuantParams& p [[buffer(5)]],
                                      uint2 gid [[thread_position_in_grid]]) {
  const bool affine = F >= QF_AFFINE2;
  const uint B = F == QF_NVFP4 ? 16u : affine ? p.group : 32u;
  const uint blk = gid.x, r = gid.y;
  if (r >= p.rows || blk >= p.cols / B) return;
  const ulong k0 = ulong(blk) * B;
  device const T* src = x + ulong(r) * p.x_stride + k0;
  device uchar* row = data + ulong(r) * p.data_stride;
  float v[128];
  for (uint j = 0; j < B; ++j) v[j] = static_cast<float>(src[j]);
  if (F <= QF_Q5_1) {
    const uint bb = F == QF_Q8_0 ? 34u : F == QF_Q4_0 ? 18u : F == QF_Q4_1 ? 20u : F == QF_Q5_0 ? 22u : 24u;
    qencode_ggml<F>(v, row + ulong(blk) * bb);
  } else if (F >= QF_MXFP4 && F <= QF_MXFP8_E5M2) {
    scales[ulong(r) * p.scales_stride + blk] = uchar(qmx_encode_block<QMxElem<F>::e>(v, p.rule, row, k0));
  } else if (F == QF_NVFP4) {
    scales[ulong(r) * p.scales_stride + blk] = uchar(qnvfp4_encode_block(v, tensor_scale[0], row + k0 / 2ul));
  } else {  // affine: scale and bias in x's dtype
    const int bits = F == QF_AFFINE2 ? 2 : F == QF_AFFINE3 ? 3 : F == QF_AFFINE4 ? 4 : F == QF_AFFINE5 ? 5
                   : F == QF_AFFINE6 ? 6 : 8;
    float lo = v[0], hi = v[0];
    for (uint j = 1; j < B; ++j) {
      lo = v[j] < lo ? v[j] : lo;
      hi = v[j] > hi ? v[j] : hi;
    }
    float s, bias;
    if (bits == 2) qaffine_group_params<2>(lo, hi, s, bias);
    else if (bits == 3) qaffine_group_params<3>(lo, hi, s, bias);
    else if (bits == 4) qaffine_group_params<4>(lo, hi, s, bias);
    else if (bits == 5) qaffine_group_params<5>(lo, hi, s, bias);
    else if (bits == 6) qaffine_group_params<6>(lo, hi, s, bias);
    else qaffine_group_params<8>(lo, hi, s, bias);
    for (uint j0 = 0; j0 < B; j0 += 8u) {
      uint c[8];
      for (uint j = 0; j < 8u; ++j) {
        const float e = v[j0 + j];
        c[j] = bits == 2 ? qaffine_code<2>(e, s, bias) : bits == 3 ? qaffine_code<3>(e, s, bias)
             : bits == 4 ? qaffine_code<4>(e, s, bias) : bits == 5 ? qaffine_code<5>(e, s, bias)
             : bits == 6 ? qaffine_code<6>(e, s, bias) : qaffine_code<8>(e, s, bias);
      }
      if (bits == 2) qpack8<2>(c, row, k0 + j0);
      else if (bits == 3) qpack8<3>(c, row, k0 + j0);
      else if (bits == 4) qpack8<4>(c, row, k0 + j0);
      else if (bits == 5) qpack8<5>(c, row, k0 + j0);
      else if (bits == 6) qpack8<6>(c, row, k0 + j0);
      else qpack8<8>(c, row, k0 + j0);
    }
    device T* st = (device T*)scales;
    st[ulong(r) * p.scales_stride + blk] = static_cast<T>(s);
    biases[ulong(r) * p.biases_stride + blk] = static_cast<T>(bias);
  }
}

template <typename T>
[[kernel]] void quant_amax_kernel(device const T* x [[buffer(0)]],
                                  device float* scales [[buffer(1)]],
                                  constant QuantParams& p [[buffer(2)]],
                                  uint2 group [[threadgroup_position_in_grid]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint nt [[threads_per_threadgroup]]) {
  threadgroup uint buf[QUANT_THREADS];
  const uint r0 = group.y * p.region_rows, c0 = group.x * p.region_cols;
  const uint nr = min(p.region_rows, p.rows - r0), nc = min(p.region_cols, p.cols - c0);
  const ulong total = ulong(nr) * nc;
  uint amax = 0u;
  for (ulong i = tid; i < total; i += nt) {
    const ulong rr = i / nc, cc = i % nc;
    const uint a = qabs_bits(static_cast<float>(x[(ulong(r0) + rr) * p.x_stride + c0 + cc]));
    amax = a > amax ? a : amax;
  }
  amax = qtg_max(amax, buf, tid, nt);
  if (tid == 0u) scales[ulong(group.y) * p.scales_stride + group.x] = qscale_of(amax, p.mode);
}

template <typename T, int MODE>
[[kernel]] void quantize_scaled_kernel(device const T* x [[buffer(0)]],
                                       device uchar* data [[buffer(1)]],
                                       device const float* scales [[buffer(2)]],
                                       constant QuantParams& p [[buffer(3)]],
                                       uint2 gid [[thread_position_in_grid]]) {
  const uint chunk = gid.x, r = gid.y;
  if (r >= p.rows || chunk >= (p.cols + QUANT_CHUNK - 1) / QUANT_CHUNK) return;
  const ulong k0 = ulong(chunk) * QUANT_CHUNK;
  const uint n = min(uint(QUANT_CHUNK), p.cols - uint(k0));  // K is free: a last partial chunk
  const float s = scales[qfp8_scale_index(p.group, r, k0, p.cols, p.scales_stride)];
  device const T* src = x + ulong(r) * p.x_stride + k0;
  device uchar* dst = data + ulong(r) * p.data_stride + k0;
  for (uint j = 0; j < n; ++j) dst[j] = qscaled_code<MODE>(static_cast<float>(src[j]), s);
}

// Host names: quantize_<format>_<dtype of x>; quant_amax_<dtype>.
#define QB_INSTANCE(name, T, F) \
  template [[host_name(name)]] [[kernel]] decltype(quantize_block_kernel<T, F>) quantize_block_kernel<T, F>;
#define QB_FORMAT(fmt, F)                          \
  QB_INSTANCE("quantize_" fmt "_f32", float, F)    \
  QB_INSTANCE("quantize_" fmt "_f16", half, F)     \
  QB_INSTANCE("quantize_" fmt "_bf16", bfloat, F)
#define QS_INSTANCE(name, T, M) \
  template [[host_name(name)]] [[kernel]] decltype(quantize_scaled_kernel<T, M>) quantize_scaled_kernel<T, M>;
#define QS_FORMAT(fmt, M)                          \
  QS_INSTANCE("quantize_" fmt "_f32", float, M)    \
  QS_INSTANCE("quantize_" fmt "_f16", half, M)     \
  QS_INSTANCE("quantize_" fmt "_bf16", bfloat, M)
#define QA_INSTANCE(name, T) \
  template [[host_name(name)]] [[kernel]] decltype(quant_amax_kernel<T>) quant_amax_kernel<T>;

QB_FORMAT("q8_0", QF_Q8_0)
QB_FORMAT("q4_0", QF_Q4_0)
QB_FORMAT("q4_1", QF_Q4_1)
QB_FORMAT("q5_0", QF_Q5_0)
QB_FORMAT("q5_1", QF_Q5_1)
QB_FORMAT("mxfp4", QF_MXFP4)
QB_FORMAT("mxfp6_e2m3", QF_MXFP6_E2M3)
QB_FORMAT("mxfp6_e3m2", QF_MXFP6_E3M2)
QB_FORMAT("mxfp8_e4m3", QF_MXFP8_E4M3)
QB_FORMAT("mxfp8_e5m2", QF_MXFP8_E5M2)
QB_FORMAT("nvfp4", QF_NVFP4)
QB_FORMAT("affine2", QF_AFFINE2)
QB_FORMAT("affine3", QF_AFFINE3)
QB_FORMAT("affine4", QF_AFFINE4)
QB_FORMAT("affine5", QF_AFFINE5)
QB_FORMAT("affine6", QF_AFFINE6)
QB_FORMAT("affine8", QF_AFFINE8)
QS_FORMAT("fp8_e4m3", QUANT_SCALE_FP8_E4M3)
QS_FORMAT("fp8_e5m2", QUANT_SCALE_FP8_E5M2)
QS_FORMAT("int8", QUANT_SCALE_INT8)
QA_INSTANCE("quant_amax_f32", float)
QA_INSTANCE("quant_amax_f16", half)
QA_INSTANCE("quant_amax_bf16", bfloat)
