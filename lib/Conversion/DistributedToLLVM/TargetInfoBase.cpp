//===- TargetInfoBase.cpp - default target hooks --------------------------===//
//
// The hooks whose LLVM-dialect form is right on every target; a target
// overrides one when its backend does not honour it (NVPTX: release add).
//
//===----------------------------------------------------------------------===//

#include "TritonDistributed/Conversion/DistributedToLLVM/TargetInfoBase.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

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
