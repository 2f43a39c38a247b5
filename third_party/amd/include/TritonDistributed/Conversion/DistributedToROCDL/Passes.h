//===- Passes.h - the ROCDL target's passes and pipeline ------------*- C++
//-*-===//
//
// --convert-distributed-to-rocdl, --triton-dist-set-amdgcn-target and the named
// pipeline --triton-dist-lower-to-rocdl (TargetPasses.h has their bodies).
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTOROCDL_PASSES_H
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTOROCDL_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
namespace LLVM {
class LLVMDialect;
} // namespace LLVM
namespace ROCDL {
class ROCDLDialect;
} // namespace ROCDL

namespace triton_dist {

#define GEN_PASS_DECL
#include "TritonDistributed/Conversion/DistributedToROCDL/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "TritonDistributed/Conversion/DistributedToROCDL/Passes.h.inc"

/// Registers the named pipeline `--triton-dist-lower-to-rocdl`.
void registerLowerToROCDLPipeline();

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTOROCDL_PASSES_H
