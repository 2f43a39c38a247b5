//===- DistributedDialect.td - the `distributed` dialect ---*- tablegen -*-===//
//
// The dialect definition and the base class of its ops.
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_DIALECT_DISTRIBUTED_IR_DIALECT_TD
#define TRITON_DIST_DIALECT_DISTRIBUTED_IR_DIALECT_TD

include "mlir/IR/OpBase.td"

def TritonDistributed_Dialect : Dialect {
  let name = "distributed";
  let cppNamespace = "::mlir::triton_dist";
  let summary = "Multi-GPU signalling for kernels that overlap computation with communication";
  let description = [{
    The `distributed` dialect names the few operations a kernel needs to talk to the same kernel running on other
    GPUs: which rank it is (`get_rank`, `get_num_ranks`), where a symmetric object lives on another rank
    (`symm_at`), waiting for flags to reach a value (`wait`, which returns a `!distributed.token`), tying later
    reads to that wait (`consume_token`), and raising a flag on another rank (`notify`).

    Every rank allocates its symmetric objects at the same offset of its own symmetric heap. The lowering passes
    (`--convert-distributed-to-nvvm`, `--convert-distributed-to-rocdl`) read a per-module runtime context, the
    external global `@__triton_dist_context` holding this rank, the world size and the heap base of every rank,
    that the runtime fills after the module is loaded.

    Pointers are LLVM pointers in the generic (0) or global (1) address space: symmetric objects live in global
    memory.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
  let useDefaultTypePrinterParser = 1;
}

class Distributed_Op<string mnemonic, list<Trait> traits = []>
    : Op<TritonDistributed_Dialect, mnemonic, traits>;

#endif // TRITON_DIST_DIALECT_DISTRIBUTED_IR_DIALECT_TD
