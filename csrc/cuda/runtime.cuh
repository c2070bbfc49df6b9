// Host-side helpers of the CUDA launchers: errors -> Python exceptions, the
// device of the arrays made current for the scope of a call, cached device
// attributes, and whether cluster kernels can run.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace braze::cuda {

// Raised as RuntimeError in Python (nanobind maps std::runtime_error).
[[noreturn]] inline void fail(const char* what, cudaError_t e) {
  throw std::runtime_error(std::string("braze CUDA backend: ") + what + ": " + cudaGetErrorName(e) + " (" +
                           cudaGetErrorString(e) + ")");
}
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(what, e);
}
// After a launch: a bad configuration or a missing kernel image shows here.
// Clears the sticky-free error state it reads; never synchronizes.
inline void check_launch(const char* op) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail(op, e);
}

// Makes `device` current and restores the caller's device on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check(cudaGetDevice(&prev_), "cudaGetDevice");
    if (prev_ != device) check(cudaSetDevice(device), "cudaSetDevice");
    else prev_ = -1;
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// Multiprocessors of `device`, its compute capability's major number and the
// shared memory a CTA may opt into (each queried once per device).
int sm_count(int device);
int cc_major(int device);
int smem_optin(int device);

// Raises `kernel`'s dynamic shared-memory limit on `device` (the current one) to
// `bytes` where the 48 KB default is not enough: once per (kernel, device), again
// if a later launch needs more. A GPU that offers less: std::runtime_error naming
// `what` and both sizes.
void allow_smem(const void* kernel, int bytes, int device, const char* what);

// kernel<<<grid, block, 0, s>>>(args...) in clusters of `cluster` CTAs along
// x (sm_90+; grid a multiple of cluster, at most 8 per cluster).
template <class... P, class... A>
void launch_clustered(void (*kernel)(P...), unsigned grid, unsigned block, unsigned cluster, cudaStream_t s,
                      const char* what, A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  check(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...), what);
}

// Resident blocks of `kernel` per multiprocessor of `device` (the current
// device) with `threads` threads and no dynamic shared memory; at least 1.
// Cached per (kernel, threads, device).
int blocks_per_sm(const void* kernel, int threads, int device);

// Whether cluster kernels may run on `device` (the current device): compute
// capability 9+ and the module's code for it compiled for sm_90 or newer
// (see docs/cuda.md). Cached per device.
bool clusters_usable(int device);

}  // namespace braze::cuda
