// The int8 W8A8 GEMM on the AMX tile unit (csrc/cpu/quant_w8a8_amx.cpp, its own unit
// built with -mamx-tile -mamx-int8 where the compiler has them: BRAZE_HAVE_AMX). The avx512
// build of quant_w8a8.cpp calls it when quant_amx() (runtime.h) is on; it computes exact
// int32 sums only, the epilogue stays that file's.
//
// Two builds of one source: namespace amx, the tile unit (only with BRAZE_HAVE_AMX), and
// amx_emu, the same code on a software model of the tile instructions (cpu/amx_emulate.h),
// built everywhere so that tests run the kernel's logic on CPUs without AMX
// (quant_amx_emulated(), runtime.h). Each has:
//
// packed_x_bytes(m, k): bytes of x packed for the tile unit, rows padded to 16, K to 64.
//   TDPBSSD (signed x signed bytes, int32 sums) takes W in place as the A operand (a tile
//   row is 64 bytes of one W row) and x as B, which must be K-packed: a B tile row holds
//   16 x rows' 4 consecutive K bytes.
// pack_x(x, x_stride, m, k, xp): xp <- rows [0, m) of x (row stride x_stride bytes, K
//   contiguous): for each block of 16 rows, kp / 4 groups (kp: K padded to 64) of 64
//   bytes, group g holding bytes [4g, 4g + 4) of each of the 16 rows; zeros past m and K.
// gemm_tile(xp, k, i0, mb, w, w_stride, nb, acc, ld): acc[i * ld + j] = sum_{k < K}
//   x[i0 + i, k] w[j, k] exactly (int32) for i < mb, j < nb; xp from pack_x, i0 a
//   multiple of 16, w the first of nb W rows (stride w_stride bytes). Configures the tiles
//   on entry and releases them on return.
#pragma once
#include <cstdint>

namespace braze::cpu {
#define BRAZE_AMX_DECLARE(ns)                                                                             \
  namespace ns {                                                                                          \
  int64_t packed_x_bytes(int64_t m, int64_t k);                                                           \
  void pack_x(const int8_t* x, int64_t x_stride, int64_t m, int64_t k, int8_t* xp);                      \
  void gemm_tile(const int8_t* xp, int64_t k, int64_t i0, int64_t mb, const int8_t* w, int64_t w_stride, \
                 int64_t nb, int32_t* acc, int64_t ld);                                                   \
  }
BRAZE_AMX_DECLARE(amx)
BRAZE_AMX_DECLARE(amx_emu)
#undef BRAZE_AMX_DECLARE
}  // namespace braze::cpu
