// Malformed IR ends the tool with a located error and a non-zero exit, never a crash.
// RUN: not triton-dist-opt %s 2>&1 | FileCheck %s

func.func @missing_semantic(%flags: !llvm.ptr<1>, %n: i32, %v: i32) {
  // CHECK: malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: custom op 'distributed.wait' expected 'semantic'
  %t = distributed.wait %flags, %n, %v scope(sys) : !llvm.ptr<1>, i32
  return
}
