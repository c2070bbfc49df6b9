// quant.matmul's int8-activation GEMV (included by quant_matmul.cpp inside
// braze::cpu::BRAZE_ISA): x rows quantized once per call to int8 the way ggml
// does it (q8_0-like blocks of 32 for the legacy formats, q8_K-like blocks of
// 256 for the K-quants; one f32 scale d = max|x| / 127 a block, round to
// nearest even, sums of every 16 levels), then int8 x int8 dot products per
// weight block, exact in int32, combined with the blocks' f32 scales.
//
// AVX2 / AVX-512 builds: q8_0, q4_1, q5_0, q5_1, iq4_nl, q4_K, q5_K and
// q6_K unpack whole blocks in 256-bit vectors (nibbles by mask and shift,
// high bits by byte shuffles, codebooks by vpshufb) and multiply u8 x s8 with
// vpmaddubsw + vpmaddwd (signed weights through vpsignb); with AVX-512 the
// legacy blocks go two a 512-bit vector (one load, scales and nibbles spread
// by vpermw), and where the CPU has AVX-512 VNNI, q4_1 / q5_0 / iq4_nl
// at 1-2 rows use vpdpbusd on unsigned levels (LegacyVnniDot). q4_0 has its
// own kernel (Q40Dot: four blocks a step, x stored in the codes' nibble order,
// 8 products an int32 lane; vpdpbusd at every row count). Every other
// int8-activation format, and every one in the base build, goes through the
// codec's levels 16 at a time and a scalar int32 dot.
//
// A row's result depends only on that row of x and W: the loops over the x
// rows of a batch (MR) only share the unpacked weight block.
// Included inside quant_matmul.cpp's anonymous namespace (it uses that file's helpers).

// ------------------------------------------------------------ x rows as int8
struct QX {
  std::unique_ptr<uint8_t[]> buf;
  // [k / lb][MR][lb]: lb = 64 or 256 elements (xb 32 or 256) of a row, then the next row; split
  // (q4_0's Q40Dot): lb = 128, four blocks' elements 0-15 (16 each) then their elements 16-31
  const int8_t* q;
  const float* d;       // [MR][k / xb]: the block scales (then 16 floats of padding: 64-byte loads at any block)
  const int16_t* bsum;  // [MR][k / 16]: sums of 16 levels
  const float* xs;      // [MR][k / 32]: d * (sum of 32 levels) (xb == 32)
  const int16_t* bsum32;  // [MR][k / 32]: sums of 32 levels
  const float* dv;      // xb == 32: [k / 64][MR][2][8], d eight times (a vector load where MR > 2);
                        // split: [k / 128][MR][4][4], each of 4 blocks' d four times
  const int32_t* c;     // xb == 32 with a VNNI bias: [k / 64][MR][16], -bias * (sum of each 4 levels), q's layout;
                        // split: [k / 128][MR][16], lane 4 b + j: -bias * (levels 4j..4j+3 and 16+4j..16+4j+3 of block b)
  int64_t k;
  int xb, mr;
  static constexpr int lb(int xb, bool split = false) { return split ? 128 : xb == 32 ? 64 : xb; }
  // row i's block b, then (xb == 32, b even) block b + 1: a W block's x rows lie together
  template <int XB> const int8_t* qb(int i, int64_t b) const {  // XB == xb, a constant: no division
    constexpr int64_t l = lb(XB);
    const int64_t e = b * XB;
    return q + ((e / l) * mr + i) * l + e % l;
  }
  // the VNNI offsets of row i's blocks b and b + 1 (b even): 16 int32 lanes, as the dot's lanes
  const int32_t* cb(int i, int64_t b) const { return c + ((b / 2) * mr + i) * 16; }
  const float* dvb(int i, int64_t b) const { return dv + ((b / 2) * mr + i) * 16; }
  // split layout: row i's four blocks 4 g .. 4 g + 3 (128 levels, their 16 offsets, their 16 scales)
  const int8_t* q4(int i, int64_t g) const { return q + (g * mr + i) * 128; }
  const int32_t* c4(int i, int64_t g) const { return c + (g * mr + i) * 16; }
  const float* dv4(int i, int64_t g) const { return dv + (g * mr + i) * 16; }
};

// q[j] = round(x[j] / d), d = max|x| / 127 (ggml's q8_0 / q8_K). NaN in x: d and the result NaN.
inline void quantize_x_block(const float* x, int n, int8_t* q, float& d) {
  float amax = 0.f;
  for (int j = 0; j < n; ++j) {
    const float a = __builtin_fabsf(x[j]);
    amax = a > amax ? a : amax;
    if (a != a) amax = a;
  }
  d = amax / 127.f;
  const float id = d != 0.f && d == d ? 1.f / d : 0.f;
  for (int j = 0; j < n; ++j) {
    float v = __builtin_nearbyintf(x[j] * id);
    v = v > 127.f ? 127.f : v < -127.f ? -127.f : v;
    q[j] = int8_t(v == v ? int(v) : 0);
  }
}

// bias (xb == 32 only): VNNI multiplies unsigned levels u = level + bias, and each 4-lane
// dot then starts from -bias * (the sum of those 4 x levels) (QX::c).
template <class D> QX quantize_x(const quant::MatmulArgs& a, int mr, int xb, int bias = 0, bool split = false) {
  const int64_t k = a.w.cols, nd = k / xb;
  QX g;
  const int64_t l = QX::lb(xb, split), kpad = (k + l - 1) / l * l;
  const size_t nq = size_t(mr) * size_t(kpad), nf = size_t(mr) * size_t(nd + k / 32 + 8 * (kpad / 32)) + 16,
               ns = size_t(mr) * size_t(k / 16 + k / 32), nc = bias ? size_t(mr) * size_t(kpad / 4) : 0;
  g.buf.reset(new uint8_t[nq + 4 * nc + 4 * nf + 2 * ns + 64]());
  int8_t* q = reinterpret_cast<int8_t*>(g.buf.get());
  int32_t* c = reinterpret_cast<int32_t*>(g.buf.get() + (nq + 15) / 16 * 16);
  float* d = reinterpret_cast<float*>(c + nc);
  float* xs = d + size_t(mr) * nd + 16;
  float* dv = xs + size_t(mr) * (k / 32);
  int16_t* bsum = reinterpret_cast<int16_t*>(dv + size_t(mr) * (kpad / 32) * 8);
  int16_t* bsum32 = bsum + size_t(mr) * (k / 16);
  std::unique_ptr<float[]> xf(new float[size_t(k)]);
  for (int64_t i = 0; i < a.m; ++i) {
    convert_row<D>(static_cast<const typename D::T*>(a.x) + i * a.x_stride, xf.get(), k);
    auto at = [&](int64_t e) {
      if (!split) return q + ((e / l) * mr + i) * l + e % l;
      const int64_t r = e % 128, j = r % 32;  // block r / 32 of the group, its element j
      return q + ((e / 128) * mr + i) * 128 + (j / 16) * 64 + (r / 32) * 16 + j % 16;
    };
    for (int64_t b = 0; b < nd; ++b) {
      if (!split) {
        quantize_x_block(xf.get() + b * xb, xb, at(b * xb), d[i * nd + b]);
      } else {  // a block's halves lie 64 bytes apart
        int8_t t[32];
        quantize_x_block(xf.get() + b * 32, 32, t, d[i * nd + b]);
        memcpy(at(b * 32), t, 16);
        memcpy(at(b * 32 + 16), t + 16, 16);
      }
    }
    for (int64_t c16 = 0; c16 < k / 16; ++c16) {
      const int8_t* qc = at(c16 * 16);
      int s = 0;
      for (int j = 0; j < 16; ++j) s += qc[j];
      bsum[i * (k / 16) + c16] = int16_t(s);
    }
    for (int64_t c32 = 0; c32 < k / 32; ++c32)
      bsum32[i * (k / 32) + c32] = int16_t(bsum[i * (k / 16) + 2 * c32] + bsum[i * (k / 16) + 2 * c32 + 1]);
    if (xb == 32)
      for (int64_t b = 0; b < nd; ++b) {
        xs[i * nd + b] = d[i * nd + b] * float(bsum[i * (k / 16) + 2 * b] + bsum[i * (k / 16) + 2 * b + 1]);
        if (split)
          for (int j = 0; j < 4; ++j) dv[((b / 4) * mr + i) * 16 + (b % 4) * 4 + j] = d[i * nd + b];
        else
          for (int j = 0; j < 8; ++j) dv[((b / 2) * mr + i) * 16 + (b % 2) * 8 + j] = d[i * nd + b];
      }
    if (bias && !split)  // the lanes of q's layout: 4 levels each
      for (int64_t e = 0; e < k; e += 4) {
        const int8_t* qe = at(e);
        c[(at(e) - q) / 4] = -bias * (int(qe[0]) + qe[1] + qe[2] + qe[3]);
      }
    if (bias && split)  // 8 levels a lane: 4 of a block's first 16 and the 4 sixteen past them
      for (int64_t b = 0; b < nd; ++b)
        for (int j = 0; j < 4; ++j) {
          const int8_t *lo = at(b * 32 + 4 * j), *hi = at(b * 32 + 16 + 4 * j);
          c[((b / 4) * mr + i) * 16 + (b % 4) * 4 + j] =
              -bias * (int(lo[0]) + lo[1] + lo[2] + lo[3] + hi[0] + hi[1] + hi[2] + hi[3]);
        }
  }
  g.q = q;
  g.d = d;
  g.xs = xs;
  g.dv = dv;
  g.bsum32 = bsum32;
  g.bsum = bsum;
  g.c = bias ? c : nullptr;
  g.k = k;
  g.xb = xb;
  g.mr = mr;
  return g;
}

// Which formats take int8 x, and in which blocks (0: none, exact f32 x).
constexpr int int8_x_block(QFormat f) {
  switch (f) {
    case QFormat::q8_0: case QFormat::q4_0: case QFormat::q4_1: case QFormat::q5_0: case QFormat::q5_1:
    case QFormat::iq4_nl: case QFormat::mxfp4_gguf:
      return 32;
    case QFormat::q2_K: case QFormat::q3_K: case QFormat::q4_K: case QFormat::q5_K: case QFormat::q6_K:
    case QFormat::iq4_xs:
      return 256;
    default:
      return 0;
  }
}

// ------------------------------------------------------------ generic: the codec's levels
// res[i] = sum over chunks of 16 of (d dx) (q . qx) (+/- (m dx) bsum).
template <QFormat F> struct CodecDot {
  static constexpr int kXBlock = int8_x_block(F);
  static constexpr int kCBias = 0;
  static constexpr bool kSplitX = false;
  template <int MR> static void row(const uint8_t* w, const QX& x, float* res) {
    constexpr Affine aff = Codec<F>::kAffine;
    const int64_t k = x.k, nd = k / kXBlock;
    float acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = 0.f;
    for (int64_t k0 = 0; k0 < k; k0 += 16) {
      int8_t q[16];
      float d, m;
      Codec<F>::levels(w, k0, q, d, m);
      for (int i = 0; i < MR; ++i) {
        const int8_t* qx = x.template qb<kXBlock>(i, k0 / kXBlock) + k0 % kXBlock;
        int s = 0;
        for (int j = 0; j < 16; ++j) s += int(q[j]) * int(qx[j]);
        const float dx = x.d[i * nd + k0 / kXBlock];
        acc[i] = __builtin_fmaf(d * dx, float(s), acc[i]);
        if constexpr (aff != Affine::mul) {
          const float mm = aff == Affine::mul_add ? m * dx : -(m * dx);
          acc[i] = __builtin_fmaf(mm, float(x.bsum[i * (k / 16) + k0 / 16]), acc[i]);
        }
      }
    }
    for (int i = 0; i < MR; ++i) res[i] = acc[i];
  }
};

#if defined(__AVX2__)
// ------------------------------------------------------------ AVX2 blocks
inline __m256i ld256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i ld128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
// 8 int32 lanes, each the sum of 4 products u[j] s[j] (u unsigned <= 63, or <= 128 with |s| <= 127)
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// the same with each half's 16 products weighted by an int16 scale (lanes 0-3 by lo, 4-7 by hi)
inline __m256i dot_u8s8_scaled(__m256i u, __m256i s, __m256i scales16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales16);
}
inline float hsum256(__m256 v) {
  f8 t;
  memcpy(&t, &v, sizeof t);
  return hsum8(t);
}
// 16 bytes as the low nibbles (elements 0-15) then the high ones (16-31).
inline __m256i nibbles32(const uint8_t* p) {
  const __m128i v = ld128(p), m4 = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}
// Bit j of the 32-bit qh as 0 / 16 in byte j.
inline __m256i high_bits32(uint32_t qh) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bits = _mm256_set1_epi64x(0x8040201008040201LL);
  const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(int(qh)), shuf), bits);
  return _mm256_and_si256(_mm256_cmpeq_epi8(b, bits), _mm256_set1_epi8(16));
}
// The sum of 4 int32 lanes, and of 8.
inline int hsum_epi32(__m128i t) {
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
  return _mm_cvtsi128_si32(t);
}
inline int hsum_epi32(__m256i t) {
  return hsum_epi32(_mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1)));
}
#if defined(__AVX512BW__)
// Two blocks' 16 nibble bytes (at p0, p1) as [lo0 | hi0 | lo1 | hi1]: each block's elements 0-31.
inline __m512i nibbles64(const uint8_t* p0, const uint8_t* p1) {
  const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(ld128(p0))),
                                       _mm256_broadcastsi128_si256(ld128(p1)), 1);
  const __m512i sh = _mm512_set_epi64(0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                      0x0004000400040004LL, 0x0004000400040004LL, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi16(v, sh), _mm512_set1_epi8(15));
}
#endif
inline __m256i iq4_codebook() {
  const __m128i t = _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
  return _mm256_set_m128i(t, t);
}

// Legacy 32-element blocks (q4_0: Q40Dot): the block's levels as int8 (q5_0 centred, so
// signed like q8_0 / iq4_nl), d, and for q4_1 / q5_1 the offset m (unsigned
// levels; m times the x block's sum). Two blocks a step: in one 512-bit vector
// with AVX-512 BW, else in two 256-bit accumulators (even and odd blocks), so
// the FMA chains of a row overlap; the lanes meet in the same order on both.
// Every path sums the same exact int32 lanes (4 products each) and adds
// (d_w * d_x) * lane into the same float lane in the same order: bit-identical.
template <QFormat F> struct LegacyDot {
  static constexpr int kXBlock = 32;
  static constexpr int kCBias = 0;
  static constexpr bool kSplitX = false;
  static constexpr int64_t kBytes = quant::info(F).blocks.block_bytes;
  static constexpr bool kOffset = F == QFormat::q4_1 || F == QFormat::q5_1;
  // U: q5_0 not centred (VNNI's unsigned levels; level + 16)
  template <bool U = false> static __m256i levels(const uint8_t* b, float& d, float& m) {
    d = quant::load_f16(b);
    m = 0.f;
    if constexpr (F == QFormat::q8_0) {
      return ld256(b + 2);
    } else if constexpr (F == QFormat::iq4_nl) {
      return _mm256_shuffle_epi8(iq4_codebook(), nibbles32(b + 2));
    } else if constexpr (F == QFormat::q4_1) {
      m = quant::load_f16(b + 2);
      return nibbles32(b + 4);
    } else if constexpr (F == QFormat::q5_0) {
      uint32_t qh;
      memcpy(&qh, b + 2, 4);
      const __m256i u = _mm256_or_si256(nibbles32(b + 6), high_bits32(qh));
      return U ? u : _mm256_sub_epi8(u, _mm256_set1_epi8(16));
    } else {
      static_assert(F == QFormat::q5_1);
      m = quant::load_f16(b + 2);
      uint32_t qh;
      memcpy(&qh, b + 4, 4);
      return _mm256_or_si256(nibbles32(b + 8), high_bits32(qh));
    }
  }
  // 8 int32 lanes of one block's dot with one row's levels
  static __m256i dot1(__m256i v, __m256i qx) {
    if constexpr (kOffset) return dot_u8s8(v, qx);
    else return dot_u8s8(_mm256_sign_epi8(v, v), _mm256_sign_epi8(qx, v));
  }
#if defined(__AVX512BW__)
  // Two blocks (at p) in one vector, block b in bytes 0-31 and b + 1 in 32-63, and their
  // scales [d0 x 8 | d1 x 8] (f32): one 64-byte load holds both f16 scales (and a 4-bit
  // pair's nibbles), spread by vpermw; q4_1's / q5_1's m0, m1. U: the levels plus
  // vnni_bias<F>(), unsigned bytes (q4_1 / q5_1 are already).
  struct Idx { alignas(64) int16_t v[32]; };
  static constexpr int kWords = int(kBytes / 2);  // a block's 16-bit words (every legacy block is even)
  static constexpr Idx scale_idx() {
    Idx r{};
    for (int j = 0; j < 32; ++j) r.v[j] = int16_t(j >= 8 && j < 16 ? kWords : 0);
    return r;
  }
  static constexpr Idx nibble_idx() {  // 128-bit lanes: qs0, qs0, qs1, qs1 (then shifted 0 / 4 / 0 / 4)
    constexpr int o = F == QFormat::q4_1 ? 2 : 1;
    Idx r{};
    for (int j = 0; j < 32; ++j) r.v[j] = int16_t((j < 16 ? o : kWords + o) + j % 8);
    return r;
  }
  template <bool U> static __m512i pair(const uint8_t* p, __m512& dw, float& m0, float& m1) {
    static constexpr Idx si = scale_idx(), ni = nibble_idx();
    // q8_0's pair is 68 bytes; the others' (36-48) end before 64: a masked load reads no further
    __m512i raw;
    if constexpr (2 * kBytes >= 64) raw = _mm512_loadu_si512(p);
    else raw = _mm512_maskz_loadu_epi8(~0ULL >> (64 - 2 * kBytes), p);
    dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(_mm512_load_si512(si.v), raw)));
    m0 = kOffset ? quant::load_f16(p + 2) : 0.f;
    m1 = kOffset ? quant::load_f16(p + kBytes + 2) : 0.f;
    if constexpr (F == QFormat::q4_1 || F == QFormat::iq4_nl) {
      const __m512i sh = _mm512_set_epi64(0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                          0x0004000400040004LL, 0x0004000400040004LL, 0, 0);
      __m512i v = _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi16(_mm512_load_si512(ni.v), raw), sh),
                                   _mm512_set1_epi8(15));
      if constexpr (F == QFormat::iq4_nl) {
        __m128i t = _mm256_castsi256_si128(iq4_codebook());
        if constexpr (U) t = _mm_xor_si128(t, _mm_set1_epi8(char(0x80)));  // level + 128
        v = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(t), v);
      }
      return v;
    } else {
      float d, m;
      const __m256i v0 = levels<U>(p, d, m), v1 = levels<U>(p + kBytes, d, m);
      const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1);
      return v;
    }
  }
  // [d_x(b) x 8 | d_x(b + 1) x 8] of row i: up to 2 rows spread by vpermps from x.d (padded for
  // the 64-byte load; an L1-sized x at K = 14336), more from the pre-broadcast x.dv (a load:
  // 1-thread q4_0, 8 x 4096 x 14336, 11.0 ms with vpermps, 9.9 with the load)
  template <int MR> static __m512 xscales(const QX& x, int i, int64_t b) {
    if constexpr (MR > 2) return _mm512_loadu_ps(x.dvb(i, b));
    const __m512i idx = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
    return _mm512_permutexvar_ps(idx, _mm512_loadu_ps(x.d + i * (x.k / 32) + b));
  }
  // The W bytes this far ahead are prefetched (a 1-thread q4_0 GEMV, 4096 x 14336: 3.3 ms
  // without, 2.2 ms with VNNI; the hardware prefetchers alone fell behind at K = 14336).
  static constexpr int64_t kPrefetch = 4096;
  // A W row's accumulators: per x row, 16 float lanes (block b's 8, b + 1's 8) and the offset.
  template <int MR> struct State {
    __m512 acc[MR];
    float off[MR];
  };
  // pairs [p0, p1) of one W row (w) into st
  template <int MR> static void part(const uint8_t* w, const QX& x, int64_t p0, int64_t p1, State<MR>& st) {
    const int64_t nb = x.k / 32;
    __m512 acc[MR];
    float off[MR];
    for (int i = 0; i < MR; ++i) acc[i] = st.acc[i], off[i] = st.off[i];
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t b = 2 * p;
      float m0, m1;
      __m512 dw;
      _mm_prefetch(reinterpret_cast<const char*>(w + b * kBytes + kPrefetch), _MM_HINT_T0);
      const __m512i v = pair<false>(w + b * kBytes, dw, m0, m1);
      __m512i u = v;
      __mmask64 neg = 0;
      if constexpr (!kOffset) {
        u = _mm512_abs_epi8(v);
        neg = _mm512_movepi8_mask(v);
      }
      for (int i = 0; i < MR; ++i) {
        __m512i qx = _mm512_loadu_si512(x.template qb<kXBlock>(i, b));
        if constexpr (!kOffset) qx = _mm512_mask_sub_epi8(qx, neg, _mm512_setzero_si512(), qx);
        const __m512i dot = _mm512_madd_epi16(_mm512_maddubs_epi16(u, qx), _mm512_set1_epi16(1));
        acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dw, xscales<MR>(x, i, b)), _mm512_cvtepi32_ps(dot), acc[i]);
        if constexpr (kOffset) {
          off[i] = __builtin_fmaf(m0, x.xs[i * nb + b], off[i]);
          off[i] = __builtin_fmaf(m1, x.xs[i * nb + b + 1], off[i]);
        }
      }
    }
    for (int i = 0; i < MR; ++i) st.acc[i] = acc[i], st.off[i] = off[i];
  }
  // the last block of an odd count (into lanes 0-7), and the lanes' sum
  template <int MR> static void finish(const uint8_t* w, const QX& x, const State<MR>& st, float* res) {
    __m256 acc0[MR], acc1[MR];
    for (int i = 0; i < MR; ++i) {
      acc0[i] = _mm512_castps512_ps256(st.acc[i]);
      acc1[i] = _mm512_extractf32x8_ps(st.acc[i], 1);
    }
    tail<MR>(w, x, acc0, acc1, st.off, res);
  }
#endif
  template <int MR> static void tail(const uint8_t* w, const QX& x, __m256* acc0, __m256* acc1, const float* off0,
                                     float* res) {
    const int64_t nb = x.k / 32;
    float off[MR];
    for (int i = 0; i < MR; ++i) off[i] = off0[i];
    if (nb & 1) {  // the last block of an odd count joins the even accumulator
      const int64_t b = nb - 1;
      float d0, m0;
      const __m256i v0 = levels(w + b * kBytes, d0, m0);
      const __m256 dw0 = _mm256_set1_ps(d0);
      for (int i = 0; i < MR; ++i) {
        const __m256i p0 = dot1(v0, ld256(x.template qb<kXBlock>(i, b)));
        acc0[i] = _mm256_fmadd_ps(_mm256_mul_ps(dw0, _mm256_set1_ps(x.d[i * nb + b])), _mm256_cvtepi32_ps(p0), acc0[i]);
        if constexpr (kOffset) off[i] = __builtin_fmaf(m0, x.xs[i * nb + b], off[i]);
      }
    }
    for (int i = 0; i < MR; ++i) res[i] = hsum256(_mm256_add_ps(acc0[i], acc1[i])) + off[i];
  }
  template <int MR> static void row(const uint8_t* w, const QX& x, float* res) {
    const int64_t pairs = x.k / 64;
#if defined(__AVX512BW__)
    State<MR> st{};
    part<MR>(w, x, 0, pairs, st);
    finish<MR>(w, x, st, res);
#else
    const int64_t nb = x.k / 32;
    float off[MR];
    __m256 acc0[MR], acc1[MR];
    for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps(), off[i] = 0.f;
    for (int64_t p = 0; p < pairs; ++p) {
      const int64_t b = 2 * p;
      float d0, m0, d1, m1;
      const __m256i v0 = levels(w + b * kBytes, d0, m0), v1 = levels(w + (b + 1) * kBytes, d1, m1);
      const __m256 dw0 = _mm256_set1_ps(d0), dw1 = _mm256_set1_ps(d1);
      for (int i = 0; i < MR; ++i) {
        const __m256i p0 = dot1(v0, ld256(x.template qb<kXBlock>(i, b))), p1 = dot1(v1, ld256(x.template qb<kXBlock>(i, b + 1)));
        acc0[i] = _mm256_fmadd_ps(_mm256_mul_ps(dw0, _mm256_set1_ps(x.d[i * nb + b])), _mm256_cvtepi32_ps(p0), acc0[i]);
        acc1[i] = _mm256_fmadd_ps(_mm256_mul_ps(dw1, _mm256_set1_ps(x.d[i * nb + b + 1])), _mm256_cvtepi32_ps(p1), acc1[i]);
        if constexpr (kOffset) {
          off[i] = __builtin_fmaf(m0, x.xs[i * nb + b], off[i]);
          off[i] = __builtin_fmaf(m1, x.xs[i * nb + b + 1], off[i]);
        }
      }
    }
    tail<MR>(w, x, acc0, acc1, off, res);
#endif
  }
};

#if defined(__AVX512BW__)
// The VNNI bias of a legacy format: its levels plus this are unsigned bytes.
template <QFormat F> constexpr int vnni_bias() {
  return F == QFormat::iq4_nl ? 128 : F == QFormat::q5_0 ? 16 : 0;
}

// LegacyDot with AVX-512 VNNI (run-time dispatch: quant_vnni(); the avx512 build's flags
// do not include it): vpdpbusd multiplies the unsigned levels u = level + bias by x's signed
// levels and adds each 4 products to a lane that starts at -bias * (those 4 x levels' sum)
// (QX::c, once per call), so a lane is the same exact int32 as LegacyDot's, one instruction
// where LegacyDot's needs the sign fix, vpmaddubsw and vpmaddwd.
template <QFormat F> struct LegacyVnniDot {
  // The formats where it measured faster (q8_0 and q5_1 did not): the only ones run and tested.
  static_assert(F == QFormat::q4_1 || F == QFormat::q5_0 || F == QFormat::iq4_nl);
  using L = LegacyDot<F>;
  static constexpr int kXBlock = 32;
  static constexpr int kCBias = vnni_bias<F>();
  static constexpr bool kSplitX = false;
  template <int MR> using State = typename L::template State<MR>;
  template <int MR> __attribute__((target("avx512vnni")))
  static void part(const uint8_t* w, const QX& x, int64_t p0, int64_t p1, State<MR>& st) {
    const int64_t nb = x.k / 32;
    __m512 acc[MR];
    float off[MR];
    for (int i = 0; i < MR; ++i) acc[i] = st.acc[i], off[i] = st.off[i];
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t b = 2 * p;
      float m0, m1;
      __m512 dw;
      _mm_prefetch(reinterpret_cast<const char*>(w + b * L::kBytes + L::kPrefetch), _MM_HINT_T0);
      const __m512i u = L::template pair<true>(w + b * L::kBytes, dw, m0, m1);
      for (int i = 0; i < MR; ++i) {
        const __m512i c = kCBias ? _mm512_loadu_si512(x.cb(i, b)) : _mm512_setzero_si512();
        const __m512i dot = _mm512_dpbusd_epi32(c, u, _mm512_loadu_si512(x.template qb<kXBlock>(i, b)));
        acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dw, L::template xscales<MR>(x, i, b)), _mm512_cvtepi32_ps(dot), acc[i]);
        if constexpr (L::kOffset) {
          off[i] = __builtin_fmaf(m0, x.xs[i * nb + b], off[i]);
          off[i] = __builtin_fmaf(m1, x.xs[i * nb + b + 1], off[i]);
        }
      }
    }
    for (int i = 0; i < MR; ++i) st.acc[i] = acc[i], st.off[i] = off[i];
  }
  template <int MR> static void row(const uint8_t* w, const QX& x, float* res) {
    State<MR> st{};
    part<MR>(w, x, 0, x.k / 64, st);
    L::template finish<MR>(w, x, st, res);
  }
};
#endif

// q4_0 four blocks a step, in QX's split layout. A block's 16 code bytes hold its elements
// 0-15 (low nibbles) and 16-31 (high nibbles), and x is stored the same way (four blocks'
// first halves, then their second halves), so the codes are only masked and shifted, never
// shuffled into element order; each int32 lane sums 8 products u q_x (4 from each half) of
// the unsigned codes u = level + 8 and starts at -8 * the sum of those 8 x levels (QX::c4),
// the exact int32 dot of the centred levels. Float lanes: 16, block 4 g + j in lanes 4 j ..
// 4 j + 3, each += (d_w * d_x) * float(lane) once a group, summed at the end as
// ((l + l8) pairs) by hsum8: one 512-bit vector with AVX-512 (vpdpbusd where the CPU has
// VNNI, else vpmaddubsw + vpmaddwd), two 256-bit ones with AVX2 (blocks 4 g, 4 g + 1 and
// 4 g + 2, 4 g + 3), the same bits on every path and for every row count. Against a lane a
// block pair (LegacyDot, q4_0's kernel before): half the conversions, scale products and
// FMAs, no x-scale vpermps (Xeon, 1 thread, 512 x 4096 in L2 through Python: 0.053 -> 0.041
// ns an element; 1 x 4096 x 14336 streamed: 2.91 -> 2.85 ms, now at the core's read rate).
struct Q40Dot {
  static constexpr int kXBlock = 32;
  static constexpr int kCBias = 8;
  static constexpr bool kSplitX = true;
  static constexpr int64_t kBytes = 18;
  static constexpr int64_t kPrefetch = 4096;  // as LegacyDot's: the W bytes this far ahead
#if defined(__AVX512BW__)
  struct Idx { alignas(64) int16_t v[32]; };
  // the 64 code bytes of a group's 4 blocks from its 72 bytes (r0: bytes 0-63, r1: 8-71), by
  // 16-bit words (every block starts on an even byte): word o is block o / 8's code word o % 8
  static constexpr Idx code_idx() {
    Idx r{};
    for (int o = 0; o < 32; ++o) {
      const int src = 1 + 9 * (o / 8) + o % 8;  // the word in the group
      r.v[o] = int16_t(o / 8 == 3 ? src - 4 + 32 : src);
    }
    return r;
  }
  static constexpr Idx scale_idx() {  // word w < 16: block w / 4's f16 scale
    Idx r{};
    for (int w = 0; w < 16; ++w) r.v[w] = int16_t(9 * (w / 4));
    return r;
  }
  // n (1-4) blocks of a group at p: codes, low and high nibbles (blocks past n: zero), scales
  static void group(const uint8_t* p, int n, __m512i& lo, __m512i& hi, __m512& dw) {
    static constexpr Idx ci = code_idx(), si = scale_idx();
    __m512i r0, r1;
    if (n == 4) {
      r0 = _mm512_loadu_si512(p);
      r1 = _mm512_loadu_si512(p + 8);
    } else {  // the row's last blocks: read no further than them
      r0 = _mm512_maskz_loadu_epi8(~0ULL >> (64 - kBytes * n), p);
      r1 = _mm512_setzero_si512();
    }
    const __m512i codes = _mm512_permutex2var_epi16(r0, _mm512_load_si512(ci.v), r1);
    const __m512i m4 = _mm512_set1_epi8(15);
    lo = _mm512_and_si512(codes, m4);
    hi = _mm512_and_si512(_mm512_srli_epi16(codes, 4), m4);
    dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(_mm512_load_si512(si.v), r0)));
  }
  // R rows of W (w[0..R-1]) against MR rows of x into res[r * MR + i]. V: vpdpbusd (the caller
  // checked quant_vnni()); the target lets its intrinsic inline here. R = 2 loads each x group
  // once for both rows (x comes from L2 at 8 rows: its reads, not W's, bounded the 1-row-at-a-time
  // kernel); every (row, x row) pair sees the same operations in the same order as at R = 1.
  template <int MR, int R, bool V> __attribute__((target("avx512vnni")))
  static void rows512(const uint8_t* const* w, const QX& x, float* res) {
    const int64_t nb = x.k / 32, ng = (nb + 3) / 4;
    __m512 acc[R][MR];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < MR; ++i) acc[r][i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
      const int n = int(std::min<int64_t>(4, nb - 4 * g));
      __m512i lo[R], hi[R];
      __m512 dw[R];
      for (int r = 0; r < R; ++r) {
        const uint8_t* p = w[r] + g * 4 * kBytes;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch + 64), _MM_HINT_T0);
        group(p, n, lo[r], hi[r], dw[r]);
      }
      const __mmask16 lanes = __mmask16((1u << (4 * n)) - 1);
      for (int i = 0; i < MR; ++i) {
        const int8_t* q = x.q4(i, g);
        const __m512i c = _mm512_loadu_si512(x.c4(i, g)), xlo = _mm512_loadu_si512(q), xhi = _mm512_loadu_si512(q + 64);
        const __m512 dx = _mm512_loadu_ps(x.dv4(i, g));
        for (int r = 0; r < R; ++r) {
          __m512i dot;
          if constexpr (V) {
            dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, lo[r], xlo), hi[r], xhi);
          } else {  // u <= 15, |q_x| <= 127: the two halves' pair sums add in int16 exactly (<= 7620)
            const __m512i s16 = _mm512_add_epi16(_mm512_maddubs_epi16(lo[r], xlo), _mm512_maddubs_epi16(hi[r], xhi));
            dot = _mm512_add_epi32(_mm512_madd_epi16(s16, _mm512_set1_epi16(1)), c);
          }
          const __m512 s = _mm512_mul_ps(dw[r], dx);
          acc[r][i] = _mm512_mask3_fmadd_ps(s, _mm512_cvtepi32_ps(dot), acc[r][i], lanes);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < MR; ++i)
        res[r * MR + i] = hsum256(_mm256_add_ps(_mm512_castps512_ps256(acc[r][i]), _mm512_extractf32x8_ps(acc[r][i], 1)));
  }
#endif
  // AVX2: the group's halves (blocks 4 g + 2 h, + 1) into acc[h], lanes of a missing block kept
  template <int MR> static void row256(const uint8_t* w, const QX& x, float* res) {
    const int64_t nb = x.k / 32, ng = (nb + 3) / 4;
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi16(1);
    __m256 acc[2][MR];
    for (int i = 0; i < MR; ++i) acc[0][i] = acc[1][i] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
      for (int h = 0; h < 2; ++h) {
        const int64_t b = 4 * g + 2 * h;
        if (b >= nb) break;
        const uint8_t* p = w + b * kBytes;
        const bool two = b + 1 < nb;
        const __m128i c0 = ld128(p + 2);
        const __m256i codes = two ? _mm256_set_m128i(ld128(p + kBytes + 2), c0) : _mm256_zextsi128_si256(c0);
        const __m256i lo = _mm256_and_si256(codes, m4), hi = _mm256_and_si256(_mm256_srli_epi16(codes, 4), m4);
        const __m256 dw = _mm256_set_m128(_mm_set1_ps(two ? quant::load_f16(p + kBytes) : 0.f),
                                          _mm_set1_ps(quant::load_f16(p)));
        for (int i = 0; i < MR; ++i) {
          const int8_t* q = x.q4(i, g) + 32 * h;
          const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, ld256(q)), _mm256_maddubs_epi16(hi, ld256(q + 64)));
          const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(s16, one), ld256(x.c4(i, g) + 8 * h));
          const __m256 s = _mm256_mul_ps(dw, _mm256_loadu_ps(x.dv4(i, g) + 8 * h));
          const __m256 t = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(dot), acc[h][i]);
          acc[h][i] = two ? t : _mm256_blend_ps(acc[h][i], t, 0x0F);
        }
      }
    }
    for (int i = 0; i < MR; ++i) res[i] = hsum256(_mm256_add_ps(acc[0][i], acc[1][i]));
  }
  template <int MR> static void row(const uint8_t* w, const QX& x, float* res) {
#if defined(__AVX512BW__)
    if (quant_vnni()) return rows512<MR, 1, true>(&w, x, res);
    return rows512<MR, 1, false>(&w, x, res);
#else
    return row256<MR>(w, x, res);
#endif
  }
#if defined(__AVX512BW__)
  // Two rows of W at once from 4 rows of x (gemv_int8): res[0..MR) row w0's, res[MR..2 MR) w1's.
  static constexpr int kPairFrom = 4;
  template <int MR> static void row_pair(const uint8_t* w0, const uint8_t* w1, const QX& x, float* res) {
    const uint8_t* w[2] = {w0, w1};
    if (quant_vnni()) return rows512<MR, 2, true>(w, x, res);
    return rows512<MR, 2, false>(w, x, res);
  }
#endif
};

// The cache lines of the block kWPrefetch bytes past blk: a K-quant block spans 2-4 lines, and at
// long rows (K = 14336) the hardware prefetchers alone fall behind, as for the legacy blocks
// (1 thread, 1 x 4096 x 14336: q4_K 2.35-2.59 -> 2.24-2.29 ms, q6_K 4.03-4.20 -> 3.32-3.37).
constexpr int64_t kWPrefetch = 4096;
template <int64_t Bytes> inline void prefetch_block(const uint8_t* blk) {
  for (int64_t o = 0; o < Bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kWPrefetch + o), _MM_HINT_T0);
}

// q4_K / q5_K's 12 scale bytes as 8 scales (out[0..7]) and 8 mins (out[8..15]) of 6 bits, four
// bytes at a time (kq_detail::scale_min_k4's layout: the high 2 bits of 4..7 in bytes 0..7).
inline void scales_mins_k4(const uint8_t* s, uint8_t* out) {
  uint32_t u[4];
  memcpy(u, s, 12);
  const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const uint32_t mins_lo = u[1] & m6;
  u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
  u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
  u[2] = mins_lo;
  u[0] &= m6;
  memcpy(out, u, 16);
}

// q4_K / q5_K: eight sub-blocks of 32, 6-bit scales and mins; x = (d sc) q - (dmin m).
// AVX-512: two sub-blocks (the low and high nibbles of 32 bytes) a 512-bit vector.
template <QFormat F> struct K45Dot {
  static constexpr int kXBlock = 256;
  static constexpr int kCBias = 0;
  static constexpr bool kSplitX = false;
  static constexpr int64_t kBytes = quant::info(F).blocks.block_bytes;
  template <int MR> static void row(const uint8_t* w, const QX& x, float* res) {
    const int64_t k = x.k, nb = k / 256;
    float off[MR];
#if defined(__AVX512BW__)
    const __m512i m4 = _mm512_set1_epi8(15), one = _mm512_set1_epi8(1);
    const __m512i sh04 = _mm512_set_epi64(0x0004000400040004LL, 0x0004000400040004LL, 0x0004000400040004LL,
                                          0x0004000400040004LL, 0, 0, 0, 0);
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps(), off[i] = 0.f;
#else
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    __m256 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps(), off[i] = 0.f;
#endif
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + b * kBytes;
      prefetch_block<kBytes>(blk);
      const float d = quant::load_f16(blk), dmin = quant::load_f16(blk + 2);
      alignas(16) uint8_t sm[16];
      scales_mins_k4(blk + 4, sm);
      const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
      const uint8_t* qs = blk + (F == QFormat::q5_K ? 48 : 16);
#if defined(__AVX512BW__)
      __m512i u[4], s16[4];
      const __m512i scw = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm))));
      const __m512i qh = _mm512_broadcast_i64x4(ld256(blk + 16));
      for (int p = 0; p < 4; ++p) {
        u[p] = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(ld256(qs + 32 * p)), sh04), m4);
        if constexpr (F == QFormat::q5_K) {
          const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16(int16_t(2 * p)), _mm256_set1_epi16(int16_t(2 * p + 1)), 1);
          u[p] = _mm512_or_si512(u[p], _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh), one), 4));
        }
        const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi16(int16_t(2 * p)), _mm256_set1_epi16(int16_t(2 * p + 1)), 1);
        s16[p] = _mm512_permutexvar_epi16(idx, scw);
      }
      for (int i = 0; i < MR; ++i) {
        const int8_t* qx = x.template qb<kXBlock>(i, b);
        __m512i isum = _mm512_madd_epi16(_mm512_maddubs_epi16(u[0], _mm512_loadu_si512(qx)), s16[0]);
        for (int p = 1; p < 4; ++p)
          isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(u[p], _mm512_loadu_si512(qx + 64 * p)), s16[p]));
        const int msum = hsum_epi32(_mm_madd_epi16(mins, ld128(x.bsum32 + i * (k / 32) + b * 8)));
        const float dx = x.d[i * nb + b];
        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(d * dx), _mm512_cvtepi32_ps(isum), acc[i]);
        off[i] = __builtin_fmaf(-(dmin * dx), float(msum), off[i]);
      }
#else
      __m256i u[8], s16[8];
      for (int p = 0; p < 4; ++p) {
        const __m256i v = ld256(qs + 32 * p);
        u[2 * p] = _mm256_and_si256(v, m4);
        u[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      }
      if constexpr (F == QFormat::q5_K) {
        const __m256i qh = ld256(blk + 16);
        for (int j = 0; j < 8; ++j) {
          const __m256i h = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), one);
          u[j] = _mm256_or_si256(u[j], _mm256_slli_epi16(h, 4));
        }
      }
      for (int j = 0; j < 8; ++j) s16[j] = _mm256_set1_epi16(int16_t(sm[j]));
      for (int i = 0; i < MR; ++i) {
        const int8_t* qx = x.template qb<kXBlock>(i, b);
        __m256i isum = dot_u8s8_scaled(u[0], ld256(qx), s16[0]);
        for (int j = 1; j < 8; ++j) isum = _mm256_add_epi32(isum, dot_u8s8_scaled(u[j], ld256(qx + 32 * j), s16[j]));
        const int msum = hsum_epi32(_mm_madd_epi16(mins, ld128(x.bsum32 + i * (k / 32) + b * 8)));
        const float dx = x.d[i * nb + b];
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(isum), acc[i]);
        off[i] = __builtin_fmaf(-(dmin * dx), float(msum), off[i]);
      }
#endif
    }
#if defined(__AVX512BW__)
    for (int i = 0; i < MR; ++i)
      res[i] = hsum256(_mm256_add_ps(_mm512_castps512_ps256(acc[i]), _mm512_extractf32x8_ps(acc[i], 1))) + off[i];
#else
    for (int i = 0; i < MR; ++i) res[i] = hsum256(acc[i]) + off[i];
#endif
  }
};

// q6_K: 6-bit levels (4 low bits in ql, 2 high in qh) centred on 32, int8 scales per 16.
struct Q6KDot {
  static constexpr int kXBlock = 256;
  static constexpr int kCBias = 0;
  static constexpr bool kSplitX = false;
  static constexpr int64_t kBytes = 210;
  template <int MR> static void row(const uint8_t* w, const QX& x, float* res) {
    const int64_t k = x.k, nb = k / 256, ns = k / 16;
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    __m256 acc[MR];
    float off[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps(), off[i] = 0.f;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + b * kBytes;
      prefetch_block<kBytes>(blk);
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
      const float d = quant::load_f16(blk + 208);
      const __m256i sc16 = _mm256_cvtepi8_epi16(ld128(sc));
      __m256i u[8], s16[8];
      for (int h = 0; h < 2; ++h) {
        const __m256i l0 = ld256(blk + 64 * h), l1 = ld256(blk + 64 * h + 32), qh = ld256(blk + 128 + 32 * h);
        const __m256i lo[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                               _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
        for (int g = 0; g < 4; ++g) {
          const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g)), m2);
          u[4 * h + g] = _mm256_or_si256(lo[g], _mm256_slli_epi16(hi, 4));
          s16[4 * h + g] = _mm256_set_m128i(_mm_set1_epi16(sc[8 * h + 2 * g + 1]), _mm_set1_epi16(sc[8 * h + 2 * g]));
        }
      }
      for (int i = 0; i < MR; ++i) {
        const int8_t* qx = x.template qb<kXBlock>(i, b);
        __m256i isum = dot_u8s8_scaled(u[0], ld256(qx), s16[0]);
        for (int j = 1; j < 8; ++j) isum = _mm256_add_epi32(isum, dot_u8s8_scaled(u[j], ld256(qx + 32 * j), s16[j]));
        const int16_t* bs = x.bsum + i * ns + b * 16;
        const int osum = hsum_epi32(_mm256_madd_epi16(sc16, ld256(bs)));
        const float dx = x.d[i * nb + b];
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(isum), acc[i]);
        off[i] = __builtin_fmaf(-32.f * (d * dx), float(osum), off[i]);
      }
    }
    for (int i = 0; i < MR; ++i) res[i] = hsum256(acc[i]) + off[i];
  }
};
#endif  // __AVX2__

// ------------------------------------------------------------ the GEMV
// Kernels with a row_pair (Q40Dot, AVX-512) take two rows of W at a time from kPairFrom rows of x
// up to 8 (16 would need more accumulators than there are registers); the results are the same.
template <class Kern, int MR, class = void> struct PairRows : std::false_type {};
template <class Kern, int MR>
struct PairRows<Kern, MR, std::void_t<decltype(Kern::kPairFrom)>>
    : std::bool_constant<(MR >= Kern::kPairFrom && MR <= 8)> {};

template <class Kern, class D, int MR> void gemv_int8(const quant::MatmulArgs& a) {
  const QX x = quantize_x<D>(a, MR, Kern::kXBlock, Kern::kCBias, Kern::kSplitX);
  const auto& bi = quant::info(a.w.format).blocks;
  const int64_t row_bytes = a.w.cols / bi.block * bi.block_bytes + a.m * 4;
  parallel_rows(a.w.rows, row_bytes, [&](int64_t r0, int64_t r1) {
    int64_t r = r0;
    if constexpr (PairRows<Kern, MR>::value) {
      for (; r + 1 < r1; r += 2) {
        float res[2 * MR];
        Kern::template row_pair<MR>(a.w.data + r * a.w.data_stride, a.w.data + (r + 1) * a.w.data_stride, x, res);
        for (int64_t i = 0; i < a.m; ++i) {
          put_out<D>(a, i, r, res[i]);
          put_out<D>(a, i, r + 1, res[MR + i]);
        }
      }
    }
    for (; r < r1; ++r) {
      float res[MR];
      Kern::template row<MR>(a.w.data + r * a.w.data_stride, x, res);
      for (int64_t i = 0; i < a.m; ++i) put_out<D>(a, i, r, res[i]);
    }
  });
}

template <class Kern, class D> void run_int8(const quant::MatmulArgs& a) {
  if (a.m == 1) return gemv_int8<Kern, D, 1>(a);
  if (a.m == 2) return gemv_int8<Kern, D, 2>(a);
  if (a.m <= 4) return gemv_int8<Kern, D, 4>(a);
  if (a.m <= 8) return gemv_int8<Kern, D, 8>(a);
  return gemv_int8<Kern, D, 16>(a);
}

// The int8-activation GEMV of a's format; false where the format keeps f32 x.
template <class D> bool matmul_int8(const quant::MatmulArgs& a) {
#if defined(__AVX512BW__)
  // VNNI where it measured faster (AMD EPYC, 1-thread 1 x 4096 x 14336: q4_0 (now Q40Dot) 2.2 vs 3.0 ms, iq4_nl 2.3 vs
  // 3.0, q5_0 3.3 vs 4.0, q4_1 2.5 vs 2.6; 2 rows ahead, 4 even, 8 behind; q8_0 and q5_1 behind)
  if (quant_vnni() && a.m <= 2) {
    switch (a.w.format) {
      case QFormat::q4_1: run_int8<LegacyVnniDot<QFormat::q4_1>, D>(a); return true;
      case QFormat::q5_0: run_int8<LegacyVnniDot<QFormat::q5_0>, D>(a); return true;
      case QFormat::iq4_nl: run_int8<LegacyVnniDot<QFormat::iq4_nl>, D>(a); return true;
      default: break;
    }
  }
#endif
#if defined(__AVX2__)
  switch (a.w.format) {
    case QFormat::q8_0: run_int8<LegacyDot<QFormat::q8_0>, D>(a); return true;
    case QFormat::q4_0: run_int8<Q40Dot, D>(a); return true;
    case QFormat::q4_1: run_int8<LegacyDot<QFormat::q4_1>, D>(a); return true;
    case QFormat::q5_0: run_int8<LegacyDot<QFormat::q5_0>, D>(a); return true;
    case QFormat::q5_1: run_int8<LegacyDot<QFormat::q5_1>, D>(a); return true;
    case QFormat::iq4_nl: run_int8<LegacyDot<QFormat::iq4_nl>, D>(a); return true;
    case QFormat::q4_K: run_int8<K45Dot<QFormat::q4_K>, D>(a); return true;
    case QFormat::q5_K: run_int8<K45Dot<QFormat::q5_K>, D>(a); return true;
    case QFormat::q6_K: run_int8<Q6KDot, D>(a); return true;
    default: break;
  }
#endif
  switch (a.w.format) {
#define BRAZE_INT8_CASE(name)                                        \
  case QFormat::name:                                                \
    if constexpr (int8_x_block(QFormat::name) == 0) return false;    \
    else { run_int8<CodecDot<QFormat::name>, D>(a); return true; }
    BRAZE_MATMUL_BLOCK_FORMATS(BRAZE_INT8_CASE)
#undef BRAZE_INT8_CASE
    default:
      return false;
  }
}
