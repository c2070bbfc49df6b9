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

// Host arrays as MTLBuffers: arrays whose bytes overlap (q and k views of one
// qkv buffer, in-place outputs) share one buffer, so every write lands once.
// A range is wrapped without a copy from its page start; where Metal refuses,
// it is copied (and copied back if the op writes it).
struct HostRange {
  std::uintptr_t lo = 0, hi = 0;
  bool output = false;
  id<MTLBuffer> buffer = nil;
  std::uintptr_t buffer_start = 0;  // the address the buffer's byte 0 stands for
  bool copied = false;
};

void bind_ranges(State& s, std::vector<HostRange>& ranges) {
  static const std::uintptr_t page = std::uintptr_t(getpagesize());
  for (HostRange& r : ranges) {
    const std::uintptr_t start = r.lo / page * page;
    const std::uintptr_t len = std::max<std::uintptr_t>((r.hi - start + page - 1) / page * page, page);
    r.buffer = [s.device newBufferWithBytesNoCopy:reinterpret_cast<void*>(start)
                                           length:len
                                          options:MTLResourceStorageModeShared
                                      deallocator:nil];
    r.buffer_start = start;
    if (!r.buffer) {
      r.buffer = [s.device newBufferWithBytes:reinterpret_cast<const void*>(r.lo)
                                       length:std::max<std::uintptr_t>(r.hi - r.lo, 1)
                                      options:MTLResourceStorageModeShared];
      r.buffer_start = r.lo;
      r.copied = true;
    }
    if (!r.buffer) throw std::runtime_error("cannot create an MTLBuffer");
  }
}

const Tensor* owner(TensorList arrays, const void* ptr) {
  for (const Tensor* t : arrays)
    if (t->defined() && t->data == ptr) return t;
  return nullptr;
}

}  // namespace

std::string library_path() {
  try {
    return state().path;
  } catch (const std::exception& e) {
    return e.what();
  }
}

void execute(const Plan& plan, TensorList arrays) {
  if (!plan.error.empty()) throw std::runtime_error(plan.error);
  if (plan.dispatches.empty()) return;
  State& s = state();
  @autoreleasepool {
    // Each plan array: an MTLBuffer and the byte offset of its first element.
    std::vector<id<MTLBuffer>> buffer(plan.arrays.size(), nil);
    std::vector<std::uint64_t> offset(plan.arrays.size(), 0);
    std::vector<HostRange> ranges;
    for (std::size_t i = 0; i < plan.arrays.size(); ++i) {
      const PlanArray& a = plan.arrays[i];
      const Tensor* t = owner(arrays, a.ptr);
      if (!t) throw std::runtime_error("plan binds an array that is not an argument of the call");
      if (t->device == Device::metal) {  // DLPack device 8: data = MTLBuffer handle + byte_offset
        buffer[i] = (__bridge id<MTLBuffer>)t->base;
        offset[i] = std::uint64_t(static_cast<const char*>(a.ptr) - static_cast<const char*>(t->base));
        continue;
      }
      const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(a.ptr);
      ranges.push_back(HostRange{lo, lo + std::max<std::uint64_t>(a.bytes, 1), a.output});  // bound below
    }
    std::sort(ranges.begin(), ranges.end(), [](const HostRange& a, const HostRange& b) { return a.lo < b.lo; });
    std::vector<HostRange> merged;
    for (const HostRange& r : ranges) {
      if (!merged.empty() && r.lo < merged.back().hi) {
        merged.back().hi = std::max(merged.back().hi, r.hi);
        merged.back().output = merged.back().output || r.output;
      } else {
        merged.push_back(r);
      }
    }
    bind_ranges(s, merged);
    for (std::size_t i = 0; i < plan.arrays.size(); ++i) {
      if (buffer[i]) continue;
      const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(plan.arrays[i].ptr);
      for (const HostRange& r : merged) {
        if (lo < r.lo || lo >= r.hi) continue;
        buffer[i] = r.buffer;
        offset[i] = lo - r.buffer_start;
        break;
      }
    }
    std::vector<id<MTLBuffer>> constants;
    for (const std::vector<std::uint8_t>& c : plan.constants)
      constants.push_back([s.device newBufferWithBytes:c.data()
                                                length:std::max<std::size_t>(c.size(), 1)
                                               options:MTLResourceStorageModeShared]);
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
          [enc setBuffer:scratch.at(std::size_t(r.scratch)) offset:r.offset atIndex:index++];
        } else if (r.constant >= 0) {
          [enc setBuffer:constants.at(std::size_t(r.constant)) offset:r.offset atIndex:index++];
        } else {
          const std::size_t i = std::size_t(r.array);
          [enc setBuffer:buffer.at(i) offset:offset.at(i) + r.offset atIndex:index++];
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
    for (const HostRange& r : merged)
      if (r.copied && r.output) std::memcpy(reinterpret_cast<void*>(r.lo), r.buffer.contents, r.hi - r.lo);
  }
}

}  // namespace braze::metal
