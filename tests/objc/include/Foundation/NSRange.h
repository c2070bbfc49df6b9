#pragma once
#import <Foundation/NSObjCRuntime.h>

typedef struct _NSRange {
  NSUInteger location;
  NSUInteger length;
} NSRange;

typedef NSRange* NSRangePointer;

static inline NSRange NSMakeRange(NSUInteger loc, NSUInteger len) {
  NSRange r;
  r.location = loc;
  r.length = len;
  return r;
}

static inline NSUInteger NSMaxRange(NSRange range) { return range.location + range.length; }
