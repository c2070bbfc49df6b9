// Host launchers of the norm family: the configuration is chosen from the row
// length (see docs/cuda.md), the kernels run on the caller's stream and device,
// and nothing here synchronizes; forward ops allocate nothing.
#include "cuda/norm.h"

#include <algorithm>
#include <climits>

#include "cuda/norm/kernel.cuh"
#include "cuda/runtime.cuh"

namespace braze::cuda {
namespace {

using braze::norm::Args;
using namespace braze::cuda::norm;

constexpr int kK = 4;              // packs per thread and input held in registers
constexpr int kWarpBlock = 128;    // warp-per-row blocks: 4 rows each

enum class Form { warp, block, loop };

struct Plan {
  Form form;
  int threads;
  int64_t blocks;
  int64_t groups;  // row groups in the grid (= VJP partials)
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Warp per row while a warp's registers hold the row (<= 32*K packs: 1024 bf16,
// 512 f32 with 16-byte packs), a block per row up to max_threads*K packs
// (16384 bf16 / 8192 f32 forward with 512 threads; 8192 / 4096 in the VJPs,
// whose gradient sums take registers too, with 256), the looped block beyond.
// `cap_groups` bounds the number of row groups (the VJPs' partials).
Plan plan(int64_t rows, int64_t cols, int V, int max_threads, int loop_threads, int64_t cap_groups) {
  const int64_t packs = ceil_div(cols, V);
  Plan p;
  int rows_per_block = 1;
  if (packs <= 32 * kK) {
    p.form = Form::warp;
    p.threads = kWarpBlock;
    rows_per_block = kWarpBlock / 32;
  } else if (packs <= int64_t(max_threads) * kK) {
    p.form = Form::block;
    p.threads = int(ceil_div(ceil_div(packs, kK), 32) * 32);
  } else {
    p.form = Form::loop;
    p.threads = loop_threads;
  }
  p.blocks = ceil_div(rows, rows_per_block);
  p.blocks = std::min<int64_t>(p.blocks, std::max<int64_t>(1, cap_groups / rows_per_block));
  p.blocks = std::min<int64_t>(p.blocks, INT_MAX);
  p.groups = p.blocks * rows_per_block;
  return p;
}

// Row groups the device can hold at once (by thread count; registers may allow fewer).
int64_t resident_groups(const Plan& pl, int device) {
  return int64_t(sm_count(device)) * std::max(1, 2048 / pl.threads) * (pl.form == Form::warp ? kWarpBlock / 32 : 1);
}

template <template <class> class OpT, class T, int V>
void launch_form(const Plan& pl, const Params& p, cudaStream_t s) {
  const dim3 grid(unsigned(pl.blocks)), block(unsigned(pl.threads));
  switch (pl.form) {
    case Form::warp: norm_kernel<Cfg<T, V, kK, true, false>, OpT><<<grid, block, 0, s>>>(p); break;
    case Form::block: norm_kernel<Cfg<T, V, kK, false, false>, OpT><<<grid, block, 0, s>>>(p); break;
    case Form::loop: norm_kernel<Cfg<T, V, kK, false, true>, OpT><<<grid, block, 0, s>>>(p); break;
  }
}

template <template <class> class OpT> constexpr bool kIsVjp = false;
template <> constexpr bool kIsVjp<RmsNormVjp> = true;
template <> constexpr bool kIsVjp<LayerNormVjp> = true;

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// 16-byte packs need every pointer a kernel offsets by rows and groups to stay
// 16-byte aligned; anything else takes the scalar path.
bool vector_ok(const Params& p, int64_t real_rows, int size) {
  for (const void* ptr : {p.x, p.r, p.w, p.b, static_cast<const void*>(p.y), static_cast<const void*>(p.h)})
    if (ptr && !aligned16(ptr)) return false;
  if (real_rows > 1)
    for (auto [ptr, stride] : {std::pair<const void*, int64_t>{p.x, p.x_stride}, {p.r, p.r_stride},
                               {p.y, p.y_stride}, {p.h, p.h_stride}})
      if (ptr && (stride * size) % 16 != 0) return false;
  return p.groups == 1 || (p.cols * size) % 16 == 0;
}

template <class T> void reduce_launch(const float* part, int64_t parts, int64_t cols, void* out, cudaStream_t s) {
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div(cols, threads), 65535);
  reduce_partials<T><<<unsigned(blocks), threads, 0, s>>>(part, parts, cols, static_cast<T*>(out));
}

template <template <class> class OpT, class T>
void run_typed(const Args& a, Params p, int64_t real_rows, cudaStream_t s) {
  constexpr int Vv = kVec16<T>;
  const bool vec = vector_ok(p, real_rows, int(sizeof(T)));
  const int V = vec ? Vv : 1;
  const int reg_threads = OpT<Cfg<T, 1, kK, false, false>>::kMaxThreads;
  const int loop_threads = OpT<Cfg<T, 1, kK, false, true>>::kMaxThreads;
  if constexpr (!kIsVjp<OpT>) {
    if (p.rows == 0) return;
    // One row group per row. A grid capped at the groups resident by thread
    // count (grid-stride) was not faster in one H200 run, measured together
    // with another change; registers allow fewer resident blocks than threads
    // do, so such long-lived blocks run in uneven waves.
    const Plan pl = plan(p.rows, p.cols, V, reg_threads, loop_threads, INT64_MAX);
    vec ? launch_form<OpT, T, Vv>(pl, p, s) : launch_form<OpT, T, 1>(pl, p, s);
    check_launch("norm kernel launch");
  } else {
    const int nparts = (a.dw ? 1 : 0) + (a.db ? 1 : 0);
    // Bound the partials: about two waves of resident groups, and <= 256 MiB.
    Plan pl = plan(p.rows, p.cols, V, reg_threads, loop_threads, INT64_MAX);
    const int64_t resident = resident_groups(pl, a.device_id);
    const int64_t by_memory = std::max<int64_t>(1, (int64_t(256) << 20) / std::max<int64_t>(1, p.cols * 4 * nparts));
    if (nparts) pl = plan(p.rows, p.cols, V, reg_threads, loop_threads, std::min(resident, by_memory));
    Scratch ws;
    if (nparts) {
      const size_t part_bytes = size_t(pl.groups) * size_t(p.cols) * sizeof(float);
      ws = workspace(a.device_id, s, part_bytes * nparts);
      float* base = static_cast<float*>(ws.ptr);
      p.part_w = a.dw ? base : nullptr;
      p.part_b = a.db ? base + (a.dw ? pl.groups * p.cols : 0) : nullptr;
    }
    if (p.rows > 0) {
      vec ? launch_form<OpT, T, Vv>(pl, p, s) : launch_form<OpT, T, 1>(pl, p, s);
      check_launch("norm VJP kernel launch");
    }
    const int64_t parts = p.rows > 0 ? pl.groups : 0;  // no rows: the gradients are zero
    if (p.part_w) reduce_launch<T>(p.part_w, parts, p.cols, a.dw, s);
    if (p.part_b) reduce_launch<T>(p.part_b, parts, p.cols, a.db, s);
    if (nparts) check_launch("norm VJP reduction launch");
    release(ws, s);
  }
}

template <template <class> class OpT> void run_op(const Args& a, const Params& p, int64_t real_rows, cudaStream_t s) {
  switch (a.dtype) {
    case DType::f32: return run_typed<OpT, float>(a, p, real_rows, s);
    case DType::f16: return run_typed<OpT, __half>(a, p, real_rows, s);
    case DType::bf16: return run_typed<OpT, __nv_bfloat16>(a, p, real_rows, s);
    default: throw TypeError(std::string("unsupported dtype ") + dtype_name(a.dtype));
  }
}

}  // namespace

void norm_run(const Args& a, uintptr_t stream) {
  if (a.cols == 0) return;  // nothing to read or write (dweight / dbias have no elements)
  Params p{};
  p.rows = a.rows;
  p.cols = a.cols;
  p.groups = 1;
  p.x = a.x;
  p.x_stride = a.x_stride;
  p.r = a.r;
  p.r_stride = a.r_stride;
  p.w = a.w;
  p.b = a.b;
  p.y = a.y;
  p.y_stride = a.y_stride;
  p.h = a.h;
  p.h_stride = a.h_stride;
  p.eps = a.eps;
  p.w_offset = a.w_offset;
  if (a.op == braze::norm::Op::rms_norm_gated && a.group != a.cols) {
    p.groups = a.cols / a.group;
    p.cols = a.group;
    p.rows = a.rows * p.groups;
  }
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  switch (a.op) {
    case braze::norm::Op::rms_norm: return run_op<RmsNorm>(a, p, a.rows, s);
    case braze::norm::Op::layer_norm: return run_op<LayerNorm>(a, p, a.rows, s);
    case braze::norm::Op::add_rms_norm: return run_op<AddRmsNorm>(a, p, a.rows, s);
    case braze::norm::Op::rms_norm_gated: return run_op<RmsNormGated>(a, p, a.rows, s);
    case braze::norm::Op::rms_norm_vjp: return run_op<RmsNormVjp>(a, p, a.rows, s);
    case braze::norm::Op::layer_norm_vjp: return run_op<LayerNormVjp>(a, p, a.rows, s);
  }
}

}  // namespace braze::cuda
