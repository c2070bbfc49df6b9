// quantize for the formats whose encoders search for their scales: the
// K-quants (q2_K, q3_K, q4_K, q5_K, q6_K, q8_K) and i-quants (iq4_nl, iq4_xs).
//
// quantize_search_kernel<T, F>: grid (blocks, rows), one thread per block
// (256 elements; iq4_nl 32), which reads its elements to thread memory, runs
// the C++ encoder's search (quant_encode_k.h, quant_encode_iq.h) and writes
// the block's bytes. Host names quantize_<format>_<dtype of x>, as
// quantize.metal's.
#include <metal_stdlib>

#include "quant_encode_iq.h"
#include "quant_encode_k.h"

using namespace metal;

template <typename T, int F>
[[kernel]] void quantize_search_kernel(device const T* x [[buffer(0)]],
                                       device uchar* data [[buffer(1)]],
                                       constant QuantParams& p [[buffer(2)]],
                                       uint2 gid [[thread_position_in_grid]]) {
  const uint B = F == QF_IQ4_NL ? 32u : 256u;
  const uint BB = F == QF_Q2_K ? 84u : F == QF_Q3_K ? 110u : F == QF_Q4_K ? 144u : F == QF_Q5_K ? 176u
                : F == QF_Q6_K ? 210u : F == QF_Q8_K ? 292u : F == QF_IQ4_NL ? 18u : 136u;
  const uint blk = gid.x, r = gid.y;
  if (r >= p.rows || blk >= p.cols / B) return;
  device const T* src = x + ulong(r) * p.x_stride + ulong(blk) * B;
  device uchar* b = data + ulong(r) * p.data_stride + ulong(blk) * BB;
  float v[256];
  for (uint j = 0; j < B; ++j) v[j] = static_cast<float>(src[j]);
  if (F == QF_Q2_K) qencode_q2_k(v, b);
  else if (F == QF_Q3_K) qencode_q3_k(v, b);
  else if (F == QF_Q4_K) qencode_q4_k(v, b);
  else if (F == QF_Q5_K) qencode_q5_k(v, b);
  else if (F == QF_Q6_K) qencode_q6_k(v, b);
  else if (F == QF_Q8_K) qencode_q8_k(v, b);
  else if (F == QF_IQ4_NL) qencode_iq4_nl(v, b);
  else qencode_iq4_xs(v, b);
}

#define QK_INSTANCE(name, T, F) \
  template [[host_name(name)]] [[kernel]] decltype(quantize_search_kernel<T, F>) quantize_search_kernel<T, F>;
#define QK_FORMAT(fmt, F)                          \
  QK_INSTANCE("quantize_" fmt "_f32", float, F)    \
  QK_INSTANCE("quantize_" fmt "_f16", half, F)     \
  QK_INSTANCE("quantize_" fmt "_bf16", bfloat, F)

QK_FORMAT("q2_K", QF_Q2_K)
QK_FORMAT("q3_K", QF_Q3_K)
QK_FORMAT("q4_K", QF_Q4_K)
QK_FORMAT("q5_K", QF_Q5_K)
QK_FORMAT("q6_K", QF_Q6_K)
QK_FORMAT("q8_K", QF_Q8_K)
QK_FORMAT("iq4_nl", QF_IQ4_NL)
QK_FORMAT("iq4_xs", QF_IQ4_XS)
