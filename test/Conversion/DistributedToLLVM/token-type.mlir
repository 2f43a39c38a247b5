// RUN: triton-dist-opt --convert-distributed-to-nvvm %s | FileCheck %s
// RUN: triton-dist-opt --convert-distributed-to-rocdl %s | FileCheck %s

// !distributed.token lowers to i32 wherever it flows: function signatures, calls, returns, branches, scf.

// CHECK-LABEL: func.func private @produce(i64, i32) -> i32
func.func private @produce(i64, i32) -> !distributed.token

// CHECK-LABEL: func.func @through_call(
// CHECK-SAME:      %[[ADDR:.*]]: i64, %[[N:.*]]: i32, %[[VALUE:.*]]: i64) -> i64
// CHECK:         %[[TOKEN:.*]] = call @produce(%[[ADDR]], %[[N]]) : (i64, i32) -> i32
// CHECK:         llvm.inline_asm "", "={{[lv]}},0,{{[rv]}}" %[[VALUE]], %[[TOKEN]] : (i64, i32) -> i64
func.func @through_call(%addr: i64, %n: i32, %value: i64) -> i64 {
  %t = call @produce(%addr, %n) : (i64, i32) -> !distributed.token
  %0 = distributed.consume_token %value, %t : i64
  return %0 : i64
}

// CHECK-LABEL: func.func @through_branch(
// CHECK:         cf.br ^[[JOIN:.*]](%{{.*}} : i32)
// CHECK:       ^[[JOIN]](%[[TOKEN:.*]]: i32):
// CHECK:         llvm.inline_asm "", "={{[rv]}},0,{{[rv]}}" %{{.*}}, %[[TOKEN]] : (i32, i32) -> i32
func.func @through_branch(%flags: !llvm.ptr<1>, %value: i32) -> i32 {
  %one = arith.constant 1 : i32
  %t = distributed.wait %flags, %one, %one scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  cf.br ^join(%t : !distributed.token)
^join(%token: !distributed.token):
  %0 = distributed.consume_token %value, %token : i32
  return %0 : i32
}

// CHECK-LABEL: func.func @through_scf_if(
// CHECK-SAME:      %[[A:.*]]: i32, %[[B:.*]]: i32, %[[COND:.*]]: i1, %[[VALUE:.*]]: f32) -> f32
// CHECK:         %[[TOKEN:.*]] = scf.if %[[COND]] -> (i32) {
// CHECK:           scf.yield %[[A]] : i32
// CHECK:         } else {
// CHECK:           scf.yield %[[B]] : i32
// CHECK:         }
// CHECK:         llvm.inline_asm "", "={{[rv]}},0,{{[rv]}}" %{{.*}}, %[[TOKEN]] : (i32, i32) -> i32
func.func @through_scf_if(%a: !distributed.token, %b: !distributed.token, %cond: i1, %value: f32) -> f32 {
  %t = scf.if %cond -> !distributed.token {
    scf.yield %a : !distributed.token
  } else {
    scf.yield %b : !distributed.token
  }
  %0 = distributed.consume_token %value, %t : f32
  return %0 : f32
}
