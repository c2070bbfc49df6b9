// Host launcher of the rope family: q and k in one launch. The grid is
// (tokens * lanes threads, 256 a block) x (head groups): the heads per group
// grow with the work, from 1 (decode: one head per thread, lowest latency) to
// kMaxGroupHeads (prefill: cos / sin computed once per 8 heads), aiming at
// kThreadsPerSm threads per multiprocessor (~2.5 waves of 768 resident).
// Nothing here allocates or synchronizes.
#include "cuda/rope.h"

#include <algorithm>
#include <climits>

#include "cuda/rope/rope.cuh"
#include "cuda/runtime.cuh"

namespace braze::cuda {
namespace {

using braze::rope::Args;
using namespace braze::cuda::rope;

constexpr int kThreads = 256;
constexpr int64_t kMaxGroupHeads = 8;
constexpr int64_t kThreadsPerSm = 2048;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// 16-byte packs need every head's start and the offsets rot/2 (rotate-half) or
// rot (pass-through) to stay 16-byte aligned.
bool vector_ok(const Params& p, const Args& a, int V) {
  if (a.rot % V != 0 || (!a.interleaved && (a.rot / 2) % V != 0)) return false;
  for (int part = 0; part < 2; ++part) {
    if (p.heads[part] == 0) continue;
    if (!aligned16(p.x[part]) || !aligned16(p.y[part])) return false;
    for (int64_t st : {p.x_tok[part], p.x_head[part], p.y_tok[part], p.y_head[part]})
      if (st % V != 0) return false;
  }
  return true;
}

template <class T, int V, bool Vec, bool Il>
void launch(const Params& p, dim3 grid, int threads, cudaStream_t s) {
  rope_kernel<T, V, Vec, Il><<<grid, dim3(unsigned(threads)), 0, s>>>(p);
}

template <class T> void run_typed(const Args& a, Params& p, cudaStream_t s) {
  const bool vec = vector_ok(p, a, kVec16<T>);
  // element path: one element of each half, or one interleaved pair, per lane
  const int V = vec ? kVec16<T> : a.interleaved ? 2 : 1;
  const int64_t rot_lanes = (a.interleaved ? a.rot : a.rot / 2) / V;  // exact, see vector_ok
  const int64_t lanes = rot_lanes + ceil_div(a.dim - a.rot, V);
  const int64_t heads = a.q.heads + a.k.heads;
  if (a.tokens * lanes > INT_MAX - kThreads || heads > INT_MAX || a.dim > INT_MAX)
    throw ValueError("too many tokens or heads for one CUDA rope launch");
  p.rot_lanes = int(rot_lanes);
  p.lanes = int(lanes);

  // Heads per group: enough threads to fill the GPU, then more heads per thread
  // (fewer sincosf per byte). Past one batch, whole batches: the kernel loads
  // a batch's worth of heads whether or not the group has that many.
  const int64_t batch = a.interleaved ? kBatch<true> : kBatch<false>;
  const int64_t wanted = int64_t(sm_count(a.device_id)) * kThreadsPerSm;
  int64_t gh = std::clamp<int64_t>(a.tokens * lanes * heads / wanted, 1, kMaxGroupHeads);
  if (gh > batch) gh -= gh % batch;
  gh = std::max(gh, ceil_div(heads, 32767));  // gridDim.y <= 65535
  p.group_heads = int(gh);
  p.q_groups = int(ceil_div(a.q.heads, gh));
  const int threads = int(std::min<int64_t>(kThreads, ceil_div(a.tokens * lanes, 32) * 32));
  const dim3 grid(unsigned(ceil_div(a.tokens * lanes, threads)), unsigned(p.q_groups + ceil_div(a.k.heads, gh)));

  if (!a.inv_freq && a.rot / 2 <= kFreqTable)
    for (int64_t i = 0; i < a.rot / 2; ++i) p.freq_table[i] = braze::rope::default_inv_freq(a.base, i, a.rot);

  constexpr int W = kVec16<T>;
  if (a.interleaved) {
    if (vec) launch<T, W, true, true>(p, grid, threads, s);
    else launch<T, 2, false, true>(p, grid, threads, s);
  } else {
    if (vec) launch<T, W, true, false>(p, grid, threads, s);
    else launch<T, 1, false, false>(p, grid, threads, s);
  }
  check_launch("rope");
}

}  // namespace

void rope_run(const Args& a, uintptr_t stream) {
  if (a.tokens == 0 || a.dim == 0 || a.q.heads + a.k.heads == 0) return;
  Params p{};
  p.pos = a.pos;
  p.pos_stride = a.pos_stride;
  p.pos64 = a.pos_dtype == DType::i64;
  p.inv_freq = a.inv_freq;
  p.base = a.base;
  p.scale = a.scale;
  p.sin_sign = a.inverse ? -1.f : 1.f;
  p.tokens = int(std::min<int64_t>(a.tokens, INT_MAX));  // run_typed rejects more
  p.rot = int(a.rot);
  p.dim = int(std::min<int64_t>(a.dim, INT_MAX));
  const braze::rope::Part* parts[2] = {&a.q, &a.k};
  for (int i = 0; i < 2; ++i) {
    const bool present = parts[i]->heads > 0;
    p.heads[i] = int(std::min<int64_t>(parts[i]->heads, INT_MAX));
    p.x[i] = parts[i]->x;
    p.y[i] = parts[i]->y;
    p.x_tok[i] = present ? parts[i]->x_tok : 0;
    p.x_head[i] = present ? parts[i]->x_head : 0;
    p.y_tok[i] = present ? parts[i]->y_tok : 0;
    p.y_head[i] = present ? parts[i]->y_head : 0;
  }
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  switch (a.dtype) {
    case DType::f32: return run_typed<float>(a, p, s);
    case DType::f16: return run_typed<__half>(a, p, s);
    case DType::bf16: return run_typed<__nv_bfloat16>(a, p, s);
    default: throw TypeError(std::string("unsupported dtype ") + dtype_name(a.dtype));
  }
}

}  // namespace braze::cuda
