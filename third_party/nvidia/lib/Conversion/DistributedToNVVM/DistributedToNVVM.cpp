//===- DistributedToNVVM.cpp - NVVM hooks and --convert-distributed-to-nvvm
//===//
//
// The NVVM target hooks and the pass, in one translation unit: NVVMDialect.h is
// expensive to compile.
//
//===----------------------------------------------------------------------===//

#include "TargetInfo.h"

#include "TritonDistributed/Conversion/DistributedToLLVM/TargetPasses.h"
#include "TritonDistributed/Conversion/DistributedToNVVM/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/TargetParser/Triple.h"

namespace mlir {
namespace triton_dist {
#define GEN_PASS_DEF_CONVERTDISTRIBUTEDTONVVM
#define GEN_PASS_DEF_SETDISTRIBUTEDNVVMTARGET
#include "TritonDistributed/Conversion/DistributedToNVVM/Passes.h.inc"
} // namespace triton_dist
} // namespace mlir

using namespace mlir;
using namespace mlir::triton_dist;

//===----------------------------------------------------------------------===//
// Hooks
//===----------------------------------------------------------------------===//

void NVVMTargetInfo::addLegalDialects(ConversionTarget &target) const {
  target.addLegalDialect<NVVM::NVVMDialect>();
}

StringRef NVVMTargetInfo::getTriple() const { return "nvptx64-nvidia-cuda"; }

StringRef NVVMTargetInfo::getDataLayout() const {
  return "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64";
}

bool NVVMTargetInfo::acceptsTriple(StringRef triple) const {
  return llvm::Triple(triple).isNVPTX();
}

Value NVVMTargetInfo::getThreadId(OpBuilder &b, Location loc) const {
  return NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
}

Value NVVMTargetInfo::getProgramId(OpBuilder &b, Location loc) const {
  return NVVM::BlockIdXOp::create(b, loc, b.getI32Type());
}

Value NVVMTargetInfo::getWarpSize(OpBuilder &b, Location loc) const {
  return LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                  b.getI32IntegerAttr(32));
}

void NVVMTargetInfo::createProgramBarrier(OpBuilder &b, Location loc) const {
  NVVM::Barrier0Op::create(b, loc);
}

void NVVMTargetInfo::createSleep(RewriterBase &rewriter, Location loc,
                                 Value nanoseconds) const {
  NVVM::NanosleepOp::create(rewriter, loc, nanoseconds);
}

StringRef NVVMTargetInfo::getSyncScope(MemSyncScope scope) const {
  switch (scope) {
  case MemSyncScope::cta:
    return "block";
  case MemSyncScope::gpu:
    return "device";
  case MemSyncScope::sys:
    return "";
  }
  llvm_unreachable("unknown scope");
}

static StringRef getPtxScope(MemSyncScope scope) {
  switch (scope) {
  case MemSyncScope::cta:
    return "cta";
  case MemSyncScope::gpu:
    return "gpu";
  case MemSyncScope::sys:
    return "sys";
  }
  llvm_unreachable("unknown scope");
}

void NVVMTargetInfo::createReleaseAdd(OpBuilder &b, Location loc, Value ptr,
                                      Value value, MemSyncScope scope) const {
  unsigned bitWidth = value.getType().getIntOrFloatBitWidth();
  StringRef reg = getRegisterConstraint(bitWidth);
  std::string ptx = ("atom.release." + getPtxScope(scope) + ".global.add.u" +
                     Twine(bitWidth) + " $0, [$1], $2;")
                        .str();
  // The old value is returned in a register nothing reads.
  std::string constraints = ("=" + reg + ",l," + reg + ",~{memory}").str();
  LLVM::InlineAsmOp::create(b, loc, value.getType(), ValueRange{ptr, value},
                            ptx, constraints, /*has_side_effects=*/true,
                            /*is_align_stack=*/false,
                            LLVM::tailcallkind::TailCallKind::None,
                            /*asm_dialect=*/LLVM::AsmDialectAttr(),
                            /*operand_attrs=*/ArrayAttr());
}

Value NVVMTargetInfo::createToken(OpBuilder &b, Location loc) const {
  auto token = LLVM::InlineAsmOp::create(
      b, loc, b.getI32Type(), ValueRange{}, "mov.u32 $0, 0;", "=r",
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None,
      /*asm_dialect=*/LLVM::AsmDialectAttr(), /*operand_attrs=*/ArrayAttr());
  return token.getRes();
}

StringRef NVVMTargetInfo::getRegisterConstraint(unsigned bitWidth) const {
  return bitWidth == 64 ? "l" : "r";
}

//===----------------------------------------------------------------------===//
// Passes and pipeline
//===----------------------------------------------------------------------===//

namespace {
struct ConvertDistributedToNVVM
    : public LowerDistributedPass<
          ConvertDistributedToNVVM, NVVMTargetInfo,
          triton_dist::impl::ConvertDistributedToNVVMBase> {
  using Wrapper::Wrapper;
};

struct SetDistributedNVVMTarget
    : public SetTargetPass<SetDistributedNVVMTarget, NVVMTargetInfo,
                           triton_dist::impl::SetDistributedNVVMTargetBase> {
  using Wrapper::Wrapper;
};
} // namespace

void mlir::triton_dist::registerLowerToNVVMPipeline() {
  TargetPassFactories factories;
  factories.createLowering = [](const LoweringOptions &options) {
    ConvertDistributedToNVVMOptions lowering;
    lowering.tightPolls = options.backoff.tightPolls;
    lowering.maxSleepNs = options.backoff.maxSleepNs;
    lowering.waitTimeoutNs = options.waitTimeoutNs;
    lowering.waitTimeoutFromRuntime = options.waitTimeoutFromRuntime;
    return createConvertDistributedToNVVM(lowering);
  };
  factories.createSetTarget = [] { return createSetDistributedNVVMTarget(); };
  registerLowerToLLVMPipeline(
      "triton-dist-lower-to-nvvm",
      "Lower a `distributed` module (func/arith/scf/cf around it) to the LLVM "
      "and NVVM dialects, ready to translate to LLVM IR",
      std::move(factories));
}
