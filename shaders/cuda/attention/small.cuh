// The elementwise kernels of the attention family: the paged-cache write and
// the merge of two partial states. One thread per element of head_dim.
#pragma once
#include <cstdint>

#include "cuda/common/dtype.cuh"

namespace braze::cuda::attn {

struct AppendParams {
  int64_t tokens, heads, dim, capacity, block_size;
  const void* k; int64_t k_st, k_sh;
  const void* v; int64_t v_st, v_sh;
  void* kc; int64_t kc_sb, kc_ss, kc_sh;
  void* vc; int64_t vc_sb, vc_ss, vc_sh;
  const void* slots; int64_t slot_stride; bool slots64;
};

// A slot outside [0, capacity) (-1 included) skips its token.
template <class T> __global__ void append_kv_kernel(const AppendParams p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.tokens * p.heads * p.dim) return;
  const int64_t d = i % p.dim, th = i / p.dim, h = th % p.heads, t = th / p.heads;
  const int64_t s = p.slots64 ? static_cast<const int64_t*>(p.slots)[t * p.slot_stride]
                              : int64_t(static_cast<const int32_t*>(p.slots)[t * p.slot_stride]);
  if (s < 0 || s >= p.capacity) return;
  const int64_t blk = s / p.block_size, off = s - blk * p.block_size;
  static_cast<T*>(p.kc)[blk * p.kc_sb + off * p.kc_ss + h * p.kc_sh + d] =
      static_cast<const T*>(p.k)[t * p.k_st + h * p.k_sh + d];
  static_cast<T*>(p.vc)[blk * p.vc_sb + off * p.vc_ss + h * p.vc_sh + d] =
      static_cast<const T*>(p.v)[t * p.v_st + h * p.v_sh + d];
}

struct MergeParams {
  int64_t tokens, heads, dim;
  const void* oa; int64_t oa_st, oa_sh;
  const float* la; int64_t la_st, la_sh;
  const void* ob; int64_t ob_st, ob_sh;
  const float* lb; int64_t lb_st, lb_sh;
  void* out; int64_t o_st, o_sh;
  float* lse; int64_t l_st, l_sh;
};

template <class T> __global__ void merge_states_kernel(const MergeParams p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.tokens * p.heads * p.dim) return;
  const int64_t d = i % p.dim, th = i / p.dim, h = th % p.heads, t = th / p.heads;
  const float a = p.la[t * p.la_st + h * p.la_sh], b = p.lb[t * p.lb_st + h * p.lb_sh];
  const float m = fmaxf(a, b);
  float o = 0.f, lse = -INFINITY;
  if (m != -INFINITY) {
    const float ea = expf(a - m), eb = expf(b - m), sum = ea + eb;
    lse = m + logf(sum);
    o = (to_f32(static_cast<const T*>(p.oa)[t * p.oa_st + h * p.oa_sh + d]) * ea +
         to_f32(static_cast<const T*>(p.ob)[t * p.ob_st + h * p.ob_sh + d]) * eb) / sum;
  }
  static_cast<T*>(p.out)[t * p.o_st + h * p.o_sh + d] = from_f32<T>(o);
  if (p.lse && d == 0) p.lse[t * p.l_st + h * p.l_sh] = lse;
}

}  // namespace braze::cuda::attn
