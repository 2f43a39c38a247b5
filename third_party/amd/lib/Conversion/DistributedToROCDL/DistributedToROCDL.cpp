//===- DistributedToROCDL.cpp - ROCDL hooks, --convert-distributed-to-rocdl
//===//
//
// The ROCDL target hooks and the pass, in one translation unit: ROCDLDialect.h
// is expensive to compile.
//
//===----------------------------------------------------------------------===//

#include "TargetInfo.h"

#include "TritonDistributed/Conversion/DistributedToLLVM/TargetPasses.h"
#include "TritonDistributed/Conversion/DistributedToROCDL/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/TargetParser/Triple.h"

namespace mlir {
namespace triton_dist {
#define GEN_PASS_DEF_CONVERTDISTRIBUTEDTOROCDL
#define GEN_PASS_DEF_SETDISTRIBUTEDROCDLTARGET
#include "TritonDistributed/Conversion/DistributedToROCDL/Passes.h.inc"
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

StringRef ROCDLTargetInfo::getDataLayout() const {
  return "e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-"
         "p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-"
         "v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-"
         "v2048:2048-n32:64-S32-A5-G1-ni:7:8:9";
}

bool ROCDLTargetInfo::acceptsTriple(StringRef triple) const {
  return llvm::Triple(triple).isAMDGCN();
}

Value ROCDLTargetInfo::getThreadId(OpBuilder &b, Location loc) const {
  return ROCDL::ThreadIdXOp::create(b, loc, b.getI32Type());
}

Value ROCDLTargetInfo::getProgramId(OpBuilder &b, Location loc) const {
  return ROCDL::BlockIdXOp::create(b, loc, b.getI32Type());
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
// Passes and pipeline
//===----------------------------------------------------------------------===//

namespace {
struct ConvertDistributedToROCDL
    : public LowerDistributedPass<
          ConvertDistributedToROCDL, ROCDLTargetInfo,
          triton_dist::impl::ConvertDistributedToROCDLBase> {
  using Wrapper::Wrapper;
};

struct SetDistributedROCDLTarget
    : public SetTargetPass<SetDistributedROCDLTarget, ROCDLTargetInfo,
                           triton_dist::impl::SetDistributedROCDLTargetBase> {
  using Wrapper::Wrapper;
};
} // namespace

void mlir::triton_dist::registerLowerToROCDLPipeline() {
  TargetPassFactories factories;
  factories.createLowering = [](const LoweringOptions &options) {
    ConvertDistributedToROCDLOptions lowering;
    lowering.tightPolls = options.backoff.tightPolls;
    lowering.maxSleepNs = options.backoff.maxSleepNs;
    lowering.waitTimeoutNs = options.waitTimeoutNs;
    lowering.waitTimeoutFromRuntime = options.waitTimeoutFromRuntime;
    return createConvertDistributedToROCDL(lowering);
  };
  factories.createSetTarget = [] { return createSetDistributedROCDLTarget(); };
  registerLowerToLLVMPipeline(
      "triton-dist-lower-to-rocdl",
      "Lower a `distributed` module (func/arith/scf/cf around it) to the LLVM "
      "and ROCDL dialects, ready to translate to LLVM IR",
      std::move(factories));
}
