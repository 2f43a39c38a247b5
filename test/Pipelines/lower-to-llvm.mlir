// RUN: triton-dist-opt --triton-dist-lower-to-nvvm %s | FileCheck %s --check-prefixes=CHECK,NVVM
// RUN: triton-dist-opt --triton-dist-lower-to-rocdl %s | FileCheck %s --check-prefixes=CHECK,ROCDL
// RUN: triton-dist-opt --triton-dist-lower-to-nvvm="set-target=true" %s | FileCheck %s --check-prefix=NVPTX-TARGET
// RUN: triton-dist-opt --triton-dist-lower-to-rocdl="set-target=true" %s | FileCheck %s --check-prefix=AMDGCN-TARGET
// RUN: triton-dist-opt --pass-pipeline="builtin.module(triton-dist-lower-to-nvvm{tight-polls=4 max-sleep-ns=0})" %s | FileCheck %s --check-prefix=SPIN
// RUN: triton-dist-opt --triton-dist-lower-to-nvvm %s | FileCheck %s --check-prefix=GONE
// RUN: triton-dist-opt --triton-dist-lower-to-rocdl %s | FileCheck %s --check-prefix=GONE

// The named pipelines take a `distributed` module with func/arith/scf/cf around it all the way to the LLVM dialect
// (and the target dialect): scf goes to cf first, so a wait inside scf.if lowers. Without set-target the module
// keeps no triple; with it, the target's triple and data layout are stamped.

// CHECK-LABEL: llvm.func @wait_when(
// CHECK:         llvm.cond_br
// CHECK:         llvm.load {{.*}} atomic acquire
// CHECK:         llvm.icmp "sge"
// NVVM:          nvvm.barrier0
// ROCDL:         rocdl.s.barrier
// GONE-NOT: distributed.
// GONE-NOT: scf.
// GONE-NOT: cf.
// GONE-NOT: func.func
// GONE-NOT: arith.
// GONE-NOT: llvm.target_triple

// NVPTX-TARGET: module attributes {llvm.data_layout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64", llvm.target_triple = "nvptx64-nvidia-cuda"}
// AMDGCN-TARGET: module attributes {llvm.data_layout = "e-m:e-p:64:64{{.*}}", llvm.target_triple = "amdgcn-amd-amdhsa"}

// The backoff options reach the lowering: no sleep with max-sleep-ns=0.
// SPIN-LABEL: llvm.func @wait_when(
// SPIN-NOT:     nvvm.nanosleep
// SPIN:         nvvm.barrier0

func.func @wait_when(%flags: !llvm.ptr<1>, %n: i32, %v: i32, %cond: i1) -> i32 {
  %zero = arith.constant 0 : i32
  %r = scf.if %cond -> i32 {
    %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i32
    %x = distributed.consume_token %v, %t : i32
    scf.yield %x : i32
  } else {
    scf.yield %zero : i32
  }
  return %r : i32
}
