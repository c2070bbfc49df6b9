// Host launchers of the ops family. The elementwise kernels (activations,
// embedding) take a 2-D grid: x tiles a row into blocks of up to 256 threads x
// U packs (threads rounded to the row so the last tile is not mostly idle),
// y walks the rows, several rows a block when rows are short; their
// persistent variants launch (SMs x resident blocks) blocks of the same shape
// that walk those tiles (walk.cuh). The Hadamard kernel takes whole rows a
// block (see shaders/cuda/ops/hadamard.cuh).
// 16-byte packs need aligned base pointers and row strides (and, for gated
// rows in halves, cols % V == 0); anything else takes the scalar path.
// Nothing here allocates or synchronizes.
//
// Tuning hooks (read once per process; docs/cuda.md): BRAZE_CUDA_ACT_VARIANT
// and BRAZE_CUDA_EMB_VARIANT pick the 16-byte path's kernel form (kActVariants, kEmbVariants);
// BRAZE_CUDA_HAD_ELEMS the elements a Hadamard thread holds (8, 16 or 32).
#include "cuda/ops.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

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
constexpr int kScalarPacks = 8;  // elements per thread on the scalar path

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// The 16-byte path's forms: packs a thread (per input), cache-streaming
// accesses, persistent grid, lean math (activations only: rcp.approx and
// paired conversions). Variant 0 of each is the measured default; 1 isolates
// the math, the others add the memory-side changes to it.
struct Form {
  int packs;
  bool stream, persist, fast;
};
constexpr Form kActVariants[] = {{2, false, false, false}, {2, false, false, true}, {4, true, false, true},
                                 {2, true, true, true}, {4, true, true, true}};
constexpr Form kEmbVariants[] = {{2, false, false, false}, {4, false, false, false}, {4, true, false, false},
                                 {2, true, true, false}, {4, true, true, false}};
constexpr int kVariantCount = 5;
static_assert(sizeof(kActVariants) == kVariantCount * sizeof(Form) && sizeof(kEmbVariants) == sizeof(kActVariants),
              "the dispatch switches list kVariantCount variants");

// An integer environment setting in [lo, hi] (unset or empty: dflt), read once
// by the caller's static; anything else is a ValueError naming it.
int env_int(const char* name, int lo, int hi, int dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == 0) return dflt;
  char* end = nullptr;
  const long k = std::strtol(v, &end, 10);
  if (*end != 0 || k < lo || k > hi)
    throw ValueError(std::string(name) + " must be an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got '" + v + "'");
  return int(k);
}
int act_variant() {
  static const int v = env_int("BRAZE_CUDA_ACT_VARIANT", 0, kVariantCount - 1, 1);
  return v;
}
int emb_variant() {
  static const int v = env_int("BRAZE_CUDA_EMB_VARIANT", 0, kVariantCount - 1, 3);
  return v;
}

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

// Launches an elementwise kernel over `rows` rows of `packs` packs, U a
// thread: the 2-D grid, or (persist) the blocks the device keeps resident at
// once, walking the same (row group, tile) items.
template <class P>
void launch_elementwise(void (*kernel)(P), P& p, int64_t rows, int64_t packs, int U, bool persist, int device,
                        cudaStream_t s) {
  const Shape sh = elementwise_shape(rows, packs, U);
  if (!persist) {
    kernel<<<sh.grid, sh.block, 0, s>>>(p);
    return;
  }
  const int threads = int(sh.block.x * sh.block.y);
  const int64_t tiles = sh.grid.x, groups = ceil_div(rows, sh.block.y);
  const int64_t resident = int64_t(sm_count(device)) * blocks_per_sm(reinterpret_cast<const void*>(kernel),
                                                                       threads, device);
  const int64_t grid = std::max<int64_t>(1, std::min(tiles * groups, resident));
  p.walk = Walk{groups, int(tiles), int(grid % tiles), grid / tiles};
  kernel<<<unsigned(grid), sh.block, 0, s>>>(p);
}

// ------------------------------------------------------------------ activations
template <class T, int V, int U, bool St, bool Pe, bool Fa, bool Bwd, Act A>
void act_form(const ActArgs& a, ActParams& p, cudaStream_t s) {
  const auto go = [&](auto kernel) { launch_elementwise(kernel, p, a.rows, p.packs, U, Pe, a.device_id, s); };
  if (!a.gated) {
    if constexpr (A != Act::swiglu_clamped) return go(act_kernel<T, V, U, A, false, false, St, Pe, Fa, Bwd>);
    else throw ValueError("swiglu_clamped is a gated activation");
  }
  if (a.interleaved) return go(act_kernel<T, V, U, A, true, true, St, Pe, Fa, Bwd>);
  go(act_kernel<T, V, U, A, true, false, St, Pe, Fa, Bwd>);
}

template <class T, int V, int U, bool St = false, bool Pe = false, bool Fa = false, bool Bwd = false>
void act_typed(const ActArgs& a, ActParams& p, cudaStream_t s) {
  p.packs = int(ceil_div(a.cols, V));
  switch (a.act) {
    case Act::silu: return act_form<T, V, U, St, Pe, Fa, Bwd, Act::silu>(a, p, s);
    case Act::gelu_erf: return act_form<T, V, U, St, Pe, Fa, Bwd, Act::gelu_erf>(a, p, s);
    case Act::gelu_tanh: return act_form<T, V, U, St, Pe, Fa, Bwd, Act::gelu_tanh>(a, p, s);
    case Act::swiglu_clamped: return act_form<T, V, U, St, Pe, Fa, Bwd, Act::swiglu_clamped>(a, p, s);
  }
  throw ValueError("unknown activation");
}

// The VJPs: the forward's default form only (BRAZE_CUDA_ACT_VARIANT tunes the forward).
constexpr Form kVjpForm = kActVariants[1];

template <class T> void act_dispatch(const ActArgs& a, ActParams& p, cudaStream_t s) {
  constexpr int V = kVec16<T>;
  const bool vjp = a.dy != nullptr;
  const bool strides = a.rows == 1 || (a.x_stride % V == 0 && a.y_stride % V == 0 && (!vjp || a.dy_stride % V == 0));
  const bool halves = !a.gated || a.interleaved || a.cols % V == 0;
  const bool vectors = aligned16(a.x) && aligned16(a.y) && (!vjp || aligned16(a.dy)) && strides && halves;
  if (vjp) {
    if (!vectors) return act_typed<T, 1, kScalarPacks, false, false, false, true>(a, p, s);
    return act_typed<T, V, kVjpForm.packs, kVjpForm.stream, kVjpForm.persist, kVjpForm.fast, true>(a, p, s);
  }
  if (!vectors) return act_typed<T, 1, kScalarPacks>(a, p, s);
#define BRAZE_ACT_VARIANT(k) \
  act_typed<T, V, kActVariants[k].packs, kActVariants[k].stream, kActVariants[k].persist, kActVariants[k].fast>(a, p, s)
  switch (act_variant()) {
    case 0: return BRAZE_ACT_VARIANT(0);
    case 1: return BRAZE_ACT_VARIANT(1);
    case 2: return BRAZE_ACT_VARIANT(2);
    case 3: return BRAZE_ACT_VARIANT(3);
    default: return BRAZE_ACT_VARIANT(4);
  }
#undef BRAZE_ACT_VARIANT
}

// ------------------------------------------------------------------ embedding
template <class T, int V, int U, bool St = false, bool Pe = false>
void embedding_typed(const EmbeddingArgs& a, EmbeddingParams& p, cudaStream_t s) {
  p.packs = int(ceil_div(a.dim, V));
  if (a.id_dtype == DType::i64)
    launch_elementwise(embedding_kernel<T, int64_t, V, U, St, Pe>, p, a.tokens, p.packs, U, Pe, a.device_id, s);
  else
    launch_elementwise(embedding_kernel<T, int32_t, V, U, St, Pe>, p, a.tokens, p.packs, U, Pe, a.device_id, s);
}

template <class T> void embedding_dispatch(const EmbeddingArgs& a, EmbeddingParams& p, cudaStream_t s) {
  constexpr int V = kVec16<T>;
  const bool vec = aligned16(a.table) && aligned16(a.y) && a.table_stride % V == 0 &&
                   (a.tokens == 1 || a.y_stride % V == 0);
  if (!vec) return embedding_typed<T, 1, kScalarPacks>(a, p, s);
#define BRAZE_EMB_VARIANT(k) \
  embedding_typed<T, V, kEmbVariants[k].packs, kEmbVariants[k].stream, kEmbVariants[k].persist>(a, p, s)
  switch (emb_variant()) {
    case 0: return BRAZE_EMB_VARIANT(0);
    case 1: return BRAZE_EMB_VARIANT(1);
    case 2: return BRAZE_EMB_VARIANT(2);
    case 3: return BRAZE_EMB_VARIANT(3);
    default: return BRAZE_EMB_VARIANT(4);
  }
#undef BRAZE_EMB_VARIANT
}

// ------------------------------------------------------------------ hadamard
struct HadamardLaunch {
  unsigned grid, block;
  int smem;
};

template <class T, int E, int V>
void hadamard_launch(const HadamardParams& p, const HadamardLaunch& l, int device, cudaStream_t s) {
  const auto kernel = p.M > 1 ? hadamard_kernel<T, E, V, true> : hadamard_kernel<T, E, V, false>;
  allow_smem(reinterpret_cast<const void*>(kernel), l.smem, device, "hadamard");
  kernel<<<l.grid, l.block, size_t(l.smem), s>>>(p);
}

template <class T, int E>
void hadamard_packed(bool vec, const HadamardParams& p, const HadamardLaunch& l, int device, cudaStream_t s) {
  constexpr int V = kVec16<T>;
  if constexpr (E % V == 0) {
    if (vec) return hadamard_launch<T, E, V>(p, l, device, s);
  }
  hadamard_launch<T, E, 1>(p, l, device, s);
}

template <class T>
void hadamard_typed(int E, bool vec, const HadamardParams& p, const HadamardLaunch& l, int device,
                    cudaStream_t s) {
  switch (E) {
    case 1: return hadamard_packed<T, 1>(vec, p, l, device, s);
    case 2: return hadamard_packed<T, 2>(vec, p, l, device, s);
    case 4: return hadamard_packed<T, 4>(vec, p, l, device, s);
    case 8: return hadamard_packed<T, 8>(vec, p, l, device, s);
    case 16: return hadamard_packed<T, 16>(vec, p, l, device, s);
    case 32: return hadamard_packed<T, 32>(vec, p, l, device, s);
    case 64: return hadamard_packed<T, 64>(vec, p, l, device, s);
    default: throw std::logic_error("hadamard: no kernel for " + std::to_string(E) + " elements a thread");
  }
}

int hadamard_elems() {
  static const int e = [] {
    const int v = env_int("BRAZE_CUDA_HAD_ELEMS", 8, 32, 16);
    if (v != 8 && v != 16 && v != 32) throw ValueError("BRAZE_CUDA_HAD_ELEMS must be 8, 16 or 32, got " + std::to_string(v));
    return v;
  }();
  return e;
}

// BRAZE_CUDA_HAD_SPLIT: 1 (default) rows of 64..4096 (m = 1) on hadamard_split_kernel, 2 the same with
// each block's next rows prefetched (a grid of resident blocks), 0 on the shuffle kernel.
int hadamard_split() {
  static const int v = env_int("BRAZE_CUDA_HAD_SPLIT", 0, 2, 1);
  return v;
}

// Resident blocks a SM of `kernel` with `threads` threads and `smem` bytes of dynamic shared memory.
int resident_blocks(const void* kernel, int threads, int smem, int device) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int, int>, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  int& n = cache[std::make_tuple(kernel, threads, smem, device)];
  if (n == 0) {
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, size_t(smem)),
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    n = n > 0 ? n : 1;
  }
  return n;
}

template <class T, int E, int LG>
void hadamard_split_launch(HadamardParams p, HadamardLaunch l, bool prefetch, int device, cudaStream_t s) {
  if (prefetch) {
    const auto kernel = hadamard_split_kernel<T, E, LG, true>;
    l.smem += int(int64_t(p.R) * (E << LG) * int64_t(sizeof(T)));  // the raw staging
    allow_smem(reinterpret_cast<const void*>(kernel), l.smem, device, "hadamard");
    const int64_t resident =
        int64_t(sm_count(device)) * resident_blocks(reinterpret_cast<const void*>(kernel), int(l.block), l.smem, device);
    l.grid = unsigned(std::min<int64_t>(p.groups, resident));
    kernel<<<l.grid, l.block, size_t(l.smem), s>>>(p);
  } else {
    const auto kernel = hadamard_split_kernel<T, E, LG, false>;
    allow_smem(reinterpret_cast<const void*>(kernel), l.smem, device, "hadamard");
    kernel<<<l.grid, l.block, size_t(l.smem), s>>>(p);
  }
}

// Rows of 2^logP, 6 <= logP <= 12: E = 2^ceil(logP / 2) elements a thread, 2^(logP - log2 E) threads a row.
template <class T>
void hadamard_split_typed(int logP, const HadamardParams& p, const HadamardLaunch& l, bool prefetch, int device,
                          cudaStream_t s) {
  switch (logP) {
    case 6: return hadamard_split_launch<T, 8, 3>(p, l, prefetch, device, s);
    case 7: return hadamard_split_launch<T, 16, 3>(p, l, prefetch, device, s);
    case 8: return hadamard_split_launch<T, 16, 4>(p, l, prefetch, device, s);
    case 9: return hadamard_split_launch<T, 32, 4>(p, l, prefetch, device, s);
    case 10: return hadamard_split_launch<T, 32, 5>(p, l, prefetch, device, s);
    case 11: return hadamard_split_launch<T, 64, 5>(p, l, prefetch, device, s);
    case 12: return hadamard_split_launch<T, 64, 6>(p, l, prefetch, device, s);
    default: throw std::logic_error("hadamard: no split kernel for rows of 2^" + std::to_string(logP));
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
  ActParams p{a.x, a.y, a.x_stride, a.y_stride, a.dy, a.dy_stride, a.rows, int(a.cols), 0, a.alpha, a.limit, Walk{}};
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
                    int(a.dim), 0, Walk{}};
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  by_dtype(a.dtype, [&](auto t) { embedding_dispatch<decltype(t)>(a, p, s); });
  check_launch("embedding");
}

// Shape of a Hadamard launch: E elements a thread (the tuning base, fewer for
// a short subrow, more when a row would need over kHadThreads threads), G =
// P / E threads a subrow, R rows a block for short rows (about 128 threads),
// the block padded to whole warps, shared memory for R rows of f32 when the
// row is staged (warp bits, or M > 1).
void hadamard_run(const HadamardArgs& a, uintptr_t stream) {
  if (a.rows == 0 || a.n == 0) return;
  const int M = a.m, logP = a.log2;
  if (!(M == 1 || M == 12 || M == 20 || M == 28) || logP < 0 || logP > 15 || (int64_t(M) << logP) != a.n ||
      a.n > 32768)
    throw ValueError("hadamard: n must be m * 2**k with m in {1, 12, 20, 28}, at most 32768, got " +
                     std::to_string(a.n));
  const int P = 1 << logP;
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (M == 1 && logP >= 6 && logP <= 12 && hadamard_split() > 0) {
    // hadamard_split_kernel: E = 2^ceil(logP / 2) elements a thread, G = P / E threads a row,
    // R rows a block of at most kHadSplitThreads; rows whose packs are not 16-byte aligned stay below
    const int E = 1 << ((logP + 1) / 2), logG = logP - (logP + 1) / 2, G = 1 << logG;
    bool done = false;
    by_dtype(a.dtype, [&](auto t) {
      using T = decltype(t);
      constexpr int V = kVec16<T>;
      if (!(aligned16(a.x) && aligned16(a.y) && (a.rows == 1 || (a.x_stride % V == 0 && a.y_stride % V == 0))))
        return;
      HadamardParams p{};
      p.x = a.x, p.y = a.y, p.x_stride = a.x_stride, p.y_stride = a.y_stride, p.rows = a.rows;
      p.R = int(std::min<int64_t>(kHadSplitThreads / G, a.rows));
      p.groups = ceil_div(a.rows, p.R);
      p.scale = a.scale, p.M = 1, p.logP = logP, p.logG = logG, p.threads = p.R * G;
      HadamardLaunch l;
      l.grid = unsigned(std::min<int64_t>(p.groups, INT_MAX));
      l.block = unsigned(p.threads);
      l.smem = int(int64_t(p.R) * (P + E) * int64_t(sizeof(float)));
      hadamard_split_typed<T>(logP, p, l, hadamard_split() == 2, a.device_id, s);
      done = true;
    });
    if (done) return check_launch("hadamard");
  }
  int E = std::min(P, hadamard_elems());
  while (int64_t(M) * (P / E) > kHadThreads) E *= 2;  // E <= 64: M * P <= 32768 = 512 * 64
  int logG = 0;
  while ((E << logG) < P) ++logG;
  const int per_row = M << logG;
  const int R = per_row < 128 ? int(std::min<int64_t>(128 / per_row, a.rows)) : 1;
  const bool staged = M > 1 || logG > 5;

  HadamardParams p{};
  p.x = a.x;
  p.y = a.y;
  p.x_stride = a.x_stride;
  p.y_stride = a.y_stride;
  p.rows = a.rows;
  p.groups = ceil_div(a.rows, R);
  p.scale = a.scale;
  p.M = M;
  p.logP = logP;
  p.logG = logG;
  p.R = R;
  p.threads = R * per_row;
  HadamardLaunch l;
  l.grid = unsigned(std::min<int64_t>(p.groups, INT_MAX));
  l.block = unsigned(ceil_div(p.threads, 32) * 32);
  l.smem = staged ? int(int64_t(R) * a.n * int64_t(sizeof(float))) : 0;
  if (l.block > unsigned(kHadThreads))
    throw std::logic_error("hadamard: a block of " + std::to_string(l.block) + " threads");

  by_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int V = kVec16<T>;
    const bool vec = E % V == 0 && aligned16(a.x) && aligned16(a.y) &&
                     (a.rows == 1 || (a.x_stride % V == 0 && a.y_stride % V == 0));
    hadamard_typed<T>(E, vec, p, l, a.device_id, s);
  });
  check_launch("hadamard");
}

}  // namespace braze::cuda
