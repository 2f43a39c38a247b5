//===- DistributedOps.td - the `distributed` ops -----------*- tablegen -*-===//
//
// Operand order, names and defaults follow the kernel-author API (triton_dist.language):
//   rank(axis="world"), num_ranks(axis="world"), symm_at(ptr, rank),
//   wait(barrierPtrs, numBarriers, scope, semantic, waitValue=1, cmp="eq"), consume_token(value, token),
//   notify(ptr, rank, signal=1, sig_op="set", comm_scope="inter_node"),
//   put_signal(dest, src, nbytes, signal_ptr, signal, rank, sig_op="set"), get(dest, src, nbytes, rank),
//   signal_wait(signal_ptr, value, cmp="eq").
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_DIALECT_DISTRIBUTED_IR_OPS_TD
#define TRITON_DIST_DIALECT_DISTRIBUTED_IR_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Dialect/LLVMIR/LLVMTypes.td"
include "TritonDistributed/Dialect/Distributed/IR/DistributedDialect.td"
include "TritonDistributed/Dialect/Distributed/IR/DistributedEnums.td"
include "TritonDistributed/Dialect/Distributed/IR/DistributedTypes.td"

// Symmetric objects live in global memory: generic (0) or global (1) LLVM pointers.
def Distributed_Ptr : Type<
    And<[LLVM_AnyPointer.predicate,
         CPred<"::llvm::cast<::mlir::LLVM::LLVMPointerType>($_self).getAddressSpace() <= 1">]>,
    "LLVM pointer to global memory (address space 0 or 1)", "::mlir::LLVM::LLVMPointerType">;
defvar Distributed_FlagValue = AnyTypeOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// get_rank / get_num_ranks
//===----------------------------------------------------------------------===//

class Distributed_RankQueryOp<string mnemonic> : Distributed_Op<mnemonic, [Pure]> {
  let arguments = (ins DefaultValuedAttr<Distributed_RankAxis, "::mlir::triton_dist::RankAxis::world">:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "(`axis` `(` $axis^ `)`)? attr-dict";
}

def Distributed_GetRankOp : Distributed_RankQueryOp<"get_rank"> {
  let summary = "the rank of this process";
  let description = [{
    The rank of the calling process along `axis`: `world` (the default, elided when printed) is its rank in the
    whole world, `local` its rank among the ranks of its node, `node` the index of its node. It is fixed for the
    lifetime of a kernel launch, so the op is pure.

    ```mlir
    %me = distributed.get_rank
    %local = distributed.get_rank axis(local)
    %node = distributed.get_rank axis(node)
    ```
  }];
}

def Distributed_GetNumRanksOp : Distributed_RankQueryOp<"get_num_ranks"> {
  let summary = "the number of ranks";
  let description = [{
    The number of ranks along `axis`: `world` (the default) is the world size, `local` the number of ranks on this
    node, `node` the number of nodes.

    ```mlir
    %world = distributed.get_num_ranks
    %nodes = distributed.get_num_ranks axis(node)
    ```
  }];
}

//===----------------------------------------------------------------------===//
// symm_at
//===----------------------------------------------------------------------===//

def Distributed_SymmAtOp : Distributed_Op<"symm_at", [Pure, AllTypesMatch<["ptr", "result"]>]> {
  let summary = "the address of the same symmetric object on another rank";
  let description = [{
    `%ptr` points into this rank's symmetric heap; the result points to the same byte of rank `%rank`'s heap, as
    mapped in this process: `ptr - heap_base[me] + heap_base[rank]`. Heap bases are 4096-byte aligned, so the
    result keeps the alignment of `%ptr`. Loads and stores through the result are ordinary memory accesses.

    ```mlir
    %peer_slot = distributed.symm_at %slot, %peer : !llvm.ptr<1>
    ```
  }];
  let arguments = (ins Distributed_Ptr:$ptr, I32:$rank);
  let results = (outs Distributed_Ptr:$result);
  let assemblyFormat = "$ptr `,` $rank attr-dict `:` qualified(type($ptr))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// heap_offset / get_heap_size
//===----------------------------------------------------------------------===//

def Distributed_HeapOffsetOp : Distributed_Op<"heap_offset", [Pure]> {
  let summary = "the byte offset of a pointer in this rank's symmetric heap";
  let description = [{
    `ptr - heap_base[me]` as an i64: the offset at which every rank holds the same symmetric object. It lies in
    `[0, heap_size)` exactly when `%ptr` points into this rank's heap (compare with `distributed.get_heap_size`).

    ```mlir
    %offset = distributed.heap_offset %slot : !llvm.ptr<1>
    ```
  }];
  let arguments = (ins Distributed_Ptr:$ptr);
  let results = (outs I64:$offset);
  let assemblyFormat = "$ptr attr-dict `:` qualified(type($ptr))";
}

def Distributed_GetHeapSizeOp : Distributed_Op<"get_heap_size", [Pure]> {
  let summary = "the size in bytes of every rank's symmetric heap";
  let description = [{
    The size of the symmetric heap (the same on every rank), fixed for the lifetime of a kernel launch.

    ```mlir
    %bytes = distributed.get_heap_size
    ```
  }];
  let results = (outs I64:$result);
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// wait
//===----------------------------------------------------------------------===//

def Distributed_WaitOp : Distributed_Op<"wait", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "spin until flags compare true with a value";
  let description = [{
    Returns once each of the `%num_barriers` consecutive flag words starting at `%barriers` (words of the type of
    `%wait_value`) satisfies `flag <cmp> %wait_value`, compared as signed integers; `cmp` defaults to `eq` and is
    printed only when it is not `eq`. Every thread of the program (CTA / workgroup) executes the op and returns
    together. With `semantic(acquire)`, every thread is ordered, at `scope`, after the writes that preceded the
    release that set the flags; with `semantic(relaxed)`, only the flag values are guaranteed.

    The returned token feeds `distributed.consume_token`. The op is modelled as reading and writing memory, so
    no memory access moves across it.

    ```mlir
    %token = distributed.wait %flags, %n, %epoch scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
    %counted = distributed.wait %counter, %one, %expected scope(sys) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i64
    ```

    A comparison that no flag value can satisfy (`gt` the largest or `lt` the smallest signed value, with a constant
    `%wait_value`) would spin forever and is rejected by the verifier.

    Watchdog: with `timeout_ns` (or the lowering's `wait-timeout-ns` option), a polling lane that has waited longer
    than that many nanoseconds writes what it waited for into the global `@__triton_dist_wait_timeout` (rank,
    program id, flag index and address, expected and last seen value, comparison; docs/abi.md) and traps, so a
    stuck wait stops the kernel instead of freezing the GPU.

    ```mlir
    %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) {timeout_ns = 5000000000 : i64} : !llvm.ptr<1>, i32
    ```
  }];
  let arguments = (ins Distributed_Ptr:$barriers, I32:$num_barriers, Distributed_FlagValue:$wait_value,
                       Distributed_MemSyncScope:$scope, Distributed_MemSemantic:$semantic,
                       DefaultValuedAttr<Distributed_WaitComparison,
                                         "::mlir::triton_dist::WaitComparison::eq">:$cmp,
                       OptionalAttr<I64Attr>:$timeout_ns);
  let results = (outs Distributed_TokenType:$token);
  let assemblyFormat = [{
    $barriers `,` $num_barriers `,` $wait_value `scope` `(` $scope `)` `semantic` `(` $semantic `)`
    (`cmp` `(` $cmp^ `)`)? attr-dict `:` qualified(type($barriers)) `,` type($wait_value)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// consume_token
//===----------------------------------------------------------------------===//

def Distributed_ConsumeTokenOp : Distributed_Op<"consume_token", [Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "tie a value to a wait";
  let description = [{
    Returns `%value`, made data-dependent on `%token`: anything computed from the result (a load through a
    pointer, say) cannot be hoisted above the `distributed.wait` that produced the token, by MLIR or by LLVM.
    The lowering hides the identity behind an opaque register copy, so it is never folded away.

    ```mlir
    %inbox = distributed.consume_token %slot, %token : !llvm.ptr<1>
    ```
  }];
  let arguments = (ins AnyTypeOf<[I32, I64, F32, F64, LLVM_AnyPointer]>:$value, Distributed_TokenType:$token);
  let results = (outs AnyTypeOf<[I32, I64, F32, F64, LLVM_AnyPointer]>:$result);
  let assemblyFormat = "$value `,` $token attr-dict `:` qualified(type($value))";
}

//===----------------------------------------------------------------------===//
// notify
//===----------------------------------------------------------------------===//

def Distributed_NotifyOp : Distributed_Op<"notify", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "set or add to a flag on another rank, with release ordering";
  let description = [{
    Every thread of the program executes the op. The program first synchronizes, then the lanes of its first
    warp / wavefront write (`sig_op(set)`, each the same value) or one thread atomically adds (`sig_op(add)`)
    `%signal` to the flag at `symm_at(%ptr, %rank)`, with
    release ordering: every write the program made before the op is visible to a thread that observes the flag
    with acquire ordering. `comm_scope(gpu)` releases at device scope (the flag is on this GPU);
    `comm_scope(intra_node)` and `comm_scope(inter_node)` at system scope.

    ```mlir
    distributed.notify %flag, %peer, %one sig_op(set) comm_scope(intra_node) : !llvm.ptr<1>, i32
    ```
  }];
  let arguments = (ins Distributed_Ptr:$ptr, I32:$rank, Distributed_FlagValue:$signal,
                       DefaultValuedAttr<Distributed_SignalOp, "::mlir::triton_dist::SignalOp::set">:$sig_op,
                       DefaultValuedAttr<Distributed_CommScope,
                                         "::mlir::triton_dist::CommScope::inter_node">:$comm_scope);
  let assemblyFormat = [{
    $ptr `,` $rank `,` $signal `sig_op` `(` $sig_op `)` `comm_scope` `(` $comm_scope `)` attr-dict
    `:` qualified(type($ptr)) `,` type($signal)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Inter-node data movement: put_signal / get / signal_wait
//===----------------------------------------------------------------------===//

def Distributed_PutSignalOp : Distributed_Op<"put_signal", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "copy bytes to another rank, then set or add to a 64-bit signal there";
  let description = [{
    One-sided put with signal, for ranks that load/store cannot reach (another node). Every thread of the program
    executes the op: the program synchronizes, then copies `%bytes` bytes from `%src` (this rank's memory) to
    `%dest` on rank `%rank`, and, once those bytes are delivered, updates the 64-bit signal `%signal_ptr` on rank
    `%rank` with `%signal` (`sig_op(set)`: store, `sig_op(add)`: atomic add). `%dest` and `%signal_ptr` are this
    rank's addresses of symmetric objects (as `symm_at` takes them); the runtime's one-sided library (NVSHMEM on
    NVIDIA) translates them to `%rank`'s. A rank that waits for the signal with `distributed.signal_wait` sees the
    bytes. The op returns when `%src` may be reused, not when the data has arrived.

    ```mlir
    distributed.put_signal %dest, %src, %bytes, %sig, %one, %peer sig_op(add) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
    ```

    Lowered only for NVIDIA (`nvshmemx_putmem_signal_block`); the ROCDL lowering rejects it with a diagnostic.
  }];
  let arguments = (ins Distributed_Ptr:$dest, Distributed_Ptr:$src, I64:$bytes, Distributed_Ptr:$signal_ptr,
                       I64:$signal, I32:$rank,
                       DefaultValuedAttr<Distributed_SignalOp, "::mlir::triton_dist::SignalOp::set">:$sig_op);
  let assemblyFormat = [{
    $dest `,` $src `,` $bytes `,` $signal_ptr `,` $signal `,` $rank `sig_op` `(` $sig_op `)` attr-dict
    `:` qualified(type($dest)) `,` qualified(type($src)) `,` qualified(type($signal_ptr))
  }];
  let hasVerifier = 1;
}

def Distributed_GetOp : Distributed_Op<"get", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "copy bytes from another rank into this rank's memory";
  let description = [{
    One-sided get. Every thread of the program executes the op: the program synchronizes, copies `%bytes` bytes
    from `%src` on rank `%rank` (`%src` is this rank's address of a symmetric object) to `%dest` (this rank's
    memory), and synchronizes again, so every thread of the program may read `%dest` after the op. The op is
    blocking: the bytes have arrived when it returns.

    ```mlir
    distributed.get %dest, %src, %bytes, %peer : !llvm.ptr<1>, !llvm.ptr<1>
    ```

    Lowered only for NVIDIA (`nvshmemx_getmem_block`); the ROCDL lowering rejects it with a diagnostic.
  }];
  let arguments = (ins Distributed_Ptr:$dest, Distributed_Ptr:$src, I64:$bytes, I32:$rank);
  let assemblyFormat = [{
    $dest `,` $src `,` $bytes `,` $rank attr-dict `:` qualified(type($dest)) `,` qualified(type($src))
  }];
  let hasVerifier = 1;
}

def Distributed_SignalWaitOp : Distributed_Op<"signal_wait", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "spin until this rank's 64-bit signal compares true with a value";
  let description = [{
    Returns once the 64-bit signal at `%signal_ptr` (this rank's memory, updated by peers' `distributed.put_signal`)
    satisfies `signal <cmp> %value`, compared as **unsigned** 64-bit integers (NVSHMEM's `signal_wait_until` on
    `uint64_t`; `distributed.wait` compares signed). Every thread of the program executes the op and returns
    together; data that the signalling put delivered is visible to all of them. `cmp` defaults to `eq`.

    ```mlir
    %token = distributed.signal_wait %sig, %expected cmp(ge) : !llvm.ptr<1>
    ```

    The token feeds `distributed.consume_token`, as a `distributed.wait`'s does. A comparison no unsigned value
    satisfies (`gt` 2^64-1, `lt` 0, with a constant `%value`) is rejected by the verifier. Lowered only for NVIDIA
    (`nvshmem_signal_wait_until`).
  }];
  let arguments = (ins Distributed_Ptr:$signal_ptr, I64:$value,
                       DefaultValuedAttr<Distributed_WaitComparison,
                                         "::mlir::triton_dist::WaitComparison::eq">:$cmp);
  let results = (outs Distributed_TokenType:$token);
  let assemblyFormat = [{
    $signal_ptr `,` $value (`cmp` `(` $cmp^ `)`)? attr-dict `:` qualified(type($signal_ptr))
  }];
  let hasVerifier = 1;
}

#endif // TRITON_DIST_DIALECT_DISTRIBUTED_IR_OPS_TD
