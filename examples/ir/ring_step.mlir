// One step of a ring exchange, written directly in the `distributed` dialect: this rank writes a value into the
// next rank's slot, raises the next rank's flag (release), waits until its own flag is raised (acquire), and
// reads what the previous rank wrote. `scripts/demo.sh` shows it at every stage of the lowering.
module {
  func.func @ring_step(%slot: !llvm.ptr<1>, %flag: !llvm.ptr<1>, %value: i32) -> i32 {
    %one = arith.constant 1 : i32
    %me = distributed.get_rank
    %world = distributed.get_num_ranks
    %me_plus_one = arith.addi %me, %one : i32
    %next = arith.remsi %me_plus_one, %world : i32
    %next_slot = distributed.symm_at %slot, %next : !llvm.ptr<1>
    llvm.store %value, %next_slot : i32, !llvm.ptr<1>
    distributed.notify %flag, %next, %one sig_op(set) comm_scope(intra_node) : !llvm.ptr<1>, i32
    %token = distributed.wait %flag, %one, %one scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
    %my_slot = distributed.consume_token %slot, %token : !llvm.ptr<1>
    %received = llvm.load %my_slot : !llvm.ptr<1> -> i32
    return %received : i32
  }
}
