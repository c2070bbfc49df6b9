// Host launchers of the ops family. The elementwise kernels (activations,
// embedding) take a 2-D grid: x tiles a row into blocks of up to 256 threads x
// U packs (threads rounded to the row so the last tile is not mostly idle),
// y walks the rows, several rows a block when rows are short. The Hadamard
// kernel takes whole rows a block (see shaders/cuda/ops/hadamard.cuh).
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
#include "cuda/ops/hadamard.cuh"
#include "cuda/runtime.cuh"

namespace braze::cuda {
namespace {

using namespace braze::cuda::ops;
using braze::ops::Act;
using braze::ops::ActArgs;
using braze::ops::EmbeddingArgs;
using braze::ops::HadamardArgs;

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

// ------------------------------------------------------------------ hadamard
// The device's opt-in shared-memory limit, granted to each Hadamard kernel
// once per device (rows of 28672 and 32768 elements stage 116 and 133 KB).
template <class K> void allow_shared(K* kernel, int device, int bytes) {
  static std::atomic<int> granted[64];
  if (bytes <= 48 * 1024) return;
  if (device >= 0 && device < 64 && granted[device].load(std::memory_order_relaxed) >= bytes) return;
  int optin = 0;
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "cudaDeviceGetAttribute");
  if (bytes > optin)
    throw std::runtime_error("braze CUDA backend: hadamard of this size stages " + std::to_string(bytes) +
                             " bytes of shared memory per block; this GPU offers " + std::to_string(optin));
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin),
        "cudaFuncSetAttribute");
  if (device >= 0 && device < 64) granted[device].store(optin, std::memory_order_relaxed);
}

template <class T, int M, int V>
void hadamard_launch(const HadamardArgs& a, HadamardParams& p, cudaStream_t s) {
  const int S = 1 << p.logS, c = 1 << p.logc, ms = M * S;
  p.R = int(std::min<int64_t>(ms >= 128 ? 1 : 128 / ms, a.rows));
  const int nt = p.R * ms;
  const bool staged = M > 1 || S > 1;
  const int smem = staged ? nt * (c + 1) * int(sizeof(float)) : 0;
  const int64_t blocks = ceil_div(a.rows, p.R);
  if (blocks > INT_MAX) throw ValueError("too many rows for one CUDA hadamard launch");
  const auto kernel = c == kHadC ? hadamard_kernel<T, M, V, true> : hadamard_kernel<T, M, V, false>;
  allow_shared(kernel, a.device_id, smem);
  kernel<<<unsigned(blocks), unsigned(nt), size_t(smem), s>>>(p);
}

template <class T, int M> void hadamard_vec(const HadamardArgs& a, HadamardParams& p, cudaStream_t s) {
  constexpr int V = kVec16<T>;
  const bool vec = p.P >= V && aligned16(a.x) && aligned16(a.y) &&
                   (a.rows == 1 || (a.x_stride % V == 0 && a.y_stride % V == 0));
  if (vec) hadamard_launch<T, M, V>(a, p, s);
  else hadamard_launch<T, M, 1>(a, p, s);
}

template <class T> void hadamard_dispatch(const HadamardArgs& a, HadamardParams& p, cudaStream_t s) {
  switch (a.m) {
    case 1: return hadamard_vec<T, 1>(a, p, s);
    case 12: return hadamard_vec<T, 12>(a, p, s);
    case 20: return hadamard_vec<T, 20>(a, p, s);
    case 28: return hadamard_vec<T, 28>(a, p, s);
    default: throw ValueError("hadamard: m must be 1, 12, 20 or 28");
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

void hadamard_run(const HadamardArgs& a, uintptr_t stream) {
  if (a.rows == 0 || a.n == 0) return;
  if (a.log2 < 0 || a.log2 > 15 || (int64_t(a.m) << a.log2) != a.n || a.n > 32768)
    throw ValueError("hadamard: n must be m * 2**k with m in {1, 12, 20, 28}, at most 32768");
  HadamardParams p{};
  p.x = a.x;
  p.y = a.y;
  p.x_stride = a.x_stride;
  p.y_stride = a.y_stride;
  p.rows = a.rows;
  p.scale = a.scale;
  p.P = 1 << a.log2;
  p.logc = std::min(a.log2, kHadLogC);
  p.logS = a.log2 - p.logc;
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  by_dtype(a.dtype, [&](auto t) { hadamard_dispatch<decltype(t)>(a, p, s); });
  check_launch("hadamard");
}

}  // namespace braze::cuda
