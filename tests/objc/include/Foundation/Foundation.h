// Umbrella for the Foundation declarations in tests/objc/include (see
// NSObjCRuntime.h): only the part of Foundation braze's Metal executor may use.
#pragma once
#import <Foundation/NSObjCRuntime.h>
#import <Foundation/NSRange.h>
#import <Foundation/NSObject.h>
#import <Foundation/NSString.h>
#import <Foundation/NSArray.h>
#import <Foundation/NSDictionary.h>
#import <Foundation/NSError.h>
#import <Foundation/NSURL.h>
