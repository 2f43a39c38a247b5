// triton-dist-opt is an mlir-opt: the usual driver flags work with our dialect and passes.

// A textual pipeline that lowers to NVVM and then to the LLVM dialect.
// RUN: triton-dist-opt %s --pass-pipeline='builtin.module(convert-distributed-to-nvvm,convert-func-to-llvm,reconcile-unrealized-casts)' | FileCheck %s --check-prefix=PIPELINE

// Printing the IR after every pass names our pass.
// RUN: triton-dist-opt %s --convert-distributed-to-rocdl --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=PRINT

// Pass options parse from the command line.
// RUN: triton-dist-opt %s '--convert-distributed-to-nvvm=tight-polls=3 max-sleep-ns=64' | FileCheck %s --check-prefix=OPTIONS

// The registered passes are listed.
// RUN: triton-dist-opt --help | FileCheck %s --check-prefix=HELP

// PIPELINE-LABEL: llvm.func @rank_plus_one
// PIPELINE-NOT:   distributed.
// PIPELINE:       llvm.mlir.addressof @__triton_dist_context
// PIPELINE:       llvm.load {{.*}} invariant

// PRINT: IR Dump After ConvertDistributedToROCDL (convert-distributed-to-rocdl)
// PRINT-NOT: distributed.get_rank

// OPTIONS-LABEL: func.func @rank_plus_one
// OPTIONS-NOT:   distributed.

// HELP-DAG: --convert-distributed-to-nvvm
// HELP-DAG: --convert-distributed-to-rocdl
// HELP-DAG: --split-input-file
// HELP-DAG: --verify-diagnostics

func.func @rank_plus_one() -> i32 {
  %one = arith.constant 1 : i32
  %me = distributed.get_rank
  %r = arith.addi %me, %one : i32
  return %r : i32
}
