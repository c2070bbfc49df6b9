// quantize_activations: x[M, K] -> (xq, sx) in one pass over x.
//
// Per token (fp8_e4m3, int8): one threadgroup per row; its threads take the
// row's amax (threadgroup max of |x| bits, NaN-propagating), then code the
// elements t, t + nt, ... against amax / fmax (re-read from cache).
// Per block (mxfp8_e4m3: 32, floor rule; nvfp4: 16, tensor scale 1): one
// thread per block, as the weight encoders.
#include <metal_stdlib>

#include "quant_encode.h"

using namespace metal;

template <typename T, int MODE>
[[kernel]] void act_token_kernel(device const T* x [[buffer(0)]],
                                 device uchar* xq [[buffer(1)]],
                                 device float* sx [[buffer(2)]],
                                 constant QuantParams& p [[buffer(3)]],
                                 uint2 group [[threadgroup_position_in_grid]],
                                 uint tid [[thread_index_in_threadgroup]],
                                 uint nt [[threads_per_threadgroup]]) {
  threadgroup uint buf[QUANT_THREADS];
  const uint r = group.y;
  device const T* src = x + ulong(r) * p.x_stride;
  device uchar* dst = xq + ulong(r) * p.data_stride;
  uint amax = 0u;
  for (uint k = tid; k < p.cols; k += nt) {
    const uint a = qabs_bits(static_cast<float>(src[k]));
    amax = a > amax ? a : amax;
  }
  amax = qtg_max(amax, buf, tid, nt);
  const float s = qscale_of(amax, MODE);
  if (tid == 0u) sx[r] = s;
  for (uint k = tid; k < p.cols; k += nt) dst[k] = qscaled_code<MODE>(static_cast<float>(src[k]), s);
}

template <typename T, int F>
[[kernel]] void act_block_kernel(device const T* x [[buffer(0)]],
                                 device uchar* xq [[buffer(1)]],
                                 device uchar* sx [[buffer(2)]],
                                 constant QuantParams& p [[buffer(3)]],
                                 uint2 gid [[thread_position_in_grid]]) {
  const uint B = F == QF_NVFP4 ? 16u : 32u;
  const uint blk = gid.x, r = gid.y;
  if (r >= p.rows || blk >= p.cols / B) return;
  const ulong k0 = ulong(blk) * B;
  device const T* src = x + ulong(r) * p.x_stride + k0;
  device uchar* row = xq + ulong(r) * p.data_stride;
  float v[32];
  for (uint j = 0; j < B; ++j) v[j] = static_cast<float>(src[j]);
  const uint s = F == QF_NVFP4 ? qnvfp4_encode_block(v, 1.0f, row + k0 / 2ul)
                               : qmx_encode_block<QE_E4M3>(v, 0u, row, k0);
  sx[ulong(r) * p.scales_stride + blk] = uchar(s);
}

// Host names: quantize_activations_<format>_<dtype of x>.
#define AT_INSTANCE(name, T, M) \
  template [[host_name(name)]] [[kernel]] decltype(act_token_kernel<T, M>) act_token_kernel<T, M>;
#define AB_INSTANCE(name, T, F) \
  template [[host_name(name)]] [[kernel]] decltype(act_block_kernel<T, F>) act_block_kernel<T, F>;
#define ACT_DTYPE(T, suffix)                                                       \
  AT_INSTANCE("quantize_activations_fp8_e4m3_" suffix, T, QUANT_SCALE_FP8_E4M3)   \
  AT_INSTANCE("quantize_activations_int8_" suffix, T, QUANT_SCALE_INT8)           \
  AB_INSTANCE("quantize_activations_mxfp8_e4m3_" suffix, T, QF_MXFP8_E4M3)        \
  AB_INSTANCE("quantize_activations_nvfp4_" suffix, T, QF_NVFP4)

ACT_DTYPE(float, "f32")
ACT_DTYPE(half, "f16")
ACT_DTYPE(bfloat, "bf16")
