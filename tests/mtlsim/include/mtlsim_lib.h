// The metal:: library subset: math, SIMD-group functions, barriers, atomics.
#pragma once

// Builtins ([[thread_position_in_grid]] ...) bind by value as uint / ushort or
// as uint2 / uint3.
namespace mtlsim {
template <class T>
struct BindValue<T, typename std::enable_if<std::is_integral<T>::value>::type> {
  static T get(const Bind& b, const ThreadCtx& c) { return T(c.builtin[b.index][0]); }
};
template <class T, int N> struct BindValue<vec<T, N>, void> {
  static vec<T, N> get(const Bind& b, const ThreadCtx& c) {
    vec<T, N> v;
    for (int i = 0; i < N; ++i) v[i] = T(c.builtin[b.index][i]);
    return v;
  }
};
}  // namespace mtlsim

namespace metal {

// ---- math: float overloads (f32 math is the subset's rule) -----------------
inline float sqrt(float x) { return __builtin_sqrtf(x); }
inline float rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
inline float exp(float x) { return __builtin_expf(x); }
inline float log(float x) { return __builtin_logf(x); }
inline float abs(float x) { return __builtin_fabsf(x); }
inline float fabs(float x) { return __builtin_fabsf(x); }
inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline float clamp(float x, float lo, float hi) { return min(max(x, lo), hi); }
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline uint max(uint a, uint b) { return a > b ? a : b; }
inline uint min(uint a, uint b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
template <class T> T select(T a, T b, bool c) { return c ? b : a; }
// High 32 bits of the 64-bit product (integer overloads of MSL's mulhi).
inline uint mulhi(uint a, uint b) { return uint((uint64_t(a) * uint64_t(b)) >> 32); }
inline int mulhi(int a, int b) { return int((int64_t(a) * int64_t(b)) >> 32); }
template <class T, class U> T as_type(const U& u) {
  static_assert(sizeof(T) == sizeof(U), "as_type needs equal sizes");
  T t;
  std::memcpy(&t, &u, sizeof(T));
  return t;
}
namespace precise { using metal::sqrt; using metal::rsqrt; using metal::exp; using metal::log; }

// ---- barriers ---------------------------------------------------------------
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(int(a) | int(b)); }
inline void threadgroup_barrier(mem_flags) { mtlsim::tg_barrier(); }
inline void simdgroup_barrier(mem_flags) { mtlsim::simd_slot().fn = nullptr; mtlsim::simd_wait(); }

// ---- SIMD-group functions (width 32, lanes in lockstep) ---------------------
namespace detail {
template <class T> T lane_in(const mtlsim::SimdGroupView& g, unsigned lane) {
  T v;
  std::memcpy(&v, g.slots[lane].in, sizeof(T));
  return v;
}
template <class T> void lane_out(const mtlsim::SimdGroupView& g, unsigned lane, const T& v) {
  std::memcpy(g.slots[lane].out, &v, sizeof(T));
}
template <class T> T plus(T a, T b) { return T(a + b); }
template <class T> T maxof(T a, T b) { return T(max(float(a), float(b))); }
template <class T, int N> mtlsim::vec<T, N> maxof(mtlsim::vec<T, N> a, mtlsim::vec<T, N> b) {
  for (int i = 0; i < N; ++i) a[i] = maxof(a[i], b[i]);
  return a;
}
template <class T, int OP> void reduce_fn(const mtlsim::SimdGroupView& g, unsigned lane) {
  bool first = true;
  T acc{};
  for (unsigned l = 0; l < 32; ++l) {  // lane order: deterministic
    if (!(g.live_mask >> l & 1u)) continue;
    T v = lane_in<T>(g, l);
    acc = first ? v : (OP == 0 ? plus(acc, v) : maxof(acc, v));
    first = false;
  }
  lane_out(g, lane, acc);
}
// Reads lane `src` computed from this lane's argument: 0 xor, 1 absolute
// lane (shuffle / broadcast), 2 down, 3 up.
template <class T, int MODE> void shuffle_fn(const mtlsim::SimdGroupView& g, unsigned lane) {
  unsigned arg = g.slots[lane].arg, src;
  if (MODE == 0) src = lane ^ arg;
  else if (MODE == 1) src = arg;
  else if (MODE == 2) src = lane + arg < 32 ? lane + arg : lane;
  else src = lane >= arg ? lane - arg : lane;
  if (src >= 32) return mtlsim::simd_fail("SIMD shuffle reads a lane >= 32", lane, arg);
  if (!(g.live_mask >> src & 1u))
    return mtlsim::simd_fail("SIMD shuffle reads an inactive lane", lane, arg);
  lane_out(g, lane, lane_in<T>(g, src));
}
template <class T> T collective(T v, mtlsim::SimdFn fn, unsigned arg, const void* site) {
  static_assert(sizeof(T) <= 64, "SIMD value too large");
  mtlsim::SimdSlot& s = mtlsim::simd_slot();
  std::memcpy(s.in, &v, sizeof(T));
  s.fn = fn;
  s.arg = arg;
  s.site = site;
  mtlsim::simd_wait();
  T r;
  std::memcpy(&r, s.out, sizeof(T));
  return r;
}
}  // namespace detail

#define MTLSIM_SITE __builtin_return_address(0)
template <class T> __attribute__((noinline)) T simd_sum(T v) {
  return detail::collective(v, &detail::reduce_fn<T, 0>, 0, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_max(T v) {
  return detail::collective(v, &detail::reduce_fn<T, 1>, 0, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_shuffle_xor(T v, ushort mask) {
  return detail::collective(v, &detail::shuffle_fn<T, 0>, mask, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_shuffle(T v, ushort lane) {
  return detail::collective(v, &detail::shuffle_fn<T, 1>, lane, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_broadcast(T v, ushort lane) {
  return detail::collective(v, &detail::shuffle_fn<T, 1>, lane, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_shuffle_down(T v, ushort delta) {
  return detail::collective(v, &detail::shuffle_fn<T, 2>, delta, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_shuffle_up(T v, ushort delta) {
  return detail::collective(v, &detail::shuffle_fn<T, 3>, delta, MTLSIM_SITE);
}
// simd_min: integers compare as integers, floats as float (fmin: NaN loses).
namespace detail {
inline float minof(float a, float b) { return __builtin_fminf(a, b); }
inline uint minof(uint a, uint b) { return b < a ? b : a; }
inline int minof(int a, int b) { return b < a ? b : a; }
template <class T> void reduce_min_fn(const mtlsim::SimdGroupView& g, unsigned lane) {
  bool first = true;
  T acc{};
  for (unsigned l = 0; l < 32; ++l) {
    if (!(g.live_mask >> l & 1u)) continue;
    T v = lane_in<T>(g, l);
    acc = first ? v : minof(acc, v);
    first = false;
  }
  lane_out(g, lane, acc);
}
}  // namespace detail
template <class T> __attribute__((noinline)) T simd_min(T v) {
  return detail::collective(v, &detail::reduce_min_fn<T>, 0, MTLSIM_SITE);
}
#undef MTLSIM_SITE

// ---- atomics: fibers are never preempted, so a plain read-modify-write is atomic
enum memory_order { memory_order_relaxed };
template <class T> struct atomic { T v; };
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<float> atomic_float;
template <class T, class U> T atomic_fetch_add_explicit(atomic<T>* a, U x, memory_order) {
  T old = a->v;
  a->v = T(old + x);
  return old;
}
template <class T> T atomic_load_explicit(atomic<T>* a, memory_order) { return a->v; }
template <class T, class U> void atomic_store_explicit(atomic<T>* a, U x, memory_order) { a->v = T(x); }

}  // namespace metal
