// Paged decode on tensor cores, built to stream the KV cache at the copy rate
// (f16 / bf16, head_dim 64, 80, 96 or 128, 16-byte aligned K / V rows).
//
// A CTA serves one (sequence, kv head, chunk of up to 8 of its query heads,
// split): every K / V row it reads feeds the whole chunk. Its 4 warps work
// independently until the end: warp w takes the split's 16-key tiles w, w + 4,
// w + 8, ... and streams them through a ring of its own (3-4 stages of K and V
// rows in shared memory, filled by 16-byte cp.async, zero-filled where a key is
// past the split or its block id is outside the cache), so 2-3 tiles of every
// warp are in flight while it computes one, with no CTA barrier in the loop.
// Per tile (FlashAttention-2's inner step, one m16 row tile): S = Q K^T by
// mma.m16n8k16 with the chunk's heads as rows 0..7 of A (rows 8..15 zero), an
// online softmax in f32 in base 2 (the scale folded into log2 e), P rounded to
// the input type and O += P V with V read by ldmatrix.trans. The warps' states
// are merged through shared memory at the end, then written as attend.cuh
// writes them: the output (sinks in the denominator), or with splits > 1 the
// partial state (acc, max, sum; natural-log max) for merge_splits_kernel.
#pragma once
#include <cstdint>

#include "cuda/attention/attend.cuh"
#include "cuda/attention/mma.cuh"

namespace braze::cuda::attn {

constexpr int kDecWarps = 4;
constexpr int kDecThreads = 32 * kDecWarps;
constexpr int kDecKeys = 16;  // keys of a warp's tile: one k16 step of P V
constexpr int kDecRows = 8;   // query heads a CTA serves: rows of the m16 tile that are not zero
constexpr float kDecLog2e = 1.4426950408889634f;
constexpr float kDecLn2 = 0.6931471805599453f;

template <int D> constexpr int kDecStride = D + 8;  // shared row stride (elements): ldmatrix rows in distinct banks
// Ring depth: 4 stages while a CTA's ring stays under ~104 KB (two CTAs an SM on sm_90), else 3.
template <int D> constexpr int kDecStages = D <= 96 ? 4 : 3;
template <int D> constexpr int kDecTile = kDecKeys * kDecStride<D>;  // elements of one K (or V) tile

// Every warp's ring, [warp][stage][K tile, V tile]; the warps' states reuse it at the end.
template <int D> constexpr size_t decode_smem_bytes() {
  const size_t ring = size_t(kDecWarps) * kDecStages<D> * 2 * kDecTile<D> * 2;
  const size_t states = size_t(kDecWarps) * kDecRows * (D + 2) * sizeof(float);
  return ring > states ? ring : states;
}

// 16 bytes src -> dst, or 16 zero bytes (src not read) when !ok.
__device__ __forceinline__ void cp_async16_or_zero(void* dst, const void* src, bool ok) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0) : "memory");
}

// Warp-wide: keys [j0, j0 + 16) of sequence b, kv head kvh, into one stage
// (ks, vs: 16 rows of kDecStride<D>). Lane l (and l + 16) walks the block
// table for key j0 + l % 16; the 16-byte chunks go out row by row (a row's
// chunks on consecutive lanes) with the row offsets shuffled from those lanes.
// Returns the mask of the keys loaded: bit i for key j0 + i (the others are zeros).
template <class T, int D>
__device__ __forceinline__ unsigned decode_load(const AttendParams& p, T* ks, T* vs, int b, int kvh, int j0,
                                                int end, int lane) {
  constexpr int S = kDecStride<D>, CH = D / 8;
  const int j = j0 + (lane & 15);
  long long ko = 0, vo = 0;
  bool ok = j < end;  // end <= kv_len <= the table's capacity: blk below is a column of the table
  if (ok) {
    const unsigned bs = unsigned(p.block_size), blk = unsigned(j) / bs, slot = unsigned(j) - blk * bs;
    const int64_t id = p.bt[int64_t(b) * p.bt_stride + blk];
    ok = id >= 0 && id < p.num_blocks;
    if (ok) {
      ko = id * p.kc_sb + int64_t(slot) * p.kc_ss + int64_t(kvh) * p.kc_sh;
      vo = id * p.vc_sb + int64_t(slot) * p.vc_ss + int64_t(kvh) * p.vc_sh;
    }
  }
  const unsigned mask = __ballot_sync(0xffffffffu, ok) & 0xffffu;
  const T* kc = static_cast<const T*>(p.kc);
  const T* vc = static_cast<const T*>(p.vc);
#pragma unroll
  for (int r = 0; r < CH / 2; ++r) {  // 16 rows x CH chunks over 32 lanes (CH is even)
    const int idx = lane + 32 * r, key = idx / CH, ch = idx - key * CH;
    const long long kr = __shfl_sync(0xffffffffu, ko, key), vr = __shfl_sync(0xffffffffu, vo, key);
    const bool on = (mask >> key) & 1u;
    cp_async16_or_zero(ks + key * S + ch * 8, on ? kc + kr + ch * 8 : kc, on);
    cp_async16_or_zero(vs + key * S + ch * 8, on ? vc + vr + ch * 8 : vc, on);
  }
  return mask;
}

// Grid: x = (sequence, kv head, head chunk), the chunk fastest, so the CTAs of
// one sequence's kv heads (reading interleaved rows of the same pages) run
// side by side; y = the split. The launcher checks the table's capacity fits
// in 30 bits, so key indices are 32-bit.
template <class T, int D>
__global__ void __launch_bounds__(kDecThreads) decode_kernel(const AttendParams p) {
  static_assert(D % 16 == 0 && D <= 128, "the f32 accumulators of P V (16 x D a warp) must fit in registers");
  constexpr int S = kDecStride<D>, NS = kDecStages<D>, TILE = kDecTile<D>, KT = D / 16, NT = D / 8;
  static_assert(NS >= 2 && NS <= 4, "the mask ring holds NS - 1 tiles of 16 bits in 64");
  extern __shared__ __align__(16) unsigned char decode_smem[];
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");  // the merge may launch (it waits on us)
#endif

  const int units = (p.q_heads / p.group) * p.head_chunks;
  const int b = int(blockIdx.x) / units, u = int(blockIdx.x) - b * units;
  const int kvh = u / p.head_chunks;
  const int h0 = kvh * p.group + (u - kvh * p.head_chunks) * kDecRows;
  const int nrows = min(kDecRows, kvh * p.group + p.group - h0);
  const int split = blockIdx.y;

  // The query sits at kv_len - 1: every key of [key_lo, len) is unmasked
  // (window: the last `window` of them). The split's share is rounded up to
  // whole tiles, so tiles (and, for block sizes dividing 16, pages) start at
  // multiples of 16 past key_lo; shares past the end are empty.
  const int len = int(min(max(int64_t(p.kv_lens[b]), int64_t(0)), p.max_blocks * p.block_size));
  const int key_lo = p.window > 0 ? int(max(int64_t(0), int64_t(len) - p.window)) : 0;
  const int n = len - key_lo;  // >= 0
  const int per = ((n + p.splits - 1) / p.splits + kDecKeys - 1) / kDecKeys * kDecKeys;
  const int s0 = int(min(int64_t(len), int64_t(key_lo) + int64_t(split) * per));
  const int s1 = min(len, s0 + per);
  const int tiles = (s1 - s0 + kDecKeys - 1) / kDecKeys;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  const int steps = tiles > warp ? (tiles - warp + kDecWarps - 1) / kDecWarps : 0;  // this warp's tiles
  T* ring = reinterpret_cast<T*>(decode_smem) + warp * NS * 2 * TILE;

  // Prologue: the first NS - 1 tiles in flight (a group committed per stage,
  // empty or not, so wait_group counts tiles). masks: 16 bits a tile in flight,
  // the oldest lowest.
  uint64_t masks = 0;
#pragma unroll
  for (int t = 0; t < NS - 1; ++t) {
    if (t < steps) {
      T* ks = ring + t * 2 * TILE;
      const unsigned m = decode_load<T, D>(p, ks, ks + TILE, b, kvh, s0 + (warp + kDecWarps * t) * kDecKeys, s1, lane);
      masks |= uint64_t(m) << (16 * t);
    }
    cp_async_commit();
  }

  // Q as A fragments (row g: head h0 + g; rows g + 8 and heads past the chunk are zero):
  // qf[kk][0] holds columns 16kk + 2tq, +1, qf[kk][1] the same + 8. Element loads: q may be unaligned.
  uint32_t qf[KT][2];
  {
    const T* qr = static_cast<const T*>(p.q) + int64_t(b) * p.q_st + int64_t(h0 + (g < nrows ? g : 0)) * p.q_sh;
#pragma unroll
    for (int kk = 0; kk < KT; ++kk) {
      const int c = kk * 16 + 2 * tq;
      qf[kk][0] = g < nrows ? pack2<T>(to_f32(qr[c]), to_f32(qr[c + 1])) : 0u;
      qf[kk][1] = g < nrows ? pack2<T>(to_f32(qr[c + 8]), to_f32(qr[c + 9])) : 0u;
    }
  }
  const float scale2 = p.scale * kDecLog2e;

  // Row g's state: o[n][0..1] columns 8n + 2tq, +1 (o[n][2..3], rows g + 8, stay zero).
  float o[NT][4], m = -INFINITY, l = 0.f;
#pragma unroll
  for (int i = 0; i < NT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;

  int st = 0;  // the stage of tile k: k % NS
  for (int k = 0; k < steps; ++k) {
    cp_async_wait<NS - 2>();  // this lane's copies of tile k have landed ...
    __syncwarp();             // ... and every lane's are visible; tile k - 1's stage is free
    const unsigned cur = unsigned(masks) & 0xffffu;
    masks >>= 16;
    const int kn = k + NS - 1;
    if (kn < steps) {
      T* ks = ring + (st == 0 ? NS - 1 : st - 1) * 2 * TILE;  // (k + NS - 1) % NS: tile k - 1's stage
      const unsigned mn = decode_load<T, D>(p, ks, ks + TILE, b, kvh, s0 + (warp + kDecWarps * kn) * kDecKeys, s1, lane);
      masks |= uint64_t(mn) << (16 * (NS - 2));
    }
    cp_async_commit();

    const T* kb = ring + st * 2 * TILE;
    const T* vb = kb + TILE;
    st = st + 1 == NS ? 0 : st + 1;

    // S = Q K^T: K rows are B's columns, so plain ldmatrix gives B fragments;
    // matrices (keys +0, d +0), (+0, +8), (+8, +0), (+8, +8) -> keys 0-7, 8-15.
    float s[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KT; ++kk) {
      uint32_t bf[4];
      ldmatrix_x4(bf, smem_addr(kb + ((lane / 16) * 8 + lane % 8) * S + kk * 16 + ((lane / 8) & 1) * 8));
      const uint32_t a[4] = {qf[kk][0], 0u, qf[kk][1], 0u};
      mma16816<T>(s[0], a, bf[0], bf[1]);
      mma16816<T>(s[1], a, bf[2], bf[3]);
    }

    // Row g's scores in base 2: x[2i + e] is key 8i + 2tq + e of the tile.
    float x[4];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = s[i][e];
        if (p.softcap > 0.f) v = p.softcap * tanhf(v * p.scale / p.softcap) * kDecLog2e;
        else v *= scale2;
        x[2 * i + e] = (cur >> (8 * i + 2 * tq + e)) & 1u ? v : -INFINITY;
      }
    }
    float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the row's 16 keys sit on its quad
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mnew = fmaxf(m, mx);
    const float mu = mnew == -INFINITY ? 0.f : mnew;  // every key so far masked: any finite shift
    const float corr = exp2f(m - mu);
    m = mnew;
    float pr[4], sum = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      pr[i] = exp2f(x[i] - mu);
      sum += pr[i];
    }
    l = l * corr + sum;
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      o[i][0] *= corr;
      o[i][1] *= corr;
    }

    // O += P V: P (row g: keys 2tq, +1 and 8 + 2tq, +1) is the A fragment;
    // V rows are B's rows, so ldmatrix.trans gives B fragments: matrices
    // (keys +0, d +0), (+8, +0), (+0, +8), (+8, +8) -> columns 16dp + 0-7, 8-15.
    const uint32_t pa[4] = {pack2<T>(pr[0], pr[1]), 0u, pack2<T>(pr[2], pr[3]), 0u};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t bf[4];
      ldmatrix_x4_trans(bf, smem_addr(vb + (((lane / 8) & 1) * 8 + lane % 8) * S + dp * 16 + (lane / 16) * 8));
      mma16816<T>(o[2 * dp], pa, bf[0], bf[1]);
      mma16816<T>(o[2 * dp + 1], pa, bf[2], bf[3]);
    }
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);  // the quad's columns
  l += __shfl_xor_sync(0xffffffffu, l, 2);

  // The warps' states through shared memory: [warp][row][D acc, max (base 2), sum].
  cp_async_wait<0>();  // only empty groups can be left; no copy may land on the states
  __syncthreads();     // every warp is done with its ring
  float* red = reinterpret_cast<float*>(decode_smem);
  {
    float* w = red + (warp * kDecRows + g) * (D + 2);
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      w[8 * i + 2 * tq] = o[i][0];
      w[8 * i + 2 * tq + 1] = o[i][1];
    }
    if (tq == 0) {
      w[D] = m;
      w[D + 1] = l;
    }
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < nrows * D; idx += kDecThreads) {
    const int r = idx / D, d = idx - r * D, h = h0 + r;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecWarps; ++w) M = fmaxf(M, red[(w * kDecRows + r) * (D + 2) + D]);
    float L = 0.f, A = 0.f;
#pragma unroll
    for (int w = 0; w < kDecWarps; ++w) {
      const float* sw = red + (w * kDecRows + r) * (D + 2);
      const float f = sw[D] == -INFINITY ? 0.f : exp2f(sw[D] - M);
      L += sw[D + 1] * f;
      A += sw[d] * f;
    }
    M *= kDecLn2;  // natural log from here on, as the merge kernel and lse take it
    if (p.splits > 1) {
      float* state = p.ws + ((int64_t(b) * p.q_heads + h) * p.splits + split) * (D + 2);
      state[d] = A;
      if (d == 0) {
        state[D] = M;
        state[D + 1] = L;
      }
      continue;
    }
    if (p.sinks_type) {  // the sink joins the denominator only
      const float sk = sink_logit(p, h), M2 = fmaxf(M, sk);
      if (M2 != -INFINITY) {
        const float f = rescale(M, M2);
        L = L * f + expf(sk - M2);
        A *= f;
        M = M2;
      }
    }
    static_cast<T*>(p.out)[int64_t(b) * p.o_st + int64_t(h) * p.o_sh + d] = from_f32<T>(L > 0.f ? A / L : 0.f);
    if (p.lse && d == 0) p.lse[int64_t(b) * p.l_st + int64_t(h) * p.l_sh] = L > 0.f ? M + logf(L) : -INFINITY;
  }
}

}  // namespace braze::cuda::attn
