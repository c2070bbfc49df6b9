// The attention family on the CPU. Prefill runs (kv head, sequence, query
// tile) tasks; a task's M query rows (f32, pre-scaled) share their keys (the q
// heads of one GQA group times a tile of queries) and walk the key range in
// tiles of NK keys. Up to 4 W rows (attend_tiles_t): the tile's keys packed to
// f32, the scores transposed (keys x rows) as an outer product of q^T's columns
// and broadcast key elements, an online softmax across rows (W rows a vector),
// and P V accumulated 4 rows x kPvCols W columns at a time. Up to 4 rows, or
// more than 4 W (attend_tiles): scores as dot products over head_dim (4 rows x
// 2 keys a block), the softmax row by row. Decode (attention_decode.h: tiles of
// 16 keys, scores reduced into one vector a row, a lazily rescaled softmax)
// runs (sequence, key range) tasks, every kv head of a tile before the next
// tile, and merges the partial states.
#include "cpu/attention.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA {
namespace {

using attention::DecodeArgs;
using attention::MergeArgs;
using attention::Options;
using attention::Outputs;
using attention::PagedKv;
using attention::PrefillArgs;

constexpr int NK = 32;  // keys per tile: 4 (AVX2) or 2 (AVX-512) score vectors per row
constexpr float kNegInf = -__builtin_inff();

// Eight sums of eight accumulators, in one vector when W == 8.
inline void hsum8(const vf* a, float* s) {
#if defined(__AVX__) && !defined(__AVX512F__)
  __m256 h01 = _mm256_hadd_ps((__m256)a[0], (__m256)a[1]), h23 = _mm256_hadd_ps((__m256)a[2], (__m256)a[3]);
  __m256 h45 = _mm256_hadd_ps((__m256)a[4], (__m256)a[5]), h67 = _mm256_hadd_ps((__m256)a[6], (__m256)a[7]);
  __m256 lo = _mm256_hadd_ps(h01, h23), hi = _mm256_hadd_ps(h45, h67);
  __m256 r = _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
  _mm256_storeu_ps(s, r);
#elif defined(__AVX512F__)
  // A tree: pairs interleaved within 128-bit lanes, then 64-bit halves, then the four lanes
  // (about 25 instructions; eight separate horizontal sums take about 80).
  __m512 v[8];
  memcpy(v, a, sizeof v);
  __m512 t[4];
  for (int i = 0; i < 4; ++i)
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  __m512 u[2];
  for (int i = 0; i < 2; ++i) {
    const __m512d x = _mm512_castps_pd(t[2 * i]), y = _mm512_castps_pd(t[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  // u[0]: sums 0..3 in each 128-bit lane, u[1]: sums 4..7
  const __m512 z = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m256 lo = _mm512_castps512_ps256(z), hi = _mm512_extractf32x8_ps(z, 1);
  _mm256_storeu_ps(s, _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31)));
#else
  for (int i = 0; i < 8; ++i) s[i] = hsum(a[i]);
#endif
}

// splat(*p) as one broadcast load (splat's vf{} + a costs an add first).
inline vf bcast(const float* p) {
#if defined(__AVX512F__)
  const __m512 v = _mm512_set1_ps(*p);
  vf r;
  memcpy(&r, &v, sizeof r);
  return r;
#elif defined(__AVX__)
  const __m256 v = _mm256_broadcast_ss(p);
  vf r;
  memcpy(&r, &v, sizeof r);
  return r;
#else
  return splat(*p);
#endif
}

// A prefill task's keys and values packed to f32 rows ([len][dim], K only where the cache's
// dtype is not f32), kept across the tasks of one (call, sequence, kv head) that a thread
// runs: a head's query tiles read the same keys. packed[t]: rows of tile t (NK keys from a
// multiple of NK) packed so far.
struct HeadRows {
  std::vector<float> k, v;
  std::vector<uint8_t> packed;
  uint64_t call = 0;
  int64_t b = -1, h = -1;
  bool on = false;
  static constexpr int64_t kMaxBytes = int64_t(8) << 20;  // longer sequences pack tile by tile
  void bind(uint64_t c, int64_t seq, int64_t head, int64_t len, int64_t dim, bool keys) {
    if (c == call && seq == b && head == h) return;
    call = c, b = seq, h = head;
    const int64_t floats = len * dim;
    on = floats * int64_t(sizeof(float)) * (keys ? 2 : 1) <= kMaxBytes;
    if (!on) return;
    if (int64_t(v.size()) < floats) v.resize(floats);
    if (keys && int64_t(k.size()) < floats) k.resize(floats);
    packed.assign((len + NK - 1) / NK, 0);
  }
};

// Per-thread buffers, reused across calls.
struct Scratch {
  std::vector<float> q, o, k, v, s, qt;
  std::vector<float> m, l, lv;  // lv: decode's row sums, W lanes a row
  std::vector<int64_t> lo, hi;
  HeadRows head;
  void size(int64_t rows, int64_t dim) {
    if (int64_t(lv.size()) < rows * W) lv.resize(rows * W);
    if (int64_t(q.size()) < rows * dim) q.resize(rows * dim), o.resize(rows * dim);
    if (int64_t(k.size()) < NK * dim) k.resize(NK * dim), v.resize(NK * dim);
    if (int64_t(s.size()) < (rows + W) * NK) s.resize((rows + W) * NK);  // + W: a transposed tile's padding rows
    if (int64_t(qt.size()) < (rows + W) * dim) qt.resize((rows + W) * dim);
    if (int64_t(m.size()) < rows) m.resize(rows), l.resize(rows), lo.resize(rows), hi.resize(rows);
  }
};
thread_local Scratch tls;

// S[r, j] = Q[r] . K[j] for R rows and keys [0, n) of the tile (n even; K[j]
// row pointers, loaded as L: f32 tiles, or the cache's own dtype read in place).
template <class L, int R>
inline void scores_rows(const float* Q, const typename L::T* const* K, float* S, int64_t dim, int n) {
  for (int j = 0; j < n; j += 2) {
    vf acc[8] = {};
    const typename L::T* k0 = K[j];
    const typename L::T* k1 = K[j + 1];
    for (int64_t d = 0; d < dim; d += W) {
      const vf a = load<L>(k0 + d), b = load<L>(k1 + d);
      for (int r = 0; r < R; ++r) {
        const vf q = load<F32>(Q + r * dim + d);
        acc[2 * r] += q * a;
        acc[2 * r + 1] += q * b;
      }
    }
    float s[8];
    hsum8(acc, s);
    for (int r = 0; r < R; ++r) {
      S[r * NK + j] = s[2 * r];
      S[r * NK + j + 1] = s[2 * r + 1];
    }
  }
}

// O[r, d0 : d0 + NV W] += sum_j P[r, j] V[j, d0 : ...] for R rows; P's rows PS floats apart
// (the prefill tile's NK, the decode tile's NT) and its keys PJ (1, or the rows of a
// transposed tile).
// alpha: each row's rescale factor of O first (the online softmax's), or null.
template <class L, int R, int NV, int PS = NK, int PJ = 1>
inline void pv_rows(const float* P, const typename L::T* const* V, float* O, int64_t dim, int64_t d0, int n,
                    const float* alpha) {
  vf acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NV; ++x) acc[r][x] = load<F32>(O + r * dim + d0 + x * W);
  if (alpha)
    for (int r = 0; r < R; ++r)
      for (int x = 0; x < NV; ++x) acc[r][x] *= alpha[r];
  for (int j = 0; j < n; ++j) {
    vf vv[NV];
    for (int x = 0; x < NV; ++x) vv[x] = load<L>(V[j] + d0 + x * W);
    for (int r = 0; r < R; ++r) {
      const vf p = bcast(P + r * PS + j * PJ);
      for (int x = 0; x < NV; ++x) acc[r][x] += p * vv[x];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NV; ++x) store<F32>(O + r * dim + d0 + x * W, acc[r][x]);
}

// O's columns kPvCols vectors at a time (R x kPvCols accumulators), then 2, then 1.
constexpr int kPvCols = W == 16 ? 4 : 2;
template <class L, int R, int PS = NK, int PJ = 1>
inline void pv_block(const float* P, const typename L::T* const* V, float* O, int64_t dim, int n,
                     const float* alpha = nullptr) {
  int64_t d = 0;
  for (; d + kPvCols * W <= dim; d += kPvCols * W) pv_rows<L, R, kPvCols, PS, PJ>(P, V, O, dim, d, n, alpha);
  for (; d + 2 * W <= dim; d += 2 * W) pv_rows<L, R, 2, PS, PJ>(P, V, O, dim, d, n, alpha);
  if (d < dim) pv_rows<L, R, 1, PS, PJ>(P, V, O, dim, d, n, alpha);
}

template <class F> inline void by_row_blocks(int M, F f) {
  int r = 0;
  for (; r + 4 <= M; r += 4) f(r, std::integral_constant<int, 4>{});
  switch (M - r) {
    case 3: f(r, std::integral_constant<int, 3>{}); break;
    case 2: f(r, std::integral_constant<int, 2>{}); break;
    case 1: f(r, std::integral_constant<int, 1>{}); break;
    default: break;
  }
}

// c * tanh(s / c) = c (1 - 2 / (e^(2 s / c) + 1)): +-c at the extremes, no NaN.
inline vf softcap_v(vf s, float c) { return c * (1.f - 2.f / (vexp(s * (2.f / c)) + 1.f)); }

alignas(64) const float kZeroRow[256] = {};  // the pad key of an odd tile (0 in every dtype)

// The rows' running state over keys [k0, k1): m (max), l (sum), O (unnormalized).
// Row r keeps keys in [lo[r], hi[r]). src.rows(j0, n, k, v) gives key rows
// j0 .. j0 + n - 1. L is how tiles are read: Pack converts each tile to f32
// once (many row blocks reuse it), otherwise rows are read in place as D.
template <class D, class L, bool Pack, class Src>
void attend_tiles(int M, int row0, int64_t dim, int64_t k0, int64_t k1, int64_t kend, float softcap, const Src& src,
                  Scratch& sc) {
  using T = typename D::T;
  using LT = typename L::T;
  // Rows row0 .. row0 + M - 1 of the scratch state.
  const float* Q = sc.q.data() + row0 * dim;
  float* O = sc.o.data() + row0 * dim;
  float* mr = sc.m.data() + row0;
  float* lr = sc.l.data() + row0;
  const int64_t* lor = sc.lo.data() + row0;
  const int64_t* hir = sc.hi.data() + row0;
  float* S = sc.s.data();
  const T* kr[NK];
  const T* vr[NK];
  const LT* kt[NK + 1];
  const LT* vt[NK];
  // Each key row of one head is a few cache lines and the next one is a page
  // away (the cache holds every head of a token together): the hardware
  // prefetchers do not cross pages, so the rows kPrefetch keys ahead are
  // asked for while this tile is computed.
  constexpr int64_t kPrefetch = 2 * NK;
  const T* pk[NK];
  const T* pv[NK];
  for (int64_t j0 = k0; j0 < k1; j0 += NK) {
    const int n = int(std::min<int64_t>(NK, k1 - j0));
    bool any_row = false;
    for (int r = 0; r < M && !any_row; ++r) any_row = lor[r] < j0 + n && hir[r] > j0;
    if (!any_row) continue;
    if (j0 + kPrefetch < kend) {
      const int np = int(std::min<int64_t>(NK, kend - j0 - kPrefetch));
      src.rows(j0 + kPrefetch, np, pk, pv);
      for (int j = 0; j < np; ++j)
        for (int64_t b = 0; b < dim * int64_t(sizeof(T)); b += 64) {
          __builtin_prefetch(reinterpret_cast<const char*>(pk[j]) + b);
          __builtin_prefetch(reinterpret_cast<const char*>(pv[j]) + b);
        }
    }
    src.rows(j0, n, kr, vr);
    for (int j = 0; j < n; ++j) {
      if constexpr (Pack) {
        float* kd = sc.k.data() + j * dim;
        float* vd = sc.v.data() + j * dim;
        for (int64_t d = 0; d < dim; d += W) {
          store<F32>(kd + d, load<D>(kr[j] + d));
          store<F32>(vd + d, load<D>(vr[j] + d));
        }
        kt[j] = kd;
        vt[j] = vd;
      } else {
        kt[j] = kr[j];
        vt[j] = vr[j];
      }
    }
    const int ne = n + (n & 1);
    if (n & 1) kt[n] = reinterpret_cast<const LT*>(kZeroRow);
    by_row_blocks(M, [&](int r, auto R) {
      scores_rows<L, decltype(R)::value>(Q + r * dim, kt, S + r * NK, dim, ne);
    });
    for (int r = 0; r < M; ++r) {
      float* s = S + r * NK;
      const int64_t lo = lor[r] - j0, hi = hir[r] - j0;
      vf mx = splat(kNegInf);
      for (int j = 0; j < NK; j += W) {
        vf x = load<F32>(s + j);
        if (softcap > 0) x = softcap_v(x, softcap);
        vi idx;
        for (int i = 0; i < W; ++i) idx[i] = j + i;
        const vi keep = (idx >= int(std::max<int64_t>(lo, -1))) &
                        (idx < int(std::max<int64_t>(std::min<int64_t>(hi, n), -1)));
        x = select(keep, x, splat(kNegInf));
        store<F32>(s + j, x);
        mx = vmax(mx, x);
      }
      const float mt = hmax(mx);
      const float m_old = mr[r];
      const float m_new = std::max(m_old, mt);
      if (m_new == kNegInf) {  // every key so far masked: nothing to add
        for (int j = 0; j < NK; ++j) s[j] = 0.f;
        continue;
      }
      vf sum = splat(0.f);
      for (int j = 0; j < NK; j += W) {
        const vf p = vexp(load<F32>(s + j) - m_new);
        store<F32>(s + j, p);
        sum += p;
      }
      if (m_new > m_old) {
        const float alpha = m_old == kNegInf ? 0.f : std::exp(m_old - m_new);
        lr[r] *= alpha;
        float* o = O + r * dim;
        for (int64_t d = 0; d < dim; d += W) store<F32>(o + d, load<F32>(o + d) * alpha);
        mr[r] = m_new;
      }
      lr[r] += hsum(sum);
    }
    by_row_blocks(M, [&](int r, auto R) { pv_block<L, decltype(R)::value>(S + r * NK, vt, O + r * dim, dim, n); });
  }
}

// attend_tiles with the tile's scores transposed, S[j][r] (RV vectors of rows a key), for
// M rows in RV vectors (the prefill tile): the scores are an outer product, q^T's
// column of rows (one load a vector) times a key's element (one broadcast), so no
// horizontal sums; the softmax runs across rows, a vector of W rows at a time.
// Keys are packed to f32 rows (a tile's rows of one head lie a page apart in q / k
// and alias in L1).
constexpr int kAccRegs = W == 16 ? 16 : 8;  // score accumulators the registers hold
// S[j][0 : RB W] = K[j] . Qt[:, 0 : RB W] for keys [0, n) of a tile and up to KB - 1 more
// (zero rows), KB keys at a time (KB x RB accumulators); Qt's and S's rows MP floats apart.
template <int RB, int KB, int MP>
inline void scores_t(const float* Qt, const float* const* K, float* S, int64_t dim, int n) {
  for (int j = 0; j < n; j += KB) {
    vf acc[KB][RB];
    for (int b = 0; b < KB; ++b)
      for (int v = 0; v < RB; ++v) acc[b][v] = splat(0.f);
    for (int64_t d = 0; d < dim; ++d) {
      vf q[RB];
      for (int v = 0; v < RB; ++v) q[v] = load<F32>(Qt + d * MP + v * W);
      for (int b = 0; b < KB; ++b) {
        const vf kv = bcast(K[j + b] + d);
        for (int v = 0; v < RB; ++v) acc[b][v] += kv * q[v];
      }
    }
    for (int b = 0; b < KB; ++b)
      for (int v = 0; v < RB; ++v) store<F32>(S + (j + b) * MP + v * W, acc[b][v]);
  }
}

template <class D, int RV, class Src>
void attend_tiles_t(int M, int row0, int64_t dim, int64_t k0, int64_t k1, int64_t /*kend*/, float softcap, const Src& src,
                    Scratch& sc) {
  using T = typename D::T;
  constexpr int MP = RV * W;                                       // rows, padded
  constexpr int RB = RV < 2 ? RV : 2;                                // row vectors a score block
  constexpr int KB = kAccRegs / RB >= 8 ? 8 : kAccRegs / RB >= 4 ? 4 : kAccRegs / RB >= 2 ? 2 : 1;  // keys a block
  const float* Q = sc.q.data() + row0 * dim;
  float* O = sc.o.data() + row0 * dim;
  float* Qt = sc.qt.data();  // [dim][MP]
  float* S = sc.s.data();    // [NK][MP]
  alignas(64) float m[MP], l[MP], alpha[MP];
  alignas(64) int32_t lo[MP], hi[MP];
  for (int r = 0; r < MP; ++r) {
    const bool in = r < M;
    m[r] = in ? sc.m[row0 + r] : kNegInf;
    l[r] = in ? sc.l[row0 + r] : 0.f;
    // relative to k0 (int32 lanes); padding rows keep no key
    lo[r] = in ? int32_t(sc.lo[row0 + r] - k0) : 0;
    hi[r] = in ? int32_t(sc.hi[row0 + r] - k0) : 0;
    for (int64_t d = 0; d < dim; ++d) Qt[d * MP + r] = in ? Q[r * dim + d] : 0.f;
  }
  const T* kr[NK];
  const T* vr[NK];
  const float* vt[NK];
  const float* kt[NK];
  float* const kpack = sc.k.data();
  float* const vpack = sc.v.data();
  constexpr bool kF32 = std::is_same<D, F32>::value;
  const bool cached = sc.head.on && k0 % NK == 0;  // tiles on multiples of NK
  for (int64_t j0 = k0; j0 < k1; j0 += NK) {
    const int n = int(std::min<int64_t>(NK, k1 - j0));
    const int32_t jr = int32_t(j0 - k0);
    bool any_row = false;
    for (int r = 0; r < M && !any_row; ++r) any_row = lo[r] < jr + n && hi[r] > jr;
    if (!any_row) continue;
    src.rows(j0, n, kr, vr);
    // f32 keys are read in place (a score block reads 8 rows, fewer than L1's ways); values and
    // other dtypes' keys packed to f32 rows: into the head's rows once (HeadRows), or this tile's
    int from = 0;
    float* kd = kpack;
    float* vd = vpack;
    if (cached) {
      uint8_t& done = sc.head.packed[j0 / NK];
      from = done;
      done = uint8_t(std::max(int(done), n));
      kd = kF32 ? nullptr : sc.head.k.data() + j0 * dim;
      vd = sc.head.v.data() + j0 * dim;
    }
    for (int j = 0; j < NK; ++j) {
      if (j >= n) {
        kt[j] = kZeroRow;
        continue;
      }
      if constexpr (kF32) kt[j] = kr[j];
      else kt[j] = kd + j * dim;
      vt[j] = vd + j * dim;
      if (j < from) continue;
      for (int64_t d = 0; d < dim; d += W) {
        if constexpr (!kF32) store<F32>(kd + j * dim + d, load<D>(kr[j] + d));
        store<F32>(vd + j * dim + d, load<D>(vr[j] + d));
      }
    }
    // S[j][r] = sum_d K[j][d] Qt[d][r], RB row vectors at a time
    int v0 = 0;
    for (; v0 + RB <= RV; v0 += RB) scores_t<RB, KB, MP>(Qt + v0 * W, kt, S + v0 * W, dim, n);
    if constexpr (RV % RB != 0) scores_t<RV % RB, KB, MP>(Qt + v0 * W, kt, S + v0 * W, dim, n);
    // the online softmax, W rows a vector: masks, the tile's max, p = e^(s - m), l, alpha
    for (int v = 0; v < RV; ++v) {
      vi lov, hiv;
      memcpy(&lov, lo + v * W, sizeof lov);
      memcpy(&hiv, hi + v * W, sizeof hiv);
      vf mx = splat(kNegInf);
      for (int j = 0; j < n; ++j) {
        float* s = S + j * MP + v * W;
        vf x = load<F32>(s);
        if (softcap > 0) x = softcap_v(x, softcap);
        const vi jj = vi{} + (jr + j);
        const vi keep = (jj >= lov) & (jj < hiv);
        x = select(keep, x, splat(kNegInf));
        store<F32>(s, x);
        mx = vmax(mx, x);
      }
      const vf m_old = load<F32>(m + v * W), m_new = vmax(m_old, mx);
      const vi live = m_new > splat(kNegInf);  // rows with a kept key so far
      const vf mz = select(live, m_new, splat(0.f));
      vf sum = splat(0.f);
      for (int j = 0; j < n; ++j) {
        float* s = S + j * MP + v * W;
        const vf p = select(live, vexp(load<F32>(s) - mz), splat(0.f));
        store<F32>(s, p);
        sum += p;
      }
      const vf a = select(m_old > splat(kNegInf), vexp(m_old - mz), splat(0.f));
      store<F32>(alpha + v * W, select(m_new > m_old, a, splat(1.f)));
      store<F32>(m + v * W, m_new);
      store<F32>(l + v * W, load<F32>(l + v * W) * load<F32>(alpha + v * W) + sum);
    }
    // O's rescale by alpha rides on P V's loads of O
    by_row_blocks(M, [&](int r, auto R) {
      pv_block<F32, decltype(R)::value, 1, MP>(S + r, vt, O + r * dim, dim, n, alpha + r);
    });
  }
  for (int r = 0; r < M; ++r) sc.m[row0 + r] = m[r], sc.l[row0 + r] = l[r];
}

template <class D, class Src>
void attend(int M, int row0, int64_t dim, int64_t k0, int64_t k1, int64_t kend, float softcap, const Src& src,
            Scratch& sc) {
  if (M <= 4) return attend_tiles<D, D, false>(M, row0, dim, k0, k1, kend, softcap, src, sc);
  const int rv = (M + W - 1) / W;
  if (rv == 1) return attend_tiles_t<D, 1>(M, row0, dim, k0, k1, kend, softcap, src, sc);
  if (rv == 2) return attend_tiles_t<D, 2>(M, row0, dim, k0, k1, kend, softcap, src, sc);
  if (rv == 3) return attend_tiles_t<D, 3>(M, row0, dim, k0, k1, kend, softcap, src, sc);
  if (rv == 4) return attend_tiles_t<D, 4>(M, row0, dim, k0, k1, kend, softcap, src, sc);
  attend_tiles<D, F32, true>(M, row0, dim, k0, k1, kend, softcap, src, sc);
}

// Resets the state of rows [row0, row0 + M) and loads their queries (times scale; qptr(r) for r < M).
// Rows kRowsAhead ahead are prefetched: a task's rows lie in runs of a few heads, a page or more apart.
constexpr int kRowsAhead = 8;
inline void prefetch_row(const void* p, int64_t bytes, bool write = false) {
  for (int64_t b = 0; b < bytes; b += 64) {
    if (write) __builtin_prefetch(static_cast<const char*>(p) + b, 1);
    else __builtin_prefetch(static_cast<const char*>(p) + b);
  }
}

template <class D, class QP> void load_rows(int M, int row0, int64_t dim, float scale, const QP& qptr, Scratch& sc) {
  for (int r = row0; r < row0 + M; ++r) {
    if (r - row0 + kRowsAhead < M) prefetch_row(qptr(r - row0 + kRowsAhead), dim * int64_t(sizeof(typename D::T)));
    const typename D::T* q = qptr(r - row0);
    for (int64_t d = 0; d < dim; d += W) store<F32>(sc.q.data() + r * dim + d, load<D>(q + d) * scale);
    std::memset(sc.o.data() + r * dim, 0, sizeof(float) * dim);
    sc.m[r] = kNegInf;
    sc.l[r] = 0.f;
  }
}

float sink_of(const Options& opt, int64_t head) {
  if (!opt.sinks) return kNegInf;
  switch (opt.sinks_dtype) {
    case DType::f32: return static_cast<const float*>(opt.sinks)[head];
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(opt.sinks)[head]);
    default: return bf16_to_f32(static_cast<const uint16_t*>(opt.sinks)[head]);
  }
}

// Writes one row's result: out = O / (l + e^(sink - m)), lse = log of that denominator.
template <class D> void finish_row(float m, float l, const float* O, float sink, int64_t dim, typename D::T* out,
                                   float* lse) {
  float ms = std::max(m, sink);
  float denom = 0.f, w = 0.f;
  if (ms != kNegInf) {
    w = m == kNegInf ? 0.f : std::exp(m - ms);
    denom = l * w + (sink == kNegInf ? 0.f : std::exp(sink - ms));
  }
  const float f = denom > 0 ? w / denom : 0.f;
  for (int64_t d = 0; d < dim; d += W) store<D>(out + d, load<F32>(O + d) * f);
  if (lse) *lse = denom > 0 ? ms + std::log(denom) : kNegInf;
}

// Keys of a sequence in the paged cache, kv head h: one division per tile.
template <class T> struct PagedRows {
  const PagedKv& kv;
  const int32_t* table;
  int64_t h;
  void rows(int64_t j0, int n, const T** k, const T** v) const {
    int64_t blk = j0 / kv.block_size, s = j0 % kv.block_size;
    for (int j = 0; j < n; ++j) {
      const int64_t b = table[blk];
      k[j] = static_cast<const T*>(kv.k) + b * kv.k_stride_b + s * kv.k_stride_s + h * kv.k_stride_h;
      v[j] = static_cast<const T*>(kv.v) + b * kv.v_stride_b + s * kv.v_stride_s + h * kv.v_stride_h;
      if (++s == kv.block_size) s = 0, ++blk;
    }
  }
};

// Keys of a ragged sequence: rows of k / v from its first token, kv head h.
template <class T> struct RaggedRows {
  const T* k; int64_t k_stride;
  const T* v; int64_t v_stride;
  void rows(int64_t j0, int n, const T** kk, const T** vv) const {
    for (int j = 0; j < n; ++j) kk[j] = k + (j0 + j) * k_stride, vv[j] = v + (j0 + j) * v_stride;
  }
};

#include "cpu/attention_decode.h"

// ---------------------------------------------------------------- decode
// A task is one sequence's key range, all of its kv heads: kChunk keys at a
// time, each head in turn. The cache holds every head of a token together
// (rows of one head are a page apart), so a chunk's pages are read whole, once,
// while they are in the TLB and the cache; head by head over the whole range
// touched a new page at every key.
constexpr int64_t kChunk = NT;
constexpr int64_t kAhead = 2 * NT;  // keys between a tile and the rows prefetched with it

// Splits so that about 4 tasks per thread exist, each with at least 256 keys.
int64_t decode_splits(const DecodeArgs& a) {
  int64_t longest = 0;
  for (int64_t b = 0; b < a.batch; ++b) longest = std::max<int64_t>(longest, a.kv.kv_lens[b]);
  const int64_t want = (4 * num_threads() + a.batch - 1) / std::max<int64_t>(a.batch, 1);
  return std::max<int64_t>(1, std::min<int64_t>(want, (longest + 255) / 256));
}

template <class D> void decode_typed(const DecodeArgs& a) {
  using T = typename D::T;
  const int64_t G = a.q_heads / a.kv_heads, H = a.kv_heads, dim = a.dim;
  const int64_t splits = decode_splits(a);
  const int64_t groups = a.batch * H;
  // Partial states of split s of group g: m, l per row, then O [G, D].
  const int64_t part = G * (dim + 2);
  std::vector<float> parts(splits > 1 ? groups * splits * part : 0);
  parallel_for(a.batch * splits, [&](int64_t task, int) {
    const int64_t b = task / splits, sp = task % splits;
    const int64_t len = a.kv.kv_lens[b];
    Scratch& sc = tls;
    sc.size(H * G, dim);
    int64_t lo = 0;
    if (a.opt.window > 0) lo = std::max<int64_t>(0, len - a.opt.window);
    const T* q = static_cast<const T*>(a.q) + b * a.q_stride_b;
    load_rows<D>(int(H * G), 0, dim, a.opt.scale, [&](int r) { return q + r * a.q_stride_h; }, sc);
    std::memset(sc.lv.data(), 0, sizeof(float) * H * G * W);
    // Split boundaries on multiples of NT keys (tiles then start on pages of 16).
    auto bound = [&](int64_t s) {
      if (s == 0) return lo;
      if (s == splits) return len;
      return std::max<int64_t>(lo, (lo + (len - lo) * s / splits) / NT * NT);
    };
    const int64_t k0 = bound(sp), k1 = bound(sp + 1);
    const int32_t* table = a.kv.block_table + b * a.kv.bt_stride;
    for (int64_t c0 = k0; c0 < k1; c0 += kChunk)
      for (int64_t h = 0; h < H; ++h)
        decode_range<D>(int(G), int(h * G), dim, c0, std::min(c0 + kChunk, k1), k1, kAhead, a.opt.softcap,
                        PagedRows<T>{a.kv, table, h}, sc);
    for (int64_t r = 0; r < H * G; ++r) sc.l[r] = hsum_tree(load<F32>(sc.lv.data() + r * W));
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = b * H + h;
      for (int64_t i = 0; i < G; ++i) {
        const int64_t r = h * G + i;
        if (splits > 1) {
          float* p = parts.data() + (g * splits + sp) * part;
          p[i] = sc.m[r];
          p[G + i] = sc.l[r];
          std::memcpy(p + 2 * G + i * dim, sc.o.data() + r * dim, sizeof(float) * dim);
          continue;
        }
        T* out = static_cast<T*>(a.o.out) + b * a.o.out_stride_t + r * a.o.out_stride_h;
        float* lse = a.o.lse ? a.o.lse + b * a.o.lse_stride_t + r * a.o.lse_stride_h : nullptr;
        finish_row<D>(sc.m[r], sc.l[r], sc.o.data() + r * dim, sink_of(a.opt, r), dim, out, lse);
      }
    }
  });
  if (splits == 1) return;
  parallel_for(groups * G, [&](int64_t task, int) {
    const int64_t g = task / G, r = task % G, b = g / a.kv_heads, h = g % a.kv_heads;
    Scratch& sc = tls;
    sc.size(1, dim);
    float m = kNegInf;
    for (int64_t sp = 0; sp < splits; ++sp) m = std::max(m, parts[(g * splits + sp) * part + r]);
    float l = 0.f;
    float* o = sc.o.data();
    std::memset(o, 0, sizeof(float) * dim);
    if (m != kNegInf) {
      for (int64_t sp = 0; sp < splits; ++sp) {
        const float* p = parts.data() + (g * splits + sp) * part;
        if (p[r] == kNegInf) continue;
        const float w = std::exp(p[r] - m);
        l += p[G + r] * w;
        for (int64_t d = 0; d < dim; d += W)
          store<F32>(o + d, load<F32>(o + d) + load<F32>(p + 2 * G + r * dim + d) * w);
      }
    }
    const int64_t hq = h * G + r;
    T* out = static_cast<T*>(a.o.out) + b * a.o.out_stride_t + hq * a.o.out_stride_h;
    float* lse = a.o.lse ? a.o.lse + b * a.o.lse_stride_t + hq * a.o.lse_stride_h : nullptr;
    finish_row<D>(m, l, o, sink_of(a.opt, hq), dim, out, lse);
  });
}

// ---------------------------------------------------------------- prefill
// Numbers the prefill calls of every dtype: tls's HeadRows are shared by all of them.
std::atomic<uint64_t> prefill_calls{0};

template <class D> void prefill_typed(const PrefillArgs& a) {
  using T = typename D::T;
  const int64_t G = a.q_heads / a.kv_heads, dim = a.dim;
  const int64_t tq = std::max<int64_t>(1, 4 * W / G);  // queries per task: 4 W rows (attend_tiles_t)
  // Tasks: kv heads, then (sequence, query tile) pairs, the largest tiles first.
  std::vector<int64_t> tiles;  // (b << 32) | tile
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t n = a.cu_seqlens[b + 1] - a.cu_seqlens[b];
    for (int64_t t = (n + tq - 1) / tq - 1; t >= 0; --t) tiles.push_back((b << 32) | t);
  }
  if (a.causal) {
    std::stable_sort(tiles.begin(), tiles.end(), [&](int64_t x, int64_t y) { return (x & 0xffffffff) > (y & 0xffffffff); });
  }
  const uint64_t call = ++prefill_calls;  // HeadRows packed in an earlier call are stale
  parallel_for(int64_t(tiles.size()) * a.kv_heads, [&](int64_t task, int) {
    // kv head by kv head: a head's keys stay in the core's L2 while its query tiles run
    const int64_t nt = int64_t(tiles.size()), tile = tiles[task % nt], h = task / nt;
    const int64_t b = tile >> 32, t0 = (tile & 0xffffffff) * tq;
    const int64_t start = a.cu_seqlens[b], n = a.cu_seqlens[b + 1] - start;
    const int64_t nq = std::min(tq, n - t0);
    const int M = int(nq * G);
    const int64_t len = a.paged ? int64_t(a.kv.kv_lens[b]) : n;
    const int64_t base = len - n;  // position of query 0
    Scratch& sc = tls;
    sc.size(M, dim);
    sc.head.bind(call, b, h, len, dim, !std::is_same<D, F32>::value);
    const T* q = static_cast<const T*>(a.q);
    load_rows<D>(M, 0, dim, a.opt.scale, [&](int r) {
      return q + (start + t0 + r / G) * a.q_stride_t + (h * G + r % G) * a.q_stride_h;
    }, sc);
    int64_t k0 = len, k1 = 0;
    for (int r = 0; r < M; ++r) {
      const int64_t p = base + t0 + r / G;
      sc.hi[r] = a.causal ? std::min(p + 1, len) : len;
      sc.lo[r] = a.opt.window > 0 ? std::max<int64_t>(0, p - a.opt.window + 1) : 0;
      k0 = std::min(k0, sc.lo[r]);
      k1 = std::max(k1, sc.hi[r]);
    }
    if (a.paged) {
      const PagedRows<T> src{a.kv, a.kv.block_table + b * a.kv.bt_stride, h};
      attend<D>(M, 0, dim, k0, k1, k1, a.opt.softcap, src, sc);
    } else {
      const T* k = static_cast<const T*>(a.k) + start * a.k_stride_t + h * a.k_stride_h;
      const T* v = static_cast<const T*>(a.v) + start * a.v_stride_t + h * a.v_stride_h;
      attend<D>(M, 0, dim, k0, k1, k1, a.opt.softcap, RaggedRows<T>{k, a.k_stride_t, v, a.v_stride_t}, sc);
    }
    auto out_row = [&](int r) {
      const int64_t t = start + t0 + r / G, hq = h * G + r % G;
      return static_cast<T*>(a.o.out) + t * a.o.out_stride_t + hq * a.o.out_stride_h;
    };
    for (int r = 0; r < M; ++r) {
      if (r + kRowsAhead < M) prefetch_row(out_row(r + kRowsAhead), dim * int64_t(sizeof(T)), true);
      const int64_t t = start + t0 + r / G, hq = h * G + r % G;
      T* out = out_row(r);
      float* lse = a.o.lse ? a.o.lse + t * a.o.lse_stride_t + hq * a.o.lse_stride_h : nullptr;
      finish_row<D>(sc.m[r], sc.l[r], sc.o.data() + r * dim, sink_of(a.opt, hq), dim, out, lse);
    }
  });
}

// ---------------------------------------------------------------- merge, append
template <class D> void merge_typed(const MergeArgs& a) {
  using T = typename D::T;
  parallel_rows(a.tokens * a.heads, 3 * a.dim * int64_t(sizeof(T)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r / a.heads, h = r % a.heads;
      const float la = a.la[t * a.la_stride_t + h * a.la_stride_h], lb = a.lb[t * a.lb_stride_t + h * a.lb_stride_h];
      float m = std::max(la, lb);
      float wa = 0.f, wb = 0.f;
      if (m != kNegInf) {
        wa = la == kNegInf ? 0.f : std::exp(la - m);
        wb = lb == kNegInf ? 0.f : std::exp(lb - m);
      }
      const float s = wa + wb, fa = s > 0 ? wa / s : 0.f, fb = s > 0 ? wb / s : 0.f;
      const T* oa = static_cast<const T*>(a.oa) + t * a.oa_stride_t + h * a.oa_stride_h;
      const T* ob = static_cast<const T*>(a.ob) + t * a.ob_stride_t + h * a.ob_stride_h;
      T* out = static_cast<T*>(a.o.out) + t * a.o.out_stride_t + h * a.o.out_stride_h;
      for (int64_t d = 0; d < a.dim; d += W) store<D>(out + d, load<D>(oa + d) * fa + load<D>(ob + d) * fb);
      if (a.o.lse) a.o.lse[t * a.o.lse_stride_t + h * a.o.lse_stride_h] = s > 0 ? m + std::log(s) : kNegInf;
    }
  });
}

}  // namespace

void append_kv_run(const attention::AppendKvArgs& a) {
  const int64_t row = a.dim * dtype_size(a.dtype);
  const char* k = static_cast<const char*>(a.k);
  const char* v = static_cast<const char*>(a.v);
  char* kc = static_cast<char*>(a.k_cache);
  char* vc = static_cast<char*>(a.v_cache);
  const int64_t esz = dtype_size(a.dtype);
  parallel_rows(a.tokens, 4 * a.heads * row, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = a.slot_dtype == DType::i64 ? static_cast<const int64_t*>(a.slots)[t * a.slot_stride]
                                                   : static_cast<const int32_t*>(a.slots)[t * a.slot_stride];
      if (s < 0) continue;
      const int64_t blk = s / a.block_size, pos = s % a.block_size;
      for (int64_t h = 0; h < a.heads; ++h) {
        std::memcpy(kc + (blk * a.kc_stride_b + pos * a.kc_stride_s + h * a.kc_stride_h) * esz,
                    k + (t * a.k_stride_t + h * a.k_stride_h) * esz, size_t(row));
        std::memcpy(vc + (blk * a.vc_stride_b + pos * a.vc_stride_s + h * a.vc_stride_h) * esz,
                    v + (t * a.v_stride_t + h * a.v_stride_h) * esz, size_t(row));
      }
    }
  });
}

void decode_run(const DecodeArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) { decode_typed<decltype(d)>(a); });
}

void prefill_run(const PrefillArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) { prefill_typed<decltype(d)>(a); });
}

void merge_states_run(const MergeArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) { merge_typed<decltype(d)>(a); });
}

}  // namespace braze::cpu::BRAZE_ISA
