func.func @f(%flags: !llvm.ptr<1>, %lb: index, %ub: index, %st: index, %init: i32) -> i32 {
  %s = scf.parallel (%i) = (%lb) to (%ub) step (%st) init (%init) -> i32 {
    scf.reduce(%init : i32) {
    ^bb0(%l: i32, %r: i32):
      %t = distributed.wait %flags, %r, %r scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
      %sum = arith.addi %l, %r : i32
      scf.reduce.return %sum : i32
    }
  }
  return %s : i32
}
