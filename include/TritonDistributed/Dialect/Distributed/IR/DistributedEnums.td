//===- DistributedEnums.td - scopes and orderings ---------*- tablegen -*-===//
//
// The enumerations the ops take. Their spellings are the Python API's strings.
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_DIALECT_DISTRIBUTED_IR_ENUMS_TD
#define TRITON_DIST_DIALECT_DISTRIBUTED_IR_ENUMS_TD

include "mlir/IR/EnumAttr.td"

def Distributed_MemSyncScope : I32EnumAttr<"MemSyncScope",
    "the set of threads a wait synchronizes with", [
      I32EnumAttrCase<"cta", 0>,
      I32EnumAttrCase<"gpu", 1>,
      I32EnumAttrCase<"sys", 2>,
    ]> {
  let cppNamespace = "::mlir::triton_dist";
  let description = [{
    `cta`: threads of the same program (CTA / workgroup); `gpu`: the same GPU; `sys`: the whole system, other GPUs
    included. A flag written by another GPU needs `sys`.
  }];
}

def Distributed_MemSemantic : I32EnumAttr<"MemSemantic",
    "the ordering a wait establishes", [
      I32EnumAttrCase<"acquire", 0>,
      I32EnumAttrCase<"relaxed", 1>,
    ]> {
  let cppNamespace = "::mlir::triton_dist";
}

def Distributed_WaitComparison : I32EnumAttr<"WaitComparison",
    "how a wait compares each flag with the wait value", [
      I32EnumAttrCase<"eq", 0>,
      I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"ge", 2>,
      I32EnumAttrCase<"gt", 3>,
      I32EnumAttrCase<"le", 4>,
      I32EnumAttrCase<"lt", 5>,
    ]> {
  let cppNamespace = "::mlir::triton_dist";
  let description = [{
    A flag satisfies the wait when `flag <cmp> wait_value` holds, comparing the two as signed integers of the flag's
    width (as NVSHMEM's `signal_wait_until`). `ge` awaits a counter that peers add to: it returns however far the
    counter overshoots.
  }];
}

def Distributed_SignalOp : I32EnumAttr<"SignalOp",
    "how notify updates the flag", [
      I32EnumAttrCase<"set", 0>,
      I32EnumAttrCase<"add", 1>,
    ]> {
  let cppNamespace = "::mlir::triton_dist";
}

def Distributed_CommScope : I32EnumAttr<"CommScope",
    "where the notified rank may be", [
      I32EnumAttrCase<"gpu", 0>,
      I32EnumAttrCase<"intra_node", 1>,
      I32EnumAttrCase<"inter_node", 2>,
    ]> {
  let cppNamespace = "::mlir::triton_dist";
  let description = [{
    `gpu`: the flag is on this GPU (device-scope release); `intra_node` and `inter_node`: another GPU, reached over
    NVLink / xGMI / PCIe (system-scope release).
  }];
}

def Distributed_RankAxis : I32EnumAttr<"RankAxis",
    "which ranks a rank query counts", [
      I32EnumAttrCase<"world", 0>,
      I32EnumAttrCase<"local", 1>,
      I32EnumAttrCase<"node", 2>,
    ]> {
  let cppNamespace = "::mlir::triton_dist";
  let description = [{
    `world`: every rank (the context's `rank` / `num_ranks`); `local`: the ranks of this node (`local_rank` /
    `local_num_ranks`); `node`: the nodes (`rank / local_num_ranks` / `num_ranks / local_num_ranks`: every node holds
    the same number of consecutive ranks, torchrun's layout).
  }];
}

#endif // TRITON_DIST_DIALECT_DISTRIBUTED_IR_ENUMS_TD
