// RUN: triton-dist-opt --triton-dist-set-nvptx-target --split-input-file --verify-diagnostics %s | FileCheck %s

// Stamping the target is a pass of its own (the device-library build runs it last): the target's triple and
// clang-22's data layout by default, or the ones given; never a triple of another architecture, and never over a
// different triple or data layout the module already has.

// CHECK: module attributes {llvm.data_layout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64", llvm.target_triple = "nvptx64-nvidia-cuda"}
module {
}

// -----

// The same attributes again are fine.
// CHECK: module attributes {llvm.data_layout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64", llvm.target_triple = "nvptx64-nvidia-cuda"}
module attributes {llvm.target_triple = "nvptx64-nvidia-cuda"} {
}

// -----

// expected-error @+1 {{the module already has llvm.target_triple = "amdgcn-amd-amdhsa"; refusing to replace it by}}
module attributes {llvm.target_triple = "amdgcn-amd-amdhsa"} {
}
