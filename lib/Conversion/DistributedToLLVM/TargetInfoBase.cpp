//===- TargetInfoBase.cpp - default target hooks --------------------------===//
//
// The hooks whose LLVM-dialect form is right on every target; a target
// overrides one when its backend does not honour it (NVPTX: release add).
//
//===----------------------------------------------------------------------===//

#include "TritonDistributed/Conversion/DistributedToLLVM/TargetInfoBase.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::triton_dist;

TargetInfoBase::~TargetInfoBase() = default;

static unsigned getByteSize(Type type) {
  return type.getIntOrFloatBitWidth() / 8;
}

Value TargetInfoBase::createPollLoad(OpBuilder &b, Location loc, Type type,
                                     Value ptr, MemSyncScope scope,
                                     MemSemantic semantic) const {
  LLVM::AtomicOrdering ordering = semantic == MemSemantic::acquire
                                      ? LLVM::AtomicOrdering::acquire
                                      : LLVM::AtomicOrdering::monotonic;
  return LLVM::LoadOp::create(b, loc, type, ptr, getByteSize(type),
                              /*isVolatile=*/false, /*isNonTemporal=*/false,
                              /*isInvariant=*/false,
                              /*isInvariantGroup=*/false, ordering,
                              getSyncScope(scope));
}

void TargetInfoBase::createReleaseStore(OpBuilder &b, Location loc, Value ptr,
                                        Value value, MemSyncScope scope) const {
  LLVM::StoreOp::create(b, loc, value, ptr, getByteSize(value.getType()),
                        /*isVolatile=*/false, /*isNonTemporal=*/false,
                        /*isInvariantGroup=*/false,
                        LLVM::AtomicOrdering::release, getSyncScope(scope));
}

void TargetInfoBase::createReleaseAdd(OpBuilder &b, Location loc, Value ptr,
                                      Value value, MemSyncScope scope) const {
  LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, ptr, value,
                            LLVM::AtomicOrdering::release, getSyncScope(scope),
                            getByteSize(value.getType()));
}

Value TargetInfoBase::createOpaqueCopy(OpBuilder &b, Location loc, Value value,
                                       Value token) const {
  // "=<reg>,0,<reg>": the result is tied to operand 0 (the value), and the
  // token is a further input. No instruction: the register keeps its value.
  unsigned bitWidth = value.getType().getIntOrFloatBitWidth();
  std::string constraints = ("=" + getRegisterConstraint(bitWidth) + ",0," +
                             getRegisterConstraint(32))
                                .str();
  auto copy = LLVM::InlineAsmOp::create(
      b, loc, value.getType(), ValueRange{value, token}, /*asm_string=*/"",
      constraints, /*has_side_effects=*/false, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None,
      /*asm_dialect=*/LLVM::AsmDialectAttr(), /*operand_attrs=*/ArrayAttr());
  return copy.getRes();
}

LogicalResult TargetInfoBase::createPutSignal(RewriterBase &, Location, Value,
                                              Value, Value, Value, Value,
                                              SignalOp, Value) const {
  llvm_unreachable("the target has no one-sided library");
}

LogicalResult TargetInfoBase::createGet(RewriterBase &, Location, Value, Value,
                                        Value, Value) const {
  llvm_unreachable("the target has no one-sided library");
}

LogicalResult TargetInfoBase::createSignalWaitUntil(RewriterBase &, Location,
                                                    Value, WaitComparison,
                                                    Value) const {
  llvm_unreachable("the target has no one-sided library");
}

LLVM::LLVMFuncOp
TargetInfoBase::getOrDeclareFunction(OpBuilder &b, Operation *from,
                                     Location loc, StringRef name,
                                     LLVM::LLVMFunctionType type) {
  Operation *scope = SymbolTable::getNearestSymbolTable(from);
  if (!scope)
    return {};
  Operation *existing = SymbolTable::lookupSymbolIn(scope, name);
  if (auto function = dyn_cast_or_null<LLVM::LLVMFuncOp>(existing)) {
    if (function.getFunctionType() == type)
      return function;
    emitError(loc) << "'" << name << "' is already declared as "
                   << function.getFunctionType() << ", but the lowering calls "
                   << type;
    return {};
  }
  if (existing) {
    emitError(loc) << "'" << name
                   << "' names a symbol that is not an llvm.func, but the "
                      "lowering calls the library function of that name";
    return {};
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&scope->getRegion(0).front());
  return LLVM::LLVMFuncOp::create(b, loc, name, type);
}
