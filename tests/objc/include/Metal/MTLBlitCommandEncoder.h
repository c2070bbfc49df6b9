#pragma once
#import <Metal/MTLBuffer.h>
#import <Metal/MTLCommandEncoder.h>

NS_ASSUME_NONNULL_BEGIN

@protocol MTLBlitCommandEncoder <MTLCommandEncoder>
- (void)synchronizeResource:(id<MTLResource>)resource;
- (void)copyFromBuffer:(id<MTLBuffer>)sourceBuffer
          sourceOffset:(NSUInteger)sourceOffset
              toBuffer:(id<MTLBuffer>)destinationBuffer
     destinationOffset:(NSUInteger)destinationOffset
                  size:(NSUInteger)size;
- (void)fillBuffer:(id<MTLBuffer>)buffer range:(NSRange)range value:(uint8_t)value;
@end

NS_ASSUME_NONNULL_END
