// Round trip of every `distributed` op: parse, print, parse again (generic form too).
// RUN: triton-dist-opt %s | triton-dist-opt | FileCheck %s
// RUN: triton-dist-opt %s --mlir-print-op-generic | triton-dist-opt | FileCheck %s

// CHECK-LABEL: func.func @ranks
func.func @ranks() -> (i32, i32, i32, i32, i32, i32, i32) {
  // CHECK-NEXT: distributed.get_rank{{$}}
  %me = distributed.get_rank
  // CHECK-NEXT: distributed.get_num_ranks{{$}}
  %world = distributed.get_num_ranks
  // The default axis (world) is elided; the others are printed.
  // CHECK-NEXT: distributed.get_rank{{$}}
  %me_explicit = distributed.get_rank axis(world)
  // CHECK-NEXT: distributed.get_rank axis(local)
  %local = distributed.get_rank axis(local)
  // CHECK-NEXT: distributed.get_num_ranks axis(local)
  %local_world = distributed.get_num_ranks axis(local)
  // CHECK-NEXT: distributed.get_rank axis(node)
  %node = distributed.get_rank axis(node)
  // CHECK-NEXT: distributed.get_num_ranks axis(node)
  %nodes = distributed.get_num_ranks axis(node)
  return %me, %world, %me_explicit, %local, %local_world, %node, %nodes : i32, i32, i32, i32, i32, i32, i32
}

// CHECK-LABEL: func.func @symm_at
// CHECK-SAME: (%[[GLOBAL:.*]]: !llvm.ptr<1>, %[[GENERIC:.*]]: !llvm.ptr, %[[RANK:.*]]: i32)
func.func @symm_at(%global: !llvm.ptr<1>, %generic: !llvm.ptr, %rank: i32) -> (!llvm.ptr<1>, !llvm.ptr) {
  // CHECK: distributed.symm_at %[[GLOBAL]], %[[RANK]] : !llvm.ptr<1>
  %a = distributed.symm_at %global, %rank : !llvm.ptr<1>
  // CHECK: distributed.symm_at %[[GENERIC]], %[[RANK]] : !llvm.ptr
  %b = distributed.symm_at %generic, %rank : !llvm.ptr
  return %a, %b : !llvm.ptr<1>, !llvm.ptr
}

// CHECK-LABEL: func.func @wait_every_scope_and_semantic
// CHECK-SAME: (%[[FLAGS:.*]]: !llvm.ptr<1>, %[[N:.*]]: i32, %[[V32:.*]]: i32, %[[V64:.*]]: i64)
func.func @wait_every_scope_and_semantic(%flags: !llvm.ptr<1>, %n: i32, %v32: i32, %v64: i64) {
  // CHECK: distributed.wait %[[FLAGS]], %[[N]], %[[V32]] scope(cta) semantic(acquire) : !llvm.ptr<1>, i32
  %t0 = distributed.wait %flags, %n, %v32 scope(cta) semantic(acquire) : !llvm.ptr<1>, i32
  // CHECK: distributed.wait %[[FLAGS]], %[[N]], %[[V32]] scope(gpu) semantic(relaxed) : !llvm.ptr<1>, i32
  %t1 = distributed.wait %flags, %n, %v32 scope(gpu) semantic(relaxed) : !llvm.ptr<1>, i32
  // CHECK: %{{.*}} = distributed.wait %[[FLAGS]], %[[N]], %[[V64]] scope(sys) semantic(acquire) : !llvm.ptr<1>, i64
  %t2 = distributed.wait %flags, %n, %v64 scope(sys) semantic(acquire) : !llvm.ptr<1>, i64
  return
}

// The comparison is printed only when it is not the default `eq`.
// CHECK-LABEL: func.func @wait_every_comparison
// CHECK-SAME: (%[[FLAGS:.*]]: !llvm.ptr<1>, %[[N:.*]]: i32, %[[V32:.*]]: i32, %[[V64:.*]]: i64)
func.func @wait_every_comparison(%flags: !llvm.ptr<1>, %n: i32, %v32: i32, %v64: i64) {
  // CHECK-NEXT: distributed.wait %[[FLAGS]], %[[N]], %[[V32]] scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  %eq = distributed.wait %flags, %n, %v32 scope(sys) semantic(acquire) cmp(eq) : !llvm.ptr<1>, i32
  // CHECK-NEXT: distributed.wait %[[FLAGS]], %[[N]], %[[V32]] scope(sys) semantic(acquire) cmp(ne) : !llvm.ptr<1>, i32
  %ne = distributed.wait %flags, %n, %v32 scope(sys) semantic(acquire) cmp(ne) : !llvm.ptr<1>, i32
  // CHECK-NEXT: distributed.wait %[[FLAGS]], %[[N]], %[[V64]] scope(gpu) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i64
  %ge = distributed.wait %flags, %n, %v64 scope(gpu) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i64
  // CHECK-NEXT: distributed.wait %[[FLAGS]], %[[N]], %[[V32]] scope(cta) semantic(relaxed) cmp(gt) : !llvm.ptr<1>, i32
  %gt = distributed.wait %flags, %n, %v32 scope(cta) semantic(relaxed) cmp(gt) : !llvm.ptr<1>, i32
  // CHECK-NEXT: distributed.wait %[[FLAGS]], %[[N]], %[[V64]] scope(sys) semantic(relaxed) cmp(le) : !llvm.ptr<1>, i64
  %le = distributed.wait %flags, %n, %v64 scope(sys) semantic(relaxed) cmp(le) : !llvm.ptr<1>, i64
  // CHECK-NEXT: distributed.wait %[[FLAGS]], %[[N]], %[[V32]] scope(sys) semantic(acquire) cmp(lt) : !llvm.ptr<1>, i32
  %lt = distributed.wait %flags, %n, %v32 scope(sys) semantic(acquire) cmp(lt) : !llvm.ptr<1>, i32
  // The watchdog's timeout is an attribute of the dictionary.
  // CHECK-NEXT: distributed.wait %[[FLAGS]], %[[N]], %[[V64]] scope(sys) semantic(acquire) cmp(ge) {timeout_ns = 1000000 : i64} : !llvm.ptr<1>, i64
  %watched = distributed.wait %flags, %n, %v64 scope(sys) semantic(acquire) cmp(ge) {timeout_ns = 1000000 : i64} : !llvm.ptr<1>, i64
  return
}

// CHECK-LABEL: func.func @heap_queries
// CHECK-SAME: (%[[GLOBAL:.*]]: !llvm.ptr<1>, %[[GENERIC:.*]]: !llvm.ptr)
func.func @heap_queries(%global: !llvm.ptr<1>, %generic: !llvm.ptr) -> (i64, i64, i64) {
  // CHECK-NEXT: distributed.heap_offset %[[GLOBAL]] : !llvm.ptr<1>
  %a = distributed.heap_offset %global : !llvm.ptr<1>
  // CHECK-NEXT: distributed.heap_offset %[[GENERIC]] : !llvm.ptr
  %b = distributed.heap_offset %generic : !llvm.ptr
  // CHECK-NEXT: distributed.get_heap_size{{$}}
  %size = distributed.get_heap_size
  return %a, %b, %size : i64, i64, i64
}

// CHECK-LABEL: func.func @consume_token
func.func @consume_token(%flags: !llvm.ptr<1>, %slot: !llvm.ptr<1>, %i: i64, %f: f32) -> (!llvm.ptr<1>, i64, f32) {
  %one = arith.constant 1 : i32
  // CHECK: %[[TOKEN:.*]] = distributed.wait
  %token = distributed.wait %flags, %one, %one scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  // CHECK: distributed.consume_token %{{.*}}, %[[TOKEN]] : !llvm.ptr<1>
  %p = distributed.consume_token %slot, %token : !llvm.ptr<1>
  // CHECK: distributed.consume_token %{{.*}}, %[[TOKEN]] : i64
  %j = distributed.consume_token %i, %token : i64
  // CHECK: distributed.consume_token %{{.*}}, %[[TOKEN]] : f32
  %g = distributed.consume_token %f, %token : f32
  return %p, %j, %g : !llvm.ptr<1>, i64, f32
}

// The token is a first-class type: it can cross function boundaries.
// CHECK-LABEL: func.func @token_argument
// CHECK-SAME: !distributed.token
func.func @token_argument(%value: i32, %token: !distributed.token) -> i32 {
  %r = distributed.consume_token %value, %token : i32
  return %r : i32
}

// CHECK-LABEL: func.func @notify_every_op_and_scope
// CHECK-SAME: (%[[FLAG:.*]]: !llvm.ptr<1>, %[[PEER:.*]]: i32, %[[S32:.*]]: i32, %[[S64:.*]]: i64)
func.func @notify_every_op_and_scope(%flag: !llvm.ptr<1>, %peer: i32, %s32: i32, %s64: i64) {
  // CHECK: distributed.notify %[[FLAG]], %[[PEER]], %[[S32]] sig_op(set) comm_scope(gpu) : !llvm.ptr<1>, i32
  distributed.notify %flag, %peer, %s32 sig_op(set) comm_scope(gpu) : !llvm.ptr<1>, i32
  // CHECK: distributed.notify %[[FLAG]], %[[PEER]], %[[S32]] sig_op(add) comm_scope(intra_node) : !llvm.ptr<1>, i32
  distributed.notify %flag, %peer, %s32 sig_op(add) comm_scope(intra_node) : !llvm.ptr<1>, i32
  // CHECK: distributed.notify %[[FLAG]], %[[PEER]], %[[S64]] sig_op(set) comm_scope(inter_node) : !llvm.ptr<1>, i64
  distributed.notify %flag, %peer, %s64 sig_op(set) comm_scope(inter_node) : !llvm.ptr<1>, i64
  return
}
