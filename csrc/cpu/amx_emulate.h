// A software model of the AMX tile instructions that quant_w8a8_amx.cpp uses (palette 1:
// 8 tiles of up to 16 rows x 64 bytes), after the Intel SDM's pseudo-code: a load reads
// exactly rows x colsb bytes and zeroes the rest of the tile, TDPBSSD sums signed byte
// products into wrapping int32 lanes, shape mismatches fault. The same kernel source built
// with BRAZE_AMX_EMULATE runs on it, so the tile kernel's packing, tails and indexing are
// tested on CPUs (or VMs) without AMX (braze._cpu._set_quant_amx_emulated, tests only).
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace braze::cpu::amx_emu {

struct Unit {
  bool configured = false;
  uint8_t rows[8] = {};
  uint16_t colsb[8] = {};
  uint8_t t[8][16][64] = {};
};
inline thread_local Unit unit;

[[noreturn]] inline void fault(const char* what) { throw std::logic_error(std::string("AMX emulation: ") + what); }

inline void check(int t) {
  if (!unit.configured) fault("tile instruction before ldtilecfg");
  if (t < 0 || t > 7 || unit.rows[t] == 0 || unit.colsb[t] == 0) fault("tile not configured");
}

inline void loadconfig(const void* cfg) {
  const uint8_t* c = static_cast<const uint8_t*>(cfg);
  if (c[0] != 1) fault("palette other than 1");
  for (int i = 0; i < 8; ++i) {
    uint16_t cb;
    std::memcpy(&cb, c + 16 + 2 * i, 2);
    const uint8_t r = c[48 + i];
    if (r > 16 || cb > 64) fault("tile larger than 16 x 64 bytes");
    unit.rows[i] = r;
    unit.colsb[i] = cb;
  }
  std::memset(unit.t, 0, sizeof unit.t);
  unit.configured = true;
}

inline void release() {
  unit = Unit{};
}

inline void zero(int t) {
  check(t);
  std::memset(unit.t[t], 0, sizeof unit.t[t]);
}

inline void load(int t, const void* base, int64_t stride) {
  check(t);
  const uint8_t* p = static_cast<const uint8_t*>(base);
  std::memset(unit.t[t], 0, sizeof unit.t[t]);
  for (int r = 0; r < unit.rows[t]; ++r) std::memcpy(unit.t[t][r], p + r * stride, unit.colsb[t]);
}

inline void store(int t, void* base, int64_t stride) {
  check(t);
  uint8_t* p = static_cast<uint8_t*>(base);
  for (int r = 0; r < unit.rows[t]; ++r) std::memcpy(p + r * stride, unit.t[t][r], unit.colsb[t]);
}

// C[m][n] += sum_{k, i < 4} A[m][4k + i] B[k][4n + i], bytes signed, int32 lanes wrapping.
inline void dpbssd(int c, int a, int b) {
  check(c), check(a), check(b);
  const int m = unit.rows[c], n = unit.colsb[c] / 4, kg = unit.colsb[a] / 4;
  if (unit.rows[a] != m || unit.colsb[b] != unit.colsb[c] || unit.rows[b] != kg || unit.colsb[c] % 4 ||
      unit.colsb[a] % 4)
    fault("tdpbssd operand shapes do not match");
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      uint32_t s;
      std::memcpy(&s, unit.t[c][i] + 4 * j, 4);
      for (int k = 0; k < kg; ++k)
        for (int q = 0; q < 4; ++q)
          s += uint32_t(int32_t(int8_t(unit.t[a][i][4 * k + q])) * int32_t(int8_t(unit.t[b][k][4 * j + q])));
      std::memcpy(unit.t[c][i] + 4 * j, &s, 4);
    }
}

}  // namespace braze::cpu::amx_emu
