//===- RuntimeContext.cpp - the per-module runtime context ----------------===//

#include "TritonDistributed/Conversion/DistributedToLLVM/RuntimeContext.h"

#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::triton_dist;

namespace {
enum ContextField : int32_t {
  kRankField = 0,
  kNumRanksField = 1,
  kHeapSizeField = 2,
  kHeapBasesField = 3,
  kLocalRankField = 4,
  kLocalNumRanksField = 5
};

Type getGlobalPtrType(MLIRContext *context) {
  return LLVM::LLVMPointerType::get(context, kGlobalAddressSpace);
}

Value getContextAddress(OpBuilder &b, Location loc) {
  return LLVM::AddressOfOp::create(b, loc, getGlobalPtrType(b.getContext()),
                                   kContextSymbol);
}

Value loadField(OpBuilder &b, Location loc, Type type,
                ArrayRef<LLVM::GEPArg> indices) {
  MLIRContext *context = b.getContext();
  Value field = LLVM::GEPOp::create(
      b, loc, getGlobalPtrType(context), getContextType(context),
      getContextAddress(b, loc), indices, LLVM::GEPNoWrapFlags::inbounds);
  return LLVM::LoadOp::create(b, loc, type, field,
                              type.getIntOrFloatBitWidth() / 8,
                              /*isVolatile=*/false, /*isNonTemporal=*/false,
                              /*isInvariant=*/true);
}
/// The module's runtime-written global `name` of `type` (`role` names it in
/// diagnostics): an existing symbol of that name must be a non-constant
/// external global of `type` in the global address space; a missing one is
/// inserted zero-initialized. Either way it is marked externally initialized:
/// the runtime writes it after the module is loaded, so no optimizer may fold
/// its initializer into loads.
FailureOr<LLVM::GlobalOp> getOrInsertRuntimeGlobal(Operation *symbolTable,
                                                   StringRef name,
                                                   LLVM::LLVMStructType type,
                                                   StringRef role) {
  if (Operation *existing = SymbolTable::lookupSymbolIn(symbolTable, name)) {
    auto global = dyn_cast<LLVM::GlobalOp>(existing);
    if (!global)
      return existing->emitError() << "'" << name << "' names " << role
                                   << " and must be an llvm.mlir.global";
    if (global.getGlobalType() != type ||
        global.getAddrSpace() != kGlobalAddressSpace || global.getConstant() ||
        global.getLinkage() != LLVM::Linkage::External)
      return global.emitError()
             << role << " must be a non-constant external global of type "
             << type << " in address space " << kGlobalAddressSpace;
    if (!global.getExternallyInitialized() &&
        (global.getValue() || !global.getInitializerRegion().empty()))
      global.setExternallyInitialized(true);
    return global;
  }

  OpBuilder b = OpBuilder::atBlockBegin(&symbolTable->getRegion(0).front());
  Location loc = symbolTable->getLoc();
  auto global = LLVM::GlobalOp::create(
      b, loc, type, /*isConstant=*/false, LLVM::Linkage::External, name,
      /*value=*/Attribute(), /*alignment=*/8, kGlobalAddressSpace);
  global.setExternallyInitialized(true);
  b.createBlock(&global.getInitializerRegion());
  Value zero = LLVM::ZeroOp::create(b, loc, type);
  LLVM::ReturnOp::create(b, loc, zero);
  return global;
}
} // namespace

LLVM::LLVMStructType mlir::triton_dist::getContextType(MLIRContext *context) {
  auto i32 = IntegerType::get(context, 32);
  auto i64 = IntegerType::get(context, 64);
  return LLVM::LLVMStructType::getLiteral(
      context,
      {i32, i32, i64, LLVM::LLVMArrayType::get(i64, kMaxRanks), i32, i32});
}

FailureOr<LLVM::GlobalOp>
mlir::triton_dist::getOrInsertContextGlobal(Operation *symbolTable) {
  return getOrInsertRuntimeGlobal(symbolTable, kContextSymbol,
                                  getContextType(symbolTable->getContext()),
                                  "the triton-dist runtime context");
}

Value mlir::triton_dist::loadContextRank(OpBuilder &b, Location loc) {
  return loadField(b, loc, b.getI32Type(), {0, kRankField});
}

Value mlir::triton_dist::loadContextNumRanks(OpBuilder &b, Location loc) {
  return loadField(b, loc, b.getI32Type(), {0, kNumRanksField});
}

Value mlir::triton_dist::loadContextLocalRank(OpBuilder &b, Location loc) {
  return loadField(b, loc, b.getI32Type(), {0, kLocalRankField});
}

Value mlir::triton_dist::loadContextLocalNumRanks(OpBuilder &b, Location loc) {
  return loadField(b, loc, b.getI32Type(), {0, kLocalNumRanksField});
}

Value mlir::triton_dist::loadContextHeapSize(OpBuilder &b, Location loc) {
  return loadField(b, loc, b.getI64Type(), {0, kHeapSizeField});
}

Value mlir::triton_dist::loadContextHeapBase(OpBuilder &b, Location loc,
                                             Value rank) {
  return loadField(b, loc, b.getI64Type(), {0, kHeapBasesField, rank});
}

LLVM::LLVMStructType
mlir::triton_dist::getWaitTimeoutType(MLIRContext *context) {
  auto i32 = IntegerType::get(context, 32);
  auto i64 = IntegerType::get(context, 64);
  return LLVM::LLVMStructType::getLiteral(
      context, {i32, i32, i32, i32, i64, i64, i64, i32, i32, i64});
}

FailureOr<LLVM::GlobalOp>
mlir::triton_dist::getOrInsertWaitTimeoutGlobal(Operation *symbolTable) {
  return getOrInsertRuntimeGlobal(symbolTable, kWaitTimeoutSymbol,
                                  getWaitTimeoutType(symbolTable->getContext()),
                                  "the triton-dist wait watchdog's record");
}

Value mlir::triton_dist::getWaitTimeoutField(OpBuilder &b, Location loc,
                                             WaitTimeoutField field) {
  Value record = LLVM::AddressOfOp::create(
      b, loc, getGlobalPtrType(b.getContext()), kWaitTimeoutSymbol);
  return getWaitTimeoutField(b, loc, record, field);
}

Value mlir::triton_dist::getWaitTimeoutField(OpBuilder &b, Location loc,
                                             Value record,
                                             WaitTimeoutField field) {
  MLIRContext *context = b.getContext();
  return LLVM::GEPOp::create(
      b, loc, getGlobalPtrType(context), getWaitTimeoutType(context), record,
      ArrayRef<LLVM::GEPArg>{0, field}, LLVM::GEPNoWrapFlags::inbounds);
}

LLVM::LLVMStructType
mlir::triton_dist::getWaitWatchdogType(MLIRContext *context) {
  auto i64 = IntegerType::get(context, 64);
  return LLVM::LLVMStructType::getLiteral(context, {i64, i64});
}

FailureOr<LLVM::GlobalOp>
mlir::triton_dist::getOrInsertWaitWatchdogGlobal(Operation *symbolTable) {
  return getOrInsertRuntimeGlobal(
      symbolTable, kWaitWatchdogSymbol,
      getWaitWatchdogType(symbolTable->getContext()),
      "the triton-dist wait watchdog's settings");
}

static Value loadWatchdogField(OpBuilder &b, Location loc, int32_t field) {
  MLIRContext *context = b.getContext();
  Value settings = LLVM::AddressOfOp::create(b, loc, getGlobalPtrType(context),
                                             kWaitWatchdogSymbol);
  Value address = LLVM::GEPOp::create(
      b, loc, getGlobalPtrType(context), getWaitWatchdogType(context), settings,
      ArrayRef<LLVM::GEPArg>{0, field}, LLVM::GEPNoWrapFlags::inbounds);
  return LLVM::LoadOp::create(b, loc, b.getI64Type(), address, /*alignment=*/8,
                              /*isVolatile=*/false, /*isNonTemporal=*/false,
                              /*isInvariant=*/true);
}

Value mlir::triton_dist::loadWaitWatchdogTimeoutNs(OpBuilder &b, Location loc) {
  return loadWatchdogField(b, loc, 0);
}

Value mlir::triton_dist::loadWaitWatchdogRecord(OpBuilder &b, Location loc) {
  return LLVM::IntToPtrOp::create(b, loc, getGlobalPtrType(b.getContext()),
                                  loadWatchdogField(b, loc, 1));
}
