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
#include "mlir/IR/SymbolTable.h"
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
// NVSHMEM
//===----------------------------------------------------------------------===//

// The values of nvshmemx_signal_op_t and of the NVSHMEM_CMP_* enumerators
// (device_host_transport/nvshmem_common_transport.h and nvshmem_constants.h of
// the nvidia-nvshmem wheel, NVSHMEM 3.x).
static int32_t getNvshmemSignalOp(SignalOp op) {
  switch (op) {
  case SignalOp::set:
    return 9; // NVSHMEM_SIGNAL_SET
  case SignalOp::add:
    return 10; // NVSHMEM_SIGNAL_ADD
  }
  llvm_unreachable("unknown signal op");
}

static int32_t getNvshmemComparison(WaitComparison cmp) {
  switch (cmp) {
  case WaitComparison::eq:
    return 0; // NVSHMEM_CMP_EQ
  case WaitComparison::ne:
    return 1; // NVSHMEM_CMP_NE
  case WaitComparison::gt:
    return 2; // NVSHMEM_CMP_GT
  case WaitComparison::le:
    return 3; // NVSHMEM_CMP_LE
  case WaitComparison::lt:
    return 4; // NVSHMEM_CMP_LT
  case WaitComparison::ge:
    return 5; // NVSHMEM_CMP_GE
  }
  llvm_unreachable("unknown wait comparison");
}

/// NVSHMEM's device functions take generic pointers.
static Value castToGeneric(OpBuilder &b, Location loc, Value ptr) {
  auto type = cast<LLVM::LLVMPointerType>(ptr.getType());
  if (type.getAddressSpace() == 0)
    return ptr;
  return LLVM::AddrSpaceCastOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), ptr);
}

static constexpr StringLiteral kPutSignal = "nvshmemx_putmem_signal_block";
static constexpr StringLiteral kGet = "nvshmemx_getmem_block";
static constexpr StringLiteral kSignalWaitUntil = "nvshmem_signal_wait_until";

/// The NVSHMEM function `op` calls: its name and its type (as the wheel's
/// bitcode defines it: generic pointers, size_t as i64, int as i32).
static std::pair<StringRef, LLVM::LLVMFunctionType>
getNvshmemCallee(Operation *op) {
  MLIRContext *context = op->getContext();
  Type ptr = LLVM::LLVMPointerType::get(context);
  Type i32 = IntegerType::get(context, 32);
  Type i64 = IntegerType::get(context, 64);
  Type none = LLVM::LLVMVoidType::get(context);
  if (isa<PutSignalOp>(op))
    return {kPutSignal, LLVM::LLVMFunctionType::get(
                            none, {ptr, ptr, i64, ptr, i64, i32, i32})};
  if (isa<GetOp>(op))
    return {kGet, LLVM::LLVMFunctionType::get(none, {ptr, ptr, i64, i32})};
  assert(isa<SignalWaitOp>(op) && "not a one-sided op");
  return {kSignalWaitUntil, LLVM::LLVMFunctionType::get(i64, {ptr, i32, i64})};
}

LogicalResult NVVMTargetInfo::declareOneSidedFunction(Operation *op) const {
  auto [name, type] = getNvshmemCallee(op);
  OpBuilder b(op->getContext());
  return success(
      static_cast<bool>(getOrDeclareFunction(b, op, op->getLoc(), name, type)));
}

/// A call of the NVSHMEM function `name`, declared beforehand by
/// declareOneSidedFunction.
static LogicalResult callNvshmem(RewriterBase &rewriter, Location loc,
                                 StringRef name, ArrayRef<Value> args) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<LLVM::LLVMFuncOp>(
      rewriter.getInsertionBlock()->getParentOp(),
      StringAttr::get(rewriter.getContext(), name));
  if (!callee)
    return emitError(loc) << "'" << name << "' is not declared";
  LLVM::CallOp::create(rewriter, loc, callee, args);
  return success();
}

LogicalResult NVVMTargetInfo::createPutSignal(
    RewriterBase &rewriter, Location loc, Value dest, Value src, Value bytes,
    Value signalPtr, Value signal, SignalOp sigOp, Value rank) const {
  Type i32 = rewriter.getI32Type();
  Value op = LLVM::ConstantOp::create(
      rewriter, loc, i32,
      rewriter.getI32IntegerAttr(getNvshmemSignalOp(sigOp)));
  return callNvshmem(
      rewriter, loc, kPutSignal,
      {castToGeneric(rewriter, loc, dest), castToGeneric(rewriter, loc, src),
       bytes, castToGeneric(rewriter, loc, signalPtr), signal, op, rank});
}

LogicalResult NVVMTargetInfo::createGet(RewriterBase &rewriter, Location loc,
                                        Value dest, Value src, Value bytes,
                                        Value rank) const {
  return callNvshmem(rewriter, loc, kGet,
                     {castToGeneric(rewriter, loc, dest),
                      castToGeneric(rewriter, loc, src), bytes, rank});
}

LogicalResult NVVMTargetInfo::createSignalWaitUntil(RewriterBase &rewriter,
                                                    Location loc,
                                                    Value signalPtr,
                                                    WaitComparison cmp,
                                                    Value value) const {
  Value code = LLVM::ConstantOp::create(
      rewriter, loc, rewriter.getI32Type(),
      rewriter.getI32IntegerAttr(getNvshmemComparison(cmp)));
  // The signal's value is returned; the token, not it, orders what follows.
  return callNvshmem(rewriter, loc, kSignalWaitUntil,
                     {castToGeneric(rewriter, loc, signalPtr), code, value});
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
