// Norm family on the CPU. Rows are split over the thread pool; a row is read
// from memory once (later passes hit L1/L2), math in f32 vectors of W lanes.
#include "cpu/norm.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA {
namespace {

using norm::NormArgs;
using norm::NormVjpArgs;
using norm::Op;

// sum over a row of f(v), v its W-lane vectors (the tail vector reads `fill`
// past the end, which f must map to 0), with four accumulators so that the
// adds' latency does not bound a row that sits in L1.
template <class D, class F> float row_sum(const typename D::T* x, int64_t n, F f, float fill = 0.f) {
  vf a0{}, a1{}, a2{}, a3{};
  int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    a0 += f(load<D>(x + i));
    a1 += f(load<D>(x + i + W));
    a2 += f(load<D>(x + i + 2 * W));
    a3 += f(load<D>(x + i + 3 * W));
  }
  for (; i < n; i += W) a0 += f(ld<D>(x, i, n - i < W ? n - i : W, fill));
  return hsum((a0 + a1) + (a2 + a3));
}

template <class D> float sum_sq(const typename D::T* x, int64_t n) {
  return row_sum<D>(x, n, [](vf v) { return v * v; });
}

template <class D> float sum(const typename D::T* x, int64_t n) {
  return row_sum<D>(x, n, [](vf v) { return v; });
}

template <class D> float sum_sq_dev(const typename D::T* x, int64_t n, float mean) {
  const vf m = splat(mean);
  return row_sum<D>(x, n, [m](vf v) { vf d = v - m; return d * d; }, mean);
}

template <class D> inline vf weight(const typename D::T* w, int64_t i, int64_t c, float offset) {
  return w ? ld<D>(w, i, c) + offset : splat(1.f + offset);
}

template <class D> void rms_norm_rows(const NormArgs& a, int64_t r0, int64_t r1) {
  using T = typename D::T;
  auto w = static_cast<const T*>(a.weight);
  for (int64_t r = r0; r < r1; ++r) {
    auto x = static_cast<const T*>(a.x) + r * a.x_stride;
    auto y = static_cast<T*>(a.out) + r * a.out_stride;
    vf s = splat(1.f / std::sqrt(sum_sq<D>(x, a.cols) / float(a.cols) + a.eps));
    lanes(a.cols, [&](int64_t i, int64_t c) { st<D>(y, i, c, ld<D>(x, i, c) * s * weight<D>(w, i, c, a.weight_offset)); });
  }
}

template <class D> void add_rms_norm_rows(const NormArgs& a, int64_t r0, int64_t r1) {
  using T = typename D::T;
  auto w = static_cast<const T*>(a.weight);
  for (int64_t r = r0; r < r1; ++r) {
    auto x = static_cast<const T*>(a.x) + r * a.x_stride;
    auto res = static_cast<const T*>(a.residual) + r * a.residual_stride;
    auto h = static_cast<T*>(a.residual_out) + r * a.residual_out_stride;
    auto y = static_cast<T*>(a.out) + r * a.out_stride;
    // Pass 1 reduces h without storing it; pass 2 recomputes h from x and
    // residual (still in L1/L2), so h and y are each written once, and h may
    // overwrite residual in place.
    vf acc{};
    lanes(a.cols, [&](int64_t i, int64_t c) {
      vf v = round_to<D>(ld<D>(x, i, c) + ld<D>(res, i, c));  // the norm sees h as stored
      acc += v * v;
    });
    vf s = splat(1.f / std::sqrt(hsum(acc) / float(a.cols) + a.eps));
    lanes(a.cols, [&](int64_t i, int64_t c) {
      vf v = round_to<D>(ld<D>(x, i, c) + ld<D>(res, i, c));
      st<D>(h, i, c, v);
      st<D>(y, i, c, v * s * weight<D>(w, i, c, a.weight_offset));
    });
  }
}

template <class D> void layer_norm_rows(const NormArgs& a, int64_t r0, int64_t r1) {
  using T = typename D::T;
  auto w = static_cast<const T*>(a.weight);
  auto b = static_cast<const T*>(a.bias);
  for (int64_t r = r0; r < r1; ++r) {
    auto x = static_cast<const T*>(a.x) + r * a.x_stride;
    auto y = static_cast<T*>(a.out) + r * a.out_stride;
    float mean = sum<D>(x, a.cols) / float(a.cols);
    float rstd = 1.f / std::sqrt(sum_sq_dev<D>(x, a.cols, mean) / float(a.cols) + a.eps);
    vf m = splat(mean), s = splat(rstd);
    lanes(a.cols, [&](int64_t i, int64_t c) {
      vf v = (ld<D>(x, i, c) - m) * s * weight<D>(w, i, c, 0.f);
      if (b) v += ld<D>(b, i, c);
      st<D>(y, i, c, v);
    });
  }
}

template <class D> void rms_norm_gated_rows(const NormArgs& a, int64_t r0, int64_t r1) {
  using T = typename D::T;
  auto w = static_cast<const T*>(a.weight);
  const int64_t g = a.group;
  for (int64_t r = r0; r < r1; ++r) {
    auto x = static_cast<const T*>(a.x) + r * a.x_stride;
    auto gate = static_cast<const T*>(a.gate) + r * a.gate_stride;
    auto y = static_cast<T*>(a.out) + r * a.out_stride;
    for (int64_t g0 = 0; g0 < a.cols; g0 += g) {
      vf s = splat(1.f / std::sqrt(sum_sq<D>(x + g0, g) / float(g) + a.eps));
      lanes(g, [&](int64_t i, int64_t c) {
        vf z = ld<D>(gate + g0, i, c);
        vf silu = z / (1.f + vexp(-z));
        vf wv = w ? ld<D>(w + g0, i, c) : splat(1.f);
        st<D>(y + g0, i, c, ld<D>(x + g0, i, c) * s * wv * silu);
      });
    }
  }
}

// The VJPs accumulate dweight / dbias per static block of rows into f32
// partials, then add the blocks in order: the result does not depend on
// which thread ran which block.
template <class D> void rms_norm_vjp_rows(const NormVjpArgs& a, int64_t r0, int64_t r1, float* dw) {
  using T = typename D::T;
  auto w = static_cast<const T*>(a.weight);
  for (int64_t r = r0; r < r1; ++r) {
    auto x = static_cast<const T*>(a.x) + r * a.x_stride;
    auto dy = static_cast<const T*>(a.dy) + r * a.dy_stride;
    auto dx = static_cast<T*>(a.dx) + r * a.dx_stride;
    vf ss{}, gx{};
    lanes(a.cols, [&](int64_t i, int64_t c) {
      vf xv = ld<D>(x, i, c);
      ss += xv * xv;
      gx += ld<D>(dy, i, c) * weight<D>(w, i, c, a.weight_offset) * xv;
    });
    float rs = 1.f / std::sqrt(hsum(ss) / float(a.cols) + a.eps);
    vf s = splat(rs), k = splat(rs * rs * hsum(gx) / float(a.cols));
    lanes(a.cols, [&](int64_t i, int64_t c) {
      vf xv = ld<D>(x, i, c), dyv = ld<D>(dy, i, c);
      st<D>(dx, i, c, s * (dyv * weight<D>(w, i, c, a.weight_offset) - xv * k));
      if (dw) {
        vf acc = ld<F32>(dw, i, c) + dyv * xv * s;
        st<F32>(dw, i, c, acc);
      }
    });
  }
}

template <class D> void layer_norm_vjp_rows(const NormVjpArgs& a, int64_t r0, int64_t r1, float* dw, float* db) {
  using T = typename D::T;
  auto w = static_cast<const T*>(a.weight);
  for (int64_t r = r0; r < r1; ++r) {
    auto x = static_cast<const T*>(a.x) + r * a.x_stride;
    auto dy = static_cast<const T*>(a.dy) + r * a.dy_stride;
    auto dx = static_cast<T*>(a.dx) + r * a.dx_stride;
    float mean = sum<D>(x, a.cols) / float(a.cols);
    float rstd = 1.f / std::sqrt(sum_sq_dev<D>(x, a.cols, mean) / float(a.cols) + a.eps);
    vf m = splat(mean), s = splat(rstd), g_sum{}, gxh_sum{};
    lanes(a.cols, [&](int64_t i, int64_t c) {
      vf xh = (ld<D>(x, i, c) - m) * s;
      vf g = ld<D>(dy, i, c) * weight<D>(w, i, c, 0.f);
      g_sum += g;
      gxh_sum += g * xh;
    });
    vf c1 = splat(hsum(g_sum) / float(a.cols)), c2 = splat(hsum(gxh_sum) / float(a.cols));
    lanes(a.cols, [&](int64_t i, int64_t c) {
      vf xh = (ld<D>(x, i, c) - m) * s;
      vf dyv = ld<D>(dy, i, c);
      vf g = dyv * weight<D>(w, i, c, 0.f);
      st<D>(dx, i, c, s * (g - c1 - xh * c2));
      if (dw) st<F32>(dw, i, c, ld<F32>(dw, i, c) + dyv * xh);
      if (db) st<F32>(db, i, c, ld<F32>(db, i, c) + dyv);
    });
  }
}

template <class D> void reduce_blocks(const std::vector<float>& parts, int64_t blocks, int64_t n, void* out) {
  using T = typename D::T;
  if (!out) return;
  lanes(n, [&](int64_t i, int64_t c) {
    vf acc{};
    for (int64_t b = 0; b < blocks; ++b) acc += ld<F32>(parts.data() + b * n, i, c);
    st<D>(static_cast<T*>(out), i, c, acc);
  });
}

// The row blocks of a VJP's parameter sums: a function of the shape alone
// (never of the thread count), so every thread count adds the same f32
// partials in the same order and gets the same bits. Enough blocks to spread
// over many threads, each worth waking one for, and a bounded partials buffer.
int64_t vjp_blocks(int64_t rows, int64_t cols, int64_t elem_bytes) {
  constexpr int64_t kMaxBlocks = 64, kMinBlockBytes = 1 << 17;
  const int64_t bytes = rows * cols * 3 * elem_bytes;  // x and dy read, dx written
  return std::max<int64_t>(1, std::min<int64_t>({rows, kMaxBlocks, bytes / kMinBlockBytes}));
}

template <class D> void run_vjp(const NormVjpArgs& a) {
  const int64_t n = a.cols;
  const bool need_w = a.dweight != nullptr, need_b = a.dbias != nullptr;
  const int64_t blocks = (need_w || need_b) ? vjp_blocks(a.rows, n, int64_t(sizeof(typename D::T))) : 1;
  std::vector<float> pw(need_w ? blocks * n : 0, 0.f), pb(need_b ? blocks * n : 0, 0.f);
  auto body = [&](int64_t blk, int) {
    int64_t r0 = a.rows * blk / blocks, r1 = a.rows * (blk + 1) / blocks;
    float* dw = need_w ? pw.data() + blk * n : nullptr;
    float* db = need_b ? pb.data() + blk * n : nullptr;
    if (a.op == Op::rms_norm_vjp) rms_norm_vjp_rows<D>(a, r0, r1, dw);
    else layer_norm_vjp_rows<D>(a, r0, r1, dw, db);
  };
  if (blocks > 1) parallel_for(blocks, body);
  else if (need_w || need_b) body(0, 0);
  else parallel_rows(a.rows, 4 * n * int64_t(sizeof(typename D::T)), [&](int64_t r0, int64_t r1) {
    if (a.op == Op::rms_norm_vjp) rms_norm_vjp_rows<D>(a, r0, r1, nullptr);
    else layer_norm_vjp_rows<D>(a, r0, r1, nullptr, nullptr);
  });
  if (a.rows == 0) {  // no rows: the gradients of weight and bias are zero
    std::fill(pw.begin(), pw.end(), 0.f);
    std::fill(pb.begin(), pb.end(), 0.f);
  }
  reduce_blocks<D>(pw, blocks, n, a.dweight);
  reduce_blocks<D>(pb, blocks, n, a.dbias);
}

template <class D> void run_typed(const NormArgs& a) {
  const int64_t row_bytes = a.cols * int64_t(sizeof(typename D::T));
  switch (a.op) {
    case Op::rms_norm:
      return parallel_rows(a.rows, 2 * row_bytes, [&](int64_t r0, int64_t r1) { rms_norm_rows<D>(a, r0, r1); });
    case Op::layer_norm:
      return parallel_rows(a.rows, 2 * row_bytes, [&](int64_t r0, int64_t r1) { layer_norm_rows<D>(a, r0, r1); });
    case Op::add_rms_norm:
      return parallel_rows(a.rows, 4 * row_bytes, [&](int64_t r0, int64_t r1) { add_rms_norm_rows<D>(a, r0, r1); });
    case Op::rms_norm_gated:
      return parallel_rows(a.rows, 3 * row_bytes, [&](int64_t r0, int64_t r1) { rms_norm_gated_rows<D>(a, r0, r1); });
    default:
      throw ValueError(std::string(norm::op_name(a.op)) + " is not a forward norm");
  }
}

}  // namespace

void norm_run(const NormArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) { run_typed<decltype(d)>(a); });
}

void norm_vjp_run(const NormVjpArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) { run_vjp<decltype(d)>(a); });
}

}  // namespace braze::cpu::BRAZE_ISA
