// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11), the counter-based generator every braze backend draws from. One
// header for host and device code, so CPU and CUDA produce the same bits; the
// numpy twin lives in python/braze/reference/sampling.py.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace braze::philox {

struct Block {
  uint32_t v[4];
};

// Ten rounds of the Philox-4x32 bijection of `ctr` under the key (k0, k1).
BRAZE_HD Block philox4x32_10(Block ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k0 += 0x9E3779B9u;  // Weyl key schedule
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = uint64_t(0xD2511F53u) * ctr.v[0];
    uint64_t p1 = uint64_t(0xCD9E8D57u) * ctr.v[2];
    Block next;
    next.v[0] = uint32_t(p1 >> 32) ^ ctr.v[1] ^ k0;
    next.v[1] = uint32_t(p1);
    next.v[2] = uint32_t(p0 >> 32) ^ ctr.v[3] ^ k1;
    next.v[3] = uint32_t(p0);
    ctr = next;
  }
  return ctr;
}

// The draw of one row: counter (offset_lo, offset_hi, row_lo, row_hi), key
// (seed_lo, seed_hi). Returns all four words.
BRAZE_HD Block row_block(uint64_t seed, uint64_t offset, uint64_t row) {
  Block c;
  c.v[0] = uint32_t(offset);
  c.v[1] = uint32_t(offset >> 32);
  c.v[2] = uint32_t(row);
  c.v[3] = uint32_t(row >> 32);
  return philox4x32_10(c, uint32_t(seed), uint32_t(seed >> 32));
}

// A uniform in [0, 1) with 24 random bits (exact in float32): the top 24 bits
// of the first word, times 2^-24.
BRAZE_HD float row_uniform(uint64_t seed, uint64_t offset, uint64_t row) {
  return float(row_block(seed, offset, row).v[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace braze::philox
