//===- Passes.td - lowering passes of the `distributed` dialect -*- tablegen -*-===//

#ifndef TRITON_DIST_CONVERSION_PASSES_TD
#define TRITON_DIST_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

// Options both lowerings share: the backoff of `distributed.wait`, and the target the device-library build stamps
// on the module.
defvar Distributed_LoweringOptions = [
  Option<"tightPolls", "tight-polls", "unsigned", /*default=*/"16",
         "polls of a flag word made back to back before the first sleep">,
  Option<"maxSleepNs", "max-sleep-ns", "unsigned", /*default=*/"256",
         "cap, in nanoseconds, of the sleep between two polls (it starts at 32 ns and doubles); 0: never sleep">,
  Option<"triple", "triple", "std::string", /*default=*/"\"\"",
         "when set, stamp this `llvm.target_triple` on the module (the device-library build)">,
  Option<"dataLayout", "data-layout", "std::string", /*default=*/"\"\"",
         "when set, stamp this `llvm.data_layout` on the module (the device-library build)">,
];

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
  let options = Distributed_LoweringOptions;
}

def ConvertDistributedToROCDL : Pass<"convert-distributed-to-rocdl", "::mlir::ModuleOp"> {
  let summary = "Lower `distributed` ops to the ROCDL and LLVM dialects (AMD GPUs)";
  let description = [{
    Replaces every `distributed` op by ROCDL + LLVM dialect code that reads the module's runtime context
    `@__triton_dist_context` (declared by the pass when missing). Scopes map to AMDGPU syncscopes
    ("workgroup", "agent", "" for system).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::ROCDL::ROCDLDialect"];
  let options = Distributed_LoweringOptions;
}

#endif // TRITON_DIST_CONVERSION_PASSES_TD
