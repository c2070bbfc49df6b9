// Host launcher of the rope family: q and k in one launch, a block per group
// of tokens sized so each block has a few thousand packs of work; nothing here
// allocates or synchronizes.
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
constexpr int kSharedBytes = 32 * 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// 16-byte packs need every head's start and the offsets rot/2 (rotate-half) or
// rot (pass-through) to stay 16-byte aligned.
bool vector_ok(const Params& p, const Args& a, int V) {
  if (a.rot % V != 0 || (!a.interleaved && (a.rot / 2) % V != 0)) return false;
  for (int part = 0; part < (a.k.heads ? 2 : 1); ++part) {
    if (!aligned16(p.x[part]) || !aligned16(p.y[part])) return false;
    for (int64_t st : {p.x_tok[part], p.x_head[part], p.y_tok[part], p.y_head[part]})
      if (st % V != 0) return false;
  }
  return true;
}

template <class T, int V, bool Vec, bool Il>
void launch(const Params& p, int64_t blocks, int threads, size_t smem, cudaStream_t s) {
  rope_kernel<T, V, Vec, Il><<<dim3(unsigned(blocks)), dim3(unsigned(threads)), smem, s>>>(p);
}

template <class T> void run_typed(const Args& a, Params& p, cudaStream_t s) {
  constexpr int V = kVec16<T>;
  const int64_t half = a.rot / 2;
  p.rot_packs = int(a.interleaved ? ceil_div(a.rot, V) : ceil_div(half, V));
  p.rest_packs = int(ceil_div(a.dim - a.rot, V));
  const int64_t per_token = std::max<int64_t>(1, p.heads * (p.rot_packs + p.rest_packs));
  if (per_token > INT_MAX / 2) throw ValueError("too many heads for the CUDA rope kernel");
  const int64_t max_tb = (kSharedBytes / 4 - half) / std::max<int64_t>(1, 2 * half);
  if (max_tb < 1) throw ValueError("rotary_dim " + std::to_string(a.rot) + " is too large for the CUDA kernel");
  // Threads: one per (head, pack) of a token, in as few equal rounds of <= 256 as fit.
  const int64_t rounds = ceil_div(per_token, kThreads);
  const int threads = int(ceil_div(ceil_div(per_token, rounds), 32) * 32);
  // Tokens per block: enough work per thread to amortize the table, while
  // keeping about 8 blocks per multiprocessor when tokens are few.
  int64_t tb = std::min<int64_t>(32, ceil_div(16 * kThreads, per_token));
  tb = std::min(tb, std::max<int64_t>(1, ceil_div(a.tokens, 8 * int64_t(sm_count(a.device_id)))));
  p.tokens_per_block = int(std::max<int64_t>(1, std::min(tb, max_tb)));
  const int64_t blocks = ceil_div(a.tokens, p.tokens_per_block);
  if (blocks > INT_MAX) throw ValueError("too many tokens for one CUDA launch");
  const size_t smem = size_t(half + 2 * int64_t(p.tokens_per_block) * half) * sizeof(float);
  const bool vec = vector_ok(p, a, V);
  if (a.interleaved) {
    if (vec) launch<T, V, true, true>(p, blocks, threads, smem, s);
    else launch<T, V, false, true>(p, blocks, threads, smem, s);
  } else {
    if (vec) launch<T, V, true, false>(p, blocks, threads, smem, s);
    else launch<T, V, false, false>(p, blocks, threads, smem, s);
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
  p.tokens = a.tokens;
  p.dim = a.dim;
  p.rot = a.rot;
  p.q_heads = a.q.heads;
  p.heads = a.q.heads + a.k.heads;
  const braze::rope::Part* parts[2] = {&a.q, &a.k};
  for (int i = 0; i < 2; ++i) {
    const bool present = parts[i]->heads > 0;
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
