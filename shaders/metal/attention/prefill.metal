// prefill and prefill_paged: flash attention on simdgroup matrices. One
// simdgroup per (tile of 8 queries of one sequence, q head). Q (scaled), and
// each tile of 8 keys and values, are staged as f32 in threadgroup memory;
// S = Q K^T is a sum of head_dim / 8 products of 8x8 matrices (K loaded
// transposed), lanes 0..7 run the online softmax of one row each on S, and
// the output accumulators O (head_dim / 8 matrices, kept in the simdgroup)
// become diag(alpha) O + P V, two matrix products per 8 columns.
//
// Grid x covers every sequence's tiles without reading cu_seqlens on the
// host: sum over b of ceil(n_b / 8) <= tokens / 8 + batch; a threadgroup
// walks cu_seqlens to find its (sequence, tile) and returns when it has none.
#include "attention_common.h"

template <typename T, bool PAGED>
[[kernel]] void prefill_kernel(device const T* q [[buffer(0)]],
                               device const T* k [[buffer(1)]],
                               device const T* v [[buffer(2)]],
                               device const int* cu [[buffer(3)]],
                               device const int* table [[buffer(4)]],
                               device const int* kv_lens [[buffer(5)]],
                               device const uchar* sinks [[buffer(6)]],
                               device T* out [[buffer(7)]],
                               device float* lse_out [[buffer(8)]],
                               constant AttnParams& p [[buffer(9)]],
                               uint2 group [[threadgroup_position_in_grid]],
                               uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float qs[ATTN_TILE * ATTN_MAX_DIM];  // Q; at the end, O
  threadgroup float ks[ATTN_TILE * ATTN_MAX_DIM];
  threadgroup float vs[ATTN_TILE * ATTN_MAX_DIM];
  threadgroup float ss[ATTN_TILE * ATTN_TILE];     // S, then P
  threadgroup float ds[ATTN_TILE * ATTN_TILE];     // diag(alpha); at the end, each row's factor
  threadgroup uint kok[ATTN_TILE];                 // whether the tile's key has a cache block

  uint tile = group.x, b = 0u;
  for (; b < p.batch; ++b) {
    const uint nt = (uint(cu[b + 1u] - cu[b]) + ATTN_TILE - 1u) / ATTN_TILE;
    if (tile < nt) break;
    tile -= nt;
  }
  if (b >= p.batch) return;  // uniform over the threadgroup
  const uint h = group.y, hk = h / (p.q_heads / p.kv_heads), D = p.dim, nd = D / ATTN_TILE;
  const uint start = uint(cu[b]), n = uint(cu[b + 1u]) - start, t0 = tile * ATTN_TILE;
  const uint rows = min(n - t0, uint(ATTN_TILE));
  const uint len = PAGED ? min(uint(max(kv_lens[b], 0)), p.max_blocks * p.block_size) : n;
  const uint base = len - n;  // position of query 0 (paged: the queries end the context)
  const bool causal = PAGED || p.causal != 0u;
  device const int* row = table + ulong(b) * p.bt_stride;

  for (uint i = lane; i < ATTN_TILE * D; i += ATTN_THREADS) {
    const uint r = i / D, d = i % D;
    qs[i] = r < rows ? float(q[ulong(start + t0 + r) * p.q_st + ulong(h) * p.q_sh + d]) * p.scale : 0.0f;
  }
  const uint first = base + t0, last = first + rows - 1u;
  const uint hi = causal ? min(len, last + 1u) : len;
  uint lo = p.window != 0u && first + 1u > p.window ? first + 1u - p.window : 0u;
  lo -= lo % ATTN_TILE;

  simdgroup_float8x8 acc[ATTN_MAX_DIM / ATTN_TILE];
  for (uint i = 0; i < nd; ++i) acc[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  float m = ATTN_NEG_INF, l = 0.0f;  // lane r < 8: row r's running max and sum

  for (uint kt = lo; kt < hi; kt += ATTN_TILE) {
    threadgroup_barrier(mem_flags::mem_threadgroup);  // the previous tile is consumed
    for (uint i = lane; i < ATTN_TILE * D; i += ATTN_THREADS) {
      const uint c = i / D, d = i % D, j = kt + c;
      float kx = 0.0f, vx = 0.0f;
      if (j < hi) {
        if (PAGED) {
          const long ko = attn_paged_slot(row, j, p.block_size, p.num_blocks, p.k_sb, p.k_st);
          const long vo = attn_paged_slot(row, j, p.block_size, p.num_blocks, p.v_sb, p.v_st);
          if (ko >= 0) {
            kx = float(k[ko + long(hk) * p.k_sh + d]);
            vx = float(v[vo + long(hk) * p.v_sh + d]);
          }
        } else {
          kx = float(k[ulong(start + j) * p.k_st + ulong(hk) * p.k_sh + d]);
          vx = float(v[ulong(start + j) * p.v_st + ulong(hk) * p.v_sh + d]);
        }
      }
      ks[i] = kx;
      vs[i] = vx;
    }
    if (lane < ATTN_TILE) {
      const uint j = kt + lane;
      kok[lane] = j < hi && (!PAGED || attn_paged_slot(row, j, p.block_size, p.num_blocks, 0u, 0u) >= 0) ? 1u : 0u;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    simdgroup_float8x8 s = make_filled_simdgroup_matrix<float, 8, 8>(0.0f), qm, km;
    for (uint i = 0; i < nd; ++i) {
      simdgroup_load(qm, qs + i * ATTN_TILE, D);
      simdgroup_load(km, ks + i * ATTN_TILE, D, ulong2(0, 0), true);
      simdgroup_multiply_accumulate(s, qm, km, s);
    }
    simdgroup_store(s, ss, ATTN_TILE);
    threadgroup_barrier(mem_flags::mem_threadgroup);

    if (lane < ATTN_TILE) {
      const uint r = lane, pos = first + r;
      float x[ATTN_TILE];
      float mx = m;
      for (uint c = 0; c < ATTN_TILE; ++c) {
        const uint j = kt + c;
        const bool ok = r < rows && kok[c] != 0u && j < len && attn_visible(j, pos, causal, p.window);
        x[c] = ok ? attn_softcap(ss[r * ATTN_TILE + c], p.softcap) : ATTN_NEG_INF;
        mx = max(mx, x[c]);
      }
      const float alpha = m == ATTN_NEG_INF ? 0.0f : exp(m - mx);
      float sum = 0.0f;
      for (uint c = 0; c < ATTN_TILE; ++c) {
        const float pc = x[c] == ATTN_NEG_INF ? 0.0f : exp(x[c] - mx);
        ss[r * ATTN_TILE + c] = pc;
        ds[r * ATTN_TILE + c] = c == r ? alpha : 0.0f;
        sum += pc;
      }
      l = l * alpha + sum;
      m = mx;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    simdgroup_float8x8 pm, dm, vm;
    simdgroup_load(pm, ss, ATTN_TILE);
    simdgroup_load(dm, ds, ATTN_TILE);
    for (uint i = 0; i < nd; ++i) {
      simdgroup_load(vm, vs + i * ATTN_TILE, D);
      simdgroup_multiply(acc[i], dm, acc[i]);
      simdgroup_multiply_accumulate(acc[i], pm, vm, acc[i]);
    }
  }

  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = 0; i < nd; ++i) simdgroup_store(acc[i], qs + i * ATTN_TILE, D);
  if (lane < rows) {
    float lse;
    ds[lane] = attn_finish(m, l, attn_sink(sinks, p, h), lse);
    if (p.has_lse != 0u) lse_out[ulong(start + t0 + lane) * p.l_st + ulong(h) * p.l_sh] = lse;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = lane; i < rows * D; i += ATTN_THREADS) {
    const uint r = i / D;
    out[ulong(start + t0 + r) * p.o_st + ulong(h) * p.o_sh + i % D] = T(qs[i] * ds[r]);
  }
}

#define PREFILL_INSTANCE(T, suffix)                                                                 \
  template [[host_name("prefill_" suffix)]] [[kernel]] decltype(prefill_kernel<T, false>)            \
      prefill_kernel<T, false>;                                                                      \
  template [[host_name("prefill_paged_" suffix)]] [[kernel]] decltype(prefill_kernel<T, true>)       \
      prefill_kernel<T, true>;
PREFILL_INSTANCE(float, "f32")
PREFILL_INSTANCE(half, "f16")
PREFILL_INSTANCE(bfloat, "bf16")
