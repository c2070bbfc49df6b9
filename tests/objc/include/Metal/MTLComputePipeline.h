#pragma once
#import <Metal/MTLDefines.h>

@protocol MTLDevice;

NS_ASSUME_NONNULL_BEGIN

@interface MTLComputePipelineReflection : NSObject
@end

@protocol MTLComputePipelineState <NSObject>
@property (nullable, readonly) NSString* label;
@property (readonly) id<MTLDevice> device;
@property (readonly) NSUInteger maxTotalThreadsPerThreadgroup;
@property (readonly) NSUInteger threadExecutionWidth;
@property (readonly) NSUInteger staticThreadgroupMemoryLength;
@property (readonly) BOOL supportIndirectCommandBuffers;
@end

NS_ASSUME_NONNULL_END
