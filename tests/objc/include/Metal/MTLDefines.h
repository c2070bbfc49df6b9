// Declarations of the Metal API surface braze's executor may use, written
// from Apple's documented Objective-C signatures so that csrc/metal/*.mm can be
// type-checked on Linux (tests/objc/check.py). Nothing here is ever linked.
// Availability: everything here is in macOS 14 (the wheels' deployment target).
#pragma once
#import <Foundation/Foundation.h>

#ifdef __cplusplus
#define MTL_EXTERN extern "C" __attribute__((visibility("default")))
#else
#define MTL_EXTERN extern __attribute__((visibility("default")))
#endif
#define MTL_INLINE static inline
