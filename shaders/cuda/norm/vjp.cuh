// VJPs of rms_norm and layer_norm. dx is written per row; the parameter
// gradients (dweight, dbias) are summed over rows in f32 without atomics:
// each row group adds its rows into its own partial row, P partials in all
// (registers in register form, its row of the workspace in looped form), and
// reduce_partials adds the P partials in a fixed order. The result depends on
// the grid only, which depends on the shape and the device, never on timing.
#pragma once
#include "cuda/norm/row.cuh"

namespace braze::cuda::norm {

// Per-thread sums of one parameter gradient over the rows this group takes.
template <class C> struct GradAcc {
  static constexpr int V = C::V, K = C::K;
  float a[C::kLoop ? 1 : K][V] = {};
  bool started = false;  // looped form: whether this group's partial row holds a row yet

  __device__ __forceinline__ void add(float* part, int k, int64_t c, int e, float v) {
    if constexpr (C::kLoop) part[c + e] = started ? part[c + e] + v : v;
    else a[k][e] += v;
  }
  // Register form: store the sums into this group's partial row.
  __device__ __forceinline__ void flush(float* part, const RowPass<C, 2>& rp) {
    if constexpr (!C::kLoop) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t c = rp.col(k);
        if (c < rp.cols)
#pragma unroll
          for (int e = 0; e < V; ++e)
            if (e < rp.valid(c)) part[c + e] = a[k][e];
      }
    }
  }
};

template <class C> struct RmsNormVjp {
  using T = typename C::T;
  using Params = VjpParams;
  static constexpr int kMaxThreads = 256, kMinBlocks = 1;  // the register form keeps K*V gradient sums besides the row
  GradAcc<C> dw;

  template <class R> __device__ __forceinline__ void row(const Params& p, const Group<C>& g, R& reduce, int64_t row) {
    const T* x = row_ptr<T>(p.x, p.x_stride, row, p);
    const T* dy = row_ptr<T>(p.dy, p.dy_stride, row, p);
    T* dx = row_ptr<T>(p.dx, p.dx_stride, row, p);
    const T* w = static_cast<const T*>(p.w);
    float* pw = p.part_w ? p.part_w + g.index * p.cols : nullptr;
    RowPass<C, 2> rp(g, p.cols);
    float ss = 0.f, gx = 0.f;
    rp.first({x, dy}, [&](int, auto c, int n, auto& q) {
      const auto wv = load_vec<T, C::V>(w, c, n);
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float xv = to_f32(q[0].v[e]);
        ss += xv * xv;
        gx += to_f32(q[1].v[e]) * scale_at(wv, w, e, p.w_offset) * xv;
      }
    });
    const Sums<2> t = reduce(Sums<2>{{ss, gx}});
    const float s = rsqrtf(t.v[0] / float(p.cols) + p.eps);
    const float k = s * s * t.v[1] / float(p.cols);
    rp.again({x, dy}, [&](int kk, auto c, int n, auto& q) {
      const auto wv = load_vec<T, C::V>(w, c, n);
      Pack<T, C::V> o;
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float xv = to_f32(q[0].v[e]), dyv = to_f32(q[1].v[e]);
        o.v[e] = from_f32<T>(s * (dyv * scale_at(wv, w, e, p.w_offset) - xv * k));
        if (pw && e < n) dw.add(pw, kk, c, e, dyv * xv * s);
      }
      store_pack(dx, c, n, o);
    });
    dw.started = true;
  }

  __device__ __forceinline__ void finish(const Params& p, const Group<C>& g) {
    if (p.part_w) dw.flush(p.part_w + g.index * p.cols, RowPass<C, 2>(g, p.cols));
  }
};

template <class C> struct LayerNormVjp {
  using T = typename C::T;
  using Params = VjpParams;
  static constexpr int kMaxThreads = 256, kMinBlocks = 1;  // the register form keeps K*V gradient sums besides the row
  GradAcc<C> dw, db;

  template <class R> __device__ __forceinline__ void row(const Params& p, const Group<C>& g, R& reduce, int64_t row) {
    const T* x = row_ptr<T>(p.x, p.x_stride, row, p);
    const T* dy = row_ptr<T>(p.dy, p.dy_stride, row, p);
    T* dx = row_ptr<T>(p.dx, p.dx_stride, row, p);
    const T* w = static_cast<const T*>(p.w);
    float* pw = p.part_w ? p.part_w + g.index * p.cols : nullptr;
    float* pb = p.part_b ? p.part_b + g.index * p.cols : nullptr;
    RowPass<C, 2> rp(g, p.cols);
    float sum = 0.f;
    rp.first({x, dy}, [&](int, int64_t, int, auto& q) {
#pragma unroll
      for (int e = 0; e < C::V; ++e) sum += to_f32(q[0].v[e]);
    });
    const float mean = reduce(Sums<1>{{sum}}).v[0] / float(p.cols);
    float dev = 0.f;
    rp.template again<1>({x, dy}, [&](int, int64_t, int n, auto& q) {
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float d = to_f32(q[0].v[e]) - mean;
        if (e < n) dev += d * d;
      }
    });
    const float rstd = rsqrtf(reduce(Sums<1>{{dev}}).v[0] / float(p.cols) + p.eps);
    float gs = 0.f, gxh = 0.f;  // sums of g = dy * w and of g * xhat (padding has dy = 0)
    rp.again({x, dy}, [&](int, auto c, int n, auto& q) {
      const auto wv = load_vec<T, C::V>(w, c, n);
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float gv = to_f32(q[1].v[e]) * scale_at(wv, w, e, 0.f);
        gs += gv;
        gxh += gv * (to_f32(q[0].v[e]) - mean) * rstd;
      }
    });
    const Sums<2> t = reduce(Sums<2>{{gs, gxh}});
    const float c1 = t.v[0] / float(p.cols), c2 = t.v[1] / float(p.cols);
    rp.again({x, dy}, [&](int kk, auto c, int n, auto& q) {
      const auto wv = load_vec<T, C::V>(w, c, n);
      Pack<T, C::V> o;
#pragma unroll
      for (int e = 0; e < C::V; ++e) {
        const float xh = (to_f32(q[0].v[e]) - mean) * rstd, dyv = to_f32(q[1].v[e]);
        o.v[e] = from_f32<T>(rstd * (dyv * scale_at(wv, w, e, 0.f) - c1 - xh * c2));
        if (e < n) {
          if (pw) dw.add(pw, kk, c, e, dyv * xh);
          if (pb) db.add(pb, kk, c, e, dyv);
        }
      }
      store_pack(dx, c, n, o);
    });
    dw.started = db.started = true;
  }

  __device__ __forceinline__ void finish(const Params& p, const Group<C>& g) {
    const RowPass<C, 2> rp(g, p.cols);
    if (p.part_w) dw.flush(p.part_w + g.index * p.cols, rp);
    if (p.part_b) db.flush(p.part_b + g.index * p.cols, rp);
  }
};

// out[c] = sum over p < parts of part[p][c], in order of p; zero when parts == 0.
template <class T>
__global__ void reduce_partials(const float* __restrict__ part, int64_t parts, int64_t cols, T* __restrict__ out) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x) {
    float acc = 0.f;
#pragma unroll 8
    for (int64_t q = 0; q < parts; ++q) acc += part[q * cols + c];
    out[c] = from_f32<T>(acc);
  }
}

}  // namespace braze::cuda::norm
