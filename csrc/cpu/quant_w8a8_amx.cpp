// The int8 W8A8 GEMM's sums on the AMX tile unit (quant_amx.h): TDPBSSD, signed x signed
// bytes into int32, 16 x 16 outputs of 64 K bytes an instruction. The sums wrap like any
// int32 addition and are exact where the true sum fits, which W8A8's K limit guarantees,
// so they are the VNNI path's sums bit for bit.
//
// Operands: TDPBSSD wants A row-major (a row: 64 consecutive K bytes) and B K-packed (a
// row: 16 columns' 4 consecutive K bytes). W [N, K] is row-major, so W is A, read in place
// (W, the large operand, is never copied); x is B, packed once per call (pack_x: M K bytes,
// small against the M N K products). The result tile is out^T (W rows x x rows),
// transposed into the caller's int32 tile. Only the edges are copied: the last 64-byte K
// step of 16 W rows when K % 64 != 0, and the last W rows when fewer than 16 remain (zero
// padded; x is zero padded to match).
//
// A gemm_tile call walks its W rows in blocks of 32 (two A tiles) and, for each, its x rows
// in blocks of 32 (two B tiles): four C tiles, each K step 4 loads and 4 products; a 32-row
// W panel (32 K bytes) stays in L2 while every x block passes over it.
#include "cpu/quant_amx.h"

#include <algorithm>
#include <cstring>
#include <vector>

// The tile instructions: the hardware's, or the software model's (BRAZE_AMX_EMULATE).
#if defined(BRAZE_AMX_EMULATE)
#include "cpu/amx_emulate.h"
#define BRAZE_AMX_NS amx_emu
#define TILE_CONFIG(c) amx_emu::loadconfig(c)
#define TILE_RELEASE() amx_emu::release()
#define TILE_ZERO(t) amx_emu::zero(t)
#define TILE_LOAD(t, p, ld) amx_emu::load(t, p, ld)
#define TILE_STORE(t, p, ld) amx_emu::store(t, p, ld)
#define TILE_DPBSSD(c, a, b) amx_emu::dpbssd(c, a, b)
#else
#include <immintrin.h>
#define BRAZE_AMX_NS amx
#define TILE_CONFIG(c) _tile_loadconfig(c)
#define TILE_RELEASE() _tile_release()
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOAD(t, p, ld) _tile_loadd(t, p, ld)
#define TILE_STORE(t, p, ld) _tile_stored(t, p, ld)
#define TILE_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#endif

namespace braze::cpu::BRAZE_AMX_NS {
namespace {

constexpr int64_t KS = 64;  // K bytes a tile step (a tile row)

inline int64_t kpad(int64_t k) { return (k + KS - 1) / KS * KS; }

// GCC's tile intrinsics are asm statements that name only a pointer (ldtilecfg: 8 bytes of
// the config), so the compiler may take the stores that fill a config or an operand buffer
// for dead: a compiler barrier after them.
inline void memory_barrier() { __asm__ volatile("" ::: "memory"); }

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// The A operand of 16 W rows: steps s < full read p + 64 s (rows ld bytes apart), the
// others (at most the last) the 16 x 64 copy `tail`.
struct ASrc {
  const int8_t* p;
  int64_t ld, full;
  const int8_t* tail;
};

// Tiles: C[a][b] = tmm(2a + b), A (W) tmm4 / tmm5, B (x) tmm6 / tmm7. c[t]: C tile t.
#define BRAZE_LOAD_A(T, S, A)                  \
  do {                                         \
    if ((S) < (A).full)                        \
      TILE_LOAD(T, (A).p + (S) * KS, (A).ld); \
    else                                       \
      TILE_LOAD(T, (A).tail, KS);            \
  } while (0)

template <int NA, int NB>
void block(const ASrc* a, const int8_t* b0, const int8_t* b1, int64_t steps, int32_t (*c)[256]) {
  TILE_ZERO(0);
  if constexpr (NB > 1) TILE_ZERO(1);
  if constexpr (NA > 1) TILE_ZERO(2);
  if constexpr (NA > 1 && NB > 1) TILE_ZERO(3);
  for (int64_t s = 0; s < steps; ++s) {
    TILE_LOAD(6, b0 + s * 16 * KS, KS);
    if constexpr (NB > 1) TILE_LOAD(7, b1 + s * 16 * KS, KS);
    BRAZE_LOAD_A(4, s, a[0]);
    TILE_DPBSSD(0, 4, 6);
    if constexpr (NB > 1) TILE_DPBSSD(1, 4, 7);
    if constexpr (NA > 1) {
      BRAZE_LOAD_A(5, s, a[1]);
      TILE_DPBSSD(2, 5, 6);
      if constexpr (NB > 1) TILE_DPBSSD(3, 5, 7);
    }
  }
  TILE_STORE(0, c[0], 64);
  if constexpr (NB > 1) TILE_STORE(1, c[1], 64);
  if constexpr (NA > 1) TILE_STORE(2, c[2], 64);
  if constexpr (NA > 1 && NB > 1) TILE_STORE(3, c[3], 64);
}
#undef BRAZE_LOAD_A

}  // namespace

int64_t packed_x_bytes(int64_t m, int64_t k) { return (m + 15) / 16 * 16 * kpad(k); }

void pack_x(const int8_t* x, int64_t x_stride, int64_t m, int64_t k, int8_t* xp) {
  const int64_t kp = kpad(k), blk = 16 * kp;
  for (int64_t b = 0; b * 16 < m; ++b) {
    int8_t* dst = xp + b * blk;
    std::memset(dst, 0, size_t(blk));
    for (int64_t r = 0; r < 16 && b * 16 + r < m; ++r) {
      const int8_t* src = x + (b * 16 + r) * x_stride;
      int64_t g = 0;
      for (; 4 * g + 4 <= k; ++g) std::memcpy(dst + g * 64 + 4 * r, src + 4 * g, 4);
      if (4 * g < k) std::memcpy(dst + g * 64 + 4 * r, src + 4 * g, size_t(k - 4 * g));
    }
  }
}

void gemm_tile(const int8_t* xp, int64_t k, int64_t i0, int64_t mb, const int8_t* w, int64_t w_stride, int64_t nb,
               int32_t* acc, int64_t ld) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  memory_barrier();
  TILE_CONFIG(&cfg);
  const int64_t kp = kpad(k), steps = kp / KS, full = k / KS, blk = 16 * kp;
  alignas(64) int8_t tails[2][16 * KS];
  alignas(64) int32_t c[4][256];
  std::vector<int8_t> part;  // the last W rows, fewer than 16: zero padded to 16 x kp
  for (int64_t j = 0; j < nb; j += 32) {
    ASrc as[2];
    const int na = nb - j > 16 ? 2 : 1;
    for (int t = 0; t < na; ++t) {
      const int64_t jt = j + 16 * t, rows = std::min<int64_t>(16, nb - jt);
      const int8_t* wr = w + jt * w_stride;
      if (rows == 16) {
        as[t] = {wr, w_stride, full, tails[t]};
        if (full < steps) {
          std::memset(tails[t], 0, sizeof tails[t]);
          for (int64_t r = 0; r < 16; ++r) std::memcpy(tails[t] + r * KS, wr + r * w_stride + full * KS, size_t(k - full * KS));
        }
      } else {
        part.assign(size_t(16 * kp), 0);
        for (int64_t r = 0; r < rows; ++r) std::memcpy(part.data() + r * kp, wr + r * w_stride, size_t(k));
        as[t] = {part.data(), kp, steps, nullptr};
      }
    }
    memory_barrier();
    for (int64_t i = 0; i < mb; i += 32) {
      const int nx = mb - i > 16 ? 2 : 1;
      const int8_t* b0 = xp + (i0 + i) / 16 * blk;
      const int8_t* b1 = b0 + blk;
      if (na == 2 && nx == 2) block<2, 2>(as, b0, b1, steps, c);
      else if (na == 2) block<2, 1>(as, b0, b1, steps, c);
      else if (nx == 2) block<1, 2>(as, b0, b1, steps, c);
      else block<1, 1>(as, b0, b1, steps, c);
      for (int ta = 0; ta < na; ++ta)
        for (int tb = 0; tb < nx; ++tb) {
          const int32_t* ct = c[2 * ta + tb];
          const int64_t jr = j + 16 * ta, ir = i + 16 * tb;
          const int64_t nr = std::min<int64_t>(16, nb - jr), nc = std::min<int64_t>(16, mb - ir);
          for (int64_t r = 0; r < nr; ++r)  // ct[r][col]: W row jr + r, x row ir + col
            for (int64_t col = 0; col < nc; ++col) acc[(ir + col) * ld + jr + r] = ct[r * 16 + col];
        }
    }
  }
  TILE_RELEASE();
}

}  // namespace braze::cpu::BRAZE_AMX_NS
