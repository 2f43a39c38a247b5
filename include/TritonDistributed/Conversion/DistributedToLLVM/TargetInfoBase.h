//===- TargetInfoBase.h - target hooks of the distributed lowering -*- C++
//-*-===//
//
// The few things the shared lowering of the `distributed` dialect
// (DistributedToLLVM) asks of a GPU target. The NVVM hooks live in
// third_party/nvidia, the ROCDL hooks in third_party/amd; this header and the
// shared lowering never include an NVVM or ROCDL header.
//
// Every hook builds LLVM-dialect (or target-dialect) IR at the builder's
// insertion point. Hooks that need control flow take a RewriterBase so they can
// split blocks inside a dialect conversion.
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_TARGETINFOBASE_H
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_TARGETINFOBASE_H

#include "TritonDistributed/Dialect/Distributed/IR/Dialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
class ConversionTarget;

namespace triton_dist {

class TargetInfoBase {
public:
  virtual ~TargetInfoBase();

  /// Marks the dialects the hooks create (NVVM, ROCDL) legal.
  virtual void addLegalDialects(ConversionTarget &target) const = 0;

  /// The target triple the device library is built for, e.g.
  /// "nvptx64-nvidia-cuda"; named in diagnostics.
  virtual StringRef getTriple() const = 0;

  /// The data layout of that triple (clang-22's), stamped on the device
  /// library.
  virtual StringRef getDataLayout() const = 0;

  /// Whether code for this target may go into a module whose
  /// `llvm.target_triple` is `triple` (its architecture is this target's).
  virtual bool acceptsTriple(StringRef triple) const = 0;

  //===--------------------------------------------------------------------===//
  // Threads
  //===--------------------------------------------------------------------===//

  /// The calling thread's index in its program, as an i32. Programs are
  /// one-dimensional, as Triton launches them: this is the x thread index.
  virtual Value getThreadId(OpBuilder &b, Location loc) const = 0;

  /// The calling program's index (x), as an i32: for the watchdog's record.
  virtual Value getProgramId(OpBuilder &b, Location loc) const = 0;

  /// Nanoseconds per tick of `llvm.readsteadycounter` on this target.
  virtual unsigned getSteadyCounterPeriodNs() const = 0;

  /// Threads per warp / wavefront, as an i32 (a constant, or a value the
  /// backend folds for the subtarget).
  virtual Value getWarpSize(OpBuilder &b, Location loc) const = 0;

  /// Every thread of the program waits for all others; memory accesses made
  /// before it by any thread of the program are ordered, at program scope,
  /// before accesses made after it (CUDA __syncthreads, HIP __syncthreads).
  virtual void createProgramBarrier(OpBuilder &b, Location loc) const = 0;

  /// Suspends the calling thread for about `nanoseconds` (an i32 > 0). May
  /// split the current block; the insertion point is left after the sleep.
  virtual void createSleep(RewriterBase &rewriter, Location loc,
                           Value nanoseconds) const = 0;

  //===--------------------------------------------------------------------===//
  // Memory model
  //===--------------------------------------------------------------------===//

  /// The LLVM syncscope name of a scope on this target ("" is the system).
  virtual StringRef getSyncScope(MemSyncScope scope) const = 0;

  /// An atomic load of the integer at `ptr` (a global pointer): acquire or
  /// monotonic at `scope`. Default: `llvm.load atomic`.
  virtual Value createPollLoad(OpBuilder &b, Location loc, Type type, Value ptr,
                               MemSyncScope scope, MemSemantic semantic) const;

  /// Stores `value` to the global `ptr` with release ordering at `scope`.
  /// Default: `llvm.store atomic release`.
  virtual void createReleaseStore(OpBuilder &b, Location loc, Value ptr,
                                  Value value, MemSyncScope scope) const;

  /// Atomically adds `value` to the integer at the global `ptr` with release
  /// ordering at `scope`. Default: `llvm.atomicrmw add release`.
  virtual void createReleaseAdd(OpBuilder &b, Location loc, Value ptr,
                                Value value, MemSyncScope scope) const;

  //===--------------------------------------------------------------------===//
  // Tokens
  //===--------------------------------------------------------------------===//

  /// The i32 a `distributed.wait` returns: an opaque value (0) produced by a
  /// side-effecting instruction placed after the wait's barrier, so nothing
  /// that depends on it can move above the wait.
  virtual Value createToken(OpBuilder &b, Location loc) const = 0;

  /// The inline-asm register constraint for an integer of `bitWidth` (32 or
  /// 64) bits that may differ between threads.
  virtual StringRef getRegisterConstraint(unsigned bitWidth) const = 0;

  /// Returns the integer `value` (i32 or i64) through an opaque register copy
  /// that also takes `token` (i32) as an input: an inline asm with no
  /// instructions whose result is tied to `value`. LLVM can neither fold it
  /// nor compute it before `token` exists.
  virtual Value createOpaqueCopy(OpBuilder &b, Location loc, Value value,
                                 Value token) const;

  //===--------------------------------------------------------------------===//
  // One-sided communication: put_signal, get, signal_wait
  //===--------------------------------------------------------------------===//

  /// The one-sided communication library these ops lower to calls of
  /// ("NVSHMEM"), or "" when the target lowers none of them: the lowering then
  /// rejects them with a located diagnostic before converting anything, and
  /// the three hooks below are never called.
  virtual StringRef getOneSidedLibrary() const { return ""; }

  /// Every thread of the program calls the library's block-scope put with
  /// signal: `bytes` (i64) from the local `src` to `dest` on rank `rank` (i32),
  /// then `signalPtr` on `rank` set to / increased by `signal` (i64). The
  /// pointers are this rank's addresses (global or generic).
  virtual LogicalResult createPutSignal(RewriterBase &rewriter, Location loc,
                                        Value dest, Value src, Value bytes,
                                        Value signalPtr, Value signal,
                                        SignalOp sigOp, Value rank) const;

  /// Every thread of the program calls the library's block-scope get: `bytes`
  /// from `src` on rank `rank` to the local `dest`; blocking.
  virtual LogicalResult createGet(RewriterBase &rewriter, Location loc,
                                  Value dest, Value src, Value bytes,
                                  Value rank) const;

  /// Each fails (after a located diagnostic) when the library function cannot
  /// be declared.
  /// The calling thread waits until the local 64-bit signal at `signalPtr`
  /// satisfies `signal <cmp> value` (unsigned).
  virtual LogicalResult createSignalWaitUntil(RewriterBase &rewriter,
                                              Location loc, Value signalPtr,
                                              WaitComparison cmp,
                                              Value value) const;

  /// Declares (once) the library function `op` (a put_signal, get or
  /// signal_wait) lowers to a call of, in the symbol table that holds `op`.
  /// The lowering calls it for every such op before converting anything, so
  /// that a conflicting symbol is one located error. Default: nothing.
  virtual LogicalResult declareOneSidedFunction(Operation *op) const {
    return success();
  }

  /// For the hooks: the external function `name` of `type`, declared (once)
  /// at the start of the symbol table that holds `from`. A symbol of that name
  /// with another type or kind is reported at `loc` and returns null.
  static LLVM::LLVMFuncOp getOrDeclareFunction(OpBuilder &b, Operation *from,
                                               Location loc, StringRef name,
                                               LLVM::LLVMFunctionType type);
};

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_TARGETINFOBASE_H
