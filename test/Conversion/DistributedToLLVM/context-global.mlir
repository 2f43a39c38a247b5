// RUN: triton-dist-opt --convert-distributed-to-nvvm --split-input-file %s | FileCheck %s
// RUN: triton-dist-opt --convert-distributed-to-rocdl --split-input-file %s | FileCheck %s

// The runtime context @__triton_dist_context: declared once per module when an op reads it, an existing definition
// of the right shape is reused (and made externally_initialized, so its zero initializer is never folded).

// CHECK-LABEL: module {
// CHECK-COUNT-1: llvm.mlir.global external @__triton_dist_context() {addr_space = 1 : i32, alignment = 8 : i64, externally_initialized}
// CHECK-NOT:     llvm.mlir.global
// CHECK:         func.func @many_readers
func.func @many_readers(%ptr: !llvm.ptr<1>, %peer: i32) -> !llvm.ptr<1> {
  %me = distributed.get_rank
  %world = distributed.get_num_ranks
  %0 = distributed.symm_at %ptr, %peer : !llvm.ptr<1>
  %1 = distributed.symm_at %0, %me : !llvm.ptr<1>
  return %1 : !llvm.ptr<1>
}

// -----

// An existing definition without externally_initialized gets it; no second global.
// CHECK-LABEL: module {
// CHECK:         llvm.mlir.global external @__triton_dist_context() {addr_space = 1 : i32, externally_initialized} : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)> {
// CHECK-NOT:     llvm.mlir.global
// CHECK:         func.func @existing_definition
llvm.mlir.global external @__triton_dist_context() {addr_space = 1 : i32} : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)> {
  %0 = llvm.mlir.zero : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
  llvm.return %0 : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
}
func.func @existing_definition() -> i32 {
  %0 = distributed.get_rank
  return %0 : i32
}

// -----

// An external declaration (defined elsewhere) is used as it is.
// CHECK-LABEL: module {
// CHECK:         llvm.mlir.global external @__triton_dist_context() {addr_space = 1 : i32} : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>{{$}}
// CHECK-NOT:     llvm.mlir.global
// CHECK:         func.func @existing_declaration
llvm.mlir.global external @__triton_dist_context() {addr_space = 1 : i32} : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
func.func @existing_declaration() -> i32 {
  %0 = distributed.get_num_ranks
  return %0 : i32
}

// -----

// wait and consume_token do not read the context: no global.
// CHECK-LABEL: module {
// CHECK-NOT:     llvm.mlir.global
// CHECK:         func.func @no_reader
func.func @no_reader(%flags: !llvm.ptr<1>, %value: i64) -> i64 {
  %one = arith.constant 1 : i32
  %t = distributed.wait %flags, %one, %one scope(gpu) semantic(acquire) : !llvm.ptr<1>, i32
  %0 = distributed.consume_token %value, %t : i64
  return %0 : i64
}
