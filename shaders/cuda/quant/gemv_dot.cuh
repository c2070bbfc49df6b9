// The GEMV's fast dot products for a few block formats: a lane's unit is 32
// consecutive elements of one row of W (one q4_0 / q4_1 / q5_0 / q8_0 / iq4_nl block,
// one q4_K, q5_K or iq4_xs sub-block, a q3_K or q6_K pair of 16-element sub-blocks),
// read from the staged bytes as 32-bit words and applied to MT rows of x without
// decoding to the codec's per-element floats:
//   - words come from aligned 4-byte shared loads, realigned by a funnel shift
//     where the unit starts 2 bytes off (18-, 22-, 34-, 110- and 210-byte blocks);
//   - a code (a byte holding 0..255) becomes a float without I2F: the byte is
//     moved into the mantissa of 2^23 (__byte_perm: 0x4B0000bb is 2^23 + bb
//     exactly) and one FADD removes 2^23 and the format's offset, exact;
//     the iq4 codebooks' codes (value + 128) are looked up by __byte_perm on
//     table words (iq4_codes);
//   - the unit's scale multiplies the sum over its elements (one FMA per scale
//     segment and x row), q4_K's min term (q4_1's offset) takes the sum of x over the unit,
//     staged with x.
// The element order inside a unit is the codec's (element e of the unit meets
// x[32 u + e]), the scales the codec's own f32 products, so the result differs
// from decode-then-FMA only by the order of the f32 roundings.
// Everything is __host__ __device__ (a host fallback for each intrinsic),
// so a host program can compare it with the CPU codecs (scripts/check_gemv_dot.cu).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/quant/ggml.h"
#include "core/quant/iquants.h"
#include "core/quant/kquants.h"
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <vector_types.h>
#endif

namespace braze::cuda::quant {

using braze::quant::QFormat;

constexpr int kDotUnit = 32;  // elements of a lane's unit

namespace dot_detail {

// Aligned 4-byte word at p (p a multiple of 4 on the device).
BRAZE_HD uint32_t word(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
#endif
}

// (hi:lo) >> s, s in 0..31.
BRAZE_HD uint32_t funnel(uint32_t lo, uint32_t hi, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, s);
#else
  return uint32_t(((uint64_t(hi) << 32) | lo) >> s);
#endif
}

// N words of the bytes starting at p (p even), each shifted right by sh bits
// more (0..15; the bits shifted into the last word's top are garbage when p is
// aligned): aligned 4-byte loads and a funnel shift, never a byte load; nothing
// past the last byte's word is read.
template <int N> BRAZE_HD void words(const uint8_t* p, int sh, uint32_t (&w)[N]) {
  const uint32_t off = uint32_t(reinterpret_cast<uintptr_t>(p) & 3u);
  const uint8_t* base = p - off;
  uint32_t a[N + 1];
#pragma unroll
  for (int i = 0; i < N; ++i) a[i] = word(base + 4 * i);
  a[N] = word(off != 0 ? base + 4 * N : base);  // needed only when p is off
#pragma unroll
  for (int i = 0; i < N; ++i) w[i] = funnel(a[i], a[i + 1], 8 * off + uint32_t(sh));
}

// 2^23 + byte t (0..3) of w, exactly: the byte in the mantissa of 2^23.
BRAZE_HD float magic(uint32_t w, int t) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | unsigned(t)));
#else
  const uint32_t b = ((w >> (8 * t)) & 0xFFu) | 0x4B000000u;
  float f;
  memcpy(&f, &b, 4);
  return f;
#endif
}

// Byte t of w minus off, as float (exact: both sides are integers in [2^23, 2^24)).
BRAZE_HD float code(uint32_t w, int t, float off) { return magic(w, t) - (8388608.f + off); }

// 0.5 + byte t of w / 256, exactly, for a byte below 128: the byte as the top
// mantissa bits of 0.5 (0x3Fbb0000), one PRMT and no FADD.
BRAZE_HD float biased(uint32_t w, int t) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(__byte_perm(w, 0x3F000000u, 0x7044u | (unsigned(t) << 8)));
#else
  const uint32_t b = (((w >> (8 * t)) & 0xFFu) << 16) | 0x3F000000u;
  float f;
  memcpy(&f, &b, 4);
  return f;
#endif
}

BRAZE_HD float half_at(const uint8_t* p) {  // f16 at p (p even)
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
#else
  return braze::quant::load_f16(p);
#endif
}

// PTX prmt (what __byte_perm runs, after it masks s with 0x7777): byte n of the
// result is byte (s >> 4 n) & 7 of b:a, or that byte's sign bit in all 8 bits
// where bit 4 n + 3 of s is set. Callers keep those bits clear, so no mask is
// spent; the host fallback does the same, so a host check runs the device's
// bit logic (and would see a selector with one of them set).
BRAZE_HD uint32_t perm(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
#else
  const uint64_t v = (uint64_t(b) << 32) | a;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) {
    const uint32_t sel = (s >> (4 * n)) & 15u, byte = uint32_t(v >> (8 * (sel & 7u))) & 0xFFu;
    r |= (sel & 8u ? (byte & 0x80u ? 0xFFu : 0u) : byte) << (8 * n);
  }
  return r;
#endif
}

// Word j (0..3) of the iq4 codebook as codes (value + 128): entries 4 j .. 4 j + 3.
BRAZE_HD constexpr uint32_t iq4_table(int j) {
  constexpr int8_t kv[16] = BRAZE_IQ4_VALUES;
  uint32_t w = 0;
  for (int t = 0; t < 4; ++t) w |= uint32_t(uint8_t(kv[4 * j + t] + 128)) << (8 * t);
  return w;
}

// The iq4 codes of w's eight nibbles: byte t of lo from the low nibble of w's
// byte t, of hi from its high nibble. w's nibbles in order are L0 H0 L1 H1 |
// L2 H2 L3 H3: four PRMTs look each up by its low 3 bits in entries 0..7 and
// in 8..15 (w, then w >> 16), two more take the second where the nibble's
// bit 3 is set, two separate the low and high nibbles; with the selectors
// (x, x >> 16, m, m >> 16) 13 instructions for 8 codes.
BRAZE_HD void iq4_codes(uint32_t w, uint32_t& lo, uint32_t& hi) {
  constexpr uint32_t t0 = iq4_table(0), t1 = iq4_table(1), t2 = iq4_table(2), t3 = iq4_table(3);
  const uint32_t x = w & 0x77777777u;                            // entry in its half
  const uint32_t m = ((w >> 1) & 0x44444444u) | 0x32103210u;    // byte n of a (entries 0..7) or b (8..15)
  const uint32_t r0 = perm(perm(t0, t1, x), perm(t2, t3, x), m);  // L0 H0 L1 H1
  const uint32_t r1 = perm(perm(t0, t1, x >> 16), perm(t2, t3, x >> 16), m >> 16);  // L2 H2 L3 H3
  lo = perm(r0, r1, 0x6420u);
  hi = perm(r0, r1, 0x7531u);
}

}  // namespace dot_detail

// One unit of one row, its codes as words (byte t of c[i] is element 4 i + t's
// code) and its scales: S segments of 32 / S elements, value of element e =
// scale(e / (32 / S)) * (code - kOff) - min; kSmall: codes below 128.
template <QFormat F> struct DotUnit;

template <> struct DotUnit<QFormat::q8_0> {  // f16 d | int8 q[32]; x = d q
  static constexpr int kSegs = 1;
  static constexpr bool kMin = false;
  static constexpr float kOff = 128.f;  // codes stored as q + 128 (sign bit flipped)
  static constexpr bool kSmall = false;
  uint32_t c[8];
  float d[1];
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 34 * u;
    d[0] = dot_detail::half_at(b);
    dot_detail::words<8>(b + 2, 0, c);
#pragma unroll
    for (int i = 0; i < 8; ++i) c[i] ^= 0x80808080u;
  }
  BRAZE_HD float min() const { return 0.f; }
};

template <> struct DotUnit<QFormat::q4_0> {  // f16 d | u8 qs[16]; x = d (q - 8), q[j + 16] the high nibble
  static constexpr int kSegs = 1;
  static constexpr bool kMin = false;
  static constexpr float kOff = 8.f;
  static constexpr bool kSmall = true;
  uint32_t c[8];
  float d[1];
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 18 * u;
    d[0] = dot_detail::half_at(b);
    uint32_t qs[4];
    dot_detail::words<4>(b + 2, 0, qs);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      c[i] = qs[i] & 0x0F0F0F0Fu;
      c[4 + i] = (qs[i] >> 4) & 0x0F0F0F0Fu;
    }
  }
  BRAZE_HD float min() const { return 0.f; }
};

template <> struct DotUnit<QFormat::q4_1> {  // f16 d, f16 m | u8 qs[16]; x = d q + m, q[j + 16] the high nibble
  static constexpr int kSegs = 1;
  static constexpr bool kMin = true;  // min() is -m: the unit adds m sum(x)
  static constexpr float kOff = 0.f;
  static constexpr bool kSmall = true;
  uint32_t c[8];
  float d[1], m;
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 20 * u;  // 4-byte aligned
    d[0] = dot_detail::half_at(b);
    m = dot_detail::half_at(b + 2);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = dot_detail::word(b + 4 + 4 * i);
      c[i] = w & 0x0F0F0F0Fu;
      c[4 + i] = (w >> 4) & 0x0F0F0F0Fu;
    }
  }
  BRAZE_HD float min() const { return -m; }
};

// q5_0: f16 d | u32 qh | u8 qs[16]; x = d (q - 16), q[j] = nibble | bit j of qh << 4.
template <> struct DotUnit<QFormat::q5_0> {
  static constexpr int kSegs = 1;
  static constexpr bool kMin = false;
  static constexpr float kOff = 16.f;
  static constexpr bool kSmall = true;
  uint32_t c[8];
  float d[1];
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 22 * u;
    d[0] = dot_detail::half_at(b);
    uint32_t w[5];  // qh, then qs
    dot_detail::words<5>(b + 2, 0, w);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      // bits 4i..4i+3 of qh to bit 4 of bytes 0..3 (the product's terms do not overlap)
      const uint32_t hb = ((w[0] >> (4 * i)) & 15u) * 0x02040810u;
      const uint32_t q = i < 4 ? w[1 + i] : w[1 + i - 4] >> 4;
      c[i] = (q & 0x0F0F0F0Fu) | (hb & 0x10101010u);
    }
  }
  BRAZE_HD float min() const { return 0.f; }
};

// q4_K: f16 d, dmin | u8 scales[12] | u8 qs[128]; sub-block s (32 elements) is the
// low (s even) or high nibbles of qs[32 (s / 2) ..]; x = (d sc) q - (dmin m).
template <> struct DotUnit<QFormat::q4_K> {
  static constexpr int kSegs = 1;
  static constexpr bool kMin = true;
  static constexpr float kOff = 0.f;
  static constexpr bool kSmall = true;
  uint32_t c[8];
  float d[1], m;
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 144 * (u >> 3);
    const int s = u & 7;
    int sc, mn;
    braze::quant::kq_detail::scale_min_k4(b + 4, s, sc, mn);
    d[0] = dot_detail::half_at(b) * float(sc);
    m = dot_detail::half_at(b + 2) * float(mn);
    const uint8_t* q = b + 16 + 32 * (s >> 1);  // 16-byte aligned in a 144-byte block
    const int sh = (s & 1) * 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) c[i] = (dot_detail::word(q + 4 * i) >> sh) & 0x0F0F0F0Fu;
  }
  BRAZE_HD float min() const { return m; }
};

// q5_K: f16 d, dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]; sub-block s as in q4_K,
// its fifth bit bit s of qh[i]; x = (d sc) q - (dmin m).
template <> struct DotUnit<QFormat::q5_K> {
  static constexpr int kSegs = 1;
  static constexpr bool kMin = true;
  static constexpr float kOff = 0.f;
  static constexpr bool kSmall = true;
  uint32_t c[8];
  float d[1], m;
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 176 * (u >> 3);  // 16-byte aligned
    const int s = u & 7;
    int sc, mn;
    braze::quant::kq_detail::scale_min_k4(b + 4, s, sc, mn);
    d[0] = dot_detail::half_at(b) * float(sc);
    m = dot_detail::half_at(b + 2) * float(mn);
    const uint8_t* q = b + 48 + 32 * (s >> 1);
    const int sh = (s & 1) * 4;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      c[i] = ((dot_detail::word(q + 4 * i) >> sh) & 0x0F0F0F0Fu) |
             (((dot_detail::word(b + 16 + 4 * i) >> s) << 4) & 0x10101010u);
  }
  BRAZE_HD float min() const { return m; }
};

// q6_K: u8 ql[128] | u8 qh[64] | int8 scales[16] | f16 d; element r (0..127) of half
// h: low 4 bits from ql[64 h + (r & 63)] (high nibble when r >= 64), high 2 from
// qh[32 h + (r & 31)] >> 2 (r / 32); x = (d sc) (q - 32), a scale per 16.
// Unit u of a block: h = (u & 7) / 4, g = u & 3 (elements r = 32 g ..).
template <> struct DotUnit<QFormat::q6_K> {
  static constexpr int kSegs = 2;
  static constexpr bool kMin = false;
  static constexpr float kOff = 32.f;
  static constexpr bool kSmall = true;
  uint32_t c[8];
  float d[2];
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 210 * (u >> 3);
    const int h = (u >> 2) & 1, g = u & 3;
    const float dd = dot_detail::half_at(b + 208);
    const uint8_t* sc = b + 192 + 8 * h + 2 * g;
    d[0] = dd * float(int8_t(sc[0]));
    d[1] = dd * float(int8_t(sc[1]));
    uint32_t l[8], hb[8];
    // the shifts ride on the funnel shifts; the garbage bits they bring in are masked off
    dot_detail::words<8>(b + 64 * h + 32 * (g & 1), 4 * (g >> 1), l);
    dot_detail::words<8>(b + 128 + 32 * h, 2 * g, hb);
#pragma unroll
    for (int i = 0; i < 8; ++i) c[i] = (l[i] & 0x0F0F0F0Fu) | ((hb[i] << 4) & 0x30303030u);
  }
  BRAZE_HD float min() const { return 0.f; }
};

// q3_K: u8 hmask[32] | u8 qs[64] | u8 scales[12] | f16 d; element e (0..255): low 2
// bits from qs[32 (e / 128) + (e & 31)] >> 2 ((e / 32) & 3), third bit bit e / 32 of
// hmask[e & 31]; x = (d sc) (q - 4), a 6-bit scale (- 32) per 16. Unit u of a block:
// sub-block s = u & 7 (elements 32 s ..).
template <> struct DotUnit<QFormat::q3_K> {
  static constexpr int kSegs = 2;
  static constexpr bool kMin = false;
  static constexpr float kOff = 4.f;
  static constexpr bool kSmall = true;
  uint32_t c[8];
  float d[2];
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 110 * (u >> 3);
    const int s = u & 7;
    const float dd = dot_detail::half_at(b + 108);
    d[0] = dd * float(braze::quant::kq_detail::scale_q3(b + 96, 2 * s));
    d[1] = dd * float(braze::quant::kq_detail::scale_q3(b + 96, 2 * s + 1));
    uint32_t l[8], h[8];  // the funnel shifts bring the bits to 0..1 / 0; their garbage is masked off
    dot_detail::words<8>(b + 32 + 32 * (s >> 2), 2 * (s & 3), l);
    dot_detail::words<8>(b, s, h);
#pragma unroll
    for (int i = 0; i < 8; ++i) c[i] = (l[i] & 0x03030303u) | ((h[i] << 2) & 0x04040404u);
  }
  BRAZE_HD float min() const { return 0.f; }
};

// iq4_nl: f16 d | u8 qs[16]; x = d kv[q], q[j + 16] the high nibble (q4_0's order);
// codes kv[q] + 128 (dot_detail::iq4_codes).
template <> struct DotUnit<QFormat::iq4_nl> {
  static constexpr int kSegs = 1;
  static constexpr bool kMin = false;
  static constexpr float kOff = 128.f;
  static constexpr bool kSmall = false;
  uint32_t c[8];
  float d[1];
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 18 * u;
    d[0] = dot_detail::half_at(b);
    uint32_t qs[4];
    dot_detail::words<4>(b + 2, 0, qs);
#pragma unroll
    for (int i = 0; i < 4; ++i) dot_detail::iq4_codes(qs[i], c[i], c[4 + i]);
  }
  BRAZE_HD float min() const { return 0.f; }
};

// iq4_xs: f16 d | u16 scales_h | u8 scales_l[4] | u8 qs[128]; sub-block s (32
// elements, unit u & 7) as an iq4_nl block at qs[16 s], scale ls = (4 bits of
// scales_l, 2 of scales_h) - 32: x = (d ls) kv[q].
template <> struct DotUnit<QFormat::iq4_xs> {
  static constexpr int kSegs = 1;
  static constexpr bool kMin = false;
  static constexpr float kOff = 128.f;
  static constexpr bool kSmall = false;
  uint32_t c[8];
  float d[1];
  BRAZE_HD void load(const uint8_t* row, int u) {
    const uint8_t* b = row + 136 * (u >> 3);  // 8-byte aligned
    const int s = u & 7;
    const uint32_t lo = dot_detail::word(b + 4), hi = dot_detail::word(b) >> 16;
    const int ls = int(((lo >> (4 * s)) & 15u) | (((hi >> (2 * s)) & 3u) << 4));
    d[0] = dot_detail::half_at(b) * float(ls - 32);
    const uint8_t* q = b + 8 + 16 * s;
#pragma unroll
    for (int i = 0; i < 4; ++i) dot_detail::iq4_codes(dot_detail::word(q + 4 * i), c[i], c[4 + i]);
  }
  BRAZE_HD float min() const { return 0.f; }
};

template <QFormat F> constexpr bool has_dot_unit() {
  return F == QFormat::q8_0 || F == QFormat::q4_0 || F == QFormat::q4_1 || F == QFormat::q5_0 || F == QFormat::q4_K ||
         F == QFormat::q5_K || F == QFormat::q6_K || F == QFormat::q3_K || F == QFormat::iq4_nl ||
         F == QFormat::iq4_xs;
}

#if defined(__CUDACC__)
// Whether unit_dot<F, ..., Biased> reads the sums of x: for the min term, or
// for the biased codes (Biased: x came from 16-bit floats).
template <QFormat F, bool Biased> constexpr bool dot_sums() {
  return DotUnit<F>::kMin || (Biased && DotUnit<F>::kSmall);
}

// acc[r][mm] += sum_e W_r[e] x_mm[e] over one unit of R rows (w) and MT rows of x:
// x points at the unit's 32 floats of x row 0 (16-byte aligned), rows xs floats
// apart; sx at the unit's two sums of 16 elements of x row 0 (where dot_sums),
// rows sxs apart. All MT rows are computed (no branch per row: the GEMV stages
// rows past m as zeros).
// Biased (codes below 128 only): each code q becomes 0.5 + q / 256 (one PRMT,
// no FADD) and the segment's sum is 256 S - (128 + kOff) sum(x): exact codes,
// but the f32 sum carries about 10x the rounding error of sum (q - kOff) x
// (scripts/check_gemv_dot.cu: at most 32 f32 roundings of the magnitude
// sum |d (q - kOff) x|, 80 for q3_K's small codes, against 4 unbiased), so it
// is meant for 16-bit x only, whose own rounding (2^-9 or 2^-12) is far larger.
template <QFormat F, int R, int MT, bool Biased>
BRAZE_HD void unit_dot(const DotUnit<F> (&w)[R], const float* x, int xs, const float* sx, int sxs,
                       float (&acc)[R][MT]) {
  using U = DotUnit<F>;
  constexpr bool kBias = Biased && U::kSmall;
  constexpr int kSeg = kDotUnit / U::kSegs;
  // Partial sums a segment (by element t of each word): one chain of FMAs per
  // (row, x row) would be latency-bound at one or two rows of x (an H100 ran
  // the 1-row GEMV at ~10 elements a clock an SM with one chain); kP chains
  // keep R * MT * kP FMAs independent.
  constexpr int kP = MT <= 2 ? 4 : MT <= 4 ? 2 : 1;
#pragma unroll
  for (int sg = 0; sg < U::kSegs; ++sg) {
    float s[R][MT][kP];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int mm = 0; mm < MT; ++mm)
#pragma unroll
        for (int c = 0; c < kP; ++c) s[r][mm][c] = 0.f;
#pragma unroll
    for (int g = 0; g < kSeg / 4; ++g) {
      const int i = sg * (kSeg / 4) + g;  // word of the codes, elements 4 i ..
      float q[R][4];
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < 4; ++t)
          q[r][t] = kBias ? dot_detail::biased(w[r].c[i], t) : dot_detail::code(w[r].c[i], t, U::kOff);
#pragma unroll
      for (int mm = 0; mm < MT; ++mm) {
        const float4 xv = *reinterpret_cast<const float4*>(x + mm * xs + 4 * i);
        const float xt[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int t = 0; t < 4; ++t) s[r][mm][t % kP] = fmaf(q[r][t], xt[t], s[r][mm][t % kP]);
      }
    }
    float sum[R][MT];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int mm = 0; mm < MT; ++mm) {
        if constexpr (kP == 4) sum[r][mm] = (s[r][mm][0] + s[r][mm][1]) + (s[r][mm][2] + s[r][mm][3]);
        else if constexpr (kP == 2) sum[r][mm] = s[r][mm][0] + s[r][mm][1];
        else sum[r][mm] = s[r][mm][0];
      }
#pragma unroll
    for (int mm = 0; mm < MT; ++mm) {
      if constexpr (kBias) {
        const float sxm = U::kSegs == 2 ? sx[mm * sxs + sg] : sx[mm * sxs] + sx[mm * sxs + 1];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          acc[r][mm] = fmaf(w[r].d[sg] * 256.f, sum[r][mm], acc[r][mm]);
          acc[r][mm] = fmaf(-(w[r].d[sg] * (128.f + U::kOff)), sxm, acc[r][mm]);
        }
      } else {
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][mm] = fmaf(w[r].d[sg], sum[r][mm], acc[r][mm]);
      }
    }
  }
  if constexpr (U::kMin) {
#pragma unroll
    for (int mm = 0; mm < MT; ++mm) {
      const float sxm = sx[mm * sxs] + sx[mm * sxs + 1];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][mm] = fmaf(-w[r].min(), sxm, acc[r][mm]);
    }
  }
}
#endif

}  // namespace braze::cuda::quant
