// Flash prefill on tensor cores (FlashAttention-2 style, mma.sync m16n8k16,
// sm_80+), for f16 / bf16 with head_dim a multiple of 16 up to 128 (the f32
// output accumulators of 16 rows x D stay in registers).
//
// A CTA of 4 warps owns a window of 64 consecutive rows of q (one query head;
// its kv head is h / group) and serves every sequence of the ragged batch
// that intersects the window, one after another (one sequence for a long
// prompt; the sequence is found on the device from cu_seqlens). Each warp
// holds its 16 rows of Q as A fragments and walks key tiles of 64 over the
// rows' unmasked key range (causal: up to the diagonal; window: from its left
// edge): S = Q K^T, masks only on tiles that need them, online softmax in f32
// (base 2, the scale folded into log2 e), P rounded to the input type as an A
// fragment and O += P V. K / V tiles are staged in shared memory by cp.async,
// double-buffered so tile i + 1 loads while tile i computes; rows are padded by
// 16 bytes so ldmatrix's eight row addresses fall in distinct banks.
#pragma once
#include <cstdint>

#include "cuda/attention/attend.cuh"
#include "cuda/attention/mma.cuh"

namespace braze::cuda::attn {

constexpr int kFlashRows = 64;  // query rows per CTA: 4 warps x 16
constexpr int kFlashKeys = 64;  // keys per tile
constexpr int kFlashThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D> constexpr int kStride = D + 8;  // shared row stride, elements

// Q [64][S], K [2][64][S], V [2][64][S] (16-bit elements), then [2][64] key flags.
template <int D> constexpr size_t flash_smem_bytes() {
  return size_t(kFlashRows + 4 * kFlashKeys) * kStride<D> * 2 + 2 * kFlashKeys;
}

// Key j of sequence b for kv head kvh, as attend.cuh's key_rows, with 32-bit
// index math for the block table (the launcher checks block_size fits).
template <class T>
__device__ __forceinline__ bool flash_key(const AttendParams& p, int b, int64_t seq_start, int kvh, int j,
                                          const T*& kp, const T*& vp) {
  if (p.mode == kRagged) {
    kp = static_cast<const T*>(p.k) + (seq_start + j) * p.k_st + kvh * p.k_sh;
    vp = static_cast<const T*>(p.v) + (seq_start + j) * p.v_st + kvh * p.v_sh;
    return true;
  }
  const unsigned bs = unsigned(p.block_size), blk = unsigned(j) / bs, slot = unsigned(j) - blk * bs;
  const int64_t id = p.bt[b * p.bt_stride + blk];
  if (id < 0 || id >= p.num_blocks) return false;
  kp = static_cast<const T*>(p.kc) + id * p.kc_sb + slot * p.kc_ss + kvh * p.kc_sh;
  vp = static_cast<const T*>(p.vc) + id * p.vc_sb + slot * p.vc_ss + kvh * p.vc_sh;
  return true;
}

// Rows [ra, rb) of q (head h) into shared rows [ra - r0, rb - r0); the others zero.
template <class T, int D>
__device__ __forceinline__ void flash_load_q(const AttendParams& p, T* qs, int r0, int ra, int rb, int h) {
  constexpr int CH = D / 8;
  for (int c = threadIdx.x; c < kFlashRows * CH; c += kFlashThreads) {
    const int i = c / CH, ch = c - i * CH, r = r0 + i;
    T* dst = qs + i * kStride<D> + ch * 8;
    if (r >= ra && r < rb) cp_async16(dst, static_cast<const T*>(p.q) + int64_t(r) * p.q_st + h * p.q_sh + ch * 8);
    else *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
}

// Keys [j0, j0 + 64) into one K / V buffer; keys at or past `end`, and paged
// keys whose block id is outside the cache, are zeros with ok = 0 (never read).
template <class T, int D>
__device__ __forceinline__ void flash_load_kv(const AttendParams& p, T* ks, T* vs, uint8_t* ok, int b,
                                              int64_t seq_start, int kvh, int j0, int end) {
  constexpr int CH = D / 8;
  for (int c = threadIdx.x; c < kFlashKeys * CH; c += kFlashThreads) {
    const int i = c / CH, ch = c - i * CH, j = j0 + i;
    const T* kp = nullptr;
    const T* vp = nullptr;
    const bool valid = j < end && flash_key<T>(p, b, seq_start, kvh, j, kp, vp);
    T* kd = ks + i * kStride<D> + ch * 8;
    T* vd = vs + i * kStride<D> + ch * 8;
    if (valid) {
      cp_async16(kd, kp + ch * 8);
      cp_async16(vd, vp + ch * 8);
    } else {
      *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
    }
    if (ch == 0) ok[i] = valid;
  }
}

// One sequence's rows [ra, rb) of the window at r0. Query row r sits at
// position r - start + shift; keys [key_lo, key_hi) cover every row's range.
struct FlashRows {
  int b, r0, ra, rb, h, kvh;
  int64_t start;  // the sequence's first row of q (ragged: of k / v too)
  int len, shift, key_lo, key_hi;
};

template <class T, int D>
__device__ __forceinline__ void flash_rows(const AttendParams& p, const FlashRows& f, unsigned char* smem) {
  constexpr int S = kStride<D>, KT = D / 16, NT = D / 8;
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = qs + kFlashRows * S;
  T* vs = ks + 2 * kFlashKeys * S;
  uint8_t* oks = reinterpret_cast<uint8_t*>(vs + 2 * kFlashKeys * S);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  const bool paged = p.mode == kPaged;
  const int64_t seq_start = paged ? 0 : f.start;

  // This lane's two rows (g and g + 8 of its warp's 16): positions and key bounds.
  int hi_r[2], lo_r[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int pos = f.r0 + warp * 16 + g + 8 * i - int(f.start) + f.shift;
    hi_r[i] = p.causal ? min(f.len, pos + 1) : f.len;
    lo_r[i] = p.window > 0 ? int(max(int64_t(0), int64_t(pos) - p.window + 1)) : 0;
  }
  // The window's first and last rows bound which tiles need a mask.
  const int pos_first = f.ra - int(f.start) + f.shift, pos_last = f.rb - 1 - int(f.start) + f.shift;
  const int hi_min = p.causal ? min(f.len, pos_first + 1) : f.len;
  const int lo_max = p.window > 0 ? int(max(int64_t(0), int64_t(pos_last) - p.window + 1)) : 0;
  const int tiles = (f.key_hi - f.key_lo + kFlashKeys - 1) / kFlashKeys;
  const float scale2 = p.scale * kLog2e;

  float o[NT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  uint32_t qf[KT][4];

  if (tiles > 0) {
    flash_load_q<T, D>(p, qs, f.r0, f.ra, f.rb, f.h);
    flash_load_kv<T, D>(p, ks, vs, oks, f.b, seq_start, f.kvh, f.key_lo, f.key_hi);
    cp_async_commit();
  }
  for (int it = 0; it < tiles; ++it) {
    const int buf = it & 1;
    if (it + 1 < tiles) {
      const int nb = buf ^ 1;
      flash_load_kv<T, D>(p, ks + nb * kFlashKeys * S, vs + nb * kFlashKeys * S, oks + nb * kFlashKeys, f.b,
                          seq_start, f.kvh, f.key_lo + (it + 1) * kFlashKeys, f.key_hi);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kk = 0; kk < KT; ++kk)
        ldmatrix_x4(qf[kk], smem_addr(qs + (warp * 16 + lane % 16) * S + kk * 16 + (lane / 16) * 8));
    }
    const T* kb = ks + buf * kFlashKeys * S;
    const T* vb = vs + buf * kFlashKeys * S;
    const uint8_t* okb = oks + buf * kFlashKeys;

    // S = Q K^T: K rows are B's columns, so plain ldmatrix gives B fragments;
    // matrices (keys +0, d +0), (+0, +8), (+8, +0), (+8, +8) -> two key tiles.
    float s[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int np = 0; np < 4; ++np) {
#pragma unroll
      for (int kk = 0; kk < KT; ++kk) {
        uint32_t bf[4];
        ldmatrix_x4(bf, smem_addr(kb + (np * 16 + (lane / 16) * 8 + lane % 8) * S + kk * 16 + ((lane / 8) & 1) * 8));
        mma16816<T>(s[2 * np], qf[kk], bf[0], bf[1]);
        mma16816<T>(s[2 * np + 1], qf[kk], bf[2], bf[3]);
      }
    }

    // Scores in base 2; masks where a key of the tile may be outside some row's range.
    const int j0 = f.key_lo + it * kFlashKeys;
    const bool masked = paged || j0 + kFlashKeys > hi_min || j0 < lo_max;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[n][e];
        if (p.softcap > 0.f) x = p.softcap * tanhf(x * p.scale / p.softcap) * kLog2e;
        else x *= scale2;
        if (masked) {
          const int c = n * 8 + 2 * tq + (e & 1), j = j0 + c, i = e >> 1;
          if (j >= hi_r[i] || j < lo_r[i] || !okb[c]) x = -INFINITY;
        }
        s[n][e] = x;
      }
    }

    // Online softmax: a row's 64 scores are spread over the 4 lanes of its quad.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * i], s[n][2 * i + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m[i], mx);
      const float mu = mn == -INFINITY ? 0.f : mn;  // every key so far masked: any finite shift
      const float corr = exp2f(m[i] - mu);
      m[i] = mn;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        s[n][2 * i] = exp2f(s[n][2 * i] - mu);
        s[n][2 * i + 1] = exp2f(s[n][2 * i + 1] - mu);
        sum += s[n][2 * i] + s[n][2 * i + 1];
      }
      l[i] = l[i] * corr + sum;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        o[n][2 * i] *= corr;
        o[n][2 * i + 1] *= corr;
      }
    }

    // O += P V: the C fragments of key tiles 2kk, 2kk + 1 are the A fragment
    // of keys [16kk, 16kk + 16); V rows are B's rows, so ldmatrix.trans gives B
    // fragments: matrices (keys +0, d +0), (+8, +0), (+0, +8), (+8, +8).
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t a[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                             pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, smem_addr(vb + (kk * 16 + ((lane / 8) & 1) * 8 + lane % 8) * S + dp * 16 +
                                        (lane / 16) * 8));
        mma16816<T>(o[2 * dp], a, bf[0], bf[1]);
        mma16816<T>(o[2 * dp + 1], a, bf[2], bf[3]);
      }
    }
    __syncthreads();  // the next iteration's loads overwrite this buffer
  }

  // The quad's partial sums, then the sink (denominator only), then O / L.
  const bool vec_out = (reinterpret_cast<uintptr_t>(p.out) & 3) == 0 && p.o_st % 2 == 0 && p.o_sh % 2 == 0;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float L = l[i];
    L += __shfl_xor_sync(0xffffffffu, L, 1);
    L += __shfl_xor_sync(0xffffffffu, L, 2);
    float M = m[i], fo = 1.f;
    if (p.sinks_type) {
      const float sk = sink_logit(p, f.h) * kLog2e, M2 = fmaxf(M, sk);
      if (M2 != -INFINITY) {
        fo = exp2f(M - M2);
        L = L * fo + exp2f(sk - M2);
        M = M2;
      }
    }
    const int r = f.r0 + warp * 16 + g + 8 * i;
    if (r < f.ra || r >= f.rb) continue;
    const float inv = L > 0.f ? fo / L : 0.f;
    T* dst = static_cast<T*>(p.out) + int64_t(r) * p.o_st + f.h * p.o_sh + 2 * tq;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const float a = o[n][2 * i] * inv, c = o[n][2 * i + 1] * inv;
      if (vec_out) {
        *reinterpret_cast<uint32_t*>(dst + n * 8) = pack2<T>(a, c);
      } else {
        dst[n * 8] = from_f32<T>(a);
        dst[n * 8 + 1] = from_f32<T>(c);
      }
    }
    if (p.lse && tq == 0) p.lse[int64_t(r) * p.l_st + f.h * p.l_sh] = L > 0.f ? M * kLn2 + logf(L) : -INFINITY;
  }
}

// Grid: x (64-row window of q, query head), the head fastest and the last
// windows first: under a causal mask they have the most keys, and the heads of
// one GQA group, reading the same K / V, run side by side (L2 hits).
template <class T, int D> __global__ void __launch_bounds__(kFlashThreads) flash_kernel(const AttendParams p) {
  static_assert(D % 16 == 0 && D <= 128, "the output accumulators of 16 rows x D must fit in registers");
  extern __shared__ __align__(16) unsigned char flash_smem[];
  FlashRows f;
  const int windows = int(gridDim.x) / p.q_heads;
  f.h = int(blockIdx.x) % p.q_heads;
  f.r0 = (windows - 1 - int(blockIdx.x) / p.q_heads) * kFlashRows;
  f.kvh = f.h / p.group;
  const int64_t cap = p.max_blocks * p.block_size;

  int lo = 0, hi = p.batch;  // the last sequence starting at or before r0
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (p.cu[mid] <= f.r0) lo = mid; else hi = mid;
  }
  for (int b = lo; b < p.batch; ++b) {
    // cu_seqlens values are not checked on the host: clamped so rows stay inside [0, tokens).
    const int64_t start = min(max(int64_t(p.cu[b]), int64_t(0)), p.tokens);
    const int64_t n = min(max(int64_t(p.cu[b + 1]) - start, int64_t(0)), p.tokens - start);
    if (start >= f.r0 + kFlashRows) break;
    f.ra = int(max(start, int64_t(f.r0)));
    f.rb = int(min(start + n, int64_t(f.r0) + kFlashRows));
    if (f.ra >= f.rb) continue;
    f.b = b;
    f.start = start;
    if (p.mode == kRagged) {
      f.len = int(n);
      f.shift = 0;
    } else {
      f.len = int(min(max(int64_t(p.kv_lens[b]), int64_t(0)), cap));
      f.shift = f.len - int(n);
    }
    const int pos_first = f.ra - int(start) + f.shift, pos_last = f.rb - 1 - int(start) + f.shift;
    f.key_hi = p.causal ? min(f.len, pos_last + 1) : f.len;
    f.key_lo = p.window > 0 ? int(max(int64_t(0), int64_t(pos_first) - p.window + 1)) : 0;
    if (f.key_hi < f.key_lo) f.key_hi = f.key_lo;
    flash_rows<T, D>(p, f, flash_smem);
  }
}

}  // namespace braze::cuda::attn
