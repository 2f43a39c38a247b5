// RUN: triton-dist-opt --triton-dist-set-amdgcn-target --split-input-file --verify-diagnostics %s | FileCheck %s

// Stamping the target is a pass of its own (the device-library build runs it last): the target's triple and
// clang-22's data layout by default, or the ones given; never a triple of another architecture, and never over a
// different triple or data layout the module already has.

// CHECK: module attributes {llvm.data_layout = "e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9", llvm.target_triple = "amdgcn-amd-amdhsa"}
module {
}

// -----

// The same attributes again are fine.
// CHECK: module attributes {llvm.data_layout = "e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9", llvm.target_triple = "amdgcn-amd-amdhsa"}
module attributes {llvm.target_triple = "amdgcn-amd-amdhsa"} {
}

// -----

// expected-error @+1 {{the module already has llvm.target_triple = "nvptx64-nvidia-cuda"; refusing to replace it by}}
module attributes {llvm.target_triple = "nvptx64-nvidia-cuda"} {
}
