// Run-time choice of the avx512 build's float32 -> bfloat16 narrowing in the
// dequantize kernels: AVX-512 BF16's vcvtne2ps2bf16 where the CPU has it
// (default), else integer rounding. Same bits: round to nearest even, NaN made
// quiet; the instruction flushes denormal inputs to zero, so a vector holding
// one takes the integer rounding (quant_store.h).
#pragma once

namespace braze::cpu {
bool cpu_has_avx512bf16();
bool hw_bf16();
void set_hw_bf16(bool on);  // on where the CPU has no AVX-512 BF16: ValueError
}  // namespace braze::cpu
