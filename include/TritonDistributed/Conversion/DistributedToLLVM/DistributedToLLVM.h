//===- DistributedToLLVM.h - the shared lowering core -----------*- C++ -*-===//
//
// The target-independent lowering of the `distributed` dialect to the LLVM
// dialect. A target supplies its hooks (TargetInfoBase); the NVVM and ROCDL
// passes instantiate LowerDistributedPass (TargetPasses.h), a thin wrapper
// around lowerDistributedToLLVM().
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_DISTRIBUTEDTOLLVM_H
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_DISTRIBUTEDTOLLVM_H

#include "TritonDistributed/Conversion/DistributedToLLVM/TargetInfoBase.h"

namespace mlir {
class LLVMTypeConverter;
class ModuleOp;
class RewritePatternSet;
class TypeConverter;

namespace triton_dist {

/// How the polling lanes of `distributed.wait` back off: `tightPolls` polls
/// back to back, then a sleep between polls that starts at `minSleepNs` and
/// doubles up to `maxSleepNs` (0: never sleep).
struct WaitBackoff {
  unsigned tightPolls = 16;
  unsigned minSleepNs = 32;
  unsigned maxSleepNs = 256;
};

struct LoweringOptions {
  WaitBackoff backoff;
  /// The watchdog of `distributed.wait` ops without a `timeout_ns` attribute:
  /// nanoseconds a polling lane waits before it records the wait and traps; 0:
  /// no watchdog.
  uint64_t waitTimeoutNs = 0;
  /// Watch the waits without a `timeout_ns` attribute with the timeout read
  /// from `@__triton_dist_wait_watchdog` (the runtime writes it per loaded
  /// module; 0: no watchdog), recording through the pointer held beside it;
  /// takes precedence over `waitTimeoutNs`.
  bool waitTimeoutFromRuntime = false;
};

/// `!distributed.token` -> i32.
void populateDistributedTypeConversion(TypeConverter &converter);

/// The conversion patterns of the `distributed` ops. Patterns that read
/// the runtime context expect `@__triton_dist_context` to exist in the module
/// (see getOrInsertContextGlobal).
void populateDistributedToLLVMPatterns(LLVMTypeConverter &converter,
                                       RewritePatternSet &patterns,
                                       const TargetInfoBase &target,
                                       const LoweringOptions &options);

/// Emits a located error for every `distributed` op under `root` the lowering
/// cannot handle (an op outside any function, a wait or notify outside a
/// function body's region). Fails when it emitted any.
LogicalResult checkLowerable(Operation *root);

/// Emits a located error for each module (nested ones included) whose
/// `llvm.target_triple` or `llvm.data_layout` is not a string, or whose triple
/// names another architecture than `target`'s. Fails when it emitted any.
LogicalResult checkTargetAttributes(ModuleOp module,
                                    const TargetInfoBase &target);

/// Emits a located error for every put_signal / get / signal_wait under
/// `root` when `target` has no one-sided library (AMD today); otherwise
/// declares the library functions they call (a conflicting symbol is a
/// located error).
LogicalResult checkOneSidedSupport(Operation *root,
                                   const TargetInfoBase &target);

/// The whole lowering both passes run: checks, declares the context, converts
/// every `distributed` op (and the token type on function, call, branch and
/// scf boundaries).
LogicalResult lowerDistributedToLLVM(ModuleOp module,
                                     const TargetInfoBase &target,
                                     const LoweringOptions &options);

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_DISTRIBUTEDTOLLVM_H
