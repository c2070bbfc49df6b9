// Thin Metal executor: device, queue, braze.metallib, pipeline cache, buffer
// binding, dispatch. Every decision was made by the launch plan.
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include "executor.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace braze::metal {
namespace {

struct State {
  id<MTLDevice> device = nil;
  id<MTLCommandQueue> queue = nil;
  id<MTLLibrary> library = nil;
  std::string path;
  std::map<std::string, id<MTLComputePipelineState>> pipelines;  // by kernel name
  std::mutex mutex;
};

// braze.metallib is installed beside this extension module.
std::string metallib_path() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<const void*>(&metallib_path), &info) || !info.dli_fname) return "";
  std::string so = info.dli_fname;
  return so.substr(0, so.find_last_of('/') + 1) + "braze.metallib";
}

State& state() {
  static State* s = [] {
    auto* st = new State();
    @autoreleasepool {
      st->device = MTLCreateSystemDefaultDevice();
      if (!st->device) throw std::runtime_error("no Metal device");
      st->queue = [st->device newCommandQueue];
      st->path = metallib_path();
      NSError* err = nil;
      NSURL* url = [NSURL fileURLWithPath:[NSString stringWithUTF8String:st->path.c_str()]];
      st->library = [st->device newLibraryWithURL:url error:&err];
      if (!st->library)
        throw std::runtime_error("cannot load " + st->path + ": " +
                                 (err ? err.localizedDescription.UTF8String : "unknown error"));
    }
    return st;
  }();
  return *s;
}

id<MTLComputePipelineState> pipeline(State& s, const std::string& name) {
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.pipelines.find(name);
  if (it != s.pipelines.end()) return it->second;
  id<MTLFunction> fn = [s.library newFunctionWithName:[NSString stringWithUTF8String:name.c_str()]];
  if (!fn) throw std::runtime_error("braze.metallib has no kernel " + name);
  NSError* err = nil;
  id<MTLComputePipelineState> p = [s.device newComputePipelineStateWithFunction:fn error:&err];
  if (!p) throw std::runtime_error("pipeline " + name + ": " + err.localizedDescription.UTF8String);
  s.pipelines.emplace(name, p);
  return p;
}

// A host array as an MTLBuffer: wrapped in place when page-aligned, else a
// copy (copied back after the call if the op writes it).
struct Bound {
  id<MTLBuffer> buffer = nil;
  std::uint64_t offset = 0;
  void* copy_back_to = nullptr;
  std::uint64_t bytes = 0;
};

Bound bind_host(State& s, const ArgBuffer& a) {
  static const std::uint64_t page = std::uint64_t(getpagesize());
  Bound b;
  b.bytes = a.bytes;
  const std::uint64_t len = std::max<std::uint64_t>(a.bytes, 1);
  if (reinterpret_cast<std::uintptr_t>(a.ptr) % page == 0) {
    b.buffer = [s.device newBufferWithBytesNoCopy:a.ptr
                                           length:(len + page - 1) / page * page
                                          options:MTLResourceStorageModeShared
                                      deallocator:nil];
  }
  if (!b.buffer) {
    b.buffer = [s.device newBufferWithBytes:a.ptr length:len options:MTLResourceStorageModeShared];
    if (a.output) b.copy_back_to = a.ptr;
  }
  if (!b.buffer) throw std::runtime_error("cannot create an MTLBuffer");
  return b;
}

}  // namespace

std::string library_path() {
  try {
    return state().path;
  } catch (const std::exception& e) {
    return e.what();
  }
}

void execute(const Plan& plan, const ArgBuffer* roles, int nroles) {
  if (!plan.error.empty()) throw std::runtime_error(plan.error);
  if (plan.dispatches.empty()) return;
  State& s = state();
  @autoreleasepool {
    std::vector<Bound> bound(nroles);
    std::vector<bool> used(nroles, false);
    for (const Dispatch& d : plan.dispatches)
      for (const BufferRef& r : d.buffers)
        if (r.role >= 0 && r.role < nroles) used[r.role] = true;
    for (int i = 0; i < nroles; ++i) {
      const ArgBuffer& a = roles[i];
      if (!used[i]) continue;
      if (!a.ptr) throw std::runtime_error("plan binds an absent array");
      if (a.device_buffer) {
        bound[i].buffer = (__bridge id<MTLBuffer>)a.ptr;
        bound[i].offset = a.offset;
      } else {
        bound[i] = bind_host(s, a);
      }
    }
    std::vector<id<MTLBuffer>> scratch;
    for (std::uint64_t bytes : plan.scratch_bytes)
      scratch.push_back([s.device newBufferWithLength:bytes options:MTLResourceStorageModePrivate]);

    id<MTLCommandBuffer> cb = [s.queue commandBuffer];
    id<MTLComputeCommandEncoder> enc = [cb computeCommandEncoderWithDispatchType:MTLDispatchTypeSerial];
    for (const Dispatch& d : plan.dispatches) {
      [enc setComputePipelineState:pipeline(s, d.kernel)];
      NSUInteger index = 0;
      for (const BufferRef& r : d.buffers) {
        if (r.scratch >= 0) {
          [enc setBuffer:scratch.at(r.scratch) offset:r.offset atIndex:index++];
        } else {
          const Bound& b = bound.at(r.role);
          [enc setBuffer:b.buffer offset:b.offset + r.offset atIndex:index++];
        }
      }
      [enc setBytes:d.params.data() length:d.params.size() atIndex:index];
      [enc dispatchThreadgroups:MTLSizeMake(d.threadgroups[0], d.threadgroups[1], d.threadgroups[2])
          threadsPerThreadgroup:MTLSizeMake(d.threads[0], d.threads[1], d.threads[2])];
    }
    [enc endEncoding];
    [cb commit];
    [cb waitUntilCompleted];
    if (cb.status != MTLCommandBufferStatusCompleted)
      throw std::runtime_error(std::string("Metal command buffer failed: ") +
                               (cb.error ? cb.error.localizedDescription.UTF8String : "unknown"));
    for (const Bound& b : bound)
      if (b.copy_back_to) std::memcpy(b.copy_back_to, b.buffer.contents, b.bytes);
  }
}

}  // namespace braze::metal
