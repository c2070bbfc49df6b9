#pragma once
#import <Metal/MTLResource.h>

NS_ASSUME_NONNULL_BEGIN

@protocol MTLBuffer <MTLResource>
@property (readonly) NSUInteger length;
// A method, not a property, in Apple's header; dot syntax still reaches it.
- (void*)contents NS_RETURNS_INNER_POINTER;
- (void)didModifyRange:(NSRange)range;
- (void)addDebugMarker:(NSString*)marker range:(NSRange)range;
- (void)removeAllDebugMarkers;
@property (nullable, readonly) id<MTLBuffer> remoteStorageBuffer;
- (nullable id<MTLBuffer>)newRemoteBufferViewForDevice:(id<MTLDevice>)device;
@property (readonly) uint64_t gpuAddress;
@end

NS_ASSUME_NONNULL_END
