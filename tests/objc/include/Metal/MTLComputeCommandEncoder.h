#pragma once
#import <Metal/MTLBuffer.h>
#import <Metal/MTLCommandEncoder.h>
#import <Metal/MTLComputePipeline.h>
#import <Metal/MTLTypes.h>

NS_ASSUME_NONNULL_BEGIN

typedef NS_ENUM(NSUInteger, MTLDispatchType) {
  MTLDispatchTypeSerial,
  MTLDispatchTypeConcurrent,
};

@protocol MTLComputeCommandEncoder <MTLCommandEncoder>
@property (readonly) MTLDispatchType dispatchType;
- (void)setComputePipelineState:(id<MTLComputePipelineState>)state;
- (void)setBytes:(const void*)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)setBuffer:(nullable id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)setBufferOffset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)setBuffers:(const id<MTLBuffer> _Nullable[_Nonnull])buffers
           offsets:(const NSUInteger[_Nonnull])offsets
         withRange:(NSRange)range;
- (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid
       threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)dispatchThreadgroupsWithIndirectBuffer:(id<MTLBuffer>)indirectBuffer
                          indirectBufferOffset:(NSUInteger)indirectBufferOffset
                         threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)dispatchThreads:(MTLSize)threadsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)useResource:(id<MTLResource>)resource usage:(MTLResourceUsage)usage;
- (void)useResources:(const id<MTLResource> _Nonnull[_Nonnull])resources
               count:(NSUInteger)count
               usage:(MTLResourceUsage)usage;
- (void)memoryBarrierWithScope:(MTLBarrierScope)scope;
- (void)memoryBarrierWithResources:(const id<MTLResource> _Nonnull[_Nonnull])resources
                             count:(NSUInteger)count;
@end

NS_ASSUME_NONNULL_END
