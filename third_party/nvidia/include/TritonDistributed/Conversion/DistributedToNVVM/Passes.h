//===- Passes.h - the NVVM target's passes and pipeline ------------*- C++
//-*-===//
//
// --convert-distributed-to-nvvm, --triton-dist-set-nvptx-target and the named
// pipeline --triton-dist-lower-to-nvvm (TargetPasses.h has their bodies).
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTONVVM_PASSES_H
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTONVVM_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
namespace LLVM {
class LLVMDialect;
} // namespace LLVM
namespace NVVM {
class NVVMDialect;
} // namespace NVVM

namespace triton_dist {

#define GEN_PASS_DECL
#include "TritonDistributed/Conversion/DistributedToNVVM/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "TritonDistributed/Conversion/DistributedToNVVM/Passes.h.inc"

/// Registers the named pipeline `--triton-dist-lower-to-nvvm`.
void registerLowerToNVVMPipeline();

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTONVVM_PASSES_H
