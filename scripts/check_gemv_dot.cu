// Host check of the GEMV's fast dots (shaders/cuda/quant/gemv_dot.cuh) against the CPU
// codecs (csrc/core/quant), for every format with a DotUnit. For each format it builds
// rows of random blocks (random bytes, the f16 scale fields set to finite random values)
// and checks (a) every element a unit implies, d[segment] (code - kOff) - min(), against
// the codec's dequantized element (bit-exact: the same f32 products), the codes below
// 128 where kSmall, and the biased code 0.5 + code / 256; (b) unit_dot over each unit
// against a double-precision dot of the codec's dequantized row with random x, for R
// in {1, 2} rows of W, MT in {1, 2, 4, 8} rows of x, Biased false and (kSmall) true
// (x then rounded to bf16, as the kernel stages 16-bit x, and its sums of 16 staged
// with it). The dot's error is printed in f32 roundings of the magnitude of the terms
// the unit sums, sum |d (q - kOff) x| + |min x|; any element mismatch or a dot error over
// 32 such roundings fails (exit status 1); biased: 32 roundings of the magnitude of its
// terms, sum |d| (256 + q + kOff) |x| + |min x|, as its biased sum carries more rounding.
// The unit code runs its host fallbacks (dot_detail::perm does what __byte_perm
// documents, so the iq4 lookups' bit logic is the device's). Build and run from the
// repository root:
//   nvcc -O2 -std=c++17 --expt-relaxed-constexpr -Xcompiler -ffp-contract=off \
//     -I csrc -I shaders scripts/check_gemv_dot.cu -o /tmp/check_gemv_dot && /tmp/check_gemv_dot
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/quant/gemv_dot.cuh"

namespace bq = braze::quant;
using braze::cuda::quant::DotUnit;
using braze::cuda::quant::kDotUnit;
using braze::cuda::quant::unit_dot;
namespace dd = braze::cuda::quant::dot_detail;
using bq::QFormat;

namespace {

constexpr int kK = 512;      // elements of a row: whole blocks of 32 and 256
constexpr int kRows = 48;    // random rows of W a (R, MT, Biased) case
constexpr double kU = 1.0 / 16777216.0;  // f32 unit roundoff (2^-24)
int g_fail = 0;

// Byte offsets of a block's f16 scale fields.
std::vector<int> f16_fields(QFormat f) {
  switch (f) {
    case QFormat::q4_1: case QFormat::q4_K: case QFormat::q5_K: return {0, 2};
    case QFormat::q6_K: return {208};
    case QFormat::q3_K: return {108};
    default: return {0};  // q8_0, q4_0, q5_0, iq4_nl, iq4_xs
  }
}

float bf16_round(float v) {  // to the nearest bf16 (ties to even), as f32
  uint32_t b;
  memcpy(&b, &v, 4);
  b = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;
  memcpy(&v, &b, 4);
  return v;
}

// A row of random blocks in a 16-byte aligned buffer (as staged), with padding past it.
struct Row {
  alignas(16) uint8_t bytes[kK / 32 * 64 + 64];
};
template <QFormat F> void random_row(std::mt19937_64& rng, Row& r) {
  constexpr int B = bq::info(F).blocks.block, BB = bq::info(F).blocks.block_bytes;
  for (auto& b : r.bytes) b = uint8_t(rng());
  std::uniform_real_distribution<float> sd(-2.f, 2.f);
  for (int blk = 0; blk < kK / B; ++blk)
    for (int off : f16_fields(F)) bq::store_f16(r.bytes + blk * BB + off, sd(rng));
}
template <QFormat F> void dequant(const Row& r, float* out) {
  for (int k = 0; k < kK; k += 16) bq::decode<F>(r.bytes, k, out + k);
}

// (a) the elements a unit implies against the codec's, over kRows rows.
template <QFormat F> void check_elements(const char* name, std::mt19937_64& rng) {
  using U = DotUnit<F>;
  constexpr int kSeg = kDotUnit / U::kSegs;
  long bad = 0, n = 0, big = 0, bad_biased = 0;
  double worst = 0;
  for (int t = 0; t < kRows; ++t) {
    Row r;
    random_row<F>(rng, r);
    float ref[kK];
    dequant<F>(r, ref);
    for (int u = 0; u < kK / kDotUnit; ++u) {
      U w;
      w.load(r.bytes, u);
      for (int e = 0; e < kDotUnit; ++e, ++n) {
        const uint32_t word = w.c[e / 4];
        const int t4 = e % 4, byte = int((word >> (8 * t4)) & 0xFFu);
        const float v = w.d[e / kSeg] * dd::code(word, t4, U::kOff) - w.min();
        const float want = ref[kDotUnit * u + e];
        if (!(v == want) && !(std::isnan(v) && std::isnan(want))) {
          if (bad++ < 5)
            printf("  %s: row %d unit %d element %d: unit %.9g codec %.9g\n", name, t, u, e, v, want);
          worst = std::fmax(worst, std::fabs(double(v) - want));
        }
        if (U::kSmall) {
          big += byte >= 128;
          bad_biased += dd::biased(word, t4) != 0.5f + float(byte) / 256.f;
        }
      }
    }
  }
  printf("%-7s elements: %ld of %ld differ from the codec (max |diff| %g)", name, bad, n, worst);
  if (U::kSmall) printf(", codes >= 128: %ld, biased codes wrong: %ld", big, bad_biased);
  printf("\n");
  if (bad || big || bad_biased) g_fail = 1;
}

// (b) unit_dot over single units: max error in f32 roundings of the terms' magnitude.
template <QFormat F, int R, int MT, bool Biased> double check_dot(std::mt19937_64& rng) {
  using U = DotUnit<F>;
  constexpr bool kBias = Biased && U::kSmall;
  constexpr int kSeg = kDotUnit / U::kSegs;
  std::uniform_real_distribution<float> xd(-1.f, 1.f);
  double worst = 0;
  for (int t = 0; t < kRows; ++t) {
    Row rows[R];
    float deq[R][kK];
    for (int r = 0; r < R; ++r) {
      random_row<F>(rng, rows[r]);
      dequant<F>(rows[r], deq[r]);
    }
    alignas(16) static float x[MT][kK];
    static float sx[MT][kK / 16];
    for (int mm = 0; mm < MT; ++mm) {
      for (int k = 0; k < kK; ++k) x[mm][k] = Biased ? bf16_round(xd(rng)) : xd(rng);
      for (int g = 0; g < kK / 16; ++g) {
        float s = 0.f;
        for (int i = 0; i < 16; ++i) s += x[mm][16 * g + i];
        sx[mm][g] = s;
      }
    }
    for (int u = 0; u < kK / kDotUnit; ++u) {
      U w[R];
      for (int r = 0; r < R; ++r) w[r].load(rows[r].bytes, u);
      float acc[R][MT] = {};
      unit_dot<F, R, MT, Biased>(w, &x[0][kDotUnit * u], kK, &sx[0][2 * u], kK / 16, acc);
      for (int r = 0; r < R; ++r)
        for (int mm = 0; mm < MT; ++mm) {
          double want = 0, mag = 0, magb = 0;
          for (int e = 0; e < kDotUnit; ++e) {
            const double xe = x[mm][kDotUnit * u + e], de = w[r].d[e / kSeg];
            const double q = dd::code(w[r].c[e / 4], e % 4, 0.f);  // the code byte
            want += double(deq[r][kDotUnit * u + e]) * xe;
            mag += std::fabs(de * (q - U::kOff) * xe) + std::fabs(double(w[r].min()) * xe);
            magb += std::fabs(de) * (256.0 + q + U::kOff) * std::fabs(xe) + std::fabs(double(w[r].min()) * xe);
          }
          const double diff = std::fabs(double(acc[r][mm]) - want), err = diff / (kU * (mag > 0 ? mag : 1e-300));
          if (!(diff <= 32.0 * kU * (kBias ? magb : mag))) {
            if (g_fail++ < 20)
              printf("  R=%d MT=%d biased=%d row %d unit %d: got %.9g want %.9g (%.3g roundings)\n", R, MT,
                     int(Biased), r, u, acc[r][mm], want, err);
          }
          worst = std::fmax(worst, err);
        }
    }
  }
  return worst;
}

template <QFormat F, int R, bool Biased> void dots_mt(std::mt19937_64& rng) {
  printf(" R=%d: %5.2f %5.2f %5.2f %5.2f", R, check_dot<F, R, 1, Biased>(rng), check_dot<F, R, 2, Biased>(rng),
         check_dot<F, R, 4, Biased>(rng), check_dot<F, R, 8, Biased>(rng));
}
template <QFormat F, bool Biased> void dots(const char* name, std::mt19937_64& rng) {
  printf("%-7s dot %-6s MT=1,2,4,8", name, Biased ? "biased" : "f32");
  dots_mt<F, 1, Biased>(rng);
  dots_mt<F, 2, Biased>(rng);
  printf("\n");
}

template <QFormat F> void check(const char* name) {
  std::mt19937_64 rng(0x5eed0000u + unsigned(F));
  check_elements<F>(name, rng);
  dots<F, false>(name, rng);
  if constexpr (DotUnit<F>::kSmall) dots<F, true>(name, rng);
}

}  // namespace

int main() {
  static_assert(dd::iq4_table(0) == 0x3F2D1801u && dd::iq4_table(3) == 0xF1D9C5B5u, "iq4 code words");
  printf("dot errors: max over %d rows x %d units, in f32 roundings of the summed terms' magnitude\n", kRows,
         kK / kDotUnit);
  check<QFormat::q8_0>("q8_0");
  check<QFormat::q4_0>("q4_0");
  check<QFormat::q4_1>("q4_1");
  check<QFormat::q5_0>("q5_0");
  check<QFormat::q3_K>("q3_K");
  check<QFormat::q4_K>("q4_K");
  check<QFormat::q5_K>("q5_K");
  check<QFormat::q6_K>("q6_K");
  check<QFormat::iq4_nl>("iq4_nl");
  check<QFormat::iq4_xs>("iq4_xs");
  printf(g_fail ? "FAILED\n" : "all passed\n");
  return g_fail ? 1 : 0;
}
