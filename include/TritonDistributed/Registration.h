//===- Registration.h - everything triton-dist tools register --*- C++ -*-===//
//
// One place that says which dialects and passes the tools (triton-dist-opt, the
// Python module) know, so they never disagree.
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_REGISTRATION_H
#define TRITON_DIST_REGISTRATION_H

namespace mlir {
class DialectRegistry;
namespace triton_dist {

/// The `distributed` dialect, the dialects its lowerings produce (LLVM, NVVM,
/// ROCDL), the dialects device library sources use (func, arith, scf, cf), and
/// their translations to LLVM IR.
void registerAllDialects(DialectRegistry &registry);

/// The passes of each target (convert-distributed-to-{nvvm,rocdl},
/// triton-dist-set-{nvptx,amdgcn}-target), the named pipelines
/// triton-dist-lower-to-{nvvm,rocdl}, and the upstream passes a pipeline to
/// LLVM needs (canonicalize, cse, convert-{scf,cf,arith,func}-to-llvm,
/// reconcile-unrealized-casts).
void registerAllPasses();

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_REGISTRATION_H
