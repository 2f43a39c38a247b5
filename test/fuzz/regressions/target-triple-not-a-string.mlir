module attributes {llvm.target_triple = 42 : i32} {
  func.func @rank() -> i32 {
    %r = distributed.get_rank
    return %r : i32
  }
}
