#pragma once
#import <Foundation/NSObject.h>

@class NSString;

NS_ASSUME_NONNULL_BEGIN

@interface NSURL : NSObject <NSSecureCoding, NSCopying>
+ (NSURL*)fileURLWithPath:(NSString*)path isDirectory:(BOOL)isDir;
+ (NSURL*)fileURLWithPath:(NSString*)path;
+ (nullable instancetype)URLWithString:(NSString*)URLString;
- (instancetype)initFileURLWithPath:(NSString*)path;
- (nullable instancetype)initWithString:(NSString*)URLString;
@property (nullable, readonly, copy) NSString* absoluteString;
@property (nullable, readonly, copy) NSString* path;
@property (readonly, copy) NSString* lastPathComponent;
@property (nullable, readonly, copy) NSURL* URLByDeletingLastPathComponent;
- (NSURL*)URLByAppendingPathComponent:(NSString*)pathComponent;
@property (readonly, getter=isFileURL) BOOL fileURL;
@property (readonly) const char* fileSystemRepresentation NS_RETURNS_INNER_POINTER;
@end

NS_ASSUME_NONNULL_END
