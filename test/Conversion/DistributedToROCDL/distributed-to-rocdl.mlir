// RUN: triton-dist-opt --convert-distributed-to-rocdl %s | FileCheck %s
// RUN: triton-dist-opt --convert-distributed-to-rocdl="tight-polls=2 max-sleep-ns=64" %s | FileCheck %s --check-prefix=TUNED
// RUN: triton-dist-opt --convert-distributed-to-rocdl %s | FileCheck %s --check-prefix=GONE

// GONE-NOT: distributed.
// GONE-NOT: __ockl
// No min/max intrinsics: LLVM 22.1 tags them with an attribute Triton 3.6's LLVM cannot read.
// GONE-NOT: llvm.intr.{{u?(min|max)}}

// The ROCDL lowering of every `distributed` op. AMDGPU syncscopes: cta -> "workgroup", gpu -> "agent", sys -> ""
// (none printed). Scope and ordering of every memory operation are checked exactly. The release add stays an
// `llvm.atomicrmw` (the AMDGPU backend honours its ordering).

// The context global of docs/abi.md, declared once.
// CHECK:       llvm.mlir.global external @__triton_dist_context() {addr_space = 1 : i32, alignment = 8 : i64, externally_initialized} : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)> {
// CHECK-NEXT:    %[[Z:.*]] = llvm.mlir.zero : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
// CHECK-NEXT:    llvm.return %[[Z]]
// CHECK-NOT:   llvm.mlir.global

// The options reach the loop: two tight polls, a sleep capped at 64 ns.
// TUNED-LABEL: func.func @wait_sys_acquire_i32(
// TUNED:         %[[TWO:.*]] = llvm.mlir.constant(2 : i32) : i32
// TUNED-NEXT:    llvm.icmp "ult" %{{.*}}, %[[TWO]] : i32
// TUNED:         rocdl.s.sleep 1
// TUNED:         %[[CAP:.*]] = llvm.mlir.constant(64 : i32) : i32
// TUNED-NEXT:    llvm.icmp "ult" %{{.*}}, %[[CAP]] : i32
// TUNED-LABEL: func.func @wait_sys_relaxed_i64(

// CHECK-LABEL: func.func @rank() -> i32
// CHECK:         %[[CTX:.*]] = llvm.mlir.addressof @__triton_dist_context : !llvm.ptr<1>
// CHECK:         %[[FIELD:.*]] = llvm.getelementptr inbounds %[[CTX]][0, 0]
// CHECK:         %[[RANK:.*]] = llvm.load %[[FIELD]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         return %[[RANK]] : i32
func.func @rank() -> i32 {
  %0 = distributed.get_rank
  return %0 : i32
}

// CHECK-LABEL: func.func @num_ranks() -> i32
// CHECK:         %[[FIELD:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 1]
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

// CHECK-LABEL: func.func @symm_at_generic(
// CHECK:         %[[RESULT:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr{{$}}
// CHECK:         return %[[RESULT]] : !llvm.ptr
func.func @symm_at_generic(%ptr: !llvm.ptr, %rank: i32) -> !llvm.ptr {
  %0 = distributed.symm_at %ptr, %rank : !llvm.ptr
  return %0 : !llvm.ptr
}

// The whole loop once; the other waits only differ in the poll. W is the wave size the backend folds.
// CHECK-LABEL: func.func @wait_sys_acquire_i32(
// CHECK-SAME:      %[[FLAGS:.*]]: !llvm.ptr<1>, %[[N:.*]]: i32, %[[VALUE:.*]]: i32) -> i32
// CHECK:         %[[TID:.*]] = rocdl.workitem.id.x : i32
// CHECK:         %[[W:.*]] = rocdl.wavefrontsize : i32
// CHECK:         %[[POLLER:.*]] = llvm.icmp "ult" %[[TID]], %[[W]] : i32
// Lanes past the last word poll word 0 (the whole warp polls in step).
// CHECK:         %[[OWNS:.*]] = llvm.icmp "slt" %[[TID]], %[[N]] : i32
// CHECK:         %[[C0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK:         %[[FIRST:.*]] = llvm.select %[[OWNS]], %[[TID]], %[[C0]] : i1, i32
// CHECK:         llvm.cond_br %[[POLLER]], ^[[WORD:.*]](%[[FIRST]] : i32), ^[[DONE:bb[0-9]+]]
// CHECK:       ^[[WORD]](%[[I:.*]]: i32):
// CHECK:         %[[IN_RANGE:.*]] = llvm.icmp "slt" %[[I]], %[[N]] : i32
// CHECK:         %[[FLAG:.*]] = llvm.getelementptr %[[FLAGS]][%[[I]]] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
// CHECK:         llvm.cond_br %[[IN_RANGE]], ^[[POLL:.*]](%{{.*}}, %{{.*}} : i32, i32), ^[[DONE]]
// CHECK:       ^[[POLL]](%[[ATTEMPT:.*]]: i32, %[[NS:.*]]: i32):
// CHECK:         %[[SEEN:.*]] = llvm.load %[[FLAG]] atomic acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         %[[ARRIVED:.*]] = llvm.icmp "eq" %[[SEEN]], %[[VALUE]] : i32
// CHECK:         llvm.cond_br %[[ARRIVED]], ^[[NEXT:.*]], ^[[RETRY:.*]]
// CHECK:       ^[[RETRY]]:
// CHECK:         llvm.cond_br %{{.*}}, ^[[POLL]](%{{.*}}, %[[NS]] : i32, i32), ^[[SLEEP:.*]]
// s_sleep takes an immediate: about ns / 32 naps of s_sleep 1 (64 clocks).
// CHECK:       ^[[SLEEP]]:
// CHECK:         %[[FIVE:.*]] = llvm.mlir.constant(5 : i32) : i32
// CHECK:         %[[SCALED:.*]] = llvm.lshr %[[NS]], %[[FIVE]] : i32
// CHECK:         %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK:         %[[ABOVE:.*]] = llvm.icmp "ugt" %[[SCALED]], %[[ONE]] : i32
// CHECK:         %[[NAPS:.*]] = llvm.select %[[ABOVE]], %[[SCALED]], %{{.*}} : i1, i32
// CHECK:         llvm.br ^[[NAP:.*]](%[[NAPS]] : i32)
// CHECK:       ^[[NAP]](%[[LEFT:.*]]: i32):
// CHECK-NEXT:    rocdl.s.sleep 1
// CHECK:         llvm.cond_br %{{.*}}, ^[[NAP]](%{{.*}} : i32), ^[[GROW:.*]]
// CHECK:       ^[[GROW]]:
// CHECK:         %[[DOUBLED:.*]] = llvm.shl %[[NS]], %{{.*}} : i32
// CHECK:         %[[CAP:.*]] = llvm.mlir.constant(256 : i32) : i32
// CHECK:         %[[BELOW:.*]] = llvm.icmp "ult" %[[DOUBLED]], %[[CAP]] : i32
// CHECK:         %[[CAPPED:.*]] = llvm.select %[[BELOW]], %[[DOUBLED]], %[[CAP]] : i1, i32
// CHECK:         llvm.br ^[[POLL]](%[[ATTEMPT]], %[[CAPPED]] : i32, i32)
// CHECK:       ^[[NEXT]]:
// CHECK:         %[[NEXT_I:.*]] = llvm.add %[[I]], %[[W]] : i32
// CHECK:         llvm.br ^[[WORD]](%[[NEXT_I]] : i32)
// CHECK:       ^[[DONE]]:
// CHECK-NEXT:    llvm.fence syncscope("workgroup") release
// CHECK-NEXT:    rocdl.s.barrier
// CHECK-NEXT:    llvm.fence syncscope("workgroup") acquire
// CHECK-NEXT:    %[[TOKEN:.*]] = llvm.inline_asm has_side_effects "v_mov_b32 $0, 0", "=v"  : () -> i32
// CHECK-NEXT:    return %[[TOKEN]] : i32
func.func @wait_sys_acquire_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_sys_relaxed_i64(
// CHECK:         llvm.load %{{.*}} atomic monotonic {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:         rocdl.s.barrier
func.func @wait_sys_relaxed_i64(%flags: !llvm.ptr<1>, %n: i32, %value: i64) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(sys) semantic(relaxed) : !llvm.ptr<1>, i64
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_gpu_acquire_i32(
// CHECK:         llvm.load %{{.*}} atomic syncscope("agent") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         rocdl.s.barrier
func.func @wait_gpu_acquire_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(gpu) semantic(acquire) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_gpu_relaxed_i32(
// CHECK:         llvm.load %{{.*}} atomic syncscope("agent") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         rocdl.s.barrier
func.func @wait_gpu_relaxed_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(gpu) semantic(relaxed) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_cta_acquire_i64(
// CHECK:         llvm.load %{{.*}} atomic syncscope("workgroup") acquire {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:         rocdl.s.barrier
func.func @wait_cta_acquire_i64(%flags: !llvm.ptr<1>, %n: i32, %value: i64) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(cta) semantic(acquire) : !llvm.ptr<1>, i64
  return %0 : !distributed.token
}

// CHECK-LABEL: func.func @wait_cta_relaxed_i32(
// CHECK:         llvm.load %{{.*}} atomic syncscope("workgroup") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         rocdl.s.barrier
func.func @wait_cta_relaxed_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(cta) semantic(relaxed) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

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
// CHECK-NEXT:    llvm.fence syncscope("workgroup") release
// CHECK-NEXT:    rocdl.s.barrier
// CHECK-NEXT:    llvm.fence syncscope("workgroup") acquire
// CHECK-NEXT:    %[[TID:.*]] = rocdl.workitem.id.x : i32
// The first wave stores (every lane the same value).
// CHECK-NEXT:    %[[W:.*]] = rocdl.wavefrontsize : i32
// CHECK-NEXT:    %[[WRITER:.*]] = llvm.icmp "ult" %[[TID]], %[[W]] : i32
// CHECK-NEXT:    llvm.cond_br %[[WRITER]], ^[[SIGNAL_BB:.*]], ^[[DONE:.*]]
// CHECK:       ^[[SIGNAL_BB]]:
// CHECK:         llvm.getelementptr inbounds %{{.*}}[0, 3, %[[PEER]]]
// CHECK:         %[[ADDR:.*]] = llvm.ptrtoint %[[PTR]] : !llvm.ptr<1> to i64
// CHECK:         %[[TARGET:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// CHECK-NEXT:    llvm.store %[[SIGNAL]], %[[TARGET]] atomic syncscope("agent") release {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK-NEXT:    llvm.br ^[[DONE]]
// CHECK:       ^[[DONE]]:
// CHECK-NEXT:    return
func.func @notify_set_gpu_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(set) comm_scope(gpu) : !llvm.ptr<1>, i32
  return
}

// CHECK-LABEL: func.func @notify_set_intra_node_i64(
// CHECK:         rocdl.s.barrier
// CHECK:         llvm.store %{{.*}}, %{{.*}} atomic release {alignment = 8 : i64} : i64, !llvm.ptr<1>
func.func @notify_set_intra_node_i64(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i64) {
  distributed.notify %ptr, %rank, %signal sig_op(set) comm_scope(intra_node) : !llvm.ptr<1>, i64
  return
}

// CHECK-LABEL: func.func @notify_set_inter_node_i32(
// CHECK:         rocdl.s.barrier
// CHECK:         llvm.store %{{.*}}, %{{.*}} atomic release {alignment = 4 : i64} : i32, !llvm.ptr<1>
func.func @notify_set_inter_node_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(set) comm_scope(inter_node) : !llvm.ptr<1>, i32
  return
}

// CHECK-LABEL: func.func @notify_add_gpu_i64(
// CHECK-SAME:      %[[SIGNAL:[^:]*]]: i64)
// CHECK:         rocdl.s.barrier
// CHECK:         %[[TARGET:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// CHECK-NEXT:    llvm.atomicrmw add %[[TARGET]], %[[SIGNAL]] syncscope("agent") release {alignment = 8 : i64} : !llvm.ptr<1>, i64
// CHECK-NOT:     llvm.inline_asm
func.func @notify_add_gpu_i64(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i64) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(gpu) : !llvm.ptr<1>, i64
  return
}

// CHECK-LABEL: func.func @notify_add_intra_node_i32(
// CHECK:         llvm.atomicrmw add %{{.*}}, %{{.*}} release {alignment = 4 : i64} : !llvm.ptr<1>, i32
func.func @notify_add_intra_node_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(intra_node) : !llvm.ptr<1>, i32
  return
}

// CHECK-LABEL: func.func @notify_add_inter_node_i64(
// CHECK:         llvm.atomicrmw add %{{.*}}, %{{.*}} release {alignment = 8 : i64} : !llvm.ptr<1>, i64
func.func @notify_add_inter_node_i64(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i64) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(inter_node) : !llvm.ptr<1>, i64
  return
}

// CHECK-LABEL: func.func @notify_generic_ptr(
// CHECK:         %[[TARGET:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr{{$}}
// CHECK-NEXT:    %[[GLOBAL:.*]] = llvm.addrspacecast %[[TARGET]] : !llvm.ptr to !llvm.ptr<1>
// CHECK-NEXT:    llvm.atomicrmw add %[[GLOBAL]], %{{.*}} release {alignment = 4 : i64} : !llvm.ptr<1>, i32
func.func @notify_generic_ptr(%ptr: !llvm.ptr, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(inter_node) : !llvm.ptr, i32
  return
}

// Values may differ between lanes: VGPR constraints.
// CHECK-LABEL: func.func @consume_i32(
// CHECK-SAME:      %[[VALUE:.*]]: i32, %[[TOKEN:.*]]: i32) -> i32
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=v,0,v" %[[VALUE]], %[[TOKEN]] : (i32, i32) -> i32
// CHECK-NEXT:    return %[[COPY]] : i32
func.func @consume_i32(%value: i32, %token: !distributed.token) -> i32 {
  %0 = distributed.consume_token %value, %token : i32
  return %0 : i32
}

// CHECK-LABEL: func.func @consume_i64(
// CHECK-SAME:      %[[VALUE:.*]]: i64, %[[TOKEN:.*]]: i32) -> i64
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=v,0,v" %[[VALUE]], %[[TOKEN]] : (i64, i32) -> i64
// CHECK-NEXT:    return %[[COPY]] : i64
func.func @consume_i64(%value: i64, %token: !distributed.token) -> i64 {
  %0 = distributed.consume_token %value, %token : i64
  return %0 : i64
}

// CHECK-LABEL: func.func @consume_f32(
// CHECK-NEXT:    %[[BITS:.*]] = llvm.bitcast %{{.*}} : f32 to i32
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=v,0,v" %[[BITS]], %{{.*}} : (i32, i32) -> i32
// CHECK-NEXT:    %[[RESULT:.*]] = llvm.bitcast %[[COPY]] : i32 to f32
// CHECK-NEXT:    return %[[RESULT]] : f32
func.func @consume_f32(%value: f32, %token: !distributed.token) -> f32 {
  %0 = distributed.consume_token %value, %token : f32
  return %0 : f32
}

// CHECK-LABEL: func.func @consume_f64(
// CHECK-NEXT:    %[[BITS:.*]] = llvm.bitcast %{{.*}} : f64 to i64
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=v,0,v" %[[BITS]], %{{.*}} : (i64, i32) -> i64
// CHECK-NEXT:    %[[RESULT:.*]] = llvm.bitcast %[[COPY]] : i64 to f64
// CHECK-NEXT:    return %[[RESULT]] : f64
func.func @consume_f64(%value: f64, %token: !distributed.token) -> f64 {
  %0 = distributed.consume_token %value, %token : f64
  return %0 : f64
}

// CHECK-LABEL: func.func @consume_ptr(
// CHECK-NEXT:    %[[ADDR:.*]] = llvm.ptrtoint %{{.*}} : !llvm.ptr<1> to i64
// CHECK-NEXT:    %[[COPY:.*]] = llvm.inline_asm "", "=v,0,v" %[[ADDR]], %{{.*}} : (i64, i32) -> i64
// CHECK-NEXT:    %[[RESULT:.*]] = llvm.inttoptr %[[COPY]] : i64 to !llvm.ptr<1>
// CHECK-NEXT:    return %[[RESULT]] : !llvm.ptr<1>
func.func @consume_ptr(%value: !llvm.ptr<1>, %token: !distributed.token) -> !llvm.ptr<1> {
  %0 = distributed.consume_token %value, %token : !llvm.ptr<1>
  return %0 : !llvm.ptr<1>
}
