// The metal:: library subset: math, SIMD-group functions and matrices, barriers, atomics.
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

typedef mtlsim::vec<ulong, 2> ulong2;

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

// A call site is its source line (a default argument is evaluated at the
// call): the compiler may duplicate code, giving one call several return
// addresses, so those cannot tell call sites apart.
#define MTLSIM_AT unsigned mtlsim_line = __builtin_LINE()
#define MTLSIM_SITE reinterpret_cast<const void*>(std::uintptr_t(mtlsim_line))
template <class T> __attribute__((noinline)) T simd_sum(T v, MTLSIM_AT) {
  return detail::collective(v, &detail::reduce_fn<T, 0>, 0, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_max(T v, MTLSIM_AT) {
  return detail::collective(v, &detail::reduce_fn<T, 1>, 0, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_shuffle_xor(T v, ushort mask, MTLSIM_AT) {
  return detail::collective(v, &detail::shuffle_fn<T, 0>, mask, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_shuffle(T v, ushort lane, MTLSIM_AT) {
  return detail::collective(v, &detail::shuffle_fn<T, 1>, lane, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_broadcast(T v, ushort lane, MTLSIM_AT) {
  return detail::collective(v, &detail::shuffle_fn<T, 1>, lane, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_shuffle_down(T v, ushort delta, MTLSIM_AT) {
  return detail::collective(v, &detail::shuffle_fn<T, 2>, delta, MTLSIM_SITE);
}
template <class T> __attribute__((noinline)) T simd_shuffle_up(T v, ushort delta, MTLSIM_AT) {
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
template <class T> __attribute__((noinline)) T simd_min(T v, MTLSIM_AT) {
  return detail::collective(v, &detail::reduce_min_fn<T>, 0, MTLSIM_SITE);
}
#undef MTLSIM_SITE
#undef MTLSIM_AT

// ---- SIMD-group matrices (8 x 8) ------------------------------------------
// On a GPU the 64 elements are spread over the 32 lanes; here every lane's
// object holds the whole matrix (it is simdgroup-uniform). Every function is a
// collective: all 32 lanes must reach the same call with the same operands
// (pointers, strides and matrix contents), or the launch fails, since on a GPU
// anything else is undefined. Products are computed in f32 and rounded to T.
template <class T, int Cols, int Rows> struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "Metal's simdgroup matrices are 8 x 8");
  T e[Rows * Cols];  // row-major: e[r * Cols + c]
  simdgroup_matrix() = default;
  explicit simdgroup_matrix(T diagonal, unsigned line = __builtin_LINE());  // diag(d, ..., d)
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

namespace detail {
// What one lane passes to a matrix collective (fits SimdSlot::in).
struct MatArgs {
  void* out;            // this lane's result matrix (fill, load, multiply)
  const void* in[3];    // operand matrices, or [0]: the fill value / load source / store target
  unsigned long epr;    // elements_per_row
  unsigned ox, oy;      // matrix_origin
  unsigned transpose;
};
static_assert(sizeof(MatArgs) <= 64, "MatArgs must fit a SIMD slot");

inline const MatArgs& mat_args(const mtlsim::SimdGroupView& g, unsigned lane) {
  return *reinterpret_cast<const MatArgs*>(g.slots[lane].in);
}
// The first live lane does the whole operation once every lane has arrived:
// it checks that the simdgroup is complete and uniform, then writes every
// lane's result.
inline bool mat_lead(const mtlsim::SimdGroupView& g, unsigned lane) {
  if (lane != unsigned(__builtin_ctz(g.live_mask))) return false;
  if (g.live_mask != 0xffffffffu) {
    mtlsim::simd_fail("simdgroup_matrix functions need all 32 lanes of the simdgroup", lane, g.live_mask);
    return false;
  }
  return true;
}
inline bool mat_same(const mtlsim::SimdGroupView& g, unsigned nbytes, int operands, bool addresses) {
  const MatArgs& a0 = mat_args(g, 0);
  for (unsigned l = 1; l < 32; ++l) {
    const MatArgs& a = mat_args(g, l);
    bool same = a.epr == a0.epr && a.ox == a0.ox && a.oy == a0.oy && a.transpose == a0.transpose;
    for (int i = 0; i < operands && same; ++i)
      same = addresses ? (i > 0 || a.in[0] == a0.in[0]) && (i == 0 || std::memcmp(a.in[i], a0.in[i], nbytes) == 0)
                       : std::memcmp(a.in[i], a0.in[i], nbytes) == 0;
    if (!same) {
      mtlsim::simd_fail("simdgroup_matrix operands differ across the lanes of a simdgroup", l, 0);
      return false;
    }
  }
  return true;
}
template <class M> void mat_broadcast(const mtlsim::SimdGroupView& g, const M& m) {
  for (unsigned l = 0; l < 32; ++l) std::memcpy(mat_args(g, l).out, &m, sizeof(M));
}
template <class T, class M> void mat_fill_fn(const mtlsim::SimdGroupView& g, unsigned lane) {
  if (!mat_lead(g, lane) || !mat_same(g, sizeof(T), 1, false)) return;
  const MatArgs& a = mat_args(g, 0);
  T v;
  std::memcpy(&v, a.in[0], sizeof(T));
  M m;
  for (int i = 0; i < 64; ++i) m.e[i] = a.transpose ? ((i / 8 == i % 8) ? v : T(0.0f)) : v;  // transpose: diagonal
  mat_broadcast(g, m);
}
template <class T, class M> void mat_load_fn(const mtlsim::SimdGroupView& g, unsigned lane) {
  if (!mat_lead(g, lane) || !mat_same(g, 0, 1, true)) return;
  const MatArgs& a = mat_args(g, 0);
  const T* base = static_cast<const T*>(a.in[0]) + a.oy * a.epr + a.ox;
  M m;
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) m.e[r * 8 + c] = a.transpose ? base[c * a.epr + r] : base[r * a.epr + c];
  mat_broadcast(g, m);
}
template <class T, class M> void mat_store_fn(const mtlsim::SimdGroupView& g, unsigned lane) {
  if (!mat_lead(g, lane) || !mat_same(g, sizeof(M), 2, true)) return;
  const MatArgs& a = mat_args(g, 0);
  T* base = const_cast<T*>(static_cast<const T*>(a.in[0])) + a.oy * a.epr + a.ox;
  const M& m = *static_cast<const M*>(a.in[1]);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) (a.transpose ? base[c * a.epr + r] : base[r * a.epr + c]) = m.e[r * 8 + c];
}
// d = a b (+ c when ACC): f32 sums in k order, rounded to T once.
template <class T, class M, bool ACC> void mat_mul_fn(const mtlsim::SimdGroupView& g, unsigned lane) {
  if (!mat_lead(g, lane) || !mat_same(g, sizeof(M), ACC ? 3 : 2, false)) return;
  const MatArgs& a = mat_args(g, 0);
  const M& x = *static_cast<const M*>(a.in[0]);
  const M& y = *static_cast<const M*>(a.in[1]);
  M d;
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) {
      float s = ACC ? float(static_cast<const M*>(a.in[2])->e[r * 8 + c]) : 0.0f;
      for (int k = 0; k < 8; ++k) s += float(x.e[r * 8 + k]) * float(y.e[k * 8 + c]);
      d.e[r * 8 + c] = T(s);
    }
  mat_broadcast(g, d);
}
inline void mat_collective(const MatArgs& a, mtlsim::SimdFn fn, const void* site) {
  mtlsim::SimdSlot& s = mtlsim::simd_slot();
  std::memcpy(s.in, &a, sizeof a);
  s.fn = fn;
  s.arg = 0;
  s.site = site;
  mtlsim::simd_wait();
}
}  // namespace detail

#define MTLSIM_AT unsigned mtlsim_line = __builtin_LINE()  // as for the SIMD functions above
#define MTLSIM_SITE reinterpret_cast<const void*>(std::uintptr_t(mtlsim_line))
template <class T, int C, int R> __attribute__((noinline)) simdgroup_matrix<T, C, R>::simdgroup_matrix(T d, unsigned mtlsim_line) {
  detail::MatArgs a{this, {&d, nullptr, nullptr}, 0, 0, 0, 1};
  detail::mat_collective(a, &detail::mat_fill_fn<T, simdgroup_matrix>, MTLSIM_SITE);
}
template <class T, int C, int R>
__attribute__((noinline)) simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(const T value, MTLSIM_AT) {
  simdgroup_matrix<T, C, R> m;
  detail::MatArgs a{&m, {&value, nullptr, nullptr}, 0, 0, 0, 0};
  detail::mat_collective(a, &detail::mat_fill_fn<T, simdgroup_matrix<T, C, R>>, MTLSIM_SITE);
  return m;
}
// Element (r, c) is src[r * elements_per_row + c] from src + origin.y *
// elements_per_row + origin.x; transposed, src[c * elements_per_row + r].
template <class T, int C, int R>
__attribute__((noinline)) void simdgroup_load(simdgroup_matrix<T, C, R>& d, const T* src,
                                              ulong elements_per_row = C, mtlsim::vec<ulong, 2> matrix_origin =
                                              mtlsim::vec<ulong, 2>(0ul), bool transpose_matrix = false, MTLSIM_AT) {
  detail::MatArgs a{&d, {src, nullptr, nullptr}, elements_per_row, unsigned(matrix_origin[0]),
                    unsigned(matrix_origin[1]), transpose_matrix ? 1u : 0u};
  detail::mat_collective(a, &detail::mat_load_fn<T, simdgroup_matrix<T, C, R>>, MTLSIM_SITE);
}
template <class T, int C, int R>
__attribute__((noinline)) void simdgroup_store(simdgroup_matrix<T, C, R> m, T* dst,
                                               ulong elements_per_row = C, mtlsim::vec<ulong, 2> matrix_origin =
                                               mtlsim::vec<ulong, 2>(0ul), bool transpose_matrix = false, MTLSIM_AT) {
  detail::MatArgs a{nullptr, {dst, &m, nullptr}, elements_per_row, unsigned(matrix_origin[0]),
                    unsigned(matrix_origin[1]), transpose_matrix ? 1u : 0u};
  detail::mat_collective(a, &detail::mat_store_fn<T, simdgroup_matrix<T, C, R>>, MTLSIM_SITE);
}
template <class T, int C, int R, int K>
__attribute__((noinline)) void simdgroup_multiply(simdgroup_matrix<T, C, R>& d, const simdgroup_matrix<T, K, R>& a,
                                                  const simdgroup_matrix<T, C, K>& b, MTLSIM_AT) {
  detail::MatArgs m{&d, {&a, &b, nullptr}, 0, 0, 0, 0};
  detail::mat_collective(m, &detail::mat_mul_fn<T, simdgroup_matrix<T, C, R>, false>, MTLSIM_SITE);
}
template <class T, int C, int R, int K>
__attribute__((noinline)) void simdgroup_multiply_accumulate(simdgroup_matrix<T, C, R>& d,
                                                             const simdgroup_matrix<T, K, R>& a,
                                                             const simdgroup_matrix<T, C, K>& b,
                                                             const simdgroup_matrix<T, C, R>& c, MTLSIM_AT) {
  detail::MatArgs m{&d, {&a, &b, &c}, 0, 0, 0, 0};
  detail::mat_collective(m, &detail::mat_mul_fn<T, simdgroup_matrix<T, C, R>, true>, MTLSIM_SITE);
}
#undef MTLSIM_SITE
#undef MTLSIM_AT

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
