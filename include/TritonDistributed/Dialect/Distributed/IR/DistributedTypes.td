//===- DistributedTypes.td - the token type ---------------*- tablegen -*-===//

#ifndef TRITON_DIST_DIALECT_DISTRIBUTED_IR_TYPES_TD
#define TRITON_DIST_DIALECT_DISTRIBUTED_IR_TYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "TritonDistributed/Dialect/Distributed/IR/DistributedDialect.td"

def Distributed_TokenType : TypeDef<TritonDistributed_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "token returned by distributed.wait";
  let description = [{
    Produced by `distributed.wait` and accepted by `distributed.consume_token`. A value passed through
    `consume_token` with this token depends on the wait, so nothing computed from it can be moved above the wait.
    Lowers to `i32`.
  }];
}

#endif // TRITON_DIST_DIALECT_DISTRIBUTED_IR_TYPES_TD
