// The named lowering pipelines run on a whole module. Nested under func.func they used to abort triton-dist-opt
// ("Can't add pass ... restricted to 'builtin.module'", SIGABRT); now it is an error that says where to anchor them.
// RUN: not triton-dist-opt --pass-pipeline='func.func(triton-dist-lower-to-nvvm)' %s 2>&1 | FileCheck %s --check-prefix=NESTED-NVVM
// RUN: not triton-dist-opt --pass-pipeline='builtin.module(func.func(triton-dist-lower-to-rocdl{tight-polls=3}))' %s 2>&1 | FileCheck %s --check-prefix=NESTED-ROCDL
// Anchored on the module, or on any op at the top, they lower it (the Python bindings agree: test_mlir_bindings.py).
// RUN: triton-dist-opt --pass-pipeline='any(triton-dist-lower-to-nvvm)' %s | FileCheck %s --check-prefix=LOWERED
// RUN: triton-dist-opt --pass-pipeline='builtin.module(triton-dist-lower-to-rocdl{tight-polls=3})' %s | FileCheck %s --check-prefix=LOWERED

// NESTED-NVVM: error: 'triton-dist-lower-to-nvvm' lowers a whole module: it runs on 'builtin.module', not nested in 'func.func' (write 'builtin.module(triton-dist-lower-to-nvvm)')
// NESTED-NVVM-NOT: LLVM ERROR
// NESTED-ROCDL: error: 'triton-dist-lower-to-rocdl' lowers a whole module: it runs on 'builtin.module', not nested in 'func.func'
// NESTED-ROCDL-NOT: LLVM ERROR

// LOWERED-LABEL: llvm.func @rank_plus_one
// LOWERED-NOT:   distributed.
// LOWERED:       llvm.mlir.addressof @__triton_dist_context
func.func @rank_plus_one() -> i32 {
  %r = distributed.get_rank
  %c1 = arith.constant 1 : i32
  %s = arith.addi %r, %c1 : i32
  return %s : i32
}
