// RUN: triton-dist-opt --allow-unregistered-dialect --convert-distributed-to-nvvm --split-input-file --verify-diagnostics %s
// RUN: triton-dist-opt --allow-unregistered-dialect --convert-distributed-to-rocdl --split-input-file --verify-diagnostics %s

// wait and notify in the region of an op the lowering knows nothing about (not scf, not a function): the error
// says to move the op, and does not suggest --convert-scf-to-cf, which would not help.

func.func @wait_in_foreign_region(%flags: !llvm.ptr<1>, %n: i32) {
  // expected-note @+1 {{the region's op}}
  "test.single_block_region"() ({
    // expected-error @+1 {{'distributed.wait' op lowers to control flow (several blocks), but its region belongs to 'test.single_block_region', not to a function body; move the op out of that region}}
    %t = distributed.wait %flags, %n, %n scope(sys) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i32
    "test.terminator"() : () -> ()
  }) : () -> ()
  return
}

// -----

func.func @notify_in_foreign_region(%flag: !llvm.ptr<1>, %peer: i32) {
  // expected-note @+1 {{the region's op}}
  "test.single_block_region"() ({
    // expected-error @+1 {{'distributed.notify' op lowers to control flow (several blocks), but its region belongs to 'test.single_block_region', not to a function body; move the op out of that region}}
    distributed.notify %flag, %peer, %peer sig_op(add) comm_scope(gpu) : !llvm.ptr<1>, i32
    "test.terminator"() : () -> ()
  }) : () -> ()
  return
}

// -----

// Ops that do not split their block lower anywhere inside a function.
func.func @rank_in_foreign_region() {
  "test.single_block_region"() ({
    %r = distributed.get_rank
    "test.use"(%r) : (i32) -> ()
    "test.terminator"() : () -> ()
  }) : () -> ()
  return
}
