//===- TargetInfo.h - ROCDL hooks of the distributed lowering ---*- C++ -*-===//
//
// AMD GPUs (AMDGPU, wave32 or wave64).
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTOROCDL_TARGETINFO_H
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTOROCDL_TARGETINFO_H

#include "TritonDistributed/Conversion/DistributedToLLVM/TargetInfoBase.h"

namespace mlir {
namespace triton_dist {

class ROCDLTargetInfo final : public TargetInfoBase {
public:
  void addLegalDialects(ConversionTarget &target) const override;

  /// "amdgcn-amd-amdhsa".
  StringRef getTriple() const override;
  /// clang-22's data layout for that triple.
  StringRef getDataLayout() const override;
  /// Architectures amdgcn.
  bool acceptsTriple(StringRef triple) const override;

  /// workitem.id.x.
  Value getThreadId(OpBuilder &b, Location loc) const override;
  /// workgroup.id.x.
  Value getProgramId(OpBuilder &b, Location loc) const override;
  /// 10: s_memrealtime counts at 100 MHz.
  unsigned getSteadyCounterPeriodNs() const override { return 10; }
  /// llvm.amdgcn.wavefrontsize, which the backend folds for the subtarget.
  Value getWarpSize(OpBuilder &b, Location loc) const override;
  /// Workgroup release fence, s_barrier, workgroup acquire fence.
  void createProgramBarrier(OpBuilder &b, Location loc) const override;
  /// `s_sleep 1` (64 clocks) repeated about nanoseconds / 32 times: s_sleep
  /// only takes an immediate.
  void createSleep(RewriterBase &rewriter, Location loc,
                   Value nanoseconds) const override;

  /// "workgroup", "agent", "" (system).
  StringRef getSyncScope(MemSyncScope scope) const override;

  /// `v_mov_b32 %v, 0` with side effects.
  Value createToken(OpBuilder &b, Location loc) const override;
  /// "v": a value may differ between the lanes of a wave.
  StringRef getRegisterConstraint(unsigned bitWidth) const override;
};

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTOROCDL_TARGETINFO_H
