// What limits the CUDA dequantize: its kernel beside the ceilings of its byte
// mix (a copy; int8 widened to bf16, 1 byte read to 2 written; 1 to 4, as a
// 4-bit format's; writes alone), the kernel before (one buffer), the same frame
// with no decode, and other grids and tile sizes, in one process (no braze
// build needed; its rows on an H100 / H200 are in docs/performance.md).
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -fmad=false -I csrc -I shaders -I scripts \
//     scripts/cuda_dequant_bw.cu -o /tmp/dqbw && /tmp/dqbw
// Each row: median of 7 timings of 20 launches rotating over 3 buffer sets
// (every set larger than the L2), bytes = packed read + output written; % is
// against cudaMemcpyAsync device-to-device of the same total, measured here.
// Variants are checked bit for bit against the library kernel's output, and the
// library kernel against a copy of the kernel of c67ad08 (namespace ref, timed
// beside it as "ref (c67ad08)") for every format; the exit status is 1 if any differs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/quant/dequant.cuh"
#include "cuda_bw.cuh"

namespace braze::cuda::quant {
// (The library's staging before its two-buffer kernel; the reference and the variants below use it.)
// The block's threads copy n bytes of global src to shared dst: 16-byte
// vectors where src is 16-byte aligned, 4-byte words where 4-aligned, else bytes.
__device__ __forceinline__ void stage_bytes(uint8_t* dst, const uint8_t* src, int n) {
  const int t = threadIdx.x, nt = blockDim.x;
  const uintptr_t a = reinterpret_cast<uintptr_t>(src);
  int done = 0;
  if ((a & 15u) == 0) {
    const int nv = n >> 4;
    for (int i = t; i < nv; i += nt)
      reinterpret_cast<uint4*>(dst)[i] = __ldg(reinterpret_cast<const uint4*>(src) + i);
    done = nv << 4;
  } else if ((a & 3u) == 0) {
    const int nv = n >> 2;
    for (int i = t; i < nv; i += nt)
      reinterpret_cast<uint32_t*>(dst)[i] = __ldg(reinterpret_cast<const unsigned int*>(src) + i);
    done = nv << 2;
  }
  for (int i = done + t; i < n; i += nt) dst[i] = __ldg(src + i);
}
}  // namespace braze::cuda::quant

// ---------------------------------------------------------------- reference
// The library's dequantize kernel as of c67ad08 (shaders/cuda/quant/dequant.cuh):
// every format through the codecs' decode_chunk (the library's, unchanged since),
// fp8 through fp8x16_times. The library kernel's output is compared with it bit
// for bit for every format (its time is printed as "ref (c67ad08)").
namespace braze::cuda::quant::ref {

using namespace braze::quant;

// decode_chunk of a chunk of a staged tile (16-byte aligned), fp8 through
// fp8x16_times; the matmuls read unaligned rows and keep decode_chunk.
template <QFormat F>
__device__ __forceinline__ void decode_staged(const uint8_t* tile, int krel, int64_t r, int64_t k_tile,
                                              const DeqParams& p, float* out) {
  if constexpr (info(F).group == Group::fp8) {
    fp8x16_times<MxElem<F>::e>(tile + krel, scaled_scale(p, r, k_tile + krel), out);
  } else {
    decode_chunk<F>(tile, krel, r, k_tile, p, out);
  }
}

template <QFormat F, class T>
__global__ void __launch_bounds__(kDeqThreads) dequantize_kernel(const DeqParams p) {
  constexpr int B = info(F).blocks.block, BB = info(F).blocks.block_bytes;
  static_assert(kDeqTile % B == 0, "tiles start on block boundaries");
  constexpr int kTileBytes = kDeqSpan / B * BB;
  __shared__ __align__(16) uint8_t tile[kTileBytes];
  const int64_t total = p.rows * p.tiles;
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t r = t / p.tiles, k_tile = (t - r * p.tiles) * kDeqSpan;
    const int64_t left = p.cols - k_tile;
    const int n = left < kDeqSpan ? int(left) : kDeqSpan;  // a multiple of B
    stage_bytes(tile, p.data + r * p.data_stride + k_tile / B * BB, n / B * BB);
    __syncthreads();
#pragma unroll
    for (int h = 0; h < kDeqSpan / kDeqTile; ++h) {
      const int krel = (h * kDeqThreads + int(threadIdx.x)) * kDeqChunk;
      if (krel < n) {
        float v[kDeqChunk];
        ref::decode_staged<F>(tile, krel, r, k_tile, p, v);
        T* dst = static_cast<T*>(p.out) + r * p.out_stride + k_tile + krel;
        const int m = n - krel < kDeqChunk ? n - krel : kDeqChunk;  // short only in fp8 / int8 rows
        store_arith_n<T, kDeqChunk>(dst, v, m, p.vec_out);
      }
    }
    __syncthreads();  // the tile is read before the next one overwrites it
  }
}

}  // namespace braze::cuda::quant::ref

using namespace braze::cuda::quant;
using braze::quant::QFormat;


// Variant "wide": a tile of M library tiles staged at once (M x the bytes in flight a barrier), one
// buffer, stored as 16-element pieces (x2: the library kernel before its second buffer and warp stores).
// Mode 0: the library's decode; 1: the bytes widened as int8 (wrong values:
// the cost of the frame without a decode).
template <int Mode, QFormat F>
__device__ __forceinline__ void chunk_of(const uint8_t* tile, int krel, int64_t r, int64_t k_tile, const DeqParams& p,
                                         float* v) {
  if constexpr (Mode == 0) {
    decode_staged<F>(tile, krel, r, k_tile, p, v);
  } else {
    const uint4 w = *reinterpret_cast<const uint4*>(tile + (krel & 1023));
    const uint32_t x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = float(int8_t(x[j / 4] >> (8 * (j % 4))));
  }
}

template <QFormat F, class T, int M, int Mode = 0>
__global__ void __launch_bounds__(kDeqThreads) deq_wide(const DeqParams p) {
  constexpr int B = info(F).blocks.block, BB = info(F).blocks.block_bytes;
  constexpr int kTile = M * kDeqTile, kTileBytes = kTile / B * BB;
  __shared__ __align__(16) uint8_t tile[kTileBytes + 16];  // the library's padding (decode_staged's unaligned reads)
  const int64_t tiles = (p.cols + kTile - 1) / kTile, total = p.rows * tiles;
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t r = t / tiles, k_tile = (t - r * tiles) * kTile;
    const int64_t left = p.cols - k_tile;
    const int n = left < kTile ? int(left) : kTile;
    stage_bytes(tile, p.data + r * p.data_stride + k_tile / B * BB, n / B * BB);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const int krel = (i * kDeqThreads + int(threadIdx.x)) * kDeqChunk;
      if (krel < n) {
        float v[kDeqChunk];
        chunk_of<Mode, F>(tile, krel, r, k_tile, p, v);
        T* dst = static_cast<T*>(p.out) + r * p.out_stride + k_tile + krel;
        const int m = n - krel < kDeqChunk ? n - krel : kDeqChunk;
        store_arith_n<T, kDeqChunk>(dst, v, m, p.vec_out);
      }
    }
    __syncthreads();
  }
}

// Ceilings: n bytes to n bytes, and n int8 to n bf16 (the widen of q8 / fp8),
// each thread U vectors in flight; stores as wide and contiguous as the loads.
__global__ void copy16(const uint4* __restrict__ s, uint4* __restrict__ d, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i0 < n; i0 += step * kU) {
    uint4 w[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) if (i0 + u * step < n) w[u] = __ldg(s + i0 + u * step);
#pragma unroll
    for (int u = 0; u < kU; ++u) if (i0 + u * step < n) d[i0 + u * step] = w[u];
  }
}
__device__ __forceinline__ uint32_t two_bf16(uint32_t b) {
  const float lo = float(int8_t(b & 0xff)), hi = float(int8_t((b >> 8) & 0xff));
  return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
}
__global__ void widen8(const uint2* __restrict__ s, uint4* __restrict__ d, int64_t n) {  // n: 8-byte words
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i0 < n; i0 += step * kU) {
    uint2 w[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) if (i0 + u * step < n) w[u] = __ldg(s + i0 + u * step);
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (i0 + u * step < n)
        d[i0 + u * step] = make_uint4(two_bf16(w[u].x), two_bf16(w[u].x >> 16), two_bf16(w[u].y), two_bf16(w[u].y >> 16));
  }
}

// Pure writes (16-byte stores, contiguous over a warp) and 4 bytes read to 16 written
// (the 1:4 mix of a 4-bit format to bf16; the bytes copied 4 times, no decode).
__global__ void fill16(uint4* __restrict__ d, int64_t n, unsigned v) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i0 < n; i0 += step * kU)
#pragma unroll
    for (int u = 0; u < kU; ++u) if (i0 + u * step < n) d[i0 + u * step] = make_uint4(v, v, v, v);
}
__global__ void widen4(const unsigned* __restrict__ s, uint4* __restrict__ d, int64_t n) {  // n: 4-byte words
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i0 < n; i0 += step * kU) {
    unsigned w[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) if (i0 + u * step < n) w[u] = __ldg(s + i0 + u * step);
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (i0 + u * step < n) d[i0 + u * step] = make_uint4(w[u], w[u] ^ 1u, w[u] ^ 2u, w[u] ^ 3u);
  }
}

template <class K> int resident(K k) {
  int dev, sms, per;
  CK(cudaGetDevice(&dev)); CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, reinterpret_cast<const void*>(k), kDeqThreads, 0));
  return sms * per;
}

struct Buffers { uint8_t* data[kSets]; void* out[kSets]; float* scale; uint8_t* scales; uint8_t* ref; };

static int g_mismatched = 0;  // formats whose library output differs from ref

// detail: also the library's other grids and the wide / no-decode variants.
// sdt: the split scales' and biases' dtype; fp8_group: fp8 / int8 scales per tensor, row or 128 x 128 block.
template <QFormat F> void run(const char* name, int64_t rows, int64_t cols, double copy_gbs_per_byte_fn(double),
                              bool detail = true, braze::DType sdt = braze::DType::f32,
                              int64_t fp8_group = braze::quant::kFp8GroupTensor) {
  using T = __nv_bfloat16;
  constexpr int B = info(F).blocks.block, BB = info(F).blocks.block_bytes;
  const int64_t stride = cols / B * BB, in_bytes = rows * stride, out_bytes = rows * cols * 2;
  Buffers bf;
  for (int s = 0; s < kSets; ++s) {
    CK(cudaMalloc(&bf.data[s], in_bytes)); CK(cudaMalloc(&bf.out[s], out_bytes));
    fill_bytes<<<1024, 256>>>(bf.data[s], in_bytes, 17u + s, B == 1 ? 256u : 0x3cu);  // fp8: every code
  }
  CK(cudaMalloc(&bf.scale, 4)); const float one = 0.5f; CK(cudaMemcpy(bf.scale, &one, 4, cudaMemcpyHostToDevice));
  // split formats' scales (mx: a byte a 32, nvfp4: a byte a 16, affine: f32 scale and bias a 64), finite bytes
  constexpr braze::quant::Group G = info(F).group;
  const int64_t sc_stride = G == braze::quant::Group::mx ? cols / 32 : G == braze::quant::Group::nvfp4 ? cols / 16
                          : G == braze::quant::Group::affine ? cols / 64 : 1;
  const int64_t sc_bytes = rows * sc_stride * 4;
  CK(cudaMalloc(&bf.scales, 2 * sc_bytes));
  fill_bytes<<<1024, 256>>>(bf.scales, 2 * sc_bytes, 99u, 0x3cu);
  const bool split = info(F).layout == braze::quant::Layout::split && G != braze::quant::Group::fp8 &&
                     G != braze::quant::Group::int8;
  bf.ref = static_cast<uint8_t*>(malloc(out_bytes));
  auto params = [&](int s, int64_t tile) {
    DeqParams p{bf.data[s], stride, bf.scale, 1, braze::DType::f32, nullptr, 0, bf.scale,
                braze::quant::kFp8GroupTensor, bf.out[s], cols, rows, cols, (cols + tile - 1) / tile, true};
    if (split) {
      p.scales = bf.scales; p.scales_stride = sc_stride; p.scales_dtype = sdt;
      p.biases = bf.scales + sc_bytes; p.biases_stride = sc_stride; p.group = 64;
    } else if (fp8_group != braze::quant::kFp8GroupTensor) {  // rows or (rows / 128) x (cols / 128) f32 scales
      p.scales = bf.scales; p.scales_stride = (cols + 127) / 128; p.group = fp8_group;
    }
    return p;
  };
  const double bytes = double(in_bytes + out_bytes);
  const double ceil_us = copy_gbs_per_byte_fn(bytes);
  auto report = [&](const char* what, float us) {
    printf("%-10s %6lld x %-6lld %-22s %8.1f us %7.0f GB/s %5.1f%%\n", name, (long long)rows, (long long)cols, what, us,
           bytes / us / 1e3, 100.0 * ceil_us / us);
  };
  auto check = [&](const char* what) {
    std::vector<uint8_t> got(out_bytes);
    CK(cudaMemcpy(got.data(), bf.out[0], out_bytes, cudaMemcpyDeviceToHost));
    if (memcmp(got.data(), bf.ref, out_bytes) != 0) {
      printf("  %s: OUTPUT DIFFERS from the library kernel\n", what);
      ++g_mismatched;
    }
  };
  {
    auto k = dequantize_kernel<F, T>;
    const int g = resident(k);
    const int64_t total = rows * ((cols + kDeqSpan - 1) / kDeqSpan);
    report("library (4 waves)", time_it([&](int s) { k<<<unsigned(std::min<int64_t>(4 * g, total)), kDeqThreads>>>(params(s, kDeqSpan)); }));
    CK(cudaMemcpy(bf.ref, bf.out[0], out_bytes, cudaMemcpyDeviceToHost));
    {  // today's kernel (ref, c67ad08): the same output bit for bit, and its time beside
      auto kr = ref::dequantize_kernel<F, T>;
      const int gr = resident(kr);
      report("ref (c67ad08)", time_it([&](int s) { kr<<<unsigned(std::min<int64_t>(4 * gr, total)), kDeqThreads>>>(params(s, kDeqSpan)); }));
      std::vector<uint8_t> got(out_bytes);
      CK(cudaMemcpy(got.data(), bf.out[0], out_bytes, cudaMemcpyDeviceToHost));
      int64_t bad = 0, first = -1;
      for (int64_t i = 0; i < out_bytes; i += 2)
        if (memcmp(got.data() + i, bf.ref + i, 2) != 0) { ++bad; if (first < 0) first = i / 2; }
      if (bad) {
        uint16_t a, b; memcpy(&a, bf.ref + 2 * first, 2); memcpy(&b, got.data() + 2 * first, 2);
        printf("  %s: MISMATCH library vs ref: %lld of %lld elements, first at %lld (library %04x, ref %04x)\n", name,
               (long long)bad, (long long)(out_bytes / 2), (long long)first, a, b);
        ++g_mismatched;
      } else {
        printf("  %s: library == ref bit for bit (%lld elements)\n", name, (long long)(out_bytes / 2));
      }
    }
    {  // the frame before (one buffer: deq_wide x2 is that kernel) and the library at 8 waves
      auto kb = deq_wide<F, T, 2, 0>;
      const int gb = resident(kb);
      report("one buffer (before)", time_it([&](int s) { kb<<<unsigned(std::min<int64_t>(4 * gb, total)), kDeqThreads>>>(params(s, kDeqSpan)); }));
      check("one buffer (before)");
      report("library, 8 waves", time_it([&](int s) { k<<<unsigned(std::min<int64_t>(8 * g, total)), kDeqThreads>>>(params(s, kDeqSpan)); }));
      check("8 waves");
    }
    if constexpr (info(F).layout == braze::quant::Layout::blocks) {  // the codecs' decode_chunk (W = false)
      auto kc = dequantize_kernel<F, T, false>;
      const int gc = resident(kc);
      const char* names[2] = {"codec path (4 waves)", "codec path, 8 waves"};
      for (int w = 0; w < 2; ++w) {
        report(names[w], time_it([&](int s) { kc<<<unsigned(std::min<int64_t>((4 << w) * gc, total)), kDeqThreads>>>(params(s, kDeqSpan)); }));
        check(names[w]);
      }
      printf("  %s: resident CTAs an SM: library %d, codec path %d\n", name, g / 132, gc / 132);
    }
    {  // tiles of 4 parts (twice the bytes a CTA has in flight), each path, 4 waves
      auto k4 = dequantize_kernel<F, T, true, 4>;
      const int64_t total4 = rows * ((cols + 4 * kDeqTile - 1) / (4 * kDeqTile));
      report("library, tiles x4", time_it([&](int s) { k4<<<unsigned(std::min<int64_t>(4 * resident(k4), total4)), kDeqThreads>>>(params(s, 4 * kDeqTile)); }));
      check("library, tiles x4");
      if constexpr (info(F).layout == braze::quant::Layout::blocks) {
        auto k4c = dequantize_kernel<F, T, false, 4>;
        report("codec path, tiles x4", time_it([&](int s) { k4c<<<unsigned(std::min<int64_t>(4 * resident(k4c), total4)), kDeqThreads>>>(params(s, 4 * kDeqTile)); }));
        check("codec path, tiles x4");
      }
    }
    if (!detail) {
      for (int s = 0; s < kSets; ++s) { CK(cudaFree(bf.data[s])); CK(cudaFree(bf.out[s])); }
      CK(cudaFree(bf.scale)); CK(cudaFree(bf.scales)); free(bf.ref);
      return;
    }
    report("library, 1 wave", time_it([&](int s) { k<<<unsigned(std::min<int64_t>(g, total)), kDeqThreads>>>(params(s, kDeqSpan)); }));
    check("1 wave");
    report("library, grid=tiles", time_it([&](int s) { k<<<unsigned(total), kDeqThreads>>>(params(s, kDeqSpan)); }));
    check("grid=tiles");
  }
  auto wide = [&](auto m_tag, auto mode_tag, std::vector<int> mults) {
    constexpr int M = decltype(m_tag)::value, Mode = decltype(mode_tag)::value;
    auto k = deq_wide<F, T, M, Mode>;
    const int64_t tiles = rows * ((cols + kDeqTile * M - 1) / (kDeqTile * M));
    for (int c : mults) {  // c resident waves, 0: every tile its CTA
      const int64_t g = c ? std::min<int64_t>(tiles, int64_t(c) * resident(k)) : tiles;
      char what[40];
      snprintf(what, sizeof what, "%s x%d (%lld CTA)", Mode == 0 ? "wide" : "no-decode", M, (long long)g);
      report(what, time_it([&](int s) { k<<<unsigned(g), kDeqThreads>>>(params(s, kDeqTile * M)); }));
      if (Mode == 0) check(what);
    }
  };
  using I1 = std::integral_constant<int, 1>;
  using I2 = std::integral_constant<int, 2>;
  using I4 = std::integral_constant<int, 4>;
  wide(I1{}, std::integral_constant<int, 0>{}, {0, 4});  // the form before kDeqSpan (one tile a barrier)
  wide(I4{}, std::integral_constant<int, 0>{}, {0, 4});
  wide(I2{}, I1{}, {0});
  for (int s = 0; s < kSets; ++s) { CK(cudaFree(bf.data[s])); CK(cudaFree(bf.out[s])); }
  CK(cudaFree(bf.scale)); CK(cudaFree(bf.scales)); free(bf.ref);
}

static double g_memcpy_gbs = 0;
double memcpy_us(double bytes) { return bytes / g_memcpy_gbs / 1e3; }

int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const int64_t n = int64_t(1) << 27;  // 128 MiB each way
  uint8_t *s[kSets], *d[kSets];
  for (int i = 0; i < kSets; ++i) { CK(cudaMalloc(&s[i], 2 * n)); CK(cudaMalloc(&d[i], 2 * n)); }
  const float mc = time_it([&](int i) { CK(cudaMemcpyAsync(d[i], s[i], n, cudaMemcpyDeviceToDevice)); });
  g_memcpy_gbs = 2.0 * n / mc / 1e3;
  printf("cudaMemcpyAsync D2D %lld B: %.1f us, %.0f GB/s (read + write)\n", (long long)n, mc, g_memcpy_gbs);
  const float ck = time_it([&](int i) { copy16<<<prop.multiProcessorCount * 8, 256>>>((const uint4*)s[i], (uint4*)d[i], n / 16); });
  printf("copy16 kernel:          %.1f us, %.0f GB/s\n", ck, 2.0 * n / ck / 1e3);
  const float wd = time_it([&](int i) { widen8<<<prop.multiProcessorCount * 8, 256>>>((const uint2*)s[i], (uint4*)d[i], n / 8); });
  printf("widen8 int8->bf16 (1:2): %.1f us, %.0f GB/s, %.1f%% of memcpy\n", wd, 3.0 * n / wd / 1e3,
         100.0 * (3.0 * n / g_memcpy_gbs / 1e3) / wd);
  const float w4 = time_it([&](int i) { widen4<<<prop.multiProcessorCount * 8, 256>>>((const unsigned*)s[i], (uint4*)d[i], n / 16); });
  printf("widen4 (1:4, n/4 B read, n written): %.1f us, %.0f GB/s, %.1f%% of memcpy\n", w4, 1.25 * n / w4 / 1e3,
         100.0 * (1.25 * n / g_memcpy_gbs / 1e3) / w4);
  const float fl = time_it([&](int i) { fill16<<<prop.multiProcessorCount * 8, 256>>>((uint4*)d[i], n / 16, 7u + i); });
  printf("fill16 (writes only): %.1f us, %.0f GB/s written, %.1f%% of memcpy\n", fl, 1.0 * n / fl / 1e3,
         100.0 * (1.0 * n / g_memcpy_gbs / 1e3) / fl);
  const float ms = time_it([&](int i) { CK(cudaMemsetAsync(d[i], i, n)); });
  printf("cudaMemsetAsync (writes only): %.1f us, %.0f GB/s written, %.1f%% of memcpy\n", ms, 1.0 * n / ms / 1e3,
         100.0 * (1.0 * n / g_memcpy_gbs / 1e3) / ms);
  for (int i = 0; i < kSets; ++i) { CK(cudaFree(s[i])); CK(cudaFree(d[i])); }
  run<QFormat::q8_0>("q8_0", 4096, 14336, memcpy_us);
  run<QFormat::q4_K>("q4_K", 4096, 14336, memcpy_us);
  run<QFormat::fp8_e4m3>("fp8_e4m3", 4096, 14336, memcpy_us);
  run<QFormat::q6_K>("q6_K", 4096, 14336, memcpy_us);
  run<QFormat::q4_0>("q4_0", 4096, 14336, memcpy_us);
  run<QFormat::q8_0>("q8_0", 4096, 4096, memcpy_us);
  // every other format, the library kernel only
#define BRAZE_ROW(name, block, bytes, layout, group) \
  if (QFormat::name != QFormat::q8_0 && QFormat::name != QFormat::q4_K && QFormat::name != QFormat::fp8_e4m3 && \
      QFormat::name != QFormat::q6_K && QFormat::name != QFormat::q4_0) \
    run<QFormat::name>(#name, 4096, 14336, memcpy_us, false);
  BRAZE_QUANT_FORMATS(BRAZE_ROW)
#undef BRAZE_ROW
  // the other scale dtypes and fp8 / int8 scale groups (the library kernel against ref)
  run<QFormat::affine4>("affine4/f16", 4096, 14336, memcpy_us, false, braze::DType::f16);
  run<QFormat::affine3>("affine3/bf16", 4096, 14336, memcpy_us, false, braze::DType::bf16);
  run<QFormat::fp8_e4m3>("fp8e4m3/row", 4096, 14336, memcpy_us, false, braze::DType::f32, braze::quant::kFp8GroupRow);
  run<QFormat::fp8_e5m2>("fp8e5m2/blk", 4096, 14336, memcpy_us, false, braze::DType::f32, braze::quant::kFp8GroupBlock);
  run<QFormat::int8>("int8/row", 4096, 14336, memcpy_us, false, braze::DType::f32, braze::quant::kFp8GroupRow);
  run<QFormat::int8>("int8/odd", 64, 14336 - 8, memcpy_us, false);  // a short last chunk a row
  if (g_mismatched) printf("%d format(s) DIFFER from ref\n", g_mismatched);
  else printf("every format bit-identical to ref\n");
  return g_mismatched ? 1 : 0;
}
