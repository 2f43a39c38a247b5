//===- Ops.cpp - verifiers of the `distributed` ops -----------------------===//

#include "TritonDistributed/Dialect/Distributed/IR/Dialect.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::triton_dist;

namespace {

// A rank known at compile time must name a rank: it cannot be negative, and
// the heap-base table has kMaxRanks entries.
LogicalResult verifyRankOperand(Operation *op, Value rank) {
  APInt value;
  if (!matchPattern(rank, m_ConstantInt(&value)))
    return success();
  if (value.isNegative())
    return op->emitOpError()
           << "rank must be non-negative, got " << value.getSExtValue();
  if (value.uge(kMaxRanks))
    return op->emitOpError()
           << "rank must be below " << kMaxRanks
           << " (the largest world size the runtime context describes), got "
           << value.getZExtValue();
  return success();
}

// A byte count known at compile time is a size_t of the one-sided library: a
// negative i64 would be read as a copy of more than 8 EiB.
LogicalResult verifyByteCount(Operation *op, Value bytes) {
  APInt value;
  if (matchPattern(bytes, m_ConstantInt(&value)) && value.isNegative())
    return op->emitOpError()
           << "bytes must be non-negative, got " << value.getSExtValue();
  return success();
}

} // namespace

LogicalResult SymmAtOp::verify() { return verifyRankOperand(*this, getRank()); }

LogicalResult WaitOp::verify() {
  APInt count;
  if (matchPattern(getNumBarriers(), m_ConstantInt(&count)) &&
      !count.isStrictlyPositive())
    return emitOpError() << "num_barriers must be positive, got "
                         << count.getSExtValue();
  if (std::optional<int64_t> timeout = getTimeoutNs(); timeout && *timeout <= 0)
    return emitOpError() << "timeout_ns must be positive, got " << *timeout;
  // A wait no flag value satisfies would spin forever.
  APInt value;
  if (matchPattern(getWaitValue(), m_ConstantInt(&value))) {
    WaitComparison cmp = getCmp();
    if ((cmp == WaitComparison::gt && value.isMaxSignedValue()) ||
        (cmp == WaitComparison::lt && value.isMinSignedValue()))
      return emitOpError() << "no i" << value.getBitWidth() << " flag is "
                           << (cmp == WaitComparison::gt ? "greater" : "less")
                           << " than " << value.getSExtValue()
                           << ": the wait (cmp " << stringifyEnum(cmp)
                           << ") could never return";
  }
  return success();
}

LogicalResult NotifyOp::verify() { return verifyRankOperand(*this, getRank()); }

LogicalResult PutSignalOp::verify() {
  if (failed(verifyRankOperand(*this, getRank())))
    return failure();
  return verifyByteCount(*this, getBytes());
}

LogicalResult GetOp::verify() {
  if (failed(verifyRankOperand(*this, getRank())))
    return failure();
  return verifyByteCount(*this, getBytes());
}

LogicalResult SignalWaitOp::verify() {
  // Signals are compared unsigned: a wait no signal value satisfies would
  // spin forever.
  APInt value;
  if (!matchPattern(getValue(), m_ConstantInt(&value)))
    return success();
  WaitComparison cmp = getCmp();
  if ((cmp == WaitComparison::gt && value.isMaxValue()) ||
      (cmp == WaitComparison::lt && value.isMinValue()))
    return emitOpError() << "no unsigned 64-bit signal is "
                         << (cmp == WaitComparison::gt ? "greater" : "less")
                         << " than " << value.getZExtValue()
                         << ": the wait (cmp " << stringifyEnum(cmp)
                         << ") could never return";
  return success();
}

#define GET_OP_CLASSES
#include "TritonDistributed/Dialect/Distributed/IR/DistributedOps.cpp.inc"
