// RUN: not triton-dist-opt --convert-distributed-to-nvvm --split-input-file %s 2>&1 | FileCheck %s --check-prefix=NVVM
// RUN: not triton-dist-opt --convert-distributed-to-rocdl --split-input-file %s 2>&1 | FileCheck %s --check-prefix=ROCDL

// Each lowering refuses a module whose llvm.target_triple names the other architecture (or an unrelated one), at
// the module; a module with its own architecture's triple lowers.

// NVVM: foreign-triple.mlir:[[@LINE+2]]:1: error: the module targets 'amdgcn-amd-amdhsa', but this lowering emits code for 'nvptx64-nvidia-cuda'
// ROCDL-NOT: error: the module targets 'amdgcn-amd-amdhsa'
module attributes {llvm.target_triple = "amdgcn-amd-amdhsa"} {
  func.func @rank() -> i32 {
    %r = distributed.get_rank
    return %r : i32
  }
}

// -----

// ROCDL: foreign-triple.mlir:[[@LINE+2]]:1: error: the module targets 'nvptx64-nvidia-cuda', but this lowering emits code for 'amdgcn-amd-amdhsa'
// NVVM-NOT: error: the module targets 'nvptx64-nvidia-cuda'
module attributes {llvm.target_triple = "nvptx64-nvidia-cuda"} {
  func.func @rank() -> i32 {
    %r = distributed.get_rank
    return %r : i32
  }
}

// -----

// NVVM: foreign-triple.mlir:[[@LINE+3]]:3: error: the module targets 'x86_64-unknown-linux-gnu', but this lowering emits code for 'nvptx64-nvidia-cuda'
// ROCDL: foreign-triple.mlir:[[@LINE+2]]:3: error: the module targets 'x86_64-unknown-linux-gnu', but this lowering emits code for 'amdgcn-amd-amdhsa'
module {
  module @host attributes {llvm.target_triple = "x86_64-unknown-linux-gnu"} {
    func.func @rank() -> i32 {
      %r = distributed.get_rank
      return %r : i32
    }
  }
}
