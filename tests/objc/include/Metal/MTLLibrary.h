#pragma once
#import <Metal/MTLDefines.h>

@protocol MTLDevice;

NS_ASSUME_NONNULL_BEGIN

typedef NS_ENUM(NSUInteger, MTLFunctionType) {
  MTLFunctionTypeVertex = 1,
  MTLFunctionTypeFragment = 2,
  MTLFunctionTypeKernel = 3,
  MTLFunctionTypeVisible = 5,
  MTLFunctionTypeIntersection = 6,
  MTLFunctionTypeMesh = 7,
  MTLFunctionTypeObject = 8,
};

typedef NS_ENUM(NSUInteger, MTLLanguageVersion) {
  MTLLanguageVersion1_1 = (1 << 16) + 1,
  MTLLanguageVersion1_2 = (1 << 16) + 2,
  MTLLanguageVersion2_0 = (2 << 16),
  MTLLanguageVersion2_1 = (2 << 16) + 1,
  MTLLanguageVersion2_2 = (2 << 16) + 2,
  MTLLanguageVersion2_3 = (2 << 16) + 3,
  MTLLanguageVersion2_4 = (2 << 16) + 4,
  MTLLanguageVersion3_0 = (3 << 16),
  MTLLanguageVersion3_1 = (3 << 16) + 1,
  MTLLanguageVersion3_2 = (3 << 16) + 2,
};

typedef NS_ENUM(NSUInteger, MTLLibraryType) {
  MTLLibraryTypeExecutable = 0,
  MTLLibraryTypeDynamic = 1,
};

typedef NS_ENUM(NSUInteger, MTLLibraryError) {
  MTLLibraryErrorUnsupported = 1,
  MTLLibraryErrorInternal = 2,
  MTLLibraryErrorCompileFailure = 3,
  MTLLibraryErrorCompileWarning = 4,
  MTLLibraryErrorFunctionNotFound = 5,
  MTLLibraryErrorFileNotFound = 6,
};

MTL_EXTERN NSErrorDomain const MTLLibraryErrorDomain;

@interface MTLCompileOptions : NSObject <NSCopying>
@property (nullable, readwrite, copy, nonatomic) NSDictionary<NSString*, NSObject*>* preprocessorMacros;
// Deprecated in macOS 15 for mathMode; still the only switch on macOS 14.
@property (readwrite, nonatomic) BOOL fastMathEnabled;
@property (readwrite, nonatomic) MTLLanguageVersion languageVersion;
@property (readwrite, nonatomic) BOOL preserveInvariance;
@end

@protocol MTLFunction <NSObject>
@property (nullable, copy, atomic) NSString* label;
@property (readonly) id<MTLDevice> device;
@property (readonly) MTLFunctionType functionType;
@property (readonly) NSString* name;
@end

@protocol MTLLibrary <NSObject>
@property (nullable, copy, atomic) NSString* label;
@property (readonly) id<MTLDevice> device;
- (nullable id<MTLFunction>)newFunctionWithName:(NSString*)functionName;
@property (readonly) NSArray<NSString*>* functionNames;
@property (readonly) MTLLibraryType type;
@property (readonly, nullable) NSString* installName;
@end

NS_ASSUME_NONNULL_END
