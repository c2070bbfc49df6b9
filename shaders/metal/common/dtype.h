// Element loads and stores with f32 math: every input is upcast on load and
// every output is cast once on store (float, half and bfloat alike).
#pragma once
#include <metal_stdlib>

template <typename T>
inline float load_f32(device const T* p, uint i) {
  return static_cast<float>(p[i]);
}

template <typename T>
inline void store_f32(device T* p, uint i, float v) {
  p[i] = static_cast<T>(v);
}
