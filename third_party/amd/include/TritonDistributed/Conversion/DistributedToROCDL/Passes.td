//===- Passes.td - the ROCDL target's passes -----------------*- tablegen -*-===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTOROCDL_PASSES_TD
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTOROCDL_PASSES_TD

include "mlir/Pass/PassBase.td"
include "TritonDistributed/Conversion/DistributedToLLVM/PassOptions.td"

def ConvertDistributedToROCDL : Pass<"convert-distributed-to-rocdl", "::mlir::ModuleOp"> {
  let summary = "Lower `distributed` ops to the ROCDL and LLVM dialects (AMD GPUs)";
  let description = [{
    Replaces every `distributed` op by ROCDL + LLVM dialect code that reads the module's runtime context
    `@__triton_dist_context` (declared by the pass when missing). Scopes map to AMDGPU syncscopes
    ("workgroup", "agent", "" for system). A module whose `llvm.target_triple` is not an AMDGCN triple is
    rejected.

    The whole way to the LLVM dialect is the named pipeline `--triton-dist-lower-to-rocdl` (structured control flow
    to cf first, this pass, the upstream arith/cf/func conversions; option `set-target` stamps the target).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::ROCDL::ROCDLDialect"];
  let options = Distributed_LoweringOptions;
}

def SetDistributedROCDLTarget : Pass<"triton-dist-set-amdgcn-target", "::mlir::ModuleOp"> {
  let summary = "Stamp the amdgcn target triple and data layout on the module";
  let description = [{
    Sets `llvm.target_triple` (default `amdgcn-amd-amdhsa`) and `llvm.data_layout` (default clang-22's for that triple)
    on the module, as the device-library build needs before translating to LLVM IR. A triple of another
    architecture, or a module that already carries a different triple or data layout, is an error.
  }];
  let options = Distributed_SetTargetOptions;
}

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTOROCDL_PASSES_TD
