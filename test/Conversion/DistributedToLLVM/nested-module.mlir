// RUN: triton-dist-opt --convert-distributed-to-nvvm %s | FileCheck %s
// RUN: triton-dist-opt --convert-distributed-to-rocdl %s | FileCheck %s

// `llvm.mlir.addressof` resolves in the nearest symbol table, so each module that holds a reader of the context
// gets its own declaration, and the outer module (which holds none) gets none. The tool verifies the lowered module
// (the addressof ops resolve), or it would fail.

// CHECK-LABEL: module {
// CHECK-NOT:     @__triton_dist_context
// CHECK:         module @inner {
// CHECK-NEXT:      llvm.mlir.global external @__triton_dist_context()
// CHECK:           func.func @rank
// CHECK:             llvm.mlir.addressof @__triton_dist_context
// CHECK:         module @other {
// CHECK-NEXT:      llvm.mlir.global external @__triton_dist_context()
// CHECK:           func.func @num_ranks
// CHECK:             llvm.mlir.addressof @__triton_dist_context
module {
  module @inner {
    func.func @rank() -> i32 {
      %r = distributed.get_rank
      return %r : i32
    }
  }
  module @other {
    func.func @num_ranks() -> i32 {
      %r = distributed.get_num_ranks
      return %r : i32
    }
  }
}
