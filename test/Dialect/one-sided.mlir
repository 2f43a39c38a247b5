// The one-sided inter-node ops round-trip through the printer and the parser (generic form too).
// RUN: triton-dist-opt %s | FileCheck %s
// RUN: triton-dist-opt %s | triton-dist-opt | FileCheck %s
// RUN: triton-dist-opt %s --mlir-print-op-generic | triton-dist-opt | FileCheck %s

// CHECK-LABEL: func.func @put_signal(
// CHECK:         distributed.put_signal %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 sig_op(set) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
// CHECK:         distributed.put_signal %arg0, %arg6, %arg2, %arg3, %arg4, %arg5 sig_op(add) : !llvm.ptr<1>, !llvm.ptr, !llvm.ptr<1>
func.func @put_signal(%dest: !llvm.ptr<1>, %src: !llvm.ptr<1>, %bytes: i64, %sig: !llvm.ptr<1>, %value: i64,
                      %peer: i32, %generic: !llvm.ptr) {
  distributed.put_signal %dest, %src, %bytes, %sig, %value, %peer sig_op(set) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  distributed.put_signal %dest, %generic, %bytes, %sig, %value, %peer sig_op(add) : !llvm.ptr<1>, !llvm.ptr, !llvm.ptr<1>
  return
}

// CHECK-LABEL: func.func @get(
// CHECK:         distributed.get %arg0, %arg1, %arg2, %arg3 : !llvm.ptr, !llvm.ptr<1>
func.func @get(%dest: !llvm.ptr, %src: !llvm.ptr<1>, %bytes: i64, %peer: i32) {
  distributed.get %dest, %src, %bytes, %peer : !llvm.ptr, !llvm.ptr<1>
  return
}

// cmp defaults to eq and is elided; the token feeds consume_token.
// CHECK-LABEL: func.func @signal_wait(
// CHECK:         %[[T:.*]] = distributed.signal_wait %arg0, %arg1 : !llvm.ptr<1>
// CHECK:         distributed.signal_wait %arg0, %arg1 cmp(ge) : !llvm.ptr<1>
// CHECK:         distributed.consume_token %arg0, %[[T]] : !llvm.ptr<1>
func.func @signal_wait(%sig: !llvm.ptr<1>, %value: i64) -> !llvm.ptr<1> {
  %t = distributed.signal_wait %sig, %value cmp(eq) : !llvm.ptr<1>
  %u = distributed.signal_wait %sig, %value cmp(ge) : !llvm.ptr<1>
  %p = distributed.consume_token %sig, %t : !llvm.ptr<1>
  return %p : !llvm.ptr<1>
}

// A constant comparison that some value satisfies is accepted: gt 2^64-2, lt 1, and a negative i64 (a large
// unsigned value) with ge.
// CHECK-LABEL: func.func @signal_wait_edges(
func.func @signal_wait_edges(%sig: !llvm.ptr<1>) {
  %almost = arith.constant -2 : i64
  %one = arith.constant 1 : i64
  %neg = arith.constant -5 : i64
  // CHECK: cmp(gt)
  %a = distributed.signal_wait %sig, %almost cmp(gt) : !llvm.ptr<1>
  // CHECK: cmp(lt)
  %b = distributed.signal_wait %sig, %one cmp(lt) : !llvm.ptr<1>
  // CHECK: cmp(ge)
  %c = distributed.signal_wait %sig, %neg cmp(ge) : !llvm.ptr<1>
  return
}
