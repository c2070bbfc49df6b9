// Host launchers of the ops family. The elementwise kernels (activations,
// embedding) take a 2-D grid: x tiles a row into blocks of up to 256 threads x
// U packs (threads rounded to the row so the last tile is not mostly idle),
// y walks the rows, several rows a block when rows are short. (The Hadamard
// kernel of b470f6e failed its first GPU run and is not built: see docs/cuda.md.)
// 16-byte packs need aligned base pointers and row strides (and, for gated
// rows in halves, cols % V == 0); anything else takes the scalar path.
// Nothing here allocates or synchronizes.
#include "cuda/ops.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <string>

#include "cuda/ops/act.cuh"
#include "cuda/ops/embedding.cuh"
#include "cuda/runtime.cuh"

namespace braze::cuda {
namespace {

using namespace braze::cuda::ops;
using braze::ops::Act;
using braze::ops::ActArgs;
using braze::ops::EmbeddingArgs;

constexpr int kThreads = 256;
constexpr int kVecPacks = 2;     // 16-byte packs per thread (and input): 2 or 4 loads in flight
constexpr int kScalarPacks = 8;  // elements per thread on the scalar path

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

struct Shape {
  dim3 grid, block;
};

// rows of `packs` packs, U per thread.
Shape elementwise_shape(int64_t rows, int64_t packs, int U) {
  const int64_t tiles = ceil_div(packs, int64_t(kThreads) * U);
  const int64_t tx = ceil_div(ceil_div(packs, U * tiles), 32) * 32;
  const int64_t ty = std::min<int64_t>(std::max<int64_t>(kThreads / tx, 1), rows);
  const int64_t gy = std::min<int64_t>(ceil_div(rows, ty), 65535);
  return {dim3(unsigned(tiles), unsigned(gy)), dim3(unsigned(tx), unsigned(ty))};
}

// ------------------------------------------------------------------ activations
template <class T, int V, int U, Act A, bool G, bool Il>
void act_launch(const ActParams& p, const Shape& sh, cudaStream_t s) {
  act_kernel<T, V, U, A, G, Il><<<sh.grid, sh.block, 0, s>>>(p);
}

template <class T, int V, int U, Act A>
void act_form(const ActArgs& a, const ActParams& p, const Shape& sh, cudaStream_t s) {
  if (!a.gated) {
    if constexpr (A != Act::swiglu_clamped) return act_launch<T, V, U, A, false, false>(p, sh, s);
    else throw ValueError("swiglu_clamped is a gated activation");
  }
  if (a.interleaved) return act_launch<T, V, U, A, true, true>(p, sh, s);
  act_launch<T, V, U, A, true, false>(p, sh, s);
}

template <class T, int V, int U>
void act_typed(const ActArgs& a, ActParams& p, cudaStream_t s) {
  p.packs = int(ceil_div(a.cols, V));
  const Shape sh = elementwise_shape(a.rows, p.packs, U);
  switch (a.act) {
    case Act::silu: return act_form<T, V, U, Act::silu>(a, p, sh, s);
    case Act::gelu_erf: return act_form<T, V, U, Act::gelu_erf>(a, p, sh, s);
    case Act::gelu_tanh: return act_form<T, V, U, Act::gelu_tanh>(a, p, sh, s);
    case Act::swiglu_clamped: return act_form<T, V, U, Act::swiglu_clamped>(a, p, sh, s);
  }
  throw ValueError("unknown activation");
}

template <class T> void act_dispatch(const ActArgs& a, ActParams& p, cudaStream_t s) {
  constexpr int V = kVec16<T>;
  const bool strides = a.rows == 1 || (a.x_stride % V == 0 && a.y_stride % V == 0);
  const bool halves = !a.gated || a.interleaved || a.cols % V == 0;
  if (aligned16(a.x) && aligned16(a.y) && strides && halves) act_typed<T, V, kVecPacks>(a, p, s);
  else act_typed<T, 1, kScalarPacks>(a, p, s);
}

// ------------------------------------------------------------------ embedding
template <class T, class Id, int V, int U>
void embedding_typed(const EmbeddingArgs& a, EmbeddingParams& p, cudaStream_t s) {
  p.packs = int(ceil_div(a.dim, V));
  const Shape sh = elementwise_shape(a.tokens, p.packs, U);
  embedding_kernel<T, Id, V, U><<<sh.grid, sh.block, 0, s>>>(p);
}

template <class T> void embedding_dispatch(const EmbeddingArgs& a, EmbeddingParams& p, cudaStream_t s) {
  constexpr int V = kVec16<T>;
  const bool vec = aligned16(a.table) && aligned16(a.y) && a.table_stride % V == 0 &&
                   (a.tokens == 1 || a.y_stride % V == 0);
  const bool i64 = a.id_dtype == DType::i64;
  if (vec) {
    if (i64) embedding_typed<T, int64_t, V, kVecPacks>(a, p, s);
    else embedding_typed<T, int32_t, V, kVecPacks>(a, p, s);
  } else {
    if (i64) embedding_typed<T, int64_t, 1, kScalarPacks>(a, p, s);
    else embedding_typed<T, int32_t, 1, kScalarPacks>(a, p, s);
  }
}

template <class F> void by_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    default: throw TypeError(std::string("unsupported dtype ") + dtype_name(t));
  }
}

}  // namespace

void act_run(const ActArgs& a, uintptr_t stream) {
  if (a.rows == 0 || a.cols == 0) return;
  if (a.cols > INT_MAX / 2) throw ValueError("rows of x are too long for the CUDA activation kernels");
  ActParams p{a.x, a.y, a.x_stride, a.y_stride, a.rows, int(a.cols), 0, a.alpha, a.limit};
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  by_dtype(a.dtype, [&](auto t) { act_dispatch<decltype(t)>(a, p, s); });
  check_launch(braze::ops::op_name(a.op));
}

void embedding_run(const EmbeddingArgs& a, uintptr_t stream) {
  if (a.tokens == 0 || a.dim == 0) return;
  if (a.dim > INT_MAX - 16) throw ValueError("rows of table are too long for the CUDA embedding kernel");
  if (a.id_dtype != DType::i32 && a.id_dtype != DType::i64)
    throw TypeError(std::string("ids must be int32 or int64, got ") + dtype_name(a.id_dtype));
  EmbeddingParams p{a.ids, a.table, a.y, a.ids_stride, a.table_stride, a.y_stride, a.tokens, a.vocab,
                    int(a.dim), 0};
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  by_dtype(a.dtype, [&](auto t) { embedding_dispatch<decltype(t)>(a, p, s); });
  check_launch("embedding");
}


}  // namespace braze::cuda
