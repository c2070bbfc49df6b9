#pragma once
#import <Metal/MTLDefines.h>

@protocol MTLDevice, MTLCommandBuffer;

NS_ASSUME_NONNULL_BEGIN

@protocol MTLCommandQueue <NSObject>
@property (nullable, copy, atomic) NSString* label;
@property (readonly) id<MTLDevice> device;
- (nullable id<MTLCommandBuffer>)commandBuffer;
- (nullable id<MTLCommandBuffer>)commandBufferWithUnretainedReferences;
@end

NS_ASSUME_NONNULL_END
