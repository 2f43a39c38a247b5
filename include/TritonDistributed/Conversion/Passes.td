//===- Passes.td - lowering passes of the `distributed` dialect -*- tablegen -*-===//

#ifndef TRITON_DIST_CONVERSION_PASSES_TD
#define TRITON_DIST_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertDistributedToNVVM : Pass<"convert-distributed-to-nvvm", "::mlir::ModuleOp"> {
  let summary = "Lower `distributed` ops to the NVVM and LLVM dialects (NVIDIA GPUs)";
  let description = [{
    Replaces every `distributed` op by NVVM + LLVM dialect code that reads the module's runtime context
    `@__triton_dist_context` (declared by the pass when missing). Scopes map to NVPTX syncscopes ("block",
    "device", "" for system). Release-ordered atomic adds are emitted as the PTX instruction itself
    (`atom.release.<scope>.global.add`) because LLVM 22's NVPTX backend drops the ordering of a release
    `atomicrmw`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect"];
}

def ConvertDistributedToROCDL : Pass<"convert-distributed-to-rocdl", "::mlir::ModuleOp"> {
  let summary = "Lower `distributed` ops to the ROCDL and LLVM dialects (AMD GPUs)";
  let description = [{
    Replaces every `distributed` op by ROCDL + LLVM dialect code that reads the module's runtime context
    `@__triton_dist_context` (declared by the pass when missing). Scopes map to AMDGPU syncscopes
    ("workgroup", "agent", "" for system).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::ROCDL::ROCDLDialect"];
}

#endif // TRITON_DIST_CONVERSION_PASSES_TD
