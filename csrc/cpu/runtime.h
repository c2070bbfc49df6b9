// The CPU backend's runtime: a persistent thread pool and run-time choice of
// the instruction set each family's kernels were compiled for.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace braze::cpu {

enum class Isa { base = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);
Isa best_isa();           // what this CPU supports and this build has
Isa active_isa();         // what kernels use now (best_isa unless overridden)
void set_isa(Isa isa);    // for tests: run the kernels of a lower ISA
bool isa_built(Isa isa);
bool isa_supported(Isa isa);

int num_threads();
// Kernels write outputs larger than this around the cache (non-temporal
// stores). Default: half the last-level cache (sysfs, else 32 MiB); tests
// set 0 to run the streaming path on small shapes.
int64_t stream_min_bytes();
void set_stream_min_bytes(int64_t bytes);  // < 0: back to the default
// quant.matmul's GEMV quantizes x to int8 for the GGML formats (as ggml does;
// docs/quant.md): on by default; off runs every format with exact f32 x.
bool quant_int8_activations();
void set_quant_int8_activations(bool on);
// The int8 GEMV of the legacy GGML blocks uses AVX-512 VNNI (vpdpbusd) in the avx512
// build where the CPU has it (default); off (tests) runs the vpmaddubsw path. Same results.
bool cpu_has_vnni();
bool quant_vnni();
void set_quant_vnni(bool on);  // on where the CPU has no VNNI: ValueError
// The int8 W8A8 GEMM (more than 16 rows) of the avx512 build runs on the AMX tile unit
// where the build has the AMX unit (BRAZE_HAVE_AMX), the CPU has AMX-TILE and AMX-INT8
// (cpuid 7.0 EDX bits 24, 25) and Linux grants the tile state (arch_prctl
// ARCH_REQ_XCOMP_PERM, once per process); else, or with BRAZE_CPU_AMX=0 in the
// environment (read at first use), it runs the VNNI kernel. Same results.
bool cpu_has_amx();
bool quant_amx();
void set_quant_amx(bool on);  // on where cpu_has_amx() is false: ValueError
// Tests: the same GEMM's AMX path (every ISA build) on a software model of the tile
// instructions (cpu/amx_emulate.h), ahead of the hardware's; off by default.
bool quant_amx_emulated();
void set_quant_amx_emulated(bool on);
void set_num_threads(int n);

// Runs fn(task, worker) for task in [0, tasks) on the pool; the calling thread
// takes part. Tasks run in no fixed order; `worker` is in [0, num_threads()).
// With one task (or one thread) everything runs inline on the caller, and so
// does a parallel_for called from inside a task (nested regions). If tasks
// throw, the tasks not yet started are skipped and the first exception is
// rethrown here once every thread has left the job. The pool survives fork():
// a child makes its own threads on first use.
void parallel_for(int64_t tasks, const std::function<void(int64_t task, int worker)>& fn);

// For tests (braze._cpu._test_pool): "nested" runs a parallel_for of 16 tasks
// whose every task runs a parallel_for of 16 and returns the inner tasks run
// (256); "throw" runs 64 tasks of which task 13 throws ValueError.
int64_t pool_self_test(const std::string& kind);

// Splits rows into chunks of at least `min_bytes` of traffic each, at most a
// few per thread, and runs fn(row_begin, row_end) over them in parallel.
void parallel_rows(int64_t rows, int64_t bytes_per_row, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace braze::cpu

// Each family's kernels are compiled once per ISA into braze::cpu::<isa>; a
// family header declares its entry points with BRAZE_CPU_ISA_DECLARE and picks
// the active one through pick().
#define BRAZE_CPU_FOR_EACH_ISA(X) X(base) X(avx2) X(avx512)

namespace braze::cpu {
template <class Fn>
Fn pick(Fn base_fn, Fn avx2_fn, Fn avx512_fn) {
  switch (active_isa()) {
    case Isa::avx512: if (avx512_fn) return avx512_fn; [[fallthrough]];
    case Isa::avx2: if (avx2_fn) return avx2_fn; [[fallthrough]];
    default: return base_fn;
  }
}
}  // namespace braze::cpu

// BRAZE_CPU_PICK(fn): the active ISA's build of braze::cpu::<isa>::fn.
#if defined(BRAZE_HAVE_ISA_avx2)
#define BRAZE_ISA_FN_avx2(f) &::braze::cpu::avx2::f
#else
#define BRAZE_ISA_FN_avx2(f) static_cast<decltype(&::braze::cpu::base::f)>(nullptr)
#endif
#if defined(BRAZE_HAVE_ISA_avx512)
#define BRAZE_ISA_FN_avx512(f) &::braze::cpu::avx512::f
#else
#define BRAZE_ISA_FN_avx512(f) static_cast<decltype(&::braze::cpu::base::f)>(nullptr)
#endif
#define BRAZE_CPU_PICK(f) ::braze::cpu::pick(&::braze::cpu::base::f, BRAZE_ISA_FN_avx2(f), BRAZE_ISA_FN_avx512(f))
