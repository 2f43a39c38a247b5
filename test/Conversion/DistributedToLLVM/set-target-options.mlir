// RUN: triton-dist-opt --triton-dist-set-nvptx-target="triple=nvptx-nvidia-cuda data-layout=e-p:64:64" %s | FileCheck %s --check-prefix=NVPTX32
// RUN: triton-dist-opt --triton-dist-set-amdgcn-target="triple=amdgcn-amd-amdpal data-layout=e-p:64:64" %s | FileCheck %s --check-prefix=AMDPAL
// RUN: not triton-dist-opt --triton-dist-set-nvptx-target="triple=amdgcn-amd-amdhsa" %s 2>&1 | FileCheck %s --check-prefix=NOT-NVPTX
// RUN: not triton-dist-opt --triton-dist-set-amdgcn-target="triple=nvptx64-nvidia-cuda" %s 2>&1 | FileCheck %s --check-prefix=NOT-AMDGCN

// Both set-target passes share one body: a triple and data layout given as options are stamped as given, as long
// as the triple is of the pass's architecture.
// NVPTX32: module attributes {llvm.data_layout = "e-p:64:64", llvm.target_triple = "nvptx-nvidia-cuda"}
// AMDPAL: module attributes {llvm.data_layout = "e-p:64:64", llvm.target_triple = "amdgcn-amd-amdpal"}
// NOT-NVPTX: error: 'amdgcn-amd-amdhsa' is not a triple of this target ('nvptx64-nvidia-cuda')
// NOT-AMDGCN: error: 'nvptx64-nvidia-cuda' is not a triple of this target ('amdgcn-amd-amdhsa')
module {
}
