#pragma once
#import <Metal/MTLBlitCommandEncoder.h>
#import <Metal/MTLComputeCommandEncoder.h>

@protocol MTLDevice, MTLCommandQueue, MTLCommandBuffer;

NS_ASSUME_NONNULL_BEGIN

typedef NS_ENUM(NSUInteger, MTLCommandBufferStatus) {
  MTLCommandBufferStatusNotEnqueued = 0,
  MTLCommandBufferStatusEnqueued = 1,
  MTLCommandBufferStatusCommitted = 2,
  MTLCommandBufferStatusScheduled = 3,
  MTLCommandBufferStatusCompleted = 4,
  MTLCommandBufferStatusError = 5,
};

MTL_EXTERN NSErrorDomain const MTLCommandBufferErrorDomain;

typedef NS_ENUM(NSUInteger, MTLCommandBufferError) {
  MTLCommandBufferErrorNone = 0,
  MTLCommandBufferErrorInternal = 1,
  MTLCommandBufferErrorTimeout = 2,
  MTLCommandBufferErrorPageFault = 3,
  MTLCommandBufferErrorAccessRevoked = 4,
  MTLCommandBufferErrorNotPermitted = 7,
  MTLCommandBufferErrorOutOfMemory = 8,
  MTLCommandBufferErrorInvalidResource = 9,
  MTLCommandBufferErrorMemoryless = 10,
  MTLCommandBufferErrorDeviceRemoved = 11,
  MTLCommandBufferErrorStackOverflow = 12,
};

typedef void (^MTLCommandBufferHandler)(id<MTLCommandBuffer>);

@protocol MTLCommandBuffer <NSObject>
@property (readonly) id<MTLDevice> device;
@property (readonly) id<MTLCommandQueue> commandQueue;
@property (readonly) BOOL retainedReferences;
@property (nullable, copy, atomic) NSString* label;
@property (readonly) CFTimeInterval kernelStartTime;
@property (readonly) CFTimeInterval kernelEndTime;
@property (readonly) CFTimeInterval GPUStartTime;
@property (readonly) CFTimeInterval GPUEndTime;
- (void)enqueue;
- (void)commit;
- (void)addScheduledHandler:(MTLCommandBufferHandler)block;
- (void)waitUntilScheduled;
- (void)addCompletedHandler:(MTLCommandBufferHandler)block;
- (void)waitUntilCompleted;
@property (readonly) MTLCommandBufferStatus status;
@property (nullable, readonly) NSError* error;
- (nullable id<MTLBlitCommandEncoder>)blitCommandEncoder;
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoder;
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoderWithDispatchType:(MTLDispatchType)dispatchType;
- (void)pushDebugGroup:(NSString*)string;
- (void)popDebugGroup;
@end

NS_ASSUME_NONNULL_END
