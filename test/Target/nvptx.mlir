// RUN: triton-dist-opt --triton-dist-lower-to-nvvm %s \
// RUN:   | mlir-translate --mlir-to-llvmir \
// RUN:   | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 \
// RUN:   | FileCheck %s

// End to end on NVIDIA: the PTX that sm_90 gets for each scope and ordering. The release add is the inline
// `atom.release.<scope>` (LLVM 22 would print a plain, .gpu-scoped `atom.global.add` for a release atomicrmw).

// The first warp polls (tid.x < 32, stride 32). A poll that sees the value leaves at once; only after the tight
// polls does a lane sleep. Then bar.sync, then the token.
// CHECK-LABEL: wait_sys_acquire_i32(
// CHECK:         mov.u32 %[[TID:r[0-9]+]], %tid.x;
// CHECK-NEXT:    setp.gt.u32 %[[NOT_POLLER:p[0-9]+]], %[[TID]], 31;
// CHECK-NEXT:    @%[[NOT_POLLER]] bra [[DONE:\$L__BB[0-9_]+]];
// CHECK:         add.s32 %{{r[0-9]+}}, %{{r[0-9]+}}, 32;
// CHECK:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]], [%{{rd[0-9]+}}];
// CHECK-NEXT:    setp.eq.b32 %[[ARRIVED:p[0-9]+]], %[[SEEN]], %{{r[0-9]+}};
// CHECK-NEXT:    @%[[ARRIVED]] bra
// CHECK:         setp.lt.u32 %[[TIGHT:p[0-9]+]], %{{r[0-9]+}}, 16;
// CHECK:         @%[[TIGHT]] bra
// CHECK:         min.u32 %{{r[0-9]+}}, %{{r[0-9]+}}, 256;
// CHECK:         nanosleep.u32 %{{r[0-9]+}};
// CHECK:         bra.uni
// CHECK:       [[DONE]]:
// CHECK-NEXT:    bar.sync 0;
// CHECK-NEXT:    // begin inline asm
// CHECK-NEXT:    mov.u32 %{{r[0-9]+}}, 0;

// CHECK-LABEL: wait_sys_relaxed_i32(
// CHECK:         ld.relaxed.sys.global.b32
// CHECK:         nanosleep.u32
// CHECK:         bar.sync 0;

// CHECK-LABEL: wait_gpu_acquire_i64(
// CHECK:         ld.acquire.gpu.global.b64
// CHECK:         nanosleep.u32
// CHECK:         bar.sync 0;

// CHECK-LABEL: wait_gpu_relaxed_i32(
// CHECK:         ld.relaxed.gpu.global.b32
// CHECK:         bar.sync 0;

// CHECK-LABEL: wait_cta_acquire_i32(
// CHECK:         ld.acquire.cta.global.b32
// CHECK:         bar.sync 0;

// notify set: bar.sync, then the first warp alone translates the address and releases.
// CHECK-LABEL: notify_set_gpu_i32(
// CHECK:         bar.sync 0;
// CHECK:         setp.gt.u32 %[[NOT_WRITER:p[0-9]+]], %{{r[0-9]+}}, 31;
// CHECK-NEXT:    @%[[NOT_WRITER]] bra
// CHECK:         ld.global.nc.b32 %{{r[0-9]+}}, [__triton_dist_context];
// CHECK:         st.release.gpu.global.b32 [%{{rd[0-9]+}}], %{{r[0-9]+}};

// CHECK-LABEL: notify_set_intra_node_i64(
// CHECK:         bar.sync 0;
// CHECK:         st.release.sys.global.b64 [%{{rd[0-9]+}}], %{{rd[0-9]+}};

// CHECK-LABEL: notify_set_inter_node_i32(
// CHECK:         bar.sync 0;
// CHECK:         st.release.sys.global.b32 [%{{rd[0-9]+}}], %{{r[0-9]+}};

// notify add: thread 0 alone adds (one add per notify).
// CHECK-LABEL: notify_add_gpu_i32(
// CHECK:         bar.sync 0;
// CHECK:         setp.ne.b32 %[[NOT_ADDER:p[0-9]+]], %{{r[0-9]+}}, 0;
// CHECK-NEXT:    @%[[NOT_ADDER]] bra
// CHECK:         atom.release.gpu.global.add.u32 %{{r[0-9]+}}, [%{{rd[0-9]+}}], %{{r[0-9]+}};
// CHECK-NOT:     atom.global.add

// CHECK-LABEL: notify_add_intra_node_i64(
// CHECK:         bar.sync 0;
// CHECK:         atom.release.sys.global.add.u64 %{{rd[0-9]+}}, [%{{rd[0-9]+}}], %{{rd[0-9]+}};
// CHECK-NOT:     atom.global.add

// CHECK-LABEL: notify_add_inter_node_i32(
// CHECK:         bar.sync 0;
// CHECK:         atom.release.sys.global.add.u32 %{{r[0-9]+}}, [%{{rd[0-9]+}}], %{{r[0-9]+}};
// CHECK-NOT:     atom.global.add

// consume_token is an empty inline asm: no instruction, but the load through its result stays after the barrier.
// CHECK-LABEL: wait_then_load(
// CHECK:         ld.acquire.sys.global.b32
// CHECK:         bar.sync 0;
// CHECK-NEXT:    // begin inline asm
// CHECK-NEXT:    mov.u32 %{{r[0-9]+}}, 0;
// CHECK-NEXT:    // end inline asm
// CHECK-NEXT:    // begin inline asm
// CHECK-NEXT:    // end inline asm
// CHECK-NEXT:    ld.global.b32

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
