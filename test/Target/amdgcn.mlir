// RUN: triton-dist-opt --triton-dist-lower-to-rocdl %s \
// RUN:   | mlir-translate --mlir-to-llvmir \
// RUN:   | llc -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 \
// RUN:   | FileCheck %s

// End to end on AMD: the gfx942 ISA for each scope and ordering. sc0/sc1 bits and cache maintenance are the
// backend's implementation of the syncscopes: system acquire = `sc0 sc1` load + `buffer_inv sc0 sc1`, agent
// acquire = `sc1` load + `buffer_inv sc1`; system release = `buffer_wbl2 sc0 sc1` first, agent = `buffer_wbl2 sc1`.

// The first wave polls (the wave size folds to 64 on gfx942). A poll that sees the value leaves at once; s_sleep
// only after the tight polls. Then s_barrier, then the token.
// CHECK-LABEL: wait_sys_acquire_i32:
// CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
// CHECK:         v_add_u32_e32 v{{[0-9]+}}, 64, v{{[0-9]+}}
// CHECK:         global_load_dword v[[SEEN:[0-9]+]], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// CHECK-NEXT:    s_waitcnt vmcnt(0)
// CHECK-NEXT:    buffer_inv sc0 sc1
// CHECK:         v_cmp_ne_u32_e32 vcc, v[[SEEN]], v{{[0-9]+}}
// CHECK:         s_sleep 1
// CHECK:         s_barrier
// CHECK-NEXT:    ;;#ASMSTART
// CHECK-NEXT:    v_mov_b32 v{{[0-9]+}}, 0

// Relaxed: the same load, no invalidate.
// CHECK-LABEL: wait_sys_relaxed_i32:
// CHECK:         global_load_dword v{{[0-9]+}}, v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// CHECK-NOT:     buffer_inv
// CHECK:         s_sleep 1
// CHECK:         s_barrier

// CHECK-LABEL: wait_gpu_acquire_i64:
// CHECK:         global_load_dwordx2 v[{{[0-9]+:[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc1
// CHECK-NEXT:    s_waitcnt vmcnt(0)
// CHECK-NEXT:    buffer_inv sc1
// CHECK:         s_barrier

// CHECK-LABEL: wait_gpu_relaxed_i32:
// CHECK:         global_load_dword v{{[0-9]+}}, v[{{[0-9]+:[0-9]+}}], off sc1
// CHECK-NOT:     buffer_inv
// CHECK:         s_barrier

// CHECK-LABEL: wait_cta_acquire_i32:
// CHECK:         global_load_dword v{{[0-9]+}}, v[{{[0-9]+:[0-9]+}}], off sc0
// CHECK-NOT:     buffer_inv
// CHECK:         s_barrier

// notify set: s_barrier, then the lanes of the first wave release (workitem id < 64 on gfx942).
// CHECK-LABEL: notify_set_gpu_i32:
// CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
// CHECK:         s_barrier
// CHECK:         buffer_wbl2 sc1
// CHECK-NEXT:    global_store_dword v[{{[0-9]+:[0-9]+}}], v{{[0-9]+}}, off sc1

// CHECK-LABEL: notify_set_intra_node_i64:
// CHECK:         s_barrier
// CHECK:         buffer_wbl2 sc0 sc1
// CHECK-NEXT:    global_store_dwordx2 v[{{[0-9]+:[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc0 sc1

// CHECK-LABEL: notify_set_inter_node_i32:
// CHECK:         s_barrier
// CHECK:         buffer_wbl2 sc0 sc1
// CHECK-NEXT:    global_store_dword v[{{[0-9]+:[0-9]+}}], v{{[0-9]+}}, off sc0 sc1

// CHECK-LABEL: notify_add_gpu_i32:
// CHECK:         s_barrier
// CHECK:         buffer_wbl2 sc1
// CHECK-NEXT:    global_atomic_add v[{{[0-9]+:[0-9]+}}], v{{[0-9]+}}, off{{$}}

// CHECK-LABEL: notify_add_intra_node_i64:
// CHECK:         s_barrier
// CHECK:         buffer_wbl2 sc0 sc1
// CHECK-NEXT:    global_atomic_add_x2 v[{{[0-9]+:[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc1

// CHECK-LABEL: notify_add_inter_node_i32:
// CHECK:         s_barrier
// CHECK:         buffer_wbl2 sc0 sc1
// CHECK-NEXT:    global_atomic_add v[{{[0-9]+:[0-9]+}}], v{{[0-9]+}}, off sc1

// consume_token is an empty inline asm: no instruction, but the load through its result stays after the barrier.
// CHECK-LABEL: wait_then_load:
// CHECK:         buffer_inv sc0 sc1
// CHECK:         s_barrier
// CHECK:         v_mov_b32 v{{[0-9]+}}, 0
// CHECK:         ;;#ASMSTART
// CHECK-NEXT:    ;;#ASMEND
// CHECK-NEXT:    global_load_dword

// The library references no function outside itself (no __ockl_*).
// CHECK-NOT:     __ockl

func.func @wait_sys_acquire_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

func.func @wait_sys_relaxed_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(sys) semantic(relaxed) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

func.func @wait_gpu_acquire_i64(%flags: !llvm.ptr<1>, %n: i32, %value: i64) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(gpu) semantic(acquire) : !llvm.ptr<1>, i64
  return %0 : !distributed.token
}

func.func @wait_gpu_relaxed_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(gpu) semantic(relaxed) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

func.func @wait_cta_acquire_i32(%flags: !llvm.ptr<1>, %n: i32, %value: i32) -> !distributed.token {
  %0 = distributed.wait %flags, %n, %value scope(cta) semantic(acquire) : !llvm.ptr<1>, i32
  return %0 : !distributed.token
}

func.func @notify_set_gpu_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(set) comm_scope(gpu) : !llvm.ptr<1>, i32
  return
}

func.func @notify_set_intra_node_i64(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i64) {
  distributed.notify %ptr, %rank, %signal sig_op(set) comm_scope(intra_node) : !llvm.ptr<1>, i64
  return
}

func.func @notify_set_inter_node_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(set) comm_scope(inter_node) : !llvm.ptr<1>, i32
  return
}

func.func @notify_add_gpu_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(gpu) : !llvm.ptr<1>, i32
  return
}

func.func @notify_add_intra_node_i64(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i64) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(intra_node) : !llvm.ptr<1>, i64
  return
}

func.func @notify_add_inter_node_i32(%ptr: !llvm.ptr<1>, %rank: i32, %signal: i32) {
  distributed.notify %ptr, %rank, %signal sig_op(add) comm_scope(inter_node) : !llvm.ptr<1>, i32
  return
}

// The load through the consumed pointer stays below the wait's barrier.
func.func @wait_then_load(%flags: !llvm.ptr<1>, %slot: !llvm.ptr<1>) -> i32 {
  %one = arith.constant 1 : i32
  %t = distributed.wait %flags, %one, %one scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  %p = distributed.consume_token %slot, %t : !llvm.ptr<1>
  %v = llvm.load %p : !llvm.ptr<1> -> i32
  return %v : i32
}
