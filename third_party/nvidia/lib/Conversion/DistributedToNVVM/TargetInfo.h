//===- TargetInfo.h - NVVM hooks of the distributed lowering ----*- C++ -*-===//
//
// NVIDIA GPUs (NVPTX, sm_70 and newer: PTX scoped memory operations).
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTONVVM_TARGETINFO_H
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTONVVM_TARGETINFO_H

#include "TritonDistributed/Conversion/DistributedToLLVM/TargetInfoBase.h"

namespace mlir {
namespace triton_dist {

class NVVMTargetInfo final : public TargetInfoBase {
public:
  void addLegalDialects(ConversionTarget &target) const override;

  /// "nvptx64-nvidia-cuda".
  StringRef getTriple() const override;
  /// clang-22's data layout for that triple.
  StringRef getDataLayout() const override;
  /// Architectures nvptx, nvptx64.
  bool acceptsTriple(StringRef triple) const override;

  /// %tid.x.
  Value getThreadId(OpBuilder &b, Location loc) const override;
  /// %ctaid.x.
  Value getProgramId(OpBuilder &b, Location loc) const override;
  /// 1: %globaltimer counts nanoseconds.
  unsigned getSteadyCounterPeriodNs() const override { return 1; }
  /// 32.
  Value getWarpSize(OpBuilder &b, Location loc) const override;
  /// bar.sync 0.
  void createProgramBarrier(OpBuilder &b, Location loc) const override;
  /// nanosleep.u32.
  void createSleep(RewriterBase &rewriter, Location loc,
                   Value nanoseconds) const override;

  /// "block", "device", "" (system).
  StringRef getSyncScope(MemSyncScope scope) const override;
  /// `atom.release.<cta|gpu|sys>.global.add.<u32|u64>` as inline PTX: the
  /// NVPTX backend of LLVM 22 emits a release `atomicrmw` as a plain
  /// (relaxed, .gpu) `atom.global.add`.
  void createReleaseAdd(OpBuilder &b, Location loc, Value ptr, Value value,
                        MemSyncScope scope) const override;

  /// `mov.u32 %r, 0;` with side effects.
  Value createToken(OpBuilder &b, Location loc) const override;
  /// "r" (32 bits), "l" (64 bits).
  StringRef getRegisterConstraint(unsigned bitWidth) const override;

  /// "NVSHMEM": the functions of its device bitcode (libnvshmem_device_sm_*.bc
  /// of the nvidia-nvshmem wheel), declared in the module and linked later.
  StringRef getOneSidedLibrary() const override { return "NVSHMEM"; }
  /// Declares the NVSHMEM function of a put_signal / get / signal_wait.
  LogicalResult declareOneSidedFunction(Operation *op) const override;
  /// nvshmemx_putmem_signal_block(dest, src, bytes, sig, signal, op, pe).
  LogicalResult createPutSignal(RewriterBase &rewriter, Location loc,
                                Value dest, Value src, Value bytes,
                                Value signalPtr, Value signal, SignalOp sigOp,
                                Value rank) const override;
  /// nvshmemx_getmem_block(dest, src, bytes, pe).
  LogicalResult createGet(RewriterBase &rewriter, Location loc, Value dest,
                          Value src, Value bytes, Value rank) const override;
  /// nvshmem_signal_wait_until(sig, cmp, value).
  LogicalResult createSignalWaitUntil(RewriterBase &rewriter, Location loc,
                                      Value signalPtr, WaitComparison cmp,
                                      Value value) const override;
};

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTONVVM_TARGETINFO_H
