// Forward norm ops, one row per row group: rms_norm, layer_norm, add_rms_norm
// (residual add fused, h stored and normalized as stored) and rms_norm_gated
// (groups are rows of their own, see RowShape). Each is a struct with row();
// norm_kernel (kernel.cuh) runs it over the rows of the grid.
#pragma once
#include "cuda/norm/row.cuh"

#ifndef BRAZE_CUDA_MIN_BLOCKS
#define BRAZE_CUDA_MIN_BLOCKS 1
#endif

namespace braze::cuda::norm {

template <class C> struct RmsNorm {
  using T = typename C::T;
  using Params = ForwardParams;
  static constexpr int kMaxThreads = 512, kMinBlocks = BRAZE_CUDA_MIN_BLOCKS;
  template <class R> __device__ __forceinline__ void row(const Params& p, const Group<C>& g, R& reduce, int64_t row) {
    const T* x = row_ptr<T>(p.x, p.x_stride, row, p);
    T* y = row_ptr<T>(p.out, p.out_stride, row, p);
    const T* w = vec_ptr<T>(p.w, row, p);
    RowPass<C, 1> rp(g, p.cols);
    float ss = 0.f;
    rp.first({x}, [&](int, int64_t, int, auto& q) {
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float v = to_f32(q[0].v[e]);
        ss += v * v;
      }
    });
    const float s = rsqrtf(reduce(Sums<1>{{ss}}).v[0] / float(p.cols) + p.eps);
    rp.again({x}, [&](int, auto c, int n, auto& q) {
      const auto wv = load_vec<T, C::V>(w, c, n);
      Pack<T, C::V> o;
#pragma unroll
      for (int e = 0; e < C::V; ++e) o.v[e] = from_f32<T>(to_f32(q[0].v[e]) * s * scale_at(wv, w, e, p.w_offset));
      store_pack(y, c, n, o);
    });
  }
};

template <class C> struct AddRmsNorm {
  using T = typename C::T;
  using Params = ForwardParams;
  static constexpr int kMaxThreads = 512, kMinBlocks = BRAZE_CUDA_MIN_BLOCKS;
  template <class R> __device__ __forceinline__ void row(const Params& p, const Group<C>& g, R& reduce, int64_t row) {
    const T* x = row_ptr<T>(p.x, p.x_stride, row, p);
    const T* res = row_ptr<T>(p.residual, p.residual_stride, row, p);
    T* h = row_ptr<T>(p.residual_out, p.residual_out_stride, row, p);  // may be res itself: each element is read before it is written, by the same thread
    T* y = row_ptr<T>(p.out, p.out_stride, row, p);
    const T* w = vec_ptr<T>(p.w, row, p);
    RowPass<C, 2> rp(g, p.cols);
    float ss = 0.f;
    rp.first({x, res}, [&](int, auto c, int n, auto& q) {
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        q[0].v[e] = from_f32<T>(to_f32(q[0].v[e]) + to_f32(q[1].v[e]));
        const float v = to_f32(q[0].v[e]);  // the norm sees h as stored
        ss += v * v;
      }
      store_pack(h, c, n, q[0]);
    });
    const float s = rsqrtf(reduce(Sums<1>{{ss}}).v[0] / float(p.cols) + p.eps);
    // Register form: q[.][0] now holds h. Looped form: h is read back from
    // memory, written above by this same thread.
    rp.template again<1>({h, h}, [&](int, auto c, int n, auto& q) {
      const auto wv = load_vec<T, C::V>(w, c, n);
      Pack<T, C::V> o;
#pragma unroll
      for (int e = 0; e < C::V; ++e) o.v[e] = from_f32<T>(to_f32(q[0].v[e]) * s * scale_at(wv, w, e, p.w_offset));
      store_pack(y, c, n, o);
    });
  }
};

template <class C> struct LayerNorm {
  using T = typename C::T;
  using Params = ForwardParams;
  static constexpr int kMaxThreads = 512, kMinBlocks = BRAZE_CUDA_MIN_BLOCKS;
  template <class R> __device__ __forceinline__ void row(const Params& p, const Group<C>& g, R& reduce, int64_t row) {
    const T* x = row_ptr<T>(p.x, p.x_stride, row, p);
    T* y = row_ptr<T>(p.out, p.out_stride, row, p);
    const T* w = vec_ptr<T>(p.w, row, p);
    const T* b = vec_ptr<T>(p.b, row, p);
    RowPass<C, 1> rp(g, p.cols);
    float sum = 0.f;
    rp.first({x}, [&](int, int64_t, int, auto& q) {
#pragma unroll
      for (int e = 0; e < C::V; ++e) sum += to_f32(q[0].v[e]);  // padding is zero
    });
    const float mean = reduce(Sums<1>{{sum}}).v[0] / float(p.cols);
    float dev = 0.f;  // the deviations from the mean, not E[x^2] - mean^2, for accuracy
    rp.again({x}, [&](int, int64_t, int n, auto& q) {
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float d = to_f32(q[0].v[e]) - mean;
        if (e < n) dev += d * d;
      }
    });
    const float rstd = rsqrtf(reduce(Sums<1>{{dev}}).v[0] / float(p.cols) + p.eps);
    rp.again({x}, [&](int, auto c, int n, auto& q) {
      const auto wv = load_vec<T, C::V>(w, c, n);
      const auto bv = load_vec<T, C::V>(b, c, n);
      Pack<T, C::V> o;
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float v = (to_f32(q[0].v[e]) - mean) * rstd * scale_at(wv, w, e, 0.f);
        o.v[e] = from_f32<T>(b ? v + to_f32(bv.v[e]) : v);
      }
      store_pack(y, c, n, o);
    });
  }
};

template <class C> struct RmsNormGated {
  using T = typename C::T;
  using Params = ForwardParams;
  static constexpr int kMaxThreads = 512, kMinBlocks = BRAZE_CUDA_MIN_BLOCKS;
  template <class R> __device__ __forceinline__ void row(const Params& p, const Group<C>& g, R& reduce, int64_t row) {
    const T* x = row_ptr<T>(p.x, p.x_stride, row, p);
    const T* gate = row_ptr<T>(p.gate, p.gate_stride, row, p);
    T* y = row_ptr<T>(p.out, p.out_stride, row, p);
    const T* w = vec_ptr<T>(p.w, row, p);
    RowPass<C, 2> rp(g, p.cols);
    float ss = 0.f;
    // Register form: the gate is loaded with x, while the reduction waits anyway.
    rp.template first<C::kLoop ? 1 : 2>({x, gate}, [&](int, int64_t, int, auto& q) {
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float v = to_f32(q[0].v[e]);
        ss += v * v;
      }
    });
    const float s = rsqrtf(reduce(Sums<1>{{ss}}).v[0] / float(p.cols) + p.eps);
    rp.again({x, gate}, [&](int, auto c, int n, auto& q) {
      const auto wv = load_vec<T, C::V>(w, c, n);
      Pack<T, C::V> o;
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float z = to_f32(q[1].v[e]);
        const float silu = z / (1.f + expf(-z));
        o.v[e] = from_f32<T>(to_f32(q[0].v[e]) * s * scale_at(wv, w, e, 0.f) * silu);
      }
      store_pack(y, c, n, o);
    });
  }
};

}  // namespace braze::cuda::norm
