// The NVVM lowering of the one-sided ops to NVSHMEM device calls (the functions libnvshmem_device_sm_*.bc of the
// nvidia-nvshmem wheel defines: llvm-nm lists nvshmemx_putmem_signal_block, nvshmemx_getmem_block and
// nvshmem_signal_wait_until with these signatures). Each function is declared once, generic pointers are passed,
// and the NVSHMEM constants are those of NVSHMEM 3.x: SIGNAL_SET 9, SIGNAL_ADD 10; CMP_EQ 0, NE 1, GT 2, LE 3, LT 4,
// GE 5.
// RUN: triton-dist-opt --convert-distributed-to-nvvm %s | FileCheck %s
// RUN: triton-dist-opt --pass-pipeline='builtin.module(triton-dist-lower-to-nvvm{set-target=true})' %s \
// RUN:   | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVM

// CHECK-DAG:   llvm.func @nvshmemx_putmem_signal_block(!llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, i32, i32)
// CHECK-DAG:   llvm.func @nvshmemx_getmem_block(!llvm.ptr, !llvm.ptr, i64, i32)
// CHECK-DAG:   llvm.func @nvshmem_signal_wait_until(!llvm.ptr, i32, i64) -> i64
// No context: these ops address peers through NVSHMEM, not through the heap-base table.
// CHECK-NOT:   @__triton_dist_context
// CHECK-NOT:   distributed.

// LLVM-DAG: declare void @nvshmemx_putmem_signal_block(ptr, ptr, i64, ptr, i64, i32, i32)
// LLVM-DAG: declare void @nvshmemx_getmem_block(ptr, ptr, i64, i32)
// LLVM-DAG: declare i64 @nvshmem_signal_wait_until(ptr, i32, i64)
// LLVM-LABEL: define void @put_signal(
// LLVM:       call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)
// LLVM:       call void @nvshmemx_putmem_signal_block(ptr %{{.*}}, ptr %{{.*}}, i64 %2, ptr %{{.*}}, i64 %4, i32 9, i32 %5)
// LLVM:       call void @nvshmemx_putmem_signal_block(ptr %{{.*}}, ptr %{{.*}}, i64 %2, ptr %{{.*}}, i64 %4, i32 10, i32 %5)
// LLVM-LABEL: define void @get(
// LLVM:       call void @nvshmemx_getmem_block(ptr %0, ptr %{{.*}}, i64 %2, i32 %3)
// LLVM-LABEL: define ptr addrspace(1) @signal_wait(
// LLVM:       call i64 @nvshmem_signal_wait_until(ptr %{{.*}}, i32 5, i64 %1)

// Put with signal: the program barrier, then every thread calls the block-scope put (set: 9, add: 10).
// CHECK-LABEL: func.func @put_signal(
// CHECK-SAME:    %[[DEST:[^:]*]]: !llvm.ptr<1>, %[[SRC:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i64, %[[SIG:[^:]*]]: !llvm.ptr<1>, %[[V:[^:]*]]: i64, %[[PE:[^:]*]]: i32)
// CHECK:         nvvm.barrier0
// CHECK-NEXT:    %[[SET:.*]] = llvm.mlir.constant(9 : i32) : i32
// CHECK-NEXT:    %[[D:.*]] = llvm.addrspacecast %[[DEST]] : !llvm.ptr<1> to !llvm.ptr
// CHECK-NEXT:    %[[S:.*]] = llvm.addrspacecast %[[SRC]] : !llvm.ptr<1> to !llvm.ptr
// CHECK-NEXT:    %[[G:.*]] = llvm.addrspacecast %[[SIG]] : !llvm.ptr<1> to !llvm.ptr
// CHECK-NEXT:    llvm.call @nvshmemx_putmem_signal_block(%[[D]], %[[S]], %[[N]], %[[G]], %[[V]], %[[SET]], %[[PE]])
// CHECK:         nvvm.barrier0
// CHECK-NEXT:    %[[ADD:.*]] = llvm.mlir.constant(10 : i32) : i32
// CHECK:         llvm.call @nvshmemx_putmem_signal_block(%{{.*}}, %{{.*}}, %[[N]], %{{.*}}, %[[V]], %[[ADD]], %[[PE]])
// CHECK-NEXT:    return
func.func @put_signal(%dest: !llvm.ptr<1>, %src: !llvm.ptr<1>, %bytes: i64, %sig: !llvm.ptr<1>, %value: i64,
                      %peer: i32) {
  distributed.put_signal %dest, %src, %bytes, %sig, %value, %peer sig_op(set) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  distributed.put_signal %dest, %src, %bytes, %sig, %value, %peer sig_op(add) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// Get: barrier, block-scope get, barrier (every thread may read what arrived). A generic pointer is passed as is.
// CHECK-LABEL: func.func @get(
// CHECK-SAME:    %[[DEST:[^:]*]]: !llvm.ptr, %[[SRC:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i64, %[[PE:[^:]*]]: i32)
// CHECK-NEXT:    nvvm.barrier0
// CHECK-NEXT:    %[[S:.*]] = llvm.addrspacecast %[[SRC]] : !llvm.ptr<1> to !llvm.ptr
// CHECK-NEXT:    llvm.call @nvshmemx_getmem_block(%[[DEST]], %[[S]], %[[N]], %[[PE]]) : (!llvm.ptr, !llvm.ptr, i64, i32) -> ()
// CHECK-NEXT:    nvvm.barrier0
// CHECK-NEXT:    return
func.func @get(%dest: !llvm.ptr, %src: !llvm.ptr<1>, %bytes: i64, %peer: i32) {
  distributed.get %dest, %src, %bytes, %peer : !llvm.ptr, !llvm.ptr<1>
  return
}

// Signal wait: every thread calls signal_wait_until (GE: 5), then the barrier and the token, which consume_token
// reads like a wait's.
// CHECK-LABEL: func.func @signal_wait(
// CHECK-SAME:    %[[SIG:[^:]*]]: !llvm.ptr<1>, %[[V:[^:]*]]: i64)
// CHECK-NEXT:    %[[GE:.*]] = llvm.mlir.constant(5 : i32) : i32
// CHECK-NEXT:    %[[G:.*]] = llvm.addrspacecast %[[SIG]] : !llvm.ptr<1> to !llvm.ptr
// CHECK-NEXT:    llvm.call @nvshmem_signal_wait_until(%[[G]], %[[GE]], %[[V]]) : (!llvm.ptr, i32, i64) -> i64
// CHECK-NEXT:    nvvm.barrier0
// CHECK-NEXT:    %[[TOKEN:.*]] = llvm.inline_asm has_side_effects "mov.u32 $0, 0;", "=r"
// CHECK:         llvm.inline_asm "", "=l,0,r" %{{.*}}, %[[TOKEN]]
func.func @signal_wait(%sig: !llvm.ptr<1>, %value: i64) -> !llvm.ptr<1> {
  %t = distributed.signal_wait %sig, %value cmp(ge) : !llvm.ptr<1>
  %p = distributed.consume_token %sig, %t : !llvm.ptr<1>
  return %p : !llvm.ptr<1>
}

// Every comparison maps to its NVSHMEM_CMP_* value.
// CHECK-LABEL: func.func @comparisons(
// CHECK:         llvm.mlir.constant(0 : i32)
// CHECK-NEXT:    llvm.addrspacecast
// CHECK-NEXT:    llvm.call @nvshmem_signal_wait_until
// CHECK:         llvm.mlir.constant(1 : i32)
// CHECK-NEXT:    llvm.addrspacecast
// CHECK-NEXT:    llvm.call @nvshmem_signal_wait_until
// CHECK:         llvm.mlir.constant(2 : i32)
// CHECK-NEXT:    llvm.addrspacecast
// CHECK-NEXT:    llvm.call @nvshmem_signal_wait_until
// CHECK:         llvm.mlir.constant(3 : i32)
// CHECK-NEXT:    llvm.addrspacecast
// CHECK-NEXT:    llvm.call @nvshmem_signal_wait_until
// CHECK:         llvm.mlir.constant(4 : i32)
// CHECK-NEXT:    llvm.addrspacecast
// CHECK-NEXT:    llvm.call @nvshmem_signal_wait_until
// CHECK:         llvm.mlir.constant(5 : i32)
// CHECK-NEXT:    llvm.addrspacecast
// CHECK-NEXT:    llvm.call @nvshmem_signal_wait_until
func.func @comparisons(%sig: !llvm.ptr<1>, %v: i64) {
  %0 = distributed.signal_wait %sig, %v cmp(eq) : !llvm.ptr<1>
  %1 = distributed.signal_wait %sig, %v cmp(ne) : !llvm.ptr<1>
  %2 = distributed.signal_wait %sig, %v cmp(gt) : !llvm.ptr<1>
  %3 = distributed.signal_wait %sig, %v cmp(le) : !llvm.ptr<1>
  %4 = distributed.signal_wait %sig, %v cmp(lt) : !llvm.ptr<1>
  %5 = distributed.signal_wait %sig, %v cmp(ge) : !llvm.ptr<1>
  return
}
