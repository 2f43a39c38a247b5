// The triton-dist device library, written in the `distributed` dialect: one function per symbol of docs/abi.md.
//
// The build lowers it with `triton-dist-opt --convert-distributed-to-{nvvm,rocdl}` and the upstream *-to-llvm
// passes, translates it to LLVM IR and assembles one bitcode file per target (lib/DeviceLibrary/CMakeLists.txt).
// Triton links the bitcode into kernels like libdevice, internalizes the functions it uses and inlines them.
//
// Addresses cross the ABI as i64 (llvm.inttoptr to a global pointer inside). A `!distributed.token` in a signature
// lowers to i32. Every function is `always_inline`; the ones that hold a program barrier (wait, notify) are also
// `convergent`, so no optimization before inlining moves their calls into divergent control flow.
module {
  //===--------------------------------------------------------------------===//
  // Ranks
  //===--------------------------------------------------------------------===//

  func.func @__triton_dist_rank() -> i32 attributes {always_inline} {
    %rank = distributed.get_rank
    return %rank : i32
  }

  func.func @__triton_dist_num_ranks() -> i32 attributes {always_inline} {
    %num_ranks = distributed.get_num_ranks
    return %num_ranks : i32
  }

  // addr - heap_bases[me] + heap_bases[rank]; symm_at(0, rank) is the byte distance between the two heaps.
  func.func @__triton_dist_symm_at(%addr: i64, %rank: i32) -> i64 attributes {always_inline} {
    %ptr = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %peer = distributed.symm_at %ptr, %rank : !llvm.ptr<1>
    %peer_addr = llvm.ptrtoint %peer : !llvm.ptr<1> to i64
    return %peer_addr : i64
  }

  //===--------------------------------------------------------------------===//
  // wait: __triton_dist_wait_{cta,gpu,sys}_{acquire,relaxed}_{i32,i64}(addr, n, value) -> token
  //===--------------------------------------------------------------------===//

  func.func @__triton_dist_wait_cta_acquire_i32(%addr: i64, %n: i32, %value: i32) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(cta) semantic(acquire) : !llvm.ptr<1>, i32
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_cta_acquire_i64(%addr: i64, %n: i32, %value: i64) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(cta) semantic(acquire) : !llvm.ptr<1>, i64
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_cta_relaxed_i32(%addr: i64, %n: i32, %value: i32) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(cta) semantic(relaxed) : !llvm.ptr<1>, i32
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_cta_relaxed_i64(%addr: i64, %n: i32, %value: i64) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(cta) semantic(relaxed) : !llvm.ptr<1>, i64
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_gpu_acquire_i32(%addr: i64, %n: i32, %value: i32) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(gpu) semantic(acquire) : !llvm.ptr<1>, i32
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_gpu_acquire_i64(%addr: i64, %n: i32, %value: i64) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(gpu) semantic(acquire) : !llvm.ptr<1>, i64
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_gpu_relaxed_i32(%addr: i64, %n: i32, %value: i32) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(gpu) semantic(relaxed) : !llvm.ptr<1>, i32
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_gpu_relaxed_i64(%addr: i64, %n: i32, %value: i64) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(gpu) semantic(relaxed) : !llvm.ptr<1>, i64
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_sys_acquire_i32(%addr: i64, %n: i32, %value: i32) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_sys_acquire_i64(%addr: i64, %n: i32, %value: i64) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(sys) semantic(acquire) : !llvm.ptr<1>, i64
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_sys_relaxed_i32(%addr: i64, %n: i32, %value: i32) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(sys) semantic(relaxed) : !llvm.ptr<1>, i32
    return %token : !distributed.token
  }

  func.func @__triton_dist_wait_sys_relaxed_i64(%addr: i64, %n: i32, %value: i64) -> !distributed.token
      attributes {always_inline, passthrough = ["convergent"]} {
    %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    %token = distributed.wait %flags, %n, %value scope(sys) semantic(relaxed) : !llvm.ptr<1>, i64
    return %token : !distributed.token
  }

  //===--------------------------------------------------------------------===//
  // notify: __triton_dist_notify_{set,add}_{gpu,intra_node,inter_node}_{i32,i64}(addr, rank, signal) -> 0
  //===--------------------------------------------------------------------===//

  func.func @__triton_dist_notify_set_gpu_i32(%addr: i64, %rank: i32, %signal: i32) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(set) comm_scope(gpu) : !llvm.ptr<1>, i32
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_set_gpu_i64(%addr: i64, %rank: i32, %signal: i64) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(set) comm_scope(gpu) : !llvm.ptr<1>, i64
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_set_intra_node_i32(%addr: i64, %rank: i32, %signal: i32) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(set) comm_scope(intra_node) : !llvm.ptr<1>, i32
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_set_intra_node_i64(%addr: i64, %rank: i32, %signal: i64) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(set) comm_scope(intra_node) : !llvm.ptr<1>, i64
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_set_inter_node_i32(%addr: i64, %rank: i32, %signal: i32) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(set) comm_scope(inter_node) : !llvm.ptr<1>, i32
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_set_inter_node_i64(%addr: i64, %rank: i32, %signal: i64) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(set) comm_scope(inter_node) : !llvm.ptr<1>, i64
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_add_gpu_i32(%addr: i64, %rank: i32, %signal: i32) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(add) comm_scope(gpu) : !llvm.ptr<1>, i32
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_add_gpu_i64(%addr: i64, %rank: i32, %signal: i64) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(add) comm_scope(gpu) : !llvm.ptr<1>, i64
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_add_intra_node_i32(%addr: i64, %rank: i32, %signal: i32) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(add) comm_scope(intra_node) : !llvm.ptr<1>, i32
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_add_intra_node_i64(%addr: i64, %rank: i32, %signal: i64) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(add) comm_scope(intra_node) : !llvm.ptr<1>, i64
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_add_inter_node_i32(%addr: i64, %rank: i32, %signal: i32) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(add) comm_scope(inter_node) : !llvm.ptr<1>, i32
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  func.func @__triton_dist_notify_add_inter_node_i64(%addr: i64, %rank: i32, %signal: i64) -> i32
      attributes {always_inline, passthrough = ["convergent"]} {
    %flag = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
    distributed.notify %flag, %rank, %signal sig_op(add) comm_scope(inter_node) : !llvm.ptr<1>, i64
    %zero = arith.constant 0 : i32
    return %zero : i32
  }

  //===--------------------------------------------------------------------===//
  // consume_token
  //===--------------------------------------------------------------------===//

  // Returns value, data-dependent on token: nothing computed from the result moves above the wait.
  func.func @__triton_dist_consume_token(%value: i64, %token: !distributed.token) -> i64 attributes {always_inline} {
    %tied = distributed.consume_token %value, %token : i64
    return %tied : i64
  }
}
