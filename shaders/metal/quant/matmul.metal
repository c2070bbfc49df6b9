// matmul: out[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]) for a W of every
// format of the table (read through quant_decode.h) or dense (F = QF_DENSE: a
// [N, K] array of T). f32 accumulation, bias added in f32, one rounding to T.
//
// GEMV (m <= 16), matmul_gemv_kernel: one simdgroup per W row, 4 to a
// threadgroup. Lane l decodes chunks l, l + 32, ... of the row (8 elements
// each, so W is read once, coalesced) and multiplies each chunk into every
// x row (up to 16 f32 accumulators); simd_sum per x row, lane 0 stores.
//
// GEMM (m > 16), matmul_gemm_kernel: a 32 x 32 tile of out per threadgroup of
// 4 simdgroups (2 x 2, each 16 x 16 = 2 x 2 simdgroup_float8x8 accumulators).
// Per step of 32 along K, each of the 128 threads stages one 8-element chunk
// of x and decodes one chunk of W into threadgroup memory as f32 (the decoded
// values are f32: rounding them to half / bfloat would change W); rows past M
// or N and columns past K are staged as 0. Matrices are f32 for every dtype.
// The tile goes back through threadgroup memory for the bias, the rounding and
// the predicated stores.
#include <metal_stdlib>

#include "quant_decode.h"

using namespace metal;

// Elements of the chunk at k0: 8, fewer only at the end of a row whose K is free.
template <int F> inline uint qmm_chunk_len(uint cols, ulong k0) {
  return QAnyK<F>::v || F == QF_DENSE ? min(uint(QUANT_CHUNK), cols - uint(k0)) : uint(QUANT_CHUNK);
}

// Elements k0 .. k0 + n - 1 of W row r as f32.
template <typename T, int F>
inline void qmm_weight(device const uchar* data, device const uchar* scales, device const uchar* biases,
                       device const float* tensor_scale, constant QuantParams& p, uint r, ulong k0, uint n,
                       thread float* v) {
  if (F == QF_DENSE) {
    device const T* w = (device const T*)(data + ulong(r) * p.data_stride) + k0;
    for (uint j = 0; j < n; ++j) v[j] = float(w[j]);
  } else {
    qdecode_chunk<F>(data, scales, biases, tensor_scale, p, r, k0, n, v);
  }
}

template <typename T, int F>
[[kernel]] void matmul_gemv_kernel(device const uchar* data [[buffer(0)]],
                                   device const uchar* scales [[buffer(1)]],
                                   device const uchar* biases [[buffer(2)]],
                                   device const float* tensor_scale [[buffer(3)]],
                                   device const T* x [[buffer(4)]],
                                   device const T* bias [[buffer(5)]],
                                   device T* out [[buffer(6)]],
                                   constant MatmulParams& p [[buffer(7)]],
                                   uint group [[threadgroup_position_in_grid]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint lane [[thread_index_in_simdgroup]]) {
  const uint r = group * QMM_GEMV_SIMDGROUPS + sg;
  if (r >= p.w.rows) return;  // the whole simdgroup: no collective waits on it
  const uint K = p.w.cols, chunks = (K + QUANT_CHUNK - 1) / QUANT_CHUNK;
  float acc[QMM_GEMV_MAX_ROWS];
  for (uint i = 0; i < QMM_GEMV_MAX_ROWS; ++i) acc[i] = 0.0f;
  for (uint c = lane; c < chunks; c += 32u) {
    const ulong k0 = ulong(c) * QUANT_CHUNK;
    const uint n = qmm_chunk_len<F>(K, k0);
    float w[QUANT_CHUNK];
    qmm_weight<T, F>(data, scales, biases, tensor_scale, p.w, r, k0, n, w);
    for (uint i = 0; i < QMM_GEMV_MAX_ROWS; ++i) {  // a constant bound: acc stays in registers
      if (i >= p.m) break;
      device const T* xr = x + ulong(i) * p.x_stride + k0;
      float s = 0.0f;
      for (uint j = 0; j < n; ++j) s += float(xr[j]) * w[j];
      acc[i] += s;
    }
  }
  const float b = p.has_bias != 0u ? float(bias[r]) : 0.0f;
  for (uint i = 0; i < QMM_GEMV_MAX_ROWS; ++i) {
    if (i >= p.m) break;  // p.m is uniform: every lane reaches each simd_sum
    const float s = simd_sum(acc[i]);
    if (lane == 0u) out[ulong(i) * p.out_stride + r] = static_cast<T>(s + b);
  }
}

template <typename T, int F>
[[kernel]] void matmul_gemm_kernel(device const uchar* data [[buffer(0)]],
                                   device const uchar* scales [[buffer(1)]],
                                   device const uchar* biases [[buffer(2)]],
                                   device const float* tensor_scale [[buffer(3)]],
                                   device const T* x [[buffer(4)]],
                                   device const T* bias [[buffer(5)]],
                                   device T* out [[buffer(6)]],
                                   constant MatmulParams& p [[buffer(7)]],
                                   uint2 group [[threadgroup_position_in_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float xs[QMM_TILE * QMM_TILE];  // x tile [m][k]; at the end, the out tile [m][n]
  threadgroup float ws[QMM_TILE * QMM_TILE];  // W tile [n][k]
  const uint TL = QMM_TILE, CPR = QMM_TILE / QUANT_CHUNK;  // chunks per tile row
  const uint n0 = group.x * TL, m0 = group.y * TL, K = p.w.cols, N = p.w.rows;
  const uint tr = tid / CPR, tc = (tid % CPR) * QUANT_CHUNK;  // this thread's chunk of a tile: row, column
  const uint sm = (sg / 2u) * 16u, sn = (sg % 2u) * 16u;      // this simdgroup's quarter of the out tile

  simdgroup_float8x8 acc[4];
  for (uint i = 0; i < 4u; ++i) acc[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);

  for (ulong k0 = 0; k0 < ulong(K); k0 += TL) {
    threadgroup_barrier(mem_flags::mem_threadgroup);  // the previous tiles are consumed
    const ulong kc = k0 + tc;
    const uint n = kc < ulong(K) ? qmm_chunk_len<F>(K, kc) : 0u;
    float v[QUANT_CHUNK];
    for (uint j = 0; j < QUANT_CHUNK; ++j) v[j] = 0.0f;
    if (m0 + tr < p.m) {
      device const T* xr = x + ulong(m0 + tr) * p.x_stride + kc;
      for (uint j = 0; j < n; ++j) v[j] = float(xr[j]);
    }
    for (uint j = 0; j < QUANT_CHUNK; ++j) xs[tr * TL + tc + j] = v[j];
    for (uint j = 0; j < QUANT_CHUNK; ++j) v[j] = 0.0f;
    if (n0 + tr < N && n != 0u) qmm_weight<T, F>(data, scales, biases, tensor_scale, p.w, n0 + tr, kc, n, v);
    for (uint j = 0; j < QUANT_CHUNK; ++j) ws[tr * TL + tc + j] = j < n ? v[j] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);

    for (uint kk = 0; kk < TL; kk += 8u) {
      simdgroup_float8x8 a0, a1, b0, b1;
      simdgroup_load(a0, xs + sm * TL + kk, TL);
      simdgroup_load(a1, xs + (sm + 8u) * TL + kk, TL);
      simdgroup_load(b0, ws + sn * TL + kk, TL, ulong2(0, 0), true);  // W^T: element (k, n)
      simdgroup_load(b1, ws + (sn + 8u) * TL + kk, TL, ulong2(0, 0), true);
      simdgroup_multiply_accumulate(acc[0], a0, b0, acc[0]);
      simdgroup_multiply_accumulate(acc[1], a0, b1, acc[1]);
      simdgroup_multiply_accumulate(acc[2], a1, b0, acc[2]);
      simdgroup_multiply_accumulate(acc[3], a1, b1, acc[3]);
    }
  }

  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(acc[0], xs + sm * TL + sn, TL);
  simdgroup_store(acc[1], xs + sm * TL + sn + 8u, TL);
  simdgroup_store(acc[2], xs + (sm + 8u) * TL + sn, TL);
  simdgroup_store(acc[3], xs + (sm + 8u) * TL + sn + 8u, TL);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (m0 + tr >= p.m) return;
  device T* o = out + ulong(m0 + tr) * p.out_stride;
  for (uint j = 0; j < QUANT_CHUNK; ++j) {
    const uint c = n0 + tc + j;
    if (c < N) o[c] = static_cast<T>(xs[tr * TL + tc + j] + (p.has_bias != 0u ? float(bias[c]) : 0.0f));
  }
}

// Host names: matmul_<format>_<dtype> (GEMV) and matmul_gemm_<format>_<dtype>;
// format "dense" for a plain W of the dtype.
#define QMM_INSTANCE(name, fn, T, F) \
  template [[host_name(name)]] [[kernel]] decltype(fn<T, F>) fn<T, F>;
#define QMM_DTYPE(fmt, F, T, dt)                                         \
  QMM_INSTANCE("matmul_" fmt "_" dt, matmul_gemv_kernel, T, F)           \
  QMM_INSTANCE("matmul_gemm_" fmt "_" dt, matmul_gemm_kernel, T, F)
#define QMM_FORMAT(fmt, F)              \
  QMM_DTYPE(fmt, F, float, "f32")       \
  QMM_DTYPE(fmt, F, half, "f16")        \
  QMM_DTYPE(fmt, F, bfloat, "bf16")

QMM_FORMAT("dense", QF_DENSE)
QMM_FORMAT("q8_0", QF_Q8_0)
QMM_FORMAT("q4_0", QF_Q4_0)
QMM_FORMAT("q4_1", QF_Q4_1)
QMM_FORMAT("q5_0", QF_Q5_0)
QMM_FORMAT("q5_1", QF_Q5_1)
QMM_FORMAT("q2_K", QF_Q2_K)
QMM_FORMAT("q3_K", QF_Q3_K)
QMM_FORMAT("q4_K", QF_Q4_K)
QMM_FORMAT("q5_K", QF_Q5_K)
QMM_FORMAT("q6_K", QF_Q6_K)
QMM_FORMAT("q8_K", QF_Q8_K)
QMM_FORMAT("iq4_nl", QF_IQ4_NL)
QMM_FORMAT("iq4_xs", QF_IQ4_XS)
QMM_FORMAT("mxfp4", QF_MXFP4)
QMM_FORMAT("mxfp6_e2m3", QF_MXFP6_E2M3)
QMM_FORMAT("mxfp6_e3m2", QF_MXFP6_E3M2)
QMM_FORMAT("mxfp8_e4m3", QF_MXFP8_E4M3)
QMM_FORMAT("mxfp8_e5m2", QF_MXFP8_E5M2)
QMM_FORMAT("mxfp4_gguf", QF_MXFP4_GGUF)
QMM_FORMAT("nvfp4", QF_NVFP4)
QMM_FORMAT("nvfp4_gguf", QF_NVFP4_GGUF)
QMM_FORMAT("fp8_e4m3", QF_FP8_E4M3)
QMM_FORMAT("fp8_e5m2", QF_FP8_E5M2)
QMM_FORMAT("int8", QF_INT8)
QMM_FORMAT("affine2", QF_AFFINE2)
QMM_FORMAT("affine3", QF_AFFINE3)
QMM_FORMAT("affine4", QF_AFFINE4)
QMM_FORMAT("affine5", QF_AFFINE5)
QMM_FORMAT("affine6", QF_AFFINE6)
QMM_FORMAT("affine8", QF_AFFINE8)
