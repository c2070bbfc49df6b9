// Host launchers of the norm family: the configuration is chosen from the row
// length (see docs/cuda.md), the kernels run on the caller's stream and device,
// and nothing here synchronizes; forward ops allocate nothing.
#include "cuda/norm.h"

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <string>
#include <utility>

#include "cuda/norm/kernel.cuh"
#include "cuda/runtime.cuh"

namespace braze::cuda {
namespace {

using braze::norm::NormArgs;
using braze::norm::NormVjpArgs;
using namespace braze::cuda::norm;

constexpr int kK = 4;              // packs per thread and input held in registers
constexpr int kWarpBlock = 128;    // warp-per-row blocks: 4 rows each
constexpr int kMaxCluster = 8;     // CTAs of a cluster (the portable limit)

enum class Form { warp, block, cluster, loop };

struct Plan {
  Form form;
  int threads;
  int64_t blocks;
  int64_t groups;  // row groups in the grid (= VJP partials)
  int cluster = 1; // CTAs per row (cluster form)
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Warp per row while a warp's registers hold the row (<= 32*K packs: 1024 bf16,
// 512 f32 with 16-byte packs), a block per row up to max_threads*K packs
// (16384 bf16 / 8192 f32 forward with 512 threads; 8192 / 4096 in the VJPs,
// whose gradient sums take registers too, with 256); beyond, with `split`
// (forward ops on compute capability 9+), the row is split over a cluster of
// up to kMaxCluster such blocks (131072 bf16 / 65536 f32), so it is still read
// once; else, and past that, the looped block. `cap_groups` bounds the number
// of row groups (the VJPs' partials).
Plan plan(int64_t rows, int64_t cols, int V, int max_threads, int loop_threads, int64_t cap_groups,
          bool split = false) {
  const int64_t packs = ceil_div(cols, V);
  const int64_t per_block = int64_t(max_threads) * kK;
  Plan p;
  int rows_per_block = 1;
  if (packs <= 32 * kK) {
    p.form = Form::warp;
    p.threads = kWarpBlock;
    rows_per_block = kWarpBlock / 32;
  } else if (packs <= per_block) {
    p.form = Form::block;
    p.threads = int(ceil_div(ceil_div(packs, kK), 32) * 32);
  } else if (split && packs <= per_block * kMaxCluster) {
    p.form = Form::cluster;
    p.cluster = int(ceil_div(packs, per_block));
    p.threads = int(ceil_div(ceil_div(packs, int64_t(kK) * p.cluster), 32) * 32);
  } else {
    p.form = Form::loop;
    p.threads = loop_threads;
  }
  p.blocks = ceil_div(rows, rows_per_block);
  p.blocks = std::min<int64_t>(p.blocks, std::max<int64_t>(1, cap_groups / rows_per_block));
  p.blocks = std::min<int64_t>(p.blocks, INT_MAX / p.cluster);
  p.groups = p.blocks * rows_per_block;
  p.blocks *= p.cluster;
  return p;
}


template <template <class> class OpT> constexpr bool kIsVjp = false;
template <> constexpr bool kIsVjp<RmsNormVjp> = true;
template <> constexpr bool kIsVjp<LayerNormVjp> = true;

template <class C, template <class> class OpT, class P> void launch_cluster(const Plan& pl, const P& p, cudaStream_t s) {
  launch_clustered(norm_kernel<C, OpT>, unsigned(pl.blocks), unsigned(pl.threads), unsigned(pl.cluster), s,
                   "norm kernel launch (cluster)", p);
}

// Full: rows of whole packs (always so for V == 1), compiled without the
// partial-pack paths.
template <template <class> class OpT, class T, int V, bool Full, class P>
void launch_cfg(const Plan& pl, const P& p, cudaStream_t s) {
  const dim3 grid(unsigned(pl.blocks)), block(unsigned(pl.threads));
  switch (pl.form) {
    case Form::warp: norm_kernel<Cfg<T, V, kK, true, false, Full>, OpT><<<grid, block, 0, s>>>(p); break;
    case Form::block: norm_kernel<Cfg<T, V, kK, false, false, Full>, OpT><<<grid, block, 0, s>>>(p); break;
    case Form::cluster:
      if constexpr (!kIsVjp<OpT>) launch_cluster<Cfg<T, V, kK, false, false, Full, true>, OpT>(pl, p, s);
      break;
    case Form::loop: norm_kernel<Cfg<T, V, kK, false, true, Full>, OpT><<<grid, block, 0, s>>>(p); break;
  }
}

// The kernel launch_cfg runs for a plan's form (the VJPs': no cluster form).
template <template <class> class OpT, class T, int V, bool Full> const void* vjp_kernel(Form f) {
  switch (f) {
    case Form::warp: return reinterpret_cast<const void*>(norm_kernel<Cfg<T, V, kK, true, false, Full>, OpT>);
    case Form::loop: return reinterpret_cast<const void*>(norm_kernel<Cfg<T, V, kK, false, true, Full>, OpT>);
    default: return reinterpret_cast<const void*>(norm_kernel<Cfg<T, V, kK, false, false, Full>, OpT>);
  }
}

// Row groups the device holds at once with this plan's kernel (registers and
// threads both counted, by the occupancy calculator).
template <template <class> class OpT, class T, int V>
int64_t resident_groups(const Plan& pl, int64_t cols, int device) {
  const bool full = V == 1 || cols % V == 0;
  const void* k = full ? vjp_kernel<OpT, T, V, true>(pl.form) : vjp_kernel<OpT, T, V, (V == 1)>(pl.form);
  return int64_t(sm_count(device)) * blocks_per_sm(k, pl.threads, device) * (pl.form == Form::warp ? kWarpBlock / 32 : 1);
}

// The VJPs' grid: one wave of resident groups, each walking its rows, so the
// partials (written, then read by reduce_partials) are the fewest that keep
// the device full; and they take at most 256 MiB. `vec`: 16-byte packs.
template <template <class> class OpT, class T>
Plan vjp_plan(int64_t rows, int64_t cols, bool vec, int nparts, int device) {
  constexpr int Vv = kVec16<T>;
  const int V = vec ? Vv : 1;
  const int reg_threads = OpT<Cfg<T, 1, kK, false, false>>::kMaxThreads;
  const int loop_threads = OpT<Cfg<T, 1, kK, false, true>>::kMaxThreads;
  const Plan pl = plan(rows, cols, V, reg_threads, loop_threads, INT64_MAX);
  if (!nparts) return pl;
  const int64_t resident = vec ? resident_groups<OpT, T, Vv>(pl, cols, device) : resident_groups<OpT, T, 1>(pl, cols, device);
  const int64_t by_memory = std::max<int64_t>(1, (int64_t(256) << 20) / std::max<int64_t>(1, cols * 4 * nparts));
  return plan(rows, cols, V, reg_threads, loop_threads, std::min(resident, by_memory));
}

// Bytes of the partials of a VJP plan.
int64_t partial_bytes(const Plan& pl, int64_t rows, int64_t cols, int nparts) {
  return rows > 0 ? pl.groups * cols * int64_t(sizeof(float)) * nparts : 0;
}

template <template <class> class OpT, class T, int V, class P>
void launch_form(const Plan& pl, const P& p, cudaStream_t s) {
  if (V == 1 || p.cols % V == 0) return launch_cfg<OpT, T, V, true>(pl, p, s);
  if constexpr (V > 1) launch_cfg<OpT, T, V, false>(pl, p, s);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// 16-byte packs need every pointer a kernel offsets by rows and groups to stay
// 16-byte aligned; anything else takes the scalar path.
bool vector_ok(std::initializer_list<const void*> vecs, std::initializer_list<std::pair<const void*, int64_t>> rows,
               const RowShape& p, int64_t real_rows, int size) {
  for (const void* ptr : vecs)
    if (ptr && !aligned16(ptr)) return false;
  for (auto [ptr, stride] : rows) {
    if (ptr && !aligned16(ptr)) return false;
    if (ptr && real_rows > 1 && (stride * size) % 16 != 0) return false;
  }
  return p.groups == 1 || (p.cols * size) % 16 == 0;
}

bool vector_ok(const ForwardParams& p, int64_t real_rows, int size) {
  return vector_ok({p.w, p.b}, {{p.x, p.x_stride}, {p.residual, p.residual_stride}, {p.gate, p.gate_stride},
                                {p.out, p.out_stride}, {p.residual_out, p.residual_out_stride}},
                   p, real_rows, size);
}

// bias: the VJP kernels never read it, but its alignment has always been part
// of the test, and the path taken decides dweight's summation order.
bool vector_ok(const VjpParams& p, const void* bias, int64_t real_rows, int size) {
  return vector_ok({p.w, bias}, {{p.x, p.x_stride}, {p.dy, p.dy_stride}, {p.dx, p.dx_stride}}, p, real_rows, size);
}

template <class T> void reduce_launch(const float* part, int64_t parts, int64_t cols, void* out, cudaStream_t s) {
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div(cols, threads), 65535);
  reduce_partials<T><<<unsigned(blocks), threads, 0, s>>>(part, parts, cols, static_cast<T*>(out));
}

template <template <class> class OpT, class T>
void run_forward(const NormArgs& a, const ForwardParams& p, cudaStream_t s) {
  constexpr int Vv = kVec16<T>;
  const bool vec = vector_ok(p, a.rows, int(sizeof(T)));
  const int V = vec ? Vv : 1;
  const int reg_threads = OpT<Cfg<T, 1, kK, false, false>>::kMaxThreads;
  const int loop_threads = OpT<Cfg<T, 1, kK, false, true>>::kMaxThreads;
  if (p.rows == 0) return;
  // One row group per row (the kernel takes exactly one each).
  const Plan pl = plan(p.rows, p.cols, V, reg_threads, loop_threads, INT64_MAX, clusters_usable(a.device_id));
  if (pl.groups < p.rows) throw ValueError("x: too many rows for one CUDA launch (" + std::to_string(p.rows) + ")");
  vec ? launch_form<OpT, T, Vv>(pl, p, s) : launch_form<OpT, T, 1>(pl, p, s);
  check_launch("norm kernel launch");
}

template <template <class> class OpT, class T>
void run_vjp(const NormVjpArgs& a, VjpParams p, cudaStream_t s) {
  constexpr int Vv = kVec16<T>;
  const bool vec = vector_ok(p, a.bias, a.rows, int(sizeof(T)));
  const int nparts = (a.dweight ? 1 : 0) + (a.dbias ? 1 : 0);
  const Plan pl = vjp_plan<OpT, T>(p.rows, p.cols, vec, nparts, a.device_id);
  const int64_t need = partial_bytes(pl, p.rows, p.cols, nparts);
  if (a.workspace_bytes < need)
    throw ValueError("workspace: this call needs " + std::to_string(need) + " bytes, got " +
                     std::to_string(a.workspace_bytes) + " (size it with norm_vjp_workspace_bytes)");
  if (need && reinterpret_cast<uintptr_t>(a.workspace) % 16)
    throw ValueError("workspace must be 16-byte aligned");
  if (need) {
    float* base = static_cast<float*>(a.workspace);
    p.part_w = a.dweight ? base : nullptr;
    p.part_b = a.dbias ? base + (a.dweight ? pl.groups * p.cols : 0) : nullptr;
  }
  if (p.rows > 0) {
    vec ? launch_form<OpT, T, Vv>(pl, p, s) : launch_form<OpT, T, 1>(pl, p, s);
    check_launch("norm VJP kernel launch");
  }
  const int64_t parts = p.rows > 0 ? pl.groups : 0;  // no rows: the gradients are zero
  // Keyed on the outputs: with no rows the workspace may be empty (null) and
  // the gradients are written as zeros all the same.
  if (a.dweight) reduce_launch<T>(p.part_w, parts, p.cols, a.dweight, s);
  if (a.dbias) reduce_launch<T>(p.part_b, parts, p.cols, a.dbias, s);
  if (nparts) check_launch("norm VJP reduction launch");
}

// f(type tag) for the dtype of the arrays.
template <class F> void with_dtype(DType t, F f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    default: throw TypeError(std::string("unsupported dtype ") + dtype_name(t));
  }
}

template <template <class> class OpT> void forward_op(const NormArgs& a, const ForwardParams& p, cudaStream_t s) {
  with_dtype(a.dtype, [&](auto tag) { run_forward<OpT, decltype(tag)>(a, p, s); });
}

template <template <class> class OpT> void vjp_op(const NormVjpArgs& a, const VjpParams& p, cudaStream_t s) {
  with_dtype(a.dtype, [&](auto tag) { run_vjp<OpT, decltype(tag)>(a, p, s); });
}

template <template <class> class OpT>
int64_t workspace_bytes_of(DType dtype, int64_t rows, int64_t cols, int nparts, int device) {
  const auto most = [&](auto tag) {
    using T = decltype(tag);
    return std::max(partial_bytes(vjp_plan<OpT, T>(rows, cols, true, nparts, device), rows, cols, nparts),
                    partial_bytes(vjp_plan<OpT, T>(rows, cols, false, nparts, device), rows, cols, nparts));
  };
  switch (dtype) {
    case DType::f32: return most(float{});
    case DType::f16: return most(__half{});
    case DType::bf16: return most(__nv_bfloat16{});
    default: throw TypeError(std::string("dtype: unsupported dtype ") + dtype_name(dtype));
  }
}

}  // namespace

int64_t norm_vjp_workspace_bytes(braze::norm::Op op, DType dtype, int64_t rows, int64_t cols, int grads,
                                 int device) {
  if (rows < 0 || cols < 0) throw ValueError("rows and cols must not be negative");
  if (grads < 0 || grads > 2) throw ValueError("grads must be 0, 1 or 2");
  if (rows == 0 || cols == 0 || grads == 0) return 0;
  DeviceGuard guard(device);
  switch (op) {
    case braze::norm::Op::rms_norm_vjp:
      if (grads > 1) throw ValueError("grads: rms_norm_vjp has one parameter gradient");
      return workspace_bytes_of<RmsNormVjp>(dtype, rows, cols, grads, device);
    case braze::norm::Op::layer_norm_vjp: return workspace_bytes_of<LayerNormVjp>(dtype, rows, cols, grads, device);
    default: throw ValueError("op: only rms_norm_vjp and layer_norm_vjp take a workspace");
  }
}

void norm_run(const NormArgs& a, uintptr_t stream) {
  if (a.cols == 0) return;  // nothing to read or write
  ForwardParams p{};
  p.rows = a.rows;
  p.cols = a.cols;
  p.groups = 1;
  p.x = a.x;
  p.x_stride = a.x_stride;
  p.residual = a.residual;
  p.residual_stride = a.residual_stride;
  p.gate = a.gate;
  p.gate_stride = a.gate_stride;
  p.w = a.weight;
  p.b = a.bias;
  p.out = a.out;
  p.out_stride = a.out_stride;
  p.residual_out = a.residual_out;
  p.residual_out_stride = a.residual_out_stride;
  p.eps = a.eps;
  p.w_offset = a.weight_offset;
  if (a.group != a.cols) {
    p.groups = a.cols / a.group;
    p.cols = a.group;
    p.rows = a.rows * p.groups;
  }
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  switch (a.op) {
    case braze::norm::Op::rms_norm: return forward_op<RmsNorm>(a, p, s);
    case braze::norm::Op::layer_norm: return forward_op<LayerNorm>(a, p, s);
    case braze::norm::Op::add_rms_norm: return forward_op<AddRmsNorm>(a, p, s);
    case braze::norm::Op::rms_norm_gated: return forward_op<RmsNormGated>(a, p, s);
    default: throw ValueError(std::string(braze::norm::op_name(a.op)) + " is not a forward norm");
  }
}

void norm_vjp_run(const NormVjpArgs& a, uintptr_t stream) {
  if (a.cols == 0) return;  // nothing to read or write (dweight / dbias have no elements)
  VjpParams p{};
  p.rows = a.rows;
  p.cols = a.cols;
  p.groups = 1;
  p.x = a.x;
  p.x_stride = a.x_stride;
  p.dy = a.dy;
  p.dy_stride = a.dy_stride;
  p.w = a.weight;
  p.dx = a.dx;
  p.dx_stride = a.dx_stride;
  p.eps = a.eps;
  p.w_offset = a.weight_offset;
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  switch (a.op) {
    case braze::norm::Op::rms_norm_vjp: return vjp_op<RmsNormVjp>(a, p, s);
    case braze::norm::Op::layer_norm_vjp: return vjp_op<LayerNormVjp>(a, p, s);
    default: throw ValueError(std::string(braze::norm::op_name(a.op)) + " is not a norm VJP");
  }
}

}  // namespace braze::cuda
