#include "cuda/runtime.cuh"
#include "cuda/runtime.h"

#include <dlfcn.h>

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

namespace braze::cuda {

std::pair<bool, std::string> device_status() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (e == cudaErrorInsufficientDriver) {
      void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
      if (!lib) lib = dlopen("libcuda.so.1", RTLD_LAZY);
      if (!lib) return {false, "no CUDA driver (libcuda.so.1 not found)"};
      return {false, "the CUDA driver is older than this build's CUDA runtime (" +
                         std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
                         ") needs"};
    }
    if (e == cudaErrorNoDevice) return {false, "no CUDA device"};
    return {false, std::string("CUDA is not usable here: ") + cudaGetErrorString(e)};
  }
  if (n == 0) return {false, "no CUDA device"};
  std::string found;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    if (prop.major >= 8) return {true, ""};
    found += (found.empty() ? "" : ", ") + std::to_string(prop.major) + "." + std::to_string(prop.minor);
  }
  cudaGetLastError();
  return {false, "braze's CUDA kernels need compute capability 8.0 or newer; found " + found};
}

namespace {
int device_attr(cudaDeviceAttr attr, int device, std::atomic<int>* cache) {
  if (device >= 0 && device < 64) {
    int v = cache[device].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  int v = 0;
  check(cudaDeviceGetAttribute(&v, attr, device), "cudaDeviceGetAttribute");
  if (device >= 0 && device < 64) cache[device].store(v, std::memory_order_relaxed);
  return v;
}
}  // namespace

int sm_count(int device) {
  static std::atomic<int> cache[64];
  return device_attr(cudaDevAttrMultiProcessorCount, device, cache);
}

int cc_major(int device) {
  static std::atomic<int> cache[64];
  return device_attr(cudaDevAttrComputeCapabilityMajor, device, cache);
}

int smem_optin(int device) {
  static std::atomic<int> cache[64];
  return device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, device, cache);
}

void allow_smem(const void* kernel, int bytes, int device, const char* what) {
  if (bytes <= 48 * 1024) return;
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> granted;
  std::lock_guard<std::mutex> lock(mu);
  int& have = granted[{kernel, device}];
  if (have >= bytes) return;
  const int optin = smem_optin(device);
  if (bytes > optin)
    throw std::runtime_error(std::string("braze CUDA backend: ") + what + ": a block needs " + std::to_string(bytes) +
                             " bytes of shared memory; this GPU offers " + std::to_string(optin));
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
        (std::string(what) + ": cudaFuncSetAttribute(MaxDynamicSharedMemorySize)").c_str());
  have = bytes;
}

int blocks_per_sm(const void* kernel, int threads, int device) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int>, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(kernel, threads, device);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int n = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  n = n > 0 ? n : 1;
  cache.emplace(key, n);
  return n;
}

namespace {
// Compiled like every kernel of the module (one CUDA_ARCHITECTURES list), so
// the code the driver picks for it on a device is the code it picks for them.
__global__ void arch_probe() {}
}  // namespace

bool clusters_usable(int device) {
  static std::atomic<int> cache[64];  // 0: not asked yet, 1: no, 2: yes
  const bool cached = device >= 0 && device < 64;
  if (cached) {
    const int v = cache[device].load(std::memory_order_relaxed);
    if (v) return v == 2;
  }
  bool ok = cc_major(device) >= 9;
  if (ok) {
    // ptxVersion is the virtual architecture the loaded code was compiled
    // for (__CUDA_ARCH__ / 10): 80 when an sm_80-only build runs on sm_90
    // through the compute_80 PTX, whose cluster helpers trap.
    cudaFuncAttributes fa{};
    check(cudaFuncGetAttributes(&fa, arch_probe), "cudaFuncGetAttributes");
    ok = fa.ptxVersion >= 90;
  }
  if (cached) cache[device].store(ok ? 2 : 1, std::memory_order_relaxed);
  return ok;
}

}  // namespace braze::cuda
