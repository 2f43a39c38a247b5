// RUN: triton-dist-opt --convert-distributed-to-nvvm %s | FileCheck %s
// RUN: triton-dist-opt --convert-distributed-to-rocdl %s | FileCheck %s

// `distributed.wait` with each comparison, on both targets: the poll compares the loaded flag with the wait value
// (flag first) by the signed predicate of `cmp`, and leaves the loop when it holds.

// CHECK-LABEL: func.func @wait_eq_i32(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i32)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i32
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "eq" %[[SEEN]], %[[V]] : i32
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_eq_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(eq) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_eq_i64(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i64)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i64
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "eq" %[[SEEN]], %[[V]] : i64
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_eq_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(eq) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_ne_i32(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i32)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i32
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "ne" %[[SEEN]], %[[V]] : i32
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_ne_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ne) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_ne_i64(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i64)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i64
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "ne" %[[SEEN]], %[[V]] : i64
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_ne_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ne) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_ge_i32(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i32)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i32
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "sge" %[[SEEN]], %[[V]] : i32
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_ge_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_ge_i64(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i64)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i64
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "sge" %[[SEEN]], %[[V]] : i64
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_ge_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_gt_i32(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i32)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i32
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "sgt" %[[SEEN]], %[[V]] : i32
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_gt_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(gt) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_gt_i64(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i64)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i64
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "sgt" %[[SEEN]], %[[V]] : i64
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_gt_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(gt) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_le_i32(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i32)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i32
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "sle" %[[SEEN]], %[[V]] : i32
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_le_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(le) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_le_i64(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i64)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i64
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "sle" %[[SEEN]], %[[V]] : i64
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_le_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(le) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_lt_i32(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i32)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i32
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "slt" %[[SEEN]], %[[V]] : i32
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_lt_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(lt) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

// CHECK-LABEL: func.func @wait_lt_i64(
// CHECK-SAME:    %[[FLAGS:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[V:[^:]*]]: i64)
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire {{.*}} : !llvm.ptr<1> -> i64
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "slt" %[[SEEN]], %[[V]] : i64
// CHECK-NEXT:    llvm.cond_br %[[OK]]
func.func @wait_lt_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(lt) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}
