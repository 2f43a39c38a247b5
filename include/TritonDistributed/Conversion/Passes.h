//===- Passes.h - lowering passes of the `distributed` dialect --*- C++ -*-===//

#ifndef TRITON_DIST_CONVERSION_PASSES_H
#define TRITON_DIST_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
namespace LLVM {
class LLVMDialect;
} // namespace LLVM
namespace NVVM {
class NVVMDialect;
} // namespace NVVM
namespace ROCDL {
class ROCDLDialect;
} // namespace ROCDL

namespace triton_dist {

#define GEN_PASS_DECL
#include "TritonDistributed/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "TritonDistributed/Conversion/Passes.h.inc"

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_CONVERSION_PASSES_H
