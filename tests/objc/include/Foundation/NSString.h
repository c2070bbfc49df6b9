#pragma once
#import <Foundation/NSObject.h>
#import <Foundation/NSRange.h>

NS_ASSUME_NONNULL_BEGIN

typedef NSUInteger NSStringEncoding;
enum {
  NSASCIIStringEncoding = 1,
  NSUTF8StringEncoding = 4,
};

@interface NSString : NSObject <NSCopying, NSSecureCoding>
@property (readonly) NSUInteger length;
- (unsigned short)characterAtIndex:(NSUInteger)index;
- (instancetype)init;
@end

@interface NSString (NSStringExtensionMethods)
+ (instancetype)string;
+ (instancetype)stringWithString:(NSString*)string;
+ (nullable instancetype)stringWithUTF8String:(const char*)nullTerminatedCString;
+ (nullable instancetype)stringWithCString:(const char*)cString encoding:(NSStringEncoding)enc;
+ (instancetype)stringWithFormat:(NSString*)format, ... NS_FORMAT_FUNCTION(1, 2);
- (nullable instancetype)initWithUTF8String:(const char*)nullTerminatedCString;
- (nullable instancetype)initWithBytes:(const void*)bytes
                                length:(NSUInteger)len
                              encoding:(NSStringEncoding)encoding;
- (instancetype)initWithFormat:(NSString*)format, ... NS_FORMAT_FUNCTION(1, 2);
@property (nullable, readonly) const char* UTF8String NS_RETURNS_INNER_POINTER;
- (nullable const char*)cStringUsingEncoding:(NSStringEncoding)encoding NS_RETURNS_INNER_POINTER;
- (NSUInteger)lengthOfBytesUsingEncoding:(NSStringEncoding)enc;
- (BOOL)isEqualToString:(NSString*)aString;
- (BOOL)hasPrefix:(NSString*)str;
- (BOOL)hasSuffix:(NSString*)str;
- (NSComparisonResult)compare:(NSString*)string;
- (NSRange)rangeOfString:(NSString*)searchString;
- (NSString*)stringByAppendingString:(NSString*)aString;
- (NSString*)substringFromIndex:(NSUInteger)from;
- (NSString*)substringToIndex:(NSUInteger)to;
- (NSString*)substringWithRange:(NSRange)range;
@property (readonly, copy) NSString* lastPathComponent;
@property (readonly, copy) NSString* stringByDeletingLastPathComponent;
- (NSString*)stringByAppendingPathComponent:(NSString*)str;
@end

NS_ASSUME_NONNULL_END
