// W8A8 matmul: out[m, n] = x_scale[m] * w_scale[n] * sum_k xq[m, k] wq[n, k] (+ bias[n]),
// x and W 8-bit codes (csrc/core/quant_w8a8.h). F: QF_INT8 (int8 x and W, int
// accumulators: exact sums) or QF_FP8_E4M3 / QF_FP8_E5M2 (e4m3 x; each product of
// two fp8 values is exact in f32, f32 accumulators). Apple GPUs have no 8-bit matrix
// unit and simdgroup_float8x8 would round int8 sums past 2^24, so both paths run on
// the ALUs. Epilogue as every backend's: fma(float(acc), x_scale * w_scale, bias or 0),
// one rounding to T.
//
// GEMV (m <= 16), w8a8_gemv_kernel: one simdgroup per W row, 4 to a threadgroup;
// lane l takes the 8-code chunks l, l + 32, ... of the row (W read once, coalesced)
// against every x row, then simd_sum per x row and lane 0 stores.
// GEMM (m > 16), w8a8_gemm_kernel: a 32 x 32 tile of out per threadgroup of 128
// threads; per step of 32 along K each thread stages 8 decoded x and 8 decoded W
// values in threadgroup memory (int or f32), then accumulates 8 outputs (1 row x 8
// columns) in a fixed order.
#include <metal_stdlib>

#include "quant_codec.h"

using namespace metal;

// The accumulator type and the decoded value of a code of each operand.
template <int F> struct W8A8Kind;
template <> struct W8A8Kind<QF_INT8> {
  typedef int acc_t;
  static inline int x(uchar c) { return int(as_type<char>(c)); }
  static inline int w(uchar c) { return int(as_type<char>(c)); }
};
template <> struct W8A8Kind<QF_FP8_E4M3> {
  typedef float acc_t;
  static inline float x(uchar c) { return qdecode_elem<QE_E4M3>(uint(c)); }
  static inline float w(uchar c) { return qdecode_elem<QE_E4M3>(uint(c)); }
};
template <> struct W8A8Kind<QF_FP8_E5M2> {
  typedef float acc_t;
  static inline float x(uchar c) { return qdecode_elem<QE_E4M3>(uint(c)); }
  static inline float w(uchar c) { return qdecode_elem<QE_E5M2>(uint(c)); }
};

inline float w8a8_w_scale(device const float* scales, constant W8A8Params& p, uint n) {
  return p.w_group == QUANT_FP8_TENSOR ? scales[0] : scales[n];
}

template <typename T, typename A>
inline T w8a8_out(A acc, float xs, float ws, device const T* bias, constant W8A8Params& p, uint n) {
  const float b = p.has_bias != 0u ? float(bias[n]) : 0.0f;
  return static_cast<T>(fma(float(acc), xs * ws, b));
}

template <typename T, int F>
[[kernel]] void w8a8_gemv_kernel(device const uchar* x [[buffer(0)]],
                                 device const float* x_scale [[buffer(1)]],
                                 device const uchar* data [[buffer(2)]],
                                 device const float* scales [[buffer(3)]],
                                 device const T* bias [[buffer(4)]],
                                 device T* out [[buffer(5)]],
                                 constant W8A8Params& p [[buffer(6)]],
                                 uint group [[threadgroup_position_in_grid]],
                                 uint sg [[simdgroup_index_in_threadgroup]],
                                 uint lane [[thread_index_in_simdgroup]]) {
  typedef W8A8Kind<F> K;
  typedef typename K::acc_t A;
  const uint r = group * QMM_GEMV_SIMDGROUPS + sg;
  if (r >= p.n) return;  // the whole simdgroup: no collective waits on it
  const uint chunks = (p.k + QUANT_CHUNK - 1) / QUANT_CHUNK;
  device const uchar* wr = data + ulong(r) * p.w_stride;
  A acc[QMM_GEMV_MAX_ROWS];
  for (uint i = 0; i < QMM_GEMV_MAX_ROWS; ++i) acc[i] = A(0);
  for (uint c = lane; c < chunks; c += 32u) {
    const uint k0 = c * QUANT_CHUNK, n = min(uint(QUANT_CHUNK), p.k - k0);
    A w[QUANT_CHUNK];
    for (uint j = 0; j < n; ++j) w[j] = K::w(wr[k0 + j]);
    for (uint i = 0; i < QMM_GEMV_MAX_ROWS; ++i) {  // a constant bound: acc stays in registers
      if (i >= p.m) break;
      device const uchar* xr = x + ulong(i) * p.x_stride + k0;
      A s = A(0);
      for (uint j = 0; j < n; ++j) s += K::x(xr[j]) * w[j];
      acc[i] += s;
    }
  }
  const float ws = w8a8_w_scale(scales, p, r);
  for (uint i = 0; i < QMM_GEMV_MAX_ROWS; ++i) {
    if (i >= p.m) break;  // p.m is uniform: every lane reaches each simd_sum
    const A s = simd_sum(acc[i]);
    if (lane == 0u) out[ulong(i) * p.out_stride + r] = w8a8_out<T, A>(s, x_scale[i], ws, bias, p, r);
  }
}

template <typename T, int F>
[[kernel]] void w8a8_gemm_kernel(device const uchar* x [[buffer(0)]],
                                 device const float* x_scale [[buffer(1)]],
                                 device const uchar* data [[buffer(2)]],
                                 device const float* scales [[buffer(3)]],
                                 device const T* bias [[buffer(4)]],
                                 device T* out [[buffer(5)]],
                                 constant W8A8Params& p [[buffer(6)]],
                                 uint2 group [[threadgroup_position_in_grid]],
                                 uint tid [[thread_index_in_threadgroup]]) {
  typedef W8A8Kind<F> K;
  typedef typename K::acc_t A;
  threadgroup A xs[QMM_TILE * QMM_TILE];  // [row][k] of the step
  threadgroup A wt[QMM_TILE * QMM_TILE];  // [col][k]
  const uint n0 = group.x * QMM_TILE, m0 = group.y * QMM_TILE;
  const uint tr = tid / 4u, tc = (tid % 4u) * QUANT_CHUNK;  // this thread: row tr, columns tc .. tc + 7
  A acc[QUANT_CHUNK];
  for (uint j = 0; j < QUANT_CHUNK; ++j) acc[j] = A(0);
  for (uint k0 = 0; k0 < p.k; k0 += QMM_TILE) {
    // stage: thread t writes x row tr and W row n0 + tr, elements tc .. tc + 7 of the step
    for (uint j = 0; j < QUANT_CHUNK; ++j) {
      const uint kk = k0 + tc + j;
      const bool kin = kk < p.k;
      xs[tr * QMM_TILE + tc + j] =
          kin && m0 + tr < p.m ? K::x(x[ulong(m0 + tr) * p.x_stride + kk]) : A(0);
      wt[tr * QMM_TILE + tc + j] =
          kin && n0 + tr < p.n ? K::w(data[ulong(n0 + tr) * p.w_stride + kk]) : A(0);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint kk = 0; kk < QMM_TILE; ++kk) {
      const A xv = xs[tr * QMM_TILE + kk];
      for (uint j = 0; j < QUANT_CHUNK; ++j) acc[j] += xv * wt[(tc + j) * QMM_TILE + kk];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (m0 + tr >= p.m) return;
  const float xsc = x_scale[m0 + tr];
  device T* o = out + ulong(m0 + tr) * p.out_stride;
  for (uint j = 0; j < QUANT_CHUNK; ++j) {
    const uint c = n0 + tc + j;
    if (c < p.n) o[c] = w8a8_out<T, A>(acc[j], xsc, w8a8_w_scale(scales, p, c), bias, p, c);
  }
}

// Host names: matmul_w8a8_<format>_<dtype> (GEMV) and matmul_w8a8_gemm_<format>_<dtype>.
#define W8A8_INSTANCE(name, fn, T, F) \
  template [[host_name(name)]] [[kernel]] decltype(fn<T, F>) fn<T, F>;
#define W8A8_DTYPE(fmt, F, T, dt)                                      \
  W8A8_INSTANCE("matmul_w8a8_" fmt "_" dt, w8a8_gemv_kernel, T, F)     \
  W8A8_INSTANCE("matmul_w8a8_gemm_" fmt "_" dt, w8a8_gemm_kernel, T, F)
#define W8A8_FORMAT(fmt, F)        \
  W8A8_DTYPE(fmt, F, float, "f32") \
  W8A8_DTYPE(fmt, F, half, "f16")  \
  W8A8_DTYPE(fmt, F, bfloat, "bf16")

W8A8_FORMAT("int8", QF_INT8)
W8A8_FORMAT("fp8_e4m3", QF_FP8_E4M3)
W8A8_FORMAT("fp8_e5m2", QF_FP8_E5M2)
