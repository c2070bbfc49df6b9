// Vector types of the MSL subset (see mtlsim.h). Swizzles are rvalues: the
// rewriter turns `v.xy` into `v.xy()`; writing through a swizzle is not in the
// supported subset.
#pragma once

namespace mtlsim {

template <class T, int N> struct vec_storage;
template <class T> struct alignas(sizeof(T) * 2) vec_storage<T, 2> { T x, y; };
template <class T> struct alignas(sizeof(T) * 4) vec_storage<T, 3> { T x, y, z; };
template <class T> struct alignas(sizeof(T) * 4) vec_storage<T, 4> { T x, y, z, w; };

template <class T, int N> struct vec : vec_storage<T, N> {
  vec() = default;
  explicit vec(T s) { for (int i = 0; i < N; ++i) (*this)[i] = s; }
  template <class A0, class A1, class... A,
            class = typename std::enable_if<2 + sizeof...(A) == N>::type>
  vec(A0 a0, A1 a1, A... a) {
    const T v[N] = {T(a0), T(a1), T(a)...};
    for (int i = 0; i < N; ++i) (*this)[i] = v[i];
  }
  template <class U> explicit vec(const vec<U, N>& o) {
    for (int i = 0; i < N; ++i) (*this)[i] = T(o[i]);
  }
  T& operator[](int i) { return (&this->x)[i]; }
  const T& operator[](int i) const { return (&this->x)[i]; }
  T c(int i) const {
    return i < N ? (*this)[i] : T(0);  // a swizzle past N is rejected by Metal; never used
  }
  vec<T, 2> xx() const { return vec<T, 2>(c(0), c(0)); }
  vec<T, 2> xy() const { return vec<T, 2>(c(0), c(1)); }
  vec<T, 2> xz() const { return vec<T, 2>(c(0), c(2)); }
  vec<T, 2> xw() const { return vec<T, 2>(c(0), c(3)); }
  vec<T, 2> yx() const { return vec<T, 2>(c(1), c(0)); }
  vec<T, 2> yy() const { return vec<T, 2>(c(1), c(1)); }
  vec<T, 2> yz() const { return vec<T, 2>(c(1), c(2)); }
  vec<T, 2> yw() const { return vec<T, 2>(c(1), c(3)); }
  vec<T, 2> zx() const { return vec<T, 2>(c(2), c(0)); }
  vec<T, 2> zy() const { return vec<T, 2>(c(2), c(1)); }
  vec<T, 2> zz() const { return vec<T, 2>(c(2), c(2)); }
  vec<T, 2> zw() const { return vec<T, 2>(c(2), c(3)); }
  vec<T, 2> wx() const { return vec<T, 2>(c(3), c(0)); }
  vec<T, 2> wy() const { return vec<T, 2>(c(3), c(1)); }
  vec<T, 2> wz() const { return vec<T, 2>(c(3), c(2)); }
  vec<T, 2> ww() const { return vec<T, 2>(c(3), c(3)); }
  vec<T, 3> xyz() const { return vec<T, 3>(c(0), c(1), c(2)); }
  vec<T, 3> xyw() const { return vec<T, 3>(c(0), c(1), c(3)); }
  vec<T, 3> xzy() const { return vec<T, 3>(c(0), c(2), c(1)); }
  vec<T, 3> xzw() const { return vec<T, 3>(c(0), c(2), c(3)); }
  vec<T, 3> xwy() const { return vec<T, 3>(c(0), c(3), c(1)); }
  vec<T, 3> xwz() const { return vec<T, 3>(c(0), c(3), c(2)); }
  vec<T, 3> yxz() const { return vec<T, 3>(c(1), c(0), c(2)); }
  vec<T, 3> yxw() const { return vec<T, 3>(c(1), c(0), c(3)); }
  vec<T, 3> yzx() const { return vec<T, 3>(c(1), c(2), c(0)); }
  vec<T, 3> yzw() const { return vec<T, 3>(c(1), c(2), c(3)); }
  vec<T, 3> ywx() const { return vec<T, 3>(c(1), c(3), c(0)); }
  vec<T, 3> ywz() const { return vec<T, 3>(c(1), c(3), c(2)); }
  vec<T, 3> zxy() const { return vec<T, 3>(c(2), c(0), c(1)); }
  vec<T, 3> zxw() const { return vec<T, 3>(c(2), c(0), c(3)); }
  vec<T, 3> zyx() const { return vec<T, 3>(c(2), c(1), c(0)); }
  vec<T, 3> zyw() const { return vec<T, 3>(c(2), c(1), c(3)); }
  vec<T, 3> zwx() const { return vec<T, 3>(c(2), c(3), c(0)); }
  vec<T, 3> zwy() const { return vec<T, 3>(c(2), c(3), c(1)); }
  vec<T, 3> wxy() const { return vec<T, 3>(c(3), c(0), c(1)); }
  vec<T, 3> wxz() const { return vec<T, 3>(c(3), c(0), c(2)); }
  vec<T, 3> wyx() const { return vec<T, 3>(c(3), c(1), c(0)); }
  vec<T, 3> wyz() const { return vec<T, 3>(c(3), c(1), c(2)); }
  vec<T, 3> wzx() const { return vec<T, 3>(c(3), c(2), c(0)); }
  vec<T, 3> wzy() const { return vec<T, 3>(c(3), c(2), c(1)); }
  vec<T, 4> xyzw() const { return vec<T, 4>(c(0), c(1), c(2), c(3)); }
  vec<T, 4> xywz() const { return vec<T, 4>(c(0), c(1), c(3), c(2)); }
  vec<T, 4> xzyw() const { return vec<T, 4>(c(0), c(2), c(1), c(3)); }
  vec<T, 4> xzwy() const { return vec<T, 4>(c(0), c(2), c(3), c(1)); }
  vec<T, 4> xwyz() const { return vec<T, 4>(c(0), c(3), c(1), c(2)); }
  vec<T, 4> xwzy() const { return vec<T, 4>(c(0), c(3), c(2), c(1)); }
  vec<T, 4> yxzw() const { return vec<T, 4>(c(1), c(0), c(2), c(3)); }
  vec<T, 4> yxwz() const { return vec<T, 4>(c(1), c(0), c(3), c(2)); }
  vec<T, 4> yzxw() const { return vec<T, 4>(c(1), c(2), c(0), c(3)); }
  vec<T, 4> yzwx() const { return vec<T, 4>(c(1), c(2), c(3), c(0)); }
  vec<T, 4> ywxz() const { return vec<T, 4>(c(1), c(3), c(0), c(2)); }
  vec<T, 4> ywzx() const { return vec<T, 4>(c(1), c(3), c(2), c(0)); }
  vec<T, 4> zxyw() const { return vec<T, 4>(c(2), c(0), c(1), c(3)); }
  vec<T, 4> zxwy() const { return vec<T, 4>(c(2), c(0), c(3), c(1)); }
  vec<T, 4> zyxw() const { return vec<T, 4>(c(2), c(1), c(0), c(3)); }
  vec<T, 4> zywx() const { return vec<T, 4>(c(2), c(1), c(3), c(0)); }
  vec<T, 4> zwxy() const { return vec<T, 4>(c(2), c(3), c(0), c(1)); }
  vec<T, 4> zwyx() const { return vec<T, 4>(c(2), c(3), c(1), c(0)); }
  vec<T, 4> wxyz() const { return vec<T, 4>(c(3), c(0), c(1), c(2)); }
  vec<T, 4> wxzy() const { return vec<T, 4>(c(3), c(0), c(2), c(1)); }
  vec<T, 4> wyxz() const { return vec<T, 4>(c(3), c(1), c(0), c(2)); }
  vec<T, 4> wyzx() const { return vec<T, 4>(c(3), c(1), c(2), c(0)); }
  vec<T, 4> wzxy() const { return vec<T, 4>(c(3), c(2), c(0), c(1)); }
  vec<T, 4> wzyx() const { return vec<T, 4>(c(3), c(2), c(1), c(0)); }
};

#define MTLSIM_VEC_OP(op)                                                            \
  template <class T, int N> vec<T, N> operator op(vec<T, N> a, const vec<T, N>& b) { \
    for (int i = 0; i < N; ++i) a[i] = T(a[i] op b[i]);                              \
    return a;                                                                        \
  }                                                                                  \
  template <class T, int N, class S,                                                 \
            class = typename std::enable_if<std::is_arithmetic<S>::value ||          \
                                             std::is_same<S, T>::value>::type>       \
  vec<T, N> operator op(vec<T, N> a, S s) {                                          \
    for (int i = 0; i < N; ++i) a[i] = T(a[i] op T(s));                              \
    return a;                                                                        \
  }                                                                                  \
  template <class T, int N, class S,                                                 \
            class = typename std::enable_if<std::is_arithmetic<S>::value ||          \
                                             std::is_same<S, T>::value>::type>       \
  vec<T, N> operator op(S s, vec<T, N> a) {                                          \
    for (int i = 0; i < N; ++i) a[i] = T(T(s) op a[i]);                              \
    return a;                                                                        \
  }                                                                                  \
  template <class T, int N, class R> vec<T, N>& operator op##=(vec<T, N>& a, const R& b) { \
    return a = a op b;                                                               \
  }
MTLSIM_VEC_OP(+) MTLSIM_VEC_OP(-) MTLSIM_VEC_OP(*) MTLSIM_VEC_OP(/)
#undef MTLSIM_VEC_OP
template <class T, int N> vec<T, N> operator-(vec<T, N> a) {
  for (int i = 0; i < N; ++i) a[i] = T(-a[i]);
  return a;
}

}  // namespace mtlsim

#define MTLSIM_VEC_TYPES(t)                   \
  typedef mtlsim::vec<t, 2> t##2;             \
  typedef mtlsim::vec<t, 3> t##3;             \
  typedef mtlsim::vec<t, 4> t##4;
MTLSIM_VEC_TYPES(float) MTLSIM_VEC_TYPES(half) MTLSIM_VEC_TYPES(bfloat)
MTLSIM_VEC_TYPES(int) MTLSIM_VEC_TYPES(uint) MTLSIM_VEC_TYPES(short) MTLSIM_VEC_TYPES(ushort)
#undef MTLSIM_VEC_TYPES
