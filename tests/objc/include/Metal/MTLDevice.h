#pragma once
#import <Metal/MTLBuffer.h>
#import <Metal/MTLCommandQueue.h>
#import <Metal/MTLComputePipeline.h>
#import <Metal/MTLLibrary.h>
#import <Metal/MTLResource.h>
#import <Metal/MTLTypes.h>

NS_ASSUME_NONNULL_BEGIN

typedef NS_ENUM(NSInteger, MTLGPUFamily) {
  MTLGPUFamilyApple1 = 1001,
  MTLGPUFamilyApple2 = 1002,
  MTLGPUFamilyApple3 = 1003,
  MTLGPUFamilyApple4 = 1004,
  MTLGPUFamilyApple5 = 1005,
  MTLGPUFamilyApple6 = 1006,
  MTLGPUFamilyApple7 = 1007,
  MTLGPUFamilyApple8 = 1008,
  MTLGPUFamilyApple9 = 1009,
  MTLGPUFamilyMac2 = 2002,
  MTLGPUFamilyCommon1 = 3001,
  MTLGPUFamilyCommon2 = 3002,
  MTLGPUFamilyCommon3 = 3003,
  MTLGPUFamilyMetal3 = 5001,
};

typedef NS_OPTIONS(NSUInteger, MTLPipelineOption) {
  MTLPipelineOptionNone = 0,
  MTLPipelineOptionArgumentInfo = 1 << 0,
  MTLPipelineOptionBufferTypeInfo = 1 << 1,
  MTLPipelineOptionFailOnBinaryArchiveMiss = 1 << 2,
};

typedef __autoreleasing MTLComputePipelineReflection* _Nullable MTLAutoreleasedComputePipelineReflection;

@protocol MTLDevice <NSObject>
@property (readonly) NSString* name;
@property (readonly) uint64_t registryID;
@property (readonly) MTLSize maxThreadsPerThreadgroup;
@property (readonly, getter=isLowPower) BOOL lowPower;
@property (readonly, getter=isHeadless) BOOL headless;
@property (readonly) BOOL hasUnifiedMemory;
@property (readonly) uint64_t recommendedMaxWorkingSetSize;
@property (readonly) NSUInteger currentAllocatedSize;
@property (readonly) NSUInteger maxThreadgroupMemoryLength;
@property (readonly) NSUInteger maxBufferLength;
- (BOOL)supportsFamily:(MTLGPUFamily)gpuFamily;

- (nullable id<MTLCommandQueue>)newCommandQueue;
- (nullable id<MTLCommandQueue>)newCommandQueueWithMaxCommandBufferCount:(NSUInteger)maxCommandBufferCount;

- (nullable id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
- (nullable id<MTLBuffer>)newBufferWithBytes:(const void*)pointer
                                      length:(NSUInteger)length
                                     options:(MTLResourceOptions)options;
- (nullable id<MTLBuffer>)newBufferWithBytesNoCopy:(void*)pointer
                                            length:(NSUInteger)length
                                           options:(MTLResourceOptions)options
                                       deallocator:(void (^_Nullable)(void* pointer, NSUInteger length))deallocator;

- (nullable id<MTLLibrary>)newDefaultLibrary;
// Deprecated since macOS 13.
- (nullable id<MTLLibrary>)newLibraryWithFile:(NSString*)filepath error:(__autoreleasing NSError**)error
    __attribute__((deprecated("use newLibraryWithURL:error:")));
- (nullable id<MTLLibrary>)newLibraryWithURL:(NSURL*)url error:(__autoreleasing NSError**)error;
- (nullable id<MTLLibrary>)newLibraryWithSource:(NSString*)source
                                        options:(nullable MTLCompileOptions*)options
                                          error:(__autoreleasing NSError**)error;

- (nullable id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction
                                                                      error:(__autoreleasing NSError**)error;
- (nullable id<MTLComputePipelineState>)
    newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction
                                options:(MTLPipelineOption)options
                             reflection:(MTLAutoreleasedComputePipelineReflection* _Nullable)reflection
                                  error:(__autoreleasing NSError**)error;
@end

MTL_EXTERN id<MTLDevice> _Nullable MTLCreateSystemDefaultDevice(void) NS_RETURNS_RETAINED;
MTL_EXTERN NSArray<id<MTLDevice>>* MTLCopyAllDevices(void) NS_RETURNS_RETAINED;

NS_ASSUME_NONNULL_END
