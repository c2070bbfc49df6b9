#pragma once
#import <Metal/MTLDefines.h>

typedef struct {
  NSUInteger x, y, z;
} MTLOrigin;

typedef struct {
  NSUInteger width, height, depth;
} MTLSize;

typedef struct {
  MTLOrigin origin;
  MTLSize size;
} MTLRegion;

MTL_INLINE MTLOrigin MTLOriginMake(NSUInteger x, NSUInteger y, NSUInteger z) {
  MTLOrigin o = {x, y, z};
  return o;
}

MTL_INLINE MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
  MTLSize s = {width, height, depth};
  return s;
}

MTL_INLINE MTLRegion MTLRegionMake1D(NSUInteger x, NSUInteger width) {
  MTLRegion r = {{x, 0, 0}, {width, 1, 1}};
  return r;
}

// Arguments of dispatchThreadgroupsWithIndirectBuffer: as the GPU reads them.
typedef struct {
  uint32_t threadgroupsPerGrid[3];
} MTLDispatchThreadgroupsIndirectArguments;
