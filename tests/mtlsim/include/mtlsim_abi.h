// The interface between rewritten shaders and the simulator runtime
// (runtime.cpp). Free of the shim's macros so host code can include it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

namespace mtlsim {

// ---- runtime interface (runtime.cpp) ---------------------------------------
enum class Builtin : int {
  thread_position_in_grid, thread_position_in_threadgroup,
  threadgroup_position_in_grid, threads_per_threadgroup, threadgroups_per_grid,
  threads_per_grid, thread_index_in_threadgroup, thread_index_in_simdgroup,
  simdgroup_index_in_threadgroup, simdgroups_per_threadgroup, threads_per_simdgroup,
};
enum class BindKind : int { buffer, threadgroup, builtin };
struct Bind { BindKind kind; int index; };

struct ThreadCtx {
  void* const* buffers;      // [[buffer(i)]]
  char* const* tg_args;      // [[threadgroup(i)]]
  unsigned builtin[11][3];   // indexed by Builtin
};
typedef void (*Entry)(const ThreadCtx&);
struct Registrar { Registrar(const char* host_name, Entry e); };

// A SIMD-group collective: each lane deposits `in`, the runtime waits for all
// live lanes of the simdgroup, then calls `fn` once per lane to fill `out`.
struct SimdSlot;
struct SimdGroupView {
  SimdSlot* slots;            // 32 lanes
  unsigned live_mask;         // lanes that exist and have not returned
};
typedef void (*SimdFn)(const SimdGroupView&, unsigned lane);
struct SimdSlot {
  alignas(16) unsigned char in[64];
  alignas(16) unsigned char out[64];
  SimdFn fn;
  unsigned arg;
  const void* site;
};
SimdSlot& simd_slot();          // this lane's slot
void simd_wait();               // block until the collective resolves
void simd_fail(const char* what, unsigned lane, unsigned arg);
void tg_barrier();
void* tg_alloc(std::size_t size, std::size_t align);

template <class P, class Enable = void> struct BindValue;  // builtins: mtlsim_lib.h
template <class T> struct BindValue<T*> {
  static T* get(const Bind& b, const ThreadCtx& c) {
    return b.kind == BindKind::threadgroup ? reinterpret_cast<T*>(c.tg_args[b.index])
                                           : static_cast<T*>(c.buffers[b.index]);
  }
};
template <class T> struct BindValue<T&> {
  static T& get(const Bind& b, const ThreadCtx& c) { return *static_cast<T*>(c.buffers[b.index]); }
};
template <class... P, std::size_t... I>
void invoke_impl(void (*f)(P...), const Bind* b, const ThreadCtx& c, std::index_sequence<I...>) {
  f(BindValue<P>::get(b[I], c)...);
}
template <class... P>
void invoke(void (*f)(P...), const Bind* b, const ThreadCtx& c) {
  invoke_impl(f, b, c, std::index_sequence_for<P...>{});
}

}  // namespace mtlsim
