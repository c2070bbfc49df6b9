// Philox4x32-10 in MSL: the same generator as csrc/core/philox.h (CPU and
// CUDA) and the numpy twin in python/braze/reference/sampling.py, in 32-bit
// unsigned arithmetic only (mulhi for the high word of each product).
#pragma once
#include <metal_stdlib>

struct PhiloxBlock {
  uint v0, v1, v2, v3;
};

// Ten rounds of the Philox-4x32 bijection of `c` under the key (k0, k1).
inline PhiloxBlock philox4x32_10(PhiloxBlock c, uint k0, uint k1) {
  for (int round = 0; round < 10; ++round) {
    if (round != 0) {
      k0 += 0x9E3779B9u;  // Weyl key schedule
      k1 += 0xBB67AE85u;
    }
    const uint lo0 = 0xD2511F53u * c.v0;
    const uint hi0 = metal::mulhi(0xD2511F53u, c.v0);
    const uint lo1 = 0xCD9E8D57u * c.v2;
    const uint hi1 = metal::mulhi(0xCD9E8D57u, c.v2);
    PhiloxBlock n;
    n.v0 = hi1 ^ c.v1 ^ k0;
    n.v1 = lo1;
    n.v2 = hi0 ^ c.v3 ^ k1;
    n.v3 = lo0;
    c = n;
  }
  return c;
}

// The uniform in [0, 1) of one row of `sample`: counter (offset lo, offset
// hi, row lo, row hi), key (seed lo, seed hi); the top 24 bits of word 0
// times 2^-24 (exact in float).
inline float philox_row_uniform(uint seed_lo, uint seed_hi, uint offset_lo, uint offset_hi,
                                uint row_lo, uint row_hi) {
  PhiloxBlock c;
  c.v0 = offset_lo;
  c.v1 = offset_hi;
  c.v2 = row_lo;
  c.v3 = row_hi;
  return float(philox4x32_10(c, seed_lo, seed_hi).v0 >> 8) * (1.0f / 16777216.0f);
}
