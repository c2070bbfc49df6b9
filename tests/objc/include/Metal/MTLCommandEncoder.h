#pragma once
#import <Metal/MTLDefines.h>

@protocol MTLDevice;

NS_ASSUME_NONNULL_BEGIN

typedef NS_OPTIONS(NSUInteger, MTLResourceUsage) {
  MTLResourceUsageRead = 1 << 0,
  MTLResourceUsageWrite = 1 << 1,
};

typedef NS_OPTIONS(NSUInteger, MTLBarrierScope) {
  MTLBarrierScopeBuffers = 1 << 0,
  MTLBarrierScopeTextures = 1 << 1,
  MTLBarrierScopeRenderTargets = 1 << 2,
};

@protocol MTLCommandEncoder <NSObject>
@property (readonly) id<MTLDevice> device;
@property (nullable, copy, atomic) NSString* label;
- (void)endEncoding;
- (void)insertDebugSignpost:(NSString*)string;
- (void)pushDebugGroup:(NSString*)string;
- (void)popDebugGroup;
@end

NS_ASSUME_NONNULL_END
