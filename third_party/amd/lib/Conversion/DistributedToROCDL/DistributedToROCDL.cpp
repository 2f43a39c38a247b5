//===- DistributedToROCDL.cpp - ROCDL hooks, --convert-distributed-to-rocdl
//===//
//
// The ROCDL target hooks and the pass, in one translation unit: ROCDLDialect.h
// is expensive to compile.
//
//===----------------------------------------------------------------------===//

#include "TritonDistributed/Conversion/DistributedToROCDL/TargetInfo.h"

#include "TritonDistributed/Conversion/DistributedToLLVM/DistributedToLLVM.h"
#include "TritonDistributed/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/TargetParser/Triple.h"

namespace mlir {
namespace triton_dist {
#define GEN_PASS_DEF_CONVERTDISTRIBUTEDTOROCDL
#include "TritonDistributed/Conversion/Passes.h.inc"
} // namespace triton_dist
} // namespace mlir

using namespace mlir;
using namespace mlir::triton_dist;

//===----------------------------------------------------------------------===//
// Hooks
//===----------------------------------------------------------------------===//

void ROCDLTargetInfo::addLegalDialects(ConversionTarget &target) const {
  target.addLegalDialect<ROCDL::ROCDLDialect>();
}

StringRef ROCDLTargetInfo::getTriple() const { return "amdgcn-amd-amdhsa"; }

bool ROCDLTargetInfo::acceptsTriple(StringRef triple) const {
  return llvm::Triple(triple).isAMDGCN();
}

Value ROCDLTargetInfo::getThreadId(OpBuilder &b, Location loc) const {
  return ROCDL::ThreadIdXOp::create(b, loc, b.getI32Type());
}

Value ROCDLTargetInfo::getWarpSize(OpBuilder &b, Location loc) const {
  return ROCDL::WavefrontSizeOp::create(b, loc, b.getI32Type());
}

void ROCDLTargetInfo::createProgramBarrier(OpBuilder &b, Location loc) const {
  LLVM::FenceOp::create(b, loc, LLVM::AtomicOrdering::release, "workgroup");
  ROCDL::SBarrierOp::create(b, loc);
  LLVM::FenceOp::create(b, loc, LLVM::AtomicOrdering::acquire, "workgroup");
}

// current:  br nap(max(ns >> 5, 1))
// nap(k):   s_sleep 1; cond_br k > 1, nap(k - 1), rest
// rest:     (insertion point)
void ROCDLTargetInfo::createSleep(RewriterBase &rewriter, Location loc,
                                  Value nanoseconds) const {
  Type i32 = rewriter.getI32Type();
  auto constant = [&](int32_t value) -> Value {
    return LLVM::ConstantOp::create(rewriter, loc, i32,
                                    rewriter.getI32IntegerAttr(value));
  };
  // icmp + select, not llvm.intr.umax (see the backoff in the shared core:
  // Triton 3.6's LLVM cannot read the attributes LLVM 22.1 puts on it).
  Value scaled = LLVM::LShrOp::create(rewriter, loc, nanoseconds, constant(5));
  Value positive = LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::ugt,
                                        scaled, constant(1));
  Value naps =
      LLVM::SelectOp::create(rewriter, loc, positive, scaled, constant(1));

  Block *current = rewriter.getInsertionBlock();
  Block *rest = rewriter.splitBlock(current, rewriter.getInsertionPoint());
  Block *nap = rewriter.createBlock(rest, {i32}, {loc});
  rewriter.setInsertionPointToEnd(current);
  LLVM::BrOp::create(rewriter, loc, ValueRange{naps}, nap);

  rewriter.setInsertionPointToEnd(nap);
  Value left = nap->getArgument(0);
  ROCDL::SSleepOp::create(rewriter, loc, 1);
  Value more = LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::ugt,
                                    left, constant(1));
  Value fewer = LLVM::SubOp::create(rewriter, loc, left, constant(1));
  LLVM::CondBrOp::create(rewriter, loc, more, nap, ValueRange{fewer}, rest,
                         ValueRange{});
  rewriter.setInsertionPointToStart(rest);
}

StringRef ROCDLTargetInfo::getSyncScope(MemSyncScope scope) const {
  switch (scope) {
  case MemSyncScope::cta:
    return "workgroup";
  case MemSyncScope::gpu:
    return "agent";
  case MemSyncScope::sys:
    return "";
  }
  llvm_unreachable("unknown scope");
}

Value ROCDLTargetInfo::createToken(OpBuilder &b, Location loc) const {
  auto token = LLVM::InlineAsmOp::create(
      b, loc, b.getI32Type(), ValueRange{}, "v_mov_b32 $0, 0", "=v",
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None,
      /*asm_dialect=*/LLVM::AsmDialectAttr(), /*operand_attrs=*/ArrayAttr());
  return token.getRes();
}

StringRef ROCDLTargetInfo::getRegisterConstraint(unsigned) const { return "v"; }

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct ConvertDistributedToROCDL
    : public triton_dist::impl::ConvertDistributedToROCDLBase<
          ConvertDistributedToROCDL> {
  using Base::Base;

  void runOnOperation() override {
    LoweringOptions options;
    options.backoff.tightPolls = tightPolls;
    options.backoff.maxSleepNs = maxSleepNs;
    options.triple = triple;
    options.dataLayout = dataLayout;
    ROCDLTargetInfo target;
    if (failed(lowerDistributedToLLVM(getOperation(), target, options)))
      signalPassFailure();
  }
};
} // namespace
