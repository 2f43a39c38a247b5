// RUN: triton-dist-opt --convert-distributed-to-nvvm %s | FileCheck %s
// RUN: triton-dist-opt --convert-distributed-to-nvvm="tight-polls=4 max-sleep-ns=0" %s | FileCheck %s --check-prefix=SPIN
// RUN: triton-dist-opt --convert-distributed-to-nvvm %s | FileCheck %s --check-prefix=GONE

// GONE-NOT: distributed.
// No min/max intrinsics: LLVM 22.1 tags them with an attribute Triton 3.6's LLVM cannot read.
// GONE-NOT: llvm.intr.{{u?(min|max)}}

// The NVVM lowering of every `distributed` op. NVPTX syncscopes: cta -> "block", gpu -> "device", sys -> "" (none
// printed). Scope and ordering of every memory operation are checked exactly.

// The context global of docs/abi.md, declared once.
// CHECK:       llvm.mlir.global external @__triton_dist_context() {addr_space = 1 : i32, alignment = 8 : i64, externally_initialized} : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)> {
// CHECK-NEXT:    %[[Z:.*]] = llvm.mlir.zero : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK-NEXT:    llvm.return %[[Z]]
// CHECK-NOT:   llvm.mlir.global
// CHECK-NOT:   distributed.

// max-sleep-ns=0: the failed poll goes straight back to the poll, nothing sleeps.
// SPIN-LABEL: func.func @wait_sys_acquire_i32(
// SPIN:         llvm.cond_br %{{.*}}, ^[[POLL:bb[0-9]+]](%{{.*}}, %{{.*}} : i32, i32), ^
// SPIN:       ^[[POLL]](%[[A:.*]]: i32, %[[NS:.*]]: i32):
// SPIN-NEXT:    %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire
// SPIN-NEXT:    %[[OK:.*]] = llvm.icmp "eq" %[[SEEN]]
// SPIN-NEXT:    llvm.cond_br %[[OK]], ^{{.*}}, ^[[POLL]](%[[A]], %[[NS]] : i32, i32)
// SPIN-NOT:     nvvm.nanosleep
// SPIN:         nvvm.barrier0
// SPIN-LABEL: func.func @wait_sys_relaxed_i64(

// CHECK-LABEL: func.func @rank() -> i32
// CHECK:         %[[CTX:.*]] = llvm.mlir.addressof @__triton_dist_context : !llvm.ptr<1>
// CHECK:         %[[FIELD:.*]] = llvm.getelementptr inbounds %[[CTX]][0, 0] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK:         %[[RANK:.*]] = llvm.load %[[FIELD]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         return %[[RANK]] : i32
func.func @rank() -> i32 {
  %0 = distributed.get_rank
  return %0 : i32
}

// CHECK-LABEL: func.func @num_ranks() -> i32
// CHECK:         %[[CTX:.*]] = llvm.mlir.addressof @__triton_dist_context : !llvm.ptr<1>
// CHECK:         %[[FIELD:.*]] = llvm.getelementptr inbounds %[[CTX]][0, 1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK:         %[[NUM:.*]] = llvm.load %[[FIELD]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         return %[[NUM]] : i32
func.func @num_ranks() -> i32 {
  %0 = distributed.get_num_ranks
  return %0 : i32
}

// The axes: `local` reads the fields after the heap bases (local_rank: 4, local_num_ranks: 5); `node` divides the
// world's rank (number) by local_num_ranks, read as 1 while the context is unfilled (0), so the division is defined.
// CHECK-LABEL: func.func @local_rank() -> i32
// CHECK:         %[[CTX:.*]] = llvm.mlir.addressof @__triton_dist_context : !llvm.ptr<1>
// CHECK:         %[[FIELD:.*]] = llvm.getelementptr inbounds %[[CTX]][0, 4] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK:         %[[LOCAL:.*]] = llvm.load %[[FIELD]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         return %[[LOCAL]] : i32
func.func @local_rank() -> i32 {
  %0 = distributed.get_rank axis(local)
  return %0 : i32
}

// CHECK-LABEL: func.func @local_num_ranks() -> i32
// CHECK:         %[[FIELD:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 5] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK:         %[[NUM:.*]] = llvm.load %[[FIELD]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         return %[[NUM]] : i32
func.func @local_num_ranks() -> i32 {
  %0 = distributed.get_num_ranks axis(local)
  return %0 : i32
}

// CHECK-LABEL: func.func @node() -> i32
// CHECK:         %[[RANK_FIELD:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 0] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK:         %[[RANK:.*]] = llvm.load %[[RANK_FIELD]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         %[[PER_NODE_FIELD:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 5] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK:         %[[PER_NODE:.*]] = llvm.load %[[PER_NODE_FIELD]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK:         %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK:         %[[UNFILLED:.*]] = llvm.icmp "eq" %[[PER_NODE]], %[[ZERO]] : i32
// CHECK:         %[[DIVISOR:.*]] = llvm.select %[[UNFILLED]], %[[ONE]], %[[PER_NODE]] : i1, i32
// CHECK:         %[[NODE:.*]] = llvm.udiv %[[RANK]], %[[DIVISOR]] : i32
// CHECK:         return %[[NODE]] : i32
func.func @node() -> i32 {
  %0 = distributed.get_rank axis(node)
  return %0 : i32
}

// CHECK-LABEL: func.func @num_nodes() -> i32
// CHECK:         %[[WORLD_FIELD:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK:         %[[WORLD:.*]] = llvm.load %[[WORLD_FIELD]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         %[[PER_NODE_FIELD:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 5] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK:         %[[PER_NODE:.*]] = llvm.load %[[PER_NODE_FIELD]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         %[[UNFILLED:.*]] = llvm.icmp "eq" %[[PER_NODE]], %{{.*}} : i32
// CHECK:         %[[DIVISOR:.*]] = llvm.select %[[UNFILLED]], %{{.*}}, %[[PER_NODE]] : i1, i32
// CHECK:         %[[NODES:.*]] = llvm.udiv %[[WORLD]], %[[DIVISOR]] : i32
// CHECK:         return %[[NODES]] : i32
func.func @num_nodes() -> i32 {
  %0 = distributed.get_num_ranks axis(node)
  return %0 : i32
}

// CHECK-LABEL: func.func @symm_at_global(
// CHECK-SAME:      %[[PTR:.*]]: !llvm.ptr<1>, %[[PEER:.*]]: i32)
// CHECK:         %[[ME:.*]] = llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         %[[MY_SLOT:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 3, %[[ME]]]
// CHECK:         %[[MY_BASE:.*]] = llvm.load %[[MY_SLOT]] invariant {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:         %[[PEER_SLOT:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 3, %[[PEER]]]
// CHECK:         %[[PEER_BASE:.*]] = llvm.load %[[PEER_SLOT]] invariant {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:         %[[ADDR:.*]] = llvm.ptrtoint %[[PTR]] : !llvm.ptr<1> to i64
// CHECK:         %[[OFFSET:.*]] = llvm.sub %[[ADDR]], %[[MY_BASE]] : i64
// CHECK:         %[[MOVED:.*]] = llvm.add %[[OFFSET]], %[[PEER_BASE]] : i64
// CHECK:         %[[RESULT:.*]] = llvm.inttoptr %[[MOVED]] : i64 to !llvm.ptr<1>
// CHECK:         return %[[RESULT]] : !llvm.ptr<1>
func.func @symm_at_global(%ptr: !llvm.ptr<1>, %rank: i32) -> !llvm.ptr<1> {
  %0 = distributed.symm_at %ptr, %rank : !llvm.ptr<1>
  return %0 : !llvm.ptr<1>
}

// The result keeps the generic address space of the operand.
// CHECK-LABEL: func.func @symm_at_generic(
// CHECK:         llvm.ptrtoint %{{.*}} : !llvm.ptr to i64
// CHECK:         %[[RESULT:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr{{$}}
// CHECK:         return %[[RESULT]] : !llvm.ptr
func.func @symm_at_generic(%ptr: !llvm.ptr, %rank: i32) -> !llvm.ptr {
  %0 = distributed.symm_at %ptr, %rank : !llvm.ptr
  return %0 : !llvm.ptr
}

// The whole loop once; the other waits only differ in the poll.
// CHECK-LABEL: func.func @wait_sys_acquire_i32(
// CHECK-SAME:      %[[FLAGS:.*]]: !llvm.ptr<1>, %[[N:.*]]: i32, %[[VALUE:.*]]: i32) -> i32
// CHECK:         %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK:         %[[W:.*]] = llvm.mlir.constant(32 : i32) : i32
// CHECK:         %[[POLLER:.*]] = llvm.icmp "ult" %[[TID]], %[[W]] : i32
// Lanes past the last word poll word 0 (the whole warp polls in step).
// CHECK:         %[[OWNS:.*]] = llvm.icmp "slt" %[[TID]], %[[N]] : i32
// CHECK:         %[[C0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK:         %[[FIRST:.*]] = llvm.select %[[OWNS]], %[[TID]], %[[C0]] : i1, i32
// CHECK:         llvm.cond_br %[[POLLER]], ^[[WORD:.*]](%[[FIRST]] : i32), ^[[DONE:bb[0-9]+]]
// CHECK:       ^[[WORD]](%[[I:.*]]: i32):
// CHECK:         %[[IN_RANGE:.*]] = llvm.icmp "slt" %[[I]], %[[N]] : i32
// CHECK:         %[[FLAG:.*]] = llvm.getelementptr %[[FLAGS]][%[[I]]] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
// CHECK:         %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK:         %[[FIRST_SLEEP:.*]] = llvm.mlir.constant(32 : i32) : i32
// CHECK:         llvm.cond_br %[[IN_RANGE]], ^[[POLL:.*]](%[[ZERO]], %[[FIRST_SLEEP]] : i32, i32), ^[[DONE]]
// CHECK:       ^[[POLL]](%[[ATTEMPT:.*]]: i32, %[[NS:.*]]: i32):
// CHECK:         %[[SEEN:.*]] = llvm.load %[[FLAG]] atomic acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         %[[ARRIVED:.*]] = llvm.icmp "eq" %[[SEEN]], %[[VALUE]] : i32
// CHECK:         llvm.cond_br %[[ARRIVED]], ^[[NEXT:.*]], ^[[RETRY:.*]]
// CHECK:       ^[[RETRY]]:
// CHECK:         %[[NEXT_ATTEMPT:.*]] = llvm.add %[[ATTEMPT]], %{{.*}} : i32
// CHECK:         %[[TIGHT_POLLS:.*]] = llvm.mlir.constant(16 : i32) : i32
// CHECK:         %[[TIGHT:.*]] = llvm.icmp "ult" %[[NEXT_ATTEMPT]], %[[TIGHT_POLLS]] : i32
// CHECK:         llvm.cond_br %[[TIGHT]], ^[[POLL]](%[[NEXT_ATTEMPT]], %[[NS]] : i32, i32), ^[[SLEEP:.*]]
// CHECK:       ^[[SLEEP]]:
// CHECK:         nvvm.nanosleep %[[NS]]
// CHECK:         %[[DOUBLED:.*]] = llvm.shl %[[NS]], %{{.*}} : i32
// CHECK:         %[[CAP:.*]] = llvm.mlir.constant(256 : i32) : i32
// CHECK:         %[[BELOW:.*]] = llvm.icmp "ult" %[[DOUBLED]], %[[CAP]] : i32
// CHECK:         %[[CAPPED:.*]] = llvm.select %[[BELOW]], %[[DOUBLED]], %[[CAP]] : i1, i32
// CHECK:         llvm.br ^[[POLL]](%[[ATTEMPT]], %[[CAPPED]] : i32, i32)
// CHECK:       ^[[NEXT]]:
// CHECK:         %[[NEXT_I:.*]] = llvm.add %[[I]], %[[W]] : i32
// CHECK:         llvm.br ^[[WORD]](%[[NEXT_I]] : i32)
// CHECK:       ^[[DONE]]:
// CHECK-NEXT:    nvvm.barrier0
// CHECK-NEXT:    %[[TOKEN:.*]] = llvm.inline_asm has_side_effects "mov.u32 $0, 0;", "=r"  : () -> i32
// CHECK-NEXT:    return %[[TOKEN]] : i32
func.func @wait_sys_acquire_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_sys_relaxed_i64(
// CHECK:         llvm.load %{{.*}} atomic monotonic {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:         nvvm.barrier0
func.func @wait_sys_relaxed_i64(%flags: !llvm.ptr<1>, %n: i32, %value: i64) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(sys) semantic(relaxed) : !llvm.ptr<1>, i64
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_gpu_acquire_i32(
// CHECK:         llvm.load %{{.*}} atomic syncscope("device") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         nvvm.barrier0
func.func @wait_gpu_acquire_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(gpu) semantic(acquire) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_gpu_relaxed_i32(
// CHECK:         llvm.load %{{.*}} atomic syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         nvvm.barrier0
func.func @wait_gpu_relaxed_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(gpu) semantic(relaxed) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_cta_acquire_i64(
// CHECK:         llvm.load %{{.*}} atomic syncscope("block") acquire {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:         nvvm.barrier0
func.func @wait_cta_acquire_i64(%flags: !llvm.ptr<1>, %n: i32, %value: i64) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(cta) semantic(acquire) : !llvm.ptr<1>, i64
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_cta_relaxed_i32(
// CHECK:         llvm.load %{{.*}} atomic syncscope("block") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         nvvm.barrier0
func.func @wait_cta_relaxed_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(cta) semantic(relaxed) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

// A generic flag pointer is cast to the global space the heap lives in.
// CHECK-LABEL: func.func @wait_generic_ptr(
// CHECK-SAME:      %[[FLAGS:.*]]: !llvm.ptr,
// CHECK:         %[[GLOBAL:.*]] = llvm.addrspacecast %[[FLAGS]] : !llvm.ptr to !llvm.ptr<1>
// CHECK:         llvm.getelementptr %[[GLOBAL]][
// CHECK:         llvm.load %{{.*}} atomic acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
func.func @wait_generic_ptr(%flags: !llvm.ptr, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(sys) semantic(acquire) : !llvm.ptr, i32
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @notify_set_gpu_i32(
// CHECK-SAME:      %[[PTR:.*]]: !llvm.ptr<1>, %[[PEER:.*]]: i32, %[[SIGNAL:.*]]: i32)
// CHECK-NEXT:    nvvm.barrier0
// CHECK-NEXT:    %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// The first warp stores (every lane the same value).
// CHECK-NEXT:    %[[W:.*]] = llvm.mlir.constant(32 : i32) : i32
// CHECK-NEXT:    %[[WRITER:.*]] = llvm.icmp "ult" %[[TID]], %[[W]] : i32
// CHECK-NEXT:    llvm.cond_br %[[WRITER]], ^[[SIGNAL_BB:.*]], ^[[DONE:.*]]
// CHECK:       ^[[SIGNAL_BB]]:
// CHECK:         llvm.getelementptr inbounds %{{.*}}[0, 3, %[[PEER]]]
// CHECK:         %[[ADDR:.*]] = llvm.ptrtoint %[[PTR]] : !llvm.ptr<1> to i64
// CHECK:         %[[TARGET:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// CHECK-NEXT:    llvm.store %[[SIGNAL]], %[[TARGET]] atomic syncscope("device") release {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK-NEXT:    llvm.br ^[[DONE]]
// CHECK:       ^[[DONE]]:
// CHECK-NEXT:    return
func.func @notify_set_gpu_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(set) comm_scope(gpu) : !llvm.ptr<1>, i32
  return
}

// CHECK-LABEL: func.func @notify_set_intra_node_i64(
// CHECK:         nvvm.barrier0
// CHECK:         llvm.store %{{.*}}, %{{.*}} atomic release {alignment = 8 : i64} : i64, !llvm.ptr<1>
func.func @notify_set_intra_node_i64(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i64) {
  distributed.notify %ptr, %rank, %signal sig_op(set) comm_scope(intra_node) : !llvm.ptr<1>, i64
  return
}

// CHECK-LABEL: func.func @notify_set_inter_node_i32(
// CHECK:         nvvm.barrier0
// CHECK:         llvm.store %{{.*}}, %{{.*}} atomic release {alignment = 4 : i64} : i32, !llvm.ptr<1>
func.func @notify_set_inter_node_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(set) comm_scope(inter_node) : !llvm.ptr<1>, i32
  return
}

// The release add is the PTX instruction itself: LLVM 22 drops the ordering of a release atomicrmw.
// CHECK-LABEL: func.func @notify_add_gpu_i64(
// CHECK-SAME:      %[[SIGNAL:[^:]*]]: i64)
// CHECK:         nvvm.barrier0
// Thread 0 alone adds.
// CHECK-NEXT:    %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT:    %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:    %[[ADDER:.*]] = llvm.icmp "eq" %[[TID]], %[[ZERO]] : i32
// CHECK-NEXT:    llvm.cond_br %[[ADDER]]
// CHECK:         %[[TARGET:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// CHECK-NEXT:    llvm.inline_asm has_side_effects "atom.release.gpu.global.add.u64 $0, [$1], $2;", "=l,l,l,~{memory}" %[[TARGET]], %[[SIGNAL]] : (!llvm.ptr<1>, i64) -> i64
// CHECK-NOT:     llvm.atomicrmw
func.func @notify_add_gpu_i64(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i64) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(gpu) : !llvm.ptr<1>, i64
  return
}

// CHECK-LABEL: func.func @notify_add_intra_node_i32(
// CHECK:         llvm.inline_asm has_side_effects "atom.release.sys.global.add.u32 $0, [$1], $2;", "=r,l,r,~{memory}" %{{.*}}, %{{.*}} : (!llvm.ptr<1>, i32) -> i32
func.func @notify_add_intra_node_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(intra_node) : !llvm.ptr<1>, i32
  return
}

// CHECK-LABEL: func.func @notify_add_inter_node_i64(
// CHECK:         llvm.inline_asm has_side_effects "atom.release.sys.global.add.u64 $0, [$1], $2;", "=l,l,l,~{memory}" %{{.*}}, %{{.*}} : (!llvm.ptr<1>, i64) -> i64
func.func @notify_add_inter_node_i64(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i64) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(inter_node) : !llvm.ptr<1>, i64
  return
}

// CHECK-LABEL: func.func @notify_generic_ptr(
// CHECK:         %[[TARGET:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr{{$}}
// CHECK-NEXT:    %[[GLOBAL:.*]] = llvm.addrspacecast %[[TARGET]] : !llvm.ptr to !llvm.ptr<1>
// CHECK-NEXT:    llvm.inline_asm has_side_effects "atom.release.sys.global.add.u32 $0, [$1], $2;", "=r,l,r,~{memory}" %[[GLOBAL]], %{{.*}} : (!llvm.ptr<1>, i32) -> i32
func.func @notify_generic_ptr(%ptr: !llvm.ptr, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(inter_node) : !llvm.ptr, i32
  return
}

// CHECK-LABEL: func.func @consume_i32(
// CHECK-SAME:      %[[VALUE:.*]]: i32, %[[TOKEN:.*]]: i32) -> i32
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=r,0,r" %[[VALUE]], %[[TOKEN]] : (i32, i32) -> i32
// CHECK-NEXT:    return %[[COPY]] : i32
func.func @consume_i32(%value: i32, %token: !distributed.token) -> i32 {
  %0 = distributed.consume_token %value, %token : i32
  return %0 : i32
}

// CHECK-LABEL: func.func @consume_i64(
// CHECK-SAME:      %[[VALUE:.*]]: i64, %[[TOKEN:.*]]: i32) -> i64
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=l,0,r" %[[VALUE]], %[[TOKEN]] : (i64, i32) -> i64
// CHECK-NEXT:    return %[[COPY]] : i64
func.func @consume_i64(%value: i64, %token: !distributed.token) -> i64 {
  %0 = distributed.consume_token %value, %token : i64
  return %0 : i64
}

// CHECK-LABEL: func.func @consume_f32(
// CHECK-SAME:      %[[VALUE:.*]]: f32, %[[TOKEN:.*]]: i32) -> f32
// CHECK-NEXT:    %[[BITS:.*]] = llvm.bitcast %[[VALUE]] : f32 to i32
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=r,0,r" %[[BITS]], %[[TOKEN]] : (i32, i32) -> i32
// CHECK-NEXT:    %[[RESULT:.*]] = llvm.bitcast %[[COPY]] : i32 to f32
// CHECK-NEXT:    return %[[RESULT]] : f32
func.func @consume_f32(%value: f32, %token: !distributed.token) -> f32 {
  %0 = distributed.consume_token %value, %token : f32
  return %0 : f32
}

// CHECK-LABEL: func.func @consume_f64(
// CHECK-NEXT:    %[[BITS:.*]] = llvm.bitcast %{{.*}} : f64 to i64
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=l,0,r" %[[BITS]], %{{.*}} : (i64, i32) -> i64
// CHECK-NEXT:    %[[RESULT:.*]] = llvm.bitcast %[[COPY]] : i64 to f64
// CHECK-NEXT:    return %[[RESULT]] : f64
func.func @consume_f64(%value: f64, %token: !distributed.token) -> f64 {
  %0 = distributed.consume_token %value, %token : f64
  return %0 : f64
}

// CHECK-LABEL: func.func @consume_ptr(
// CHECK-NEXT:    %[[ADDR:.*]] = llvm.ptrtoint %{{.*}} : !llvm.ptr<1> to i64
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=l,0,r" %[[ADDR]], %{{.*}} : (i64, i32) -> i64
// CHECK-NEXT:    %[[RESULT:.*]] = llvm.inttoptr %[[COPY]] : i64 to !llvm.ptr<1>
// CHECK-NEXT:    return %[[RESULT]] : !llvm.ptr<1>
func.func @consume_ptr(%value: !llvm.ptr<1>, %token: !distributed.token) -> !llvm.ptr<1> {
  %0 = distributed.consume_token %value, %token : !llvm.ptr<1>
  return %0 : !llvm.ptr<1>
}
