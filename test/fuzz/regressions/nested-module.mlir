module {
  module @inner {
    func.func @rank() -> i32 {
      %r = distributed.get_rank
      return %r : i32
    }
  }
}
