// The decode tile of the CPU attention family, included by attention.cpp
// inside its per-ISA anonymous namespace. One tile is NT = 16 keys of one kv
// head against the G query rows of that head (pre-scaled f32 in the scratch):
//
// * scores: 4 keys x R rows at a time, one partial vector per (row, key)
//   summed over head_dim, then reduced by a transpose tree whose output is
//   the scores themselves: lane i of a row's score vector is key i. There
//   is no scalar score and no store of partial sums per key.
// * online softmax once a tile and row, on those vectors: the row keeps a
//   reference max m and rescales only when a score passes m + kSlack (then
//   m becomes the tile's max); below that, e^(s - m) <= e^kSlack needs no
//   rescale, so the tile costs one compare and one vexp per W keys, and the
//   row's sum stays a vector (reduced once, at the end of the range).
// * P V: broadcast probabilities times V rows into R x NV accumulators of
//   O's columns, NV W-wide vectors at a time (attention.cpp's pv_rows).
#pragma once

constexpr int NT = 16;          // keys per decode tile
constexpr float kSlack = 8.f;   // e^8 ~ 3e3: the largest factor a stale max lets through

// Four vectors a0..a3 -> one whose lane 4g + k holds the sum of a_k's lanes
// in 128-bit group g (all of them without groups).
inline vf sum4_groups(vf a0, vf a1, vf a2, vf a3) {
#if defined(__AVX512F__)
  const __m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps((__m512)a0, (__m512)a1), _mm512_unpackhi_ps((__m512)a0, (__m512)a1));
  const __m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps((__m512)a2, (__m512)a3), _mm512_unpackhi_ps((__m512)a2, (__m512)a3));
  const __m512d x = _mm512_castps_pd(t0), y = _mm512_castps_pd(t1);
  return (vf)_mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
#elif defined(__AVX__)
  const __m256 h01 = _mm256_hadd_ps((__m256)a0, (__m256)a1), h23 = _mm256_hadd_ps((__m256)a2, (__m256)a3);
  return (vf)_mm256_hadd_ps(h01, h23);
#else
  vf r = {};
  r[0] = hsum(a0), r[1] = hsum(a1), r[2] = hsum(a2), r[3] = hsum(a3);
  return r;
#endif
}

// W / 4 vectors of sum4_groups (keys 4q .. 4q + 3 in vector q) -> lane i the total of key i.
inline vf sum_groups(const vf* u) {
#if defined(__AVX512F__)
  const __m512 u0 = (__m512)u[0], u1 = (__m512)u[1], u2 = (__m512)u[2], u3 = (__m512)u[3];
  const __m512 v0 = _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, 0x88), _mm512_shuffle_f32x4(u0, u1, 0xDD));
  const __m512 v1 = _mm512_add_ps(_mm512_shuffle_f32x4(u2, u3, 0x88), _mm512_shuffle_f32x4(u2, u3, 0xDD));
  return (vf)_mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, 0x88), _mm512_shuffle_f32x4(v0, v1, 0xDD));
#elif defined(__AVX__)
  const __m256 u0 = (__m256)u[0], u1 = (__m256)u[1];
  return (vf)_mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
#else
  return u[0];
#endif
}

inline float hmax_tree(vf v) {
#if defined(__AVX512F__)
  return _mm512_reduce_max_ps((__m512)v);
#else
  return hmax(v);
#endif
}
inline float hsum_tree(vf v) {
#if defined(__AVX512F__)
  return _mm512_reduce_add_ps((__m512)v);
#else
  return hsum(v);
#endif
}

// f(r, integral_constant<R>) over blocks of at most MaxR of M rows.
template <int MaxR, class F> inline void by_rows(int M, F f) {
  int r = 0;
  for (; r + MaxR <= M; r += MaxR) f(r, std::integral_constant<int, MaxR>{});
  if constexpr (MaxR > 2) {
    switch (M - r) {
      case 3: f(r, std::integral_constant<int, 3>{}); return;
      case 2: f(r, std::integral_constant<int, 2>{}); return;
      default: break;
    }
  }
  if (M - r == 1) f(r, std::integral_constant<int, 1>{});
}

constexpr int SV = NT / W;  // score vectors per row and tile
// Rows a block of the score loop holds: R x 4 accumulators, 4 key vectors and
// a query vector in the 32 registers of AVX-512, 2 rows in the 16 of AVX / SSE.
constexpr int kScoreRows = W == 16 ? 4 : 2;

// Rows of keys ahead of the tile, fetched into L2 (prefetcht1) four keys at a
// time between the score blocks of the current tile. prefetcht0 (into L1)
// held back the tile's own loads: D128 f32, 4096 keys, 0.73-0.80 against
// 0.39-0.53 us a key on one thread.
struct Prefetch {
  const char* k[NT];
  const char* v[NT];
  int n = 0;
  int64_t bytes = 0;
  void keys(int j0, int j1) const {
    for (int j = j0; j < std::min(j1, n); ++j)
      for (int64_t b = 0; b < bytes; b += 64) {
        __builtin_prefetch(k[j] + b, 0, 2);
        __builtin_prefetch(v[j] + b, 0, 2);
      }
  }
};

// S[r][v] (lane i: key v W + i) = Q[r] . K[key] for R rows and the NT keys of K (rows past the tile's
// keys point at zeros).
template <class L, int R>
inline void tile_scores(const float* Q, int64_t dim, const typename L::T* const* K, vf (*S)[SV], const Prefetch* pf) {
  vf U[R][NT / 4];
  for (int q4 = 0; q4 < NT / 4; ++q4) {
    if (pf) pf->keys(4 * q4, 4 * q4 + 4);
    const typename L::T* k0 = K[4 * q4];
    const typename L::T* k1 = K[4 * q4 + 1];
    const typename L::T* k2 = K[4 * q4 + 2];
    const typename L::T* k3 = K[4 * q4 + 3];
    vf acc[R][4] = {};
    for (int64_t d = 0; d < dim; d += W) {
      const vf a = load<L>(k0 + d), b = load<L>(k1 + d), c = load<L>(k2 + d), e = load<L>(k3 + d);
      for (int r = 0; r < R; ++r) {
        const vf q = load<F32>(Q + r * dim + d);
        acc[r][0] += q * a;
        acc[r][1] += q * b;
        acc[r][2] += q * c;
        acc[r][3] += q * e;
      }
    }
    for (int r = 0; r < R; ++r) U[r][q4] = sum4_groups(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < SV; ++v) S[r][v] = sum_groups(&U[r][v * (W / 4)]);
}


// The online softmax of one row over a tile: s (the scores, capped, lanes
// past n at -inf) become P[0 : NT]; m, lv (the row's sum as a vector) and
// O[0 : dim] are rescaled when a score passes m + kSlack.
inline void tile_softmax_row(const vf* s, float& m, float* lsum, float* O, int64_t dim, float* P) {
  vf lv = load<F32>(lsum);
  const vf thr = splat(m + kSlack);
  bool up = false;
  for (int v = 0; v < SV; ++v) up |= any_greater(s[v], thr);
  if (up) {
    vf mx = s[0];
    for (int v = 1; v < SV; ++v) mx = vmax(mx, s[v]);
    const float m_new = hmax_tree(mx);
    if (m != kNegInf) {
      const float alpha = std::exp(m - m_new);
      lv = lv * alpha;
      for (int64_t d = 0; d < dim; d += W) store<F32>(O + d, load<F32>(O + d) * alpha);
    }
    m = m_new;
  }
  if (m == kNegInf) {  // no key so far has a finite score (-inf - -inf is NaN)
    for (int v = 0; v < SV; ++v) store<F32>(P + v * W, splat(0.f));
    return;  // lsum is still 0
  }
  const vf mm = splat(m);
  for (int v = 0; v < SV; ++v) {
    const vf p = vexp(s[v] - mm);
    lv += p;
    store<F32>(P + v * W, p);
  }
  store<F32>(lsum, lv);
}

// One tile (n <= NT keys: K rows kt[0 : NT], rows past n at zeros; V rows
// vt[0 : n]) against the G query rows row0 .. row0 + G - 1 of the scratch.
template <class L, int R>
inline void tile_rows(int row0, int64_t dim, const typename L::T* const* kt, const typename L::T* const* vt, int n,
                      float softcap, const Prefetch* pf, Scratch& sc) {
  const float* Q = sc.q.data() + row0 * dim;
  float* O = sc.o.data() + row0 * dim;
  vf S[R][SV];
  tile_scores<L, R>(Q, dim, kt, S, pf);
  if (softcap > 0)  // before the mask: the cap of -inf is finite
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < SV; ++v) S[r][v] = softcap_v(S[r][v], softcap);
  if (n < NT) {
    vi idx;
    for (int i = 0; i < W; ++i) idx[i] = i;
    for (int v = 0; v < SV; ++v) {
      const vi keep = (idx + v * W) < n;
      for (int r = 0; r < R; ++r) S[r][v] = select(keep, S[r][v], splat(kNegInf));
    }
  }
  alignas(64) float P[R * NT];
  for (int r = 0; r < R; ++r)
    tile_softmax_row(S[r], sc.m[row0 + r], sc.lv.data() + (row0 + r) * W, O + r * dim, dim, P + r * NT);
  pv_block<L, R, NT>(P, vt, O, dim, n);
}

// Rows row0 .. row0 + G - 1 (one kv head) over keys [k0, k1) of src; the
// rows `ahead` keys on (below kend) are prefetched while a tile is computed.
template <class D, class Src>
void decode_range(int G, int row0, int64_t dim, int64_t k0, int64_t k1, int64_t kend, int64_t ahead, float softcap,
                  const Src& src, Scratch& sc) {
  using T = typename D::T;
  // f16 / bf16 tiles read by more than one score block are converted once.
  const bool pack = !std::is_same<D, F32>::value && G > kScoreRows;
  const T* kr[NT];
  const T* vr[NT];
  const float* kf[NT];
  const float* vq[NT];
  Prefetch pf;
  pf.bytes = dim * int64_t(sizeof(T));
  for (int64_t j0 = k0; j0 < k1; j0 += NT) {
    const int n = int(std::min<int64_t>(NT, k1 - j0));
    pf.n = 0;
    if (j0 + ahead < kend) {
      const T* pk[NT];
      const T* pv[NT];
      pf.n = int(std::min<int64_t>(NT, kend - j0 - ahead));
      src.rows(j0 + ahead, pf.n, pk, pv);
      for (int j = 0; j < pf.n; ++j) pf.k[j] = reinterpret_cast<const char*>(pk[j]), pf.v[j] = reinterpret_cast<const char*>(pv[j]);
    }
    src.rows(j0, n, kr, vr);
    for (int j = n; j < NT; ++j) kr[j] = reinterpret_cast<const T*>(kZeroRow);
    if (pack) {
      for (int j = 0; j < NT; ++j) {
        float* kd = sc.k.data() + j * dim;
        float* vd = sc.v.data() + j * dim;
        for (int64_t d = 0; d < dim; d += W) {
          store<F32>(kd + d, load<D>(kr[j] + d));
          if (j < n) store<F32>(vd + d, load<D>(vr[j] + d));
        }
        kf[j] = kd;
        vq[j] = vd;
      }
      by_rows<kScoreRows>(G, [&](int r, auto R) { tile_rows<F32, decltype(R)::value>(row0 + r, dim, kf, vq, n, softcap, r == 0 ? &pf : nullptr, sc); });
    } else {
      by_rows<kScoreRows>(G, [&](int r, auto R) { tile_rows<D, decltype(R)::value>(row0 + r, dim, kr, vr, n, softcap, r == 0 ? &pf : nullptr, sc); });
    }
  }
}
