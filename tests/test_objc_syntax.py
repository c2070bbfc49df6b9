"""csrc/metal/*.mm type-check as Objective-C++ against the declared Metal /
Foundation API (tests/objc/check.py), and a planted API misuse fails the check."""
import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "objc"))
import check  # noqa: E402

try:
    from clang import cindex
except ImportError as e:  # the `test` extra installs the libclang wheel
    pytest.skip(f"libclang's Python bindings cannot be imported ({e})", allow_module_level=True)
try:
    cindex.Index.create()
except cindex.LibclangError as e:
    pytest.skip(f"the libclang shared library cannot be loaded ({e})", allow_module_level=True)

EXECUTOR = check.ROOT / "csrc" / "metal" / "executor.mm"


def test_the_metal_sources_are_found():
    names = [p.name for p in check.sources()]
    assert "executor.mm" in names, names


@pytest.mark.parametrize("path", check.sources(), ids=lambda p: p.name)
def test_objective_cxx_parses_without_errors(path):
    errors = check.check_source(path)
    assert errors == [], "\n".join(errors)


# Each plant rewrites the first match of `pattern` in executor.mm; the check
# must then report, on that line, an error containing `expect`. All plants go
# into one copy (one parse, not five); clang reports each statement's error.
PLANTS = {
    "wrong-selector": (r"setBuffer:(.*?)\boffset:(.*?)\batIndex:", r"setBuffer:\1atOffset:\2index:",
                       "setBuffer:atOffset:index:"),
    "string-for-pipeline": (r"setComputePipelineState:pipeline\(s, d\.kernel\)",
                            "setComputePipelineState:d.kernel", "id<MTLComputePipelineState>"),
    "vector-for-pointer": (r"setBytes:d\.params\.data\(\)", "setBytes:d.params", "const void *"),
    "queue-method-on-device": (r"\[s\.queue commandBuffer\]", "[s.device commandBuffer]",
                               "selector 'commandBuffer'"),
    "misspelt-enum": (r"MTLCommandBufferStatusCompleted\b", "MTLCommandBufferStatusComplete",
                      "MTLCommandBufferStatusComplete"),
}


@pytest.fixture(scope="module")
def planted():
    """(errors of the planted copy, {plant: line number})."""
    src, lines = EXECUTOR.read_text(), {}
    for name, (pattern, repl, _) in PLANTS.items():
        m = re.search(pattern, src)
        assert m, f"executor.mm no longer matches {pattern!r}: update the plant"
        lines[name] = src.count("\n", 0, m.start()) + 1
        src = src[:m.start()] + m.expand(repl) + src[m.end():]
    path = EXECUTOR.with_name("planted_executor.mm")
    return check.check_source(path, src), lines


@pytest.mark.parametrize("name", PLANTS)
def test_planted_api_misuse_fails(planted, name):
    errors, lines = planted
    expect = PLANTS[name][2]
    at = f"planted_executor.mm:{lines[name]}:"
    assert any(at in e and expect in e for e in errors), (at, expect, errors)


# API the executor does not use yet but will: the declarations must accept the
# documented calls (OR-ed options, blocks, blits, barriers) without errors.
SURFACE = r"""
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#include <cstdint>

static std::uint64_t use_surface(id<MTLDevice> dev, const float* host, std::size_t n) {
  id<MTLCommandQueue> q = [dev newCommandQueueWithMaxCommandBufferCount:4];
  id<MTLBuffer> a = [dev newBufferWithBytes:host length:n * sizeof(float)
                                    options:MTLResourceStorageModeShared | MTLResourceHazardTrackingModeUntracked];
  id<MTLBuffer> b = [dev newBufferWithLength:a.length options:MTLResourceStorageModePrivate];
  NSError* err = nil;
  id<MTLLibrary> lib = [dev newLibraryWithSource:@"kernel void k() {}" options:[MTLCompileOptions new] error:&err];
  if (!lib) return std::uint64_t(err.code);
  id<MTLFunction> fn = [lib newFunctionWithName:lib.functionNames.firstObject];
  id<MTLComputePipelineState> pso = [dev newComputePipelineStateWithFunction:fn
                                                                     options:MTLPipelineOptionNone
                                                                  reflection:nil
                                                                       error:&err];
  id<MTLCommandBuffer> cb = [q commandBufferWithUnretainedReferences];
  id<MTLBlitCommandEncoder> blit = [cb blitCommandEncoder];
  [blit copyFromBuffer:a sourceOffset:0 toBuffer:b destinationOffset:0 size:a.length];
  [blit fillBuffer:a range:NSMakeRange(0, 4) value:0];
  [blit endEncoding];
  id<MTLComputeCommandEncoder> enc = [cb computeCommandEncoderWithDispatchType:MTLDispatchTypeConcurrent];
  const std::uint32_t params[2] = {1, 2};
  id<MTLBuffer> both[2] = {a, b};
  NSUInteger offsets[2] = {0, 16};
  [enc setComputePipelineState:pso];
  [enc setBuffers:both offsets:offsets withRange:NSMakeRange(0, 2)];
  [enc setBytes:params length:sizeof(params) atIndex:2];
  [enc setThreadgroupMemoryLength:pso.threadExecutionWidth * sizeof(float) atIndex:0];
  [enc useResource:b usage:MTLResourceUsageRead | MTLResourceUsageWrite];
  [enc dispatchThreads:MTLSizeMake(n, 1, 1)
      threadsPerThreadgroup:MTLSizeMake(pso.maxTotalThreadsPerThreadgroup, 1, 1)];
  [enc memoryBarrierWithScope:MTLBarrierScopeBuffers];
  [enc dispatchThreadgroupsWithIndirectBuffer:b indirectBufferOffset:0
                        threadsPerThreadgroup:dev.maxThreadsPerThreadgroup];
  [enc endEncoding];
  __block std::uint64_t done = 0;
  [cb addCompletedHandler:^(id<MTLCommandBuffer> c) { done = c.status == MTLCommandBufferStatusError; }];
  [cb commit];
  [cb waitUntilCompleted];
  return done + a.gpuAddress + dev.recommendedMaxWorkingSetSize + [dev supportsFamily:MTLGPUFamilyApple7] +
         (cb.GPUEndTime > cb.GPUStartTime);
}
"""


def test_declared_surface_accepts_documented_calls():
    errors = check.check_source(check.ROOT / "csrc" / "metal" / "surface.mm", SURFACE)
    assert errors == [], "\n".join(errors)
