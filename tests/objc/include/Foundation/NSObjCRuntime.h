// Declarations of the Foundation base types and macros braze's Objective-C++
// uses, written from Apple's documented signatures so that csrc/metal/*.mm can
// be type-checked on Linux (tests/objc/check.py). Not a Foundation
// implementation: nothing here is ever linked.
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define NS_ASSUME_NONNULL_BEGIN _Pragma("clang assume_nonnull begin")
#define NS_ASSUME_NONNULL_END _Pragma("clang assume_nonnull end")
#define NS_RETURNS_INNER_POINTER __attribute__((objc_returns_inner_pointer))
#define NS_RETURNS_RETAINED __attribute__((ns_returns_retained))
#define NS_FORMAT_FUNCTION(F, A) __attribute__((format(__NSString__, F, A)))
#define NS_AUTOMATED_REFCOUNT_UNAVAILABLE \
  __attribute__((unavailable("not available in automatic reference counting mode")))
#define NS_SWIFT_NAME(_name)

#ifdef __cplusplus
#define FOUNDATION_EXPORT extern "C"
#else
#define FOUNDATION_EXPORT extern
#endif
#define FOUNDATION_EXTERN FOUNDATION_EXPORT

// 64-bit Apple platforms: NSInteger is long, NSUInteger unsigned long.
typedef long NSInteger;
typedef unsigned long NSUInteger;
#define NSIntegerMax LONG_MAX
#define NSUIntegerMax ULONG_MAX
typedef double NSTimeInterval;
typedef double CFTimeInterval;

// arm64 macOS (the only platform braze ships Metal for): BOOL is bool.
typedef bool BOOL;
#define YES __objc_yes
#define NO __objc_no

#ifndef nil
#ifdef __cplusplus
#define nil nullptr
#else
#define nil ((void*)0)
#endif
#endif
#ifndef Nil
#define Nil nil
#endif

// Apple's fixed-underlying-type enums. In C++ an NS_OPTIONS type is the
// integer type itself, so OR-ed options need no cast (as in Apple's headers).
#define NS_ENUM(_type, _name) enum _name : _type _name; enum _name : _type
#if defined(__cplusplus)
#define NS_OPTIONS(_type, _name) _type _name; enum __attribute__((flag_enum)) : _type
#else
#define NS_OPTIONS(_type, _name) enum _name : _type _name; enum __attribute__((flag_enum)) _name : _type
#endif
#define NS_ERROR_ENUM(_domain, _name) enum _name : NSInteger _name; enum _name : NSInteger

typedef NS_ENUM(NSInteger, NSComparisonResult) {
  NSOrderedAscending = -1L,
  NSOrderedSame = 0,
  NSOrderedDescending = 1,
};

static const NSInteger NSNotFound = NSIntegerMax;

@class Protocol;
