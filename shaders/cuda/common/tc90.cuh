// Hopper (sm_90a) building blocks: mbarriers, 2-D / 3-D / 4-D bulk tensor copies (the
// copy engine, "TMA"), named barriers, and the warpgroup MMA (wgmma) from
// shared-memory operands laid out with the copy engine's 128-byte swizzle
// (K-major; MN-major for B of 16-bit types) or with A from registers.
// Only for translation units built for sm_90a (-gencode arch=compute_90a,code=sm_90a);
// everything here compiles to nothing elsewhere (BRAZE_TC90 is 0).
#pragma once
#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BRAZE_TC90 1
#else
#define BRAZE_TC90 0
#endif

namespace braze::cuda::tc90 {

// The operand types of wgmma, as template arguments: a k step is 32 bytes of K.
struct Bf16In {};
struct F16In {};
struct E4m3In {};
struct E5m2In {};

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
#ifdef BRAZE_TC90_SPIN_TRIES
__device__ unsigned* tc90_hang;  // see mbar_wait
#endif

#if BRAZE_TC90
__device__ __forceinline__ void mbar_init(uint32_t bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// One arrival that also announces `bytes` the copy engine will deliver.
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed. With BRAZE_TC90_SPIN_TRIES defined (the
// microbenches), a wait still unfinished after that many tries (each try_wait may suspend the thread
// for a system-dependent time) writes the barrier's address to *tc90_hang (when set: mapped host
// memory the host polls, then exits) and goes on waiting. (A clock-based limit, and a trap on the
// way out, both made ptxas spill the consumers' wgmma registers.)
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
#ifdef BRAZE_TC90_SPIN_TRIES
  uint32_t tries = 0;
#endif
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
#ifdef BRAZE_TC90_SPIN_TRIES
    if (!done && ++tries == uint32_t(BRAZE_TC90_SPIN_TRIES)) {
      if (tc90_hang) *reinterpret_cast<volatile unsigned*>(tc90_hang) = 0x80000000u | bar;
      __threadfence_system();
    }
#endif
  }
}
// Box (c0, c1) of a 2-D tensor map (c0 the contiguous axis, in elements) into shared memory at dst.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
// Box (c0, c1, c2) of a 3-D tensor map into shared memory at dst.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// Box (c0, c1, c2, c3) of a 4-D tensor map into shared memory at dst.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
// Matrix descriptor of a K-major operand whose 128-byte rows the copy engine
// swizzled (128B mode): 8-row groups 1024 bytes apart; the tile starts on 1024
// bytes, and a k step within the row advances the start address by its bytes.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}
// Matrix descriptor of an MN-major operand (B with imm-trans-b = 1: a [K][N] matrix with N contiguous,
// e.g. V stored [keys][D]) whose 128-byte rows (64 16-bit elements of N) the copy engine swizzled:
// atoms of 8 K rows x 128 bytes (1024 bytes, starting on 1024 bytes); the next 8 K rows 1024 bytes on
// (stride byte offset, sbo), the next 64 elements of N `lbo` bytes on (leading byte offset).
__device__ __forceinline__ uint64_t sw128_desc_mn(uint32_t addr, uint32_t lbo, uint32_t sbo = 1024) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}
// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32).
__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// Keeps the compiler from moving reads / writes of registers an in-flight wgmma owns (accumulators,
// register A fragments) across a wgmma_wait: an empty asm that "reads and writes" each one.
template <int N> __device__ __forceinline__ void reg_fence(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void reg_fence(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

#define BRAZE_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define BRAZE_F16(i) BRAZE_F4(i), BRAZE_F4(i + 4), BRAZE_F4(i + 8), BRAZE_F4(i + 12)
#define BRAZE_F128 \
  BRAZE_F16(0), BRAZE_F16(16), BRAZE_F16(32), BRAZE_F16(48), BRAZE_F16(64), BRAZE_F16(80), BRAZE_F16(96), BRAZE_F16(112)
#define BRAZE_D128                                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                       \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "              \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "              \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "              \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "              \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "              \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "  \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define BRAZE_WGMMA_N256(shape_types, tail)                                                         \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"                                      \
               "wgmma.mma_async.sync.aligned." shape_types " " BRAZE_D128 ", %128, %129, p" tail ";\n}\n" \
               : BRAZE_F128                                                                         \
               : "l"(da), "l"(db), "r"(accumulate))


// d[64 x 256] (+)= A[64 x kstep] B[256 x kstep]^T (accumulate 0: d = the product). d is laid out
// as mma's C fragments: d[4 j + 2 h + c] is row 16 w + lane / 4 + 8 h, column 8 j + 2 (lane % 4) + c
// for warp w of the warpgroup.
template <class In>
__device__ __forceinline__ void wgmma_n256(float (&d)[128], uint64_t da, uint64_t db, int accumulate) {
  if constexpr (std::is_same_v<In, Bf16In>) BRAZE_WGMMA_N256("m64n256k16.f32.bf16.bf16", ", 1, 1, 0, 0");
  else if constexpr (std::is_same_v<In, F16In>) BRAZE_WGMMA_N256("m64n256k16.f32.f16.f16", ", 1, 1, 0, 0");
  else if constexpr (std::is_same_v<In, E4m3In>) BRAZE_WGMMA_N256("m64n256k32.f32.e4m3.e4m3", ", 1, 1");
  else BRAZE_WGMMA_N256("m64n256k32.f32.e5m2.e5m2", ", 1, 1");
}
#undef BRAZE_WGMMA_N256

#define BRAZE_F64 BRAZE_F16(0), BRAZE_F16(16), BRAZE_F16(32), BRAZE_F16(48)
#define BRAZE_D64                                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "          \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
// d[64 x 128] (+)= A[64 x kstep] B[128 x kstep]^T, both from shared memory, K-major (a k step is
// 32 bytes: 16 elements of 16 bits, 32 of fp8).
// d[4 j + 2 h + c]: row 16 w + lane / 4 + 8 h, column 8 j + 2 (lane % 4) + c, as wgmma_n256.
#define BRAZE_WGMMA_N128_SS(shape_types, tail)                                                  \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"                                    \
               "wgmma.mma_async.sync.aligned." shape_types " " BRAZE_D64 ", %64, %65, p" tail ";\n}\n" \
               : BRAZE_F64                                                                      \
               : "l"(da), "l"(db), "r"(accumulate))
template <class In>
__device__ __forceinline__ void wgmma_n128_ss(float (&d)[64], uint64_t da, uint64_t db, int accumulate) {
  if constexpr (std::is_same_v<In, Bf16In>) BRAZE_WGMMA_N128_SS("m64n128k16.f32.bf16.bf16", ", 1, 1, 0, 0");
  else if constexpr (std::is_same_v<In, F16In>) BRAZE_WGMMA_N128_SS("m64n128k16.f32.f16.f16", ", 1, 1, 0, 0");
  else if constexpr (std::is_same_v<In, E4m3In>) BRAZE_WGMMA_N128_SS("m64n128k32.f32.e4m3.e4m3", ", 1, 1");
  else BRAZE_WGMMA_N128_SS("m64n128k32.f32.e5m2.e5m2", ", 1, 1");
}
#undef BRAZE_WGMMA_N128_SS
// d[64 x 128] (+)= A[64 x 16] B[16 x 128] with A from registers and B MN-major in shared memory
// (imm-trans-b = 1; descriptor from sw128_desc_mn). a holds mma.m16n8k16's A fragment of the
// warp's 16 rows (row 16 w + lane / 4 (+8 in a[1], a[3]), columns 2 (lane % 4), +1 (+8 in a[2], a[3])),
// which is how the accumulator columns 16 k .. 16 k + 15 of wgmma_n128_ss pack (j = 2 k, 2 k + 1).
#define BRAZE_WGMMA_N128_RS(types)                                                                          \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." types " " BRAZE_D64                          \
               ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                              \
               : BRAZE_F64                                                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate))
template <class In>
__device__ __forceinline__ void wgmma_n128_rs_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t db, int accumulate) {
  static_assert(std::is_same_v<In, Bf16In> || std::is_same_v<In, F16In>, "16-bit operands only");
  if constexpr (std::is_same_v<In, Bf16In>) BRAZE_WGMMA_N128_RS("bf16.bf16");
  else BRAZE_WGMMA_N128_RS("f16.f16");
}
#undef BRAZE_WGMMA_N128_RS
#undef BRAZE_D64
#undef BRAZE_F64
#undef BRAZE_D128
#undef BRAZE_F128
#undef BRAZE_F16
#undef BRAZE_F4
#endif  // BRAZE_TC90

}  // namespace braze::cuda::tc90
