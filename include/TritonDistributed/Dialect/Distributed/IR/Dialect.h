//===- Dialect.h - the `distributed` dialect --------------------*- C++ -*-===//
//
// The one header users of the dialect include: the dialect, its token type,
// enums and ops.
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_DIALECT_DISTRIBUTED_IR_DIALECT_H
#define TRITON_DIST_DIALECT_DISTRIBUTED_IR_DIALECT_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace triton_dist {
/// The largest world size: the length of the runtime context's heap-base
/// table (docs/abi.md). A rank known at compile time must be below it.
inline constexpr unsigned kMaxRanks = 256;
} // namespace triton_dist
} // namespace mlir

#include "TritonDistributed/Dialect/Distributed/IR/DistributedDialect.h.inc"
#include "TritonDistributed/Dialect/Distributed/IR/DistributedEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "TritonDistributed/Dialect/Distributed/IR/DistributedTypes.h.inc"

#define GET_OP_CLASSES
#include "TritonDistributed/Dialect/Distributed/IR/DistributedOps.h.inc"

#endif // TRITON_DIST_DIALECT_DISTRIBUTED_IR_DIALECT_H
