// RUN: triton-dist-opt --convert-distributed-to-nvvm="triple=nvptx64-nvidia-cuda data-layout=e-p6:32:32-i64:64" %s | FileCheck %s --check-prefix=NV
// RUN: triton-dist-opt --convert-distributed-to-rocdl="triple=amdgcn-amd-amdhsa data-layout=e-m:e-p:64:64-A5-G1" %s | FileCheck %s --check-prefix=AMD
// RUN: triton-dist-opt --convert-distributed-to-nvvm %s | FileCheck %s --check-prefix=NONE

// The triple / data-layout options (the device-library build) stamp the module; without them it is left alone.

// NV:   module attributes {llvm.data_layout = "e-p6:32:32-i64:64", llvm.target_triple = "nvptx64-nvidia-cuda"}
// AMD:  module attributes {llvm.data_layout = "e-m:e-p:64:64-A5-G1", llvm.target_triple = "amdgcn-amd-amdhsa"}
// NONE: module {
func.func @rank() -> i32 {
  %0 = distributed.get_rank
  return %0 : i32
}
