//===- Passes.td - the NVVM target's passes -----------------*- tablegen -*-===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTONVVM_PASSES_TD
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTONVVM_PASSES_TD

include "mlir/Pass/PassBase.td"
include "TritonDistributed/Conversion/DistributedToLLVM/PassOptions.td"

def ConvertDistributedToNVVM : Pass<"convert-distributed-to-nvvm", "::mlir::ModuleOp"> {
  let summary = "Lower `distributed` ops to the NVVM and LLVM dialects (NVIDIA GPUs)";
  let description = [{
    Replaces every `distributed` op by NVVM + LLVM dialect code that reads the module's runtime context
    `@__triton_dist_context` (declared by the pass when missing). Scopes map to NVPTX syncscopes ("block",
    "device", "" for system). Release-ordered atomic adds are emitted as the PTX instruction itself
    (`atom.release.<scope>.global.add`) because LLVM 22's NVPTX backend drops the ordering of a release
    `atomicrmw`. A module whose `llvm.target_triple` is not an NVPTX triple is rejected.

    The whole way to the LLVM dialect is the named pipeline `--triton-dist-lower-to-nvvm` (structured control flow
    to cf first, this pass, the upstream arith/cf/func conversions; option `set-target` stamps the target).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect"];
  let options = Distributed_LoweringOptions;
}

def SetDistributedNVVMTarget : Pass<"triton-dist-set-nvptx-target", "::mlir::ModuleOp"> {
  let summary = "Stamp the nvptx target triple and data layout on the module";
  let description = [{
    Sets `llvm.target_triple` (default `nvptx64-nvidia-cuda`) and `llvm.data_layout` (default clang-22's for that triple)
    on the module, as the device-library build needs before translating to LLVM IR. A triple of another
    architecture, or a module that already carries a different triple or data layout, is an error.
  }];
  let options = Distributed_SetTargetOptions;
}

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTONVVM_PASSES_TD
