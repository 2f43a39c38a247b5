//===- RuntimeContext.h - the per-module runtime context --------*- C++ -*-===//
//
// The external global the runtime fills once per loaded module (docs/abi.md):
//
//   @__triton_dist_context = externally_initialized addrspace(1) global
//                            { i32, i32, i64, [256 x i64], i32, i32 }
//                            zeroinitializer
//
// holding this rank, the world size, the heap size, the heap base of every
// rank, this rank's rank on its node and the number of ranks on its node
// (ABI v3: 2072 bytes, heap_bases at byte 16, local_rank at byte 2064).
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_RUNTIMECONTEXT_H
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_RUNTIMECONTEXT_H

#include "TritonDistributed/Dialect/Distributed/IR/Dialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir {
namespace triton_dist {

/// The symbol name of the context global.
inline constexpr llvm::StringLiteral kContextSymbol = "__triton_dist_context";
/// The length of the heap_bases array is kMaxRanks (Dialect.h).
/// The address space of the context and of symmetric heaps (global memory).
inline constexpr unsigned kGlobalAddressSpace = 1;

/// `!llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>`: rank,
/// num_ranks, heap_size, heap_bases, local_rank, local_num_ranks.
LLVM::LLVMStructType getContextType(MLIRContext *context);

/// Returns the `@__triton_dist_context` of `symbolTable` (a module: the nearest
/// symbol table of the ops that read it), inserting the definition the ABI
/// prescribes when it has no such symbol. A symbol of that name with another
/// type, address space or kind gets a located error and failure.
FailureOr<LLVM::GlobalOp> getOrInsertContextGlobal(Operation *symbolTable);

/// The symbol name of the wait watchdog's record (docs/abi.md): a separate
/// global, so that the context keeps the size the runtime writes.
inline constexpr llvm::StringLiteral kWaitTimeoutSymbol =
    "__triton_dist_wait_timeout";

/// The fields of the watchdog record, in order (all naturally aligned, 56
/// bytes): state (i32: 0 none, 1 being written, 2 written), rank, program id,
/// flag index (i32 each), flag address, expected value, last value seen (i64
/// each, values sign-extended), comparison (i32, WaitComparison), flag width
/// in bits (i32), timeout in ns (i64).
enum WaitTimeoutField : int32_t {
  kTimeoutState = 0,
  kTimeoutRank,
  kTimeoutProgramId,
  kTimeoutFlagIndex,
  kTimeoutFlagAddress,
  kTimeoutExpected,
  kTimeoutLastSeen,
  kTimeoutComparison,
  kTimeoutFlagBits,
  kTimeoutNs,
};

/// `!llvm.struct<(i32, i32, i32, i32, i64, i64, i64, i32, i32, i64)>`.
LLVM::LLVMStructType getWaitTimeoutType(MLIRContext *context);

/// Returns the `@__triton_dist_wait_timeout` of `symbolTable`, inserting a
/// zero-initialized external global in address space 1 when missing; a
/// symbol of that name that is something else gets a located error.
FailureOr<LLVM::GlobalOp> getOrInsertWaitTimeoutGlobal(Operation *symbolTable);

/// The address of field `field` of the module's watchdog record
/// (`@__triton_dist_wait_timeout`).
Value getWaitTimeoutField(OpBuilder &b, Location loc, WaitTimeoutField field);

/// The address of field `field` of the watchdog record at `record` (a
/// `!llvm.ptr<1>`: the host-mapped record of the runtime-timeout mode).
Value getWaitTimeoutField(OpBuilder &b, Location loc, Value record,
                          WaitTimeoutField field);

/// The symbol name of the runtime-timeout mode's settings (docs/abi.md): what
/// the runtime writes into every loaded module that holds it, like the
/// context.
inline constexpr llvm::StringLiteral kWaitWatchdogSymbol =
    "__triton_dist_wait_watchdog";

/// `!llvm.struct<(i64, i64)>`: the timeout in nanoseconds (0: no watchdog)
/// and the device address of the record the first timed-out lane fills (a
/// 56-byte record in host-mapped pinned memory, so that the host reads it
/// after the trap has killed the GPU context).
LLVM::LLVMStructType getWaitWatchdogType(MLIRContext *context);

/// Returns the `@__triton_dist_wait_watchdog` of `symbolTable`, inserting a
/// zero-initialized externally initialized global in address space 1 when
/// missing; a symbol of that name that is something else gets a located error.
FailureOr<LLVM::GlobalOp> getOrInsertWaitWatchdogGlobal(Operation *symbolTable);

/// Invariant loads of the runtime-timeout settings: the timeout (i64) and the
/// record's address (`!llvm.ptr<1>`).
Value loadWaitWatchdogTimeoutNs(OpBuilder &b, Location loc);
Value loadWaitWatchdogRecord(OpBuilder &b, Location loc);

/// Loads of the context's fields at the builder's insertion point. The context
/// does not change while a kernel runs, so the loads are marked invariant.
Value loadContextRank(OpBuilder &b, Location loc);
Value loadContextNumRanks(OpBuilder &b, Location loc);
/// This rank's rank among the ranks of its node, and their number.
Value loadContextLocalRank(OpBuilder &b, Location loc);
Value loadContextLocalNumRanks(OpBuilder &b, Location loc);
/// The heap size in bytes, as an i64.
Value loadContextHeapSize(OpBuilder &b, Location loc);
/// heap_bases[rank] as an i64; `rank` is an i32.
Value loadContextHeapBase(OpBuilder &b, Location loc, Value rank);

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_RUNTIMECONTEXT_H
