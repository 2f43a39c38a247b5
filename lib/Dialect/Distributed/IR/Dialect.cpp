//===- Dialect.cpp - the `distributed` dialect and its token type ---------===//

#include "TritonDistributed/Dialect/Distributed/IR/Dialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::triton_dist;

#include "TritonDistributed/Dialect/Distributed/IR/DistributedDialect.cpp.inc"
#include "TritonDistributed/Dialect/Distributed/IR/DistributedEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "TritonDistributed/Dialect/Distributed/IR/DistributedTypes.cpp.inc"

void TritonDistributedDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "TritonDistributed/Dialect/Distributed/IR/DistributedTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "TritonDistributed/Dialect/Distributed/IR/DistributedOps.cpp.inc"
      >();
}
