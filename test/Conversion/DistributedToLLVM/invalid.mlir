// RUN: triton-dist-opt --convert-distributed-to-nvvm --split-input-file --verify-diagnostics %s
// RUN: triton-dist-opt --convert-distributed-to-rocdl --split-input-file --verify-diagnostics %s

// What the lowerings cannot handle: a located error on the op, and the pass fails (no crash, no partial output).

// wait becomes a loop, which only a function body's region is known to hold; scf regions go to cf first.
func.func @wait_in_scf_for(%flags: !llvm.ptr<1>, %lb: index, %ub: index, %step: index) {
  %one = arith.constant 1 : i32
  // expected-note @+1 {{the region's op}}
  scf.for %i = %lb to %ub step %step {
    // expected-error @+1 {{'distributed.wait' op lowers to control flow (several blocks), but its region belongs to 'scf.for', not to a function body; lower structured control flow to the cf dialect first (--convert-scf-to-cf)}}
    %t = distributed.wait %flags, %one, %one scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  }
  return
}

// -----

func.func @notify_in_scf_if(%flag: !llvm.ptr<1>, %peer: i32, %cond: i1) {
  %one = arith.constant 1 : i32
  // expected-note @+1 {{the region's op}}
  scf.if %cond {
    // expected-error @+1 {{'distributed.notify' op lowers to control flow (several blocks), but its region belongs to 'scf.if'}}
    distributed.notify %flag, %peer, %one sig_op(set) comm_scope(intra_node) : !llvm.ptr<1>, i32
  }
  return
}

// -----

// scf.reduce has no SingleBlock trait, but its region must stay one block all the same.
func.func @wait_in_scf_reduce(%flags: !llvm.ptr<1>, %lb: index, %ub: index, %st: index, %init: i32) -> i32 {
  %s = scf.parallel (%i) = (%lb) to (%ub) step (%st) init (%init) -> i32 {
    // expected-note @+1 {{the region's op}}
    scf.reduce(%init : i32) {
    ^bb0(%l: i32, %r: i32):
      // expected-error @+1 {{'distributed.wait' op lowers to control flow (several blocks), but its region belongs to 'scf.reduce', not to a function body; lower structured control flow to the cf dialect first (--convert-scf-to-cf)}}
      %t = distributed.wait %flags, %r, %r scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
      %sum = arith.addi %l, %r : i32
      scf.reduce.return %sum : i32
    }
  }
  return %s : i32
}

// -----

// Ops directly in a module: lowering them would leave instructions outside any function.
// expected-error @+1 {{'distributed.get_rank' op is outside any function: it lowers to instructions, and LLVM IR has instructions only in function bodies}}
%r = distributed.get_rank

// -----

%ptr = llvm.mlir.zero : !llvm.ptr<1>
%one = arith.constant 1 : i32
// expected-error @+1 {{'distributed.symm_at' op is outside any function}}
%peer = distributed.symm_at %ptr, %one : !llvm.ptr<1>

// -----

%flags = llvm.mlir.zero : !llvm.ptr<1>
%one = arith.constant 1 : i32
// expected-error @+1 {{'distributed.wait' op is outside any function}}
%t = distributed.wait %flags, %one, %one scope(sys) semantic(acquire) : !llvm.ptr<1>, i32

// -----

// expected-error @+1 {{'llvm.target_triple' must be a string, got 42 : i32}}
module attributes {llvm.target_triple = 42 : i32} {
  func.func @rank() -> i32 {
    %r = distributed.get_rank
    return %r : i32
  }
}

// -----

// The context's name is taken by something that is not a global.
// expected-error @+1 {{'__triton_dist_context' names the triton-dist runtime context and must be an llvm.mlir.global}}
llvm.func @__triton_dist_context()

func.func @rank() -> i32 {
  %0 = distributed.get_rank
  return %0 : i32
}

// -----

// expected-error @+1 {{the triton-dist runtime context must be a non-constant external global of type '!llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>' in address space 1}}
llvm.mlir.global external @__triton_dist_context() {addr_space = 1 : i32} : !llvm.struct<(i32, i32, array<128 x i64>)>

func.func @rank() -> i32 {
  %0 = distributed.get_rank
  return %0 : i32
}

// -----

// expected-error @+1 {{the triton-dist runtime context must be a non-constant external global}}
llvm.mlir.global external @__triton_dist_context() : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>

func.func @num_ranks() -> i32 {
  %0 = distributed.get_num_ranks
  return %0 : i32
}

// -----

// expected-error @+1 {{the triton-dist runtime context must be a non-constant external global}}
llvm.mlir.global internal @__triton_dist_context() {addr_space = 1 : i32} : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)> {
  %0 = llvm.mlir.zero : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
  llvm.return %0 : !llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>
}

func.func @symm_at(%ptr: !llvm.ptr<1>, %peer: i32) -> !llvm.ptr<1> {
  %0 = distributed.symm_at %ptr, %peer : !llvm.ptr<1>
  return %0 : !llvm.ptr<1>
}
