//===- triton-dist-opt.cpp - mlir-opt with the `distributed` dialect ------===//
//
// An mlir-opt-style driver: the `distributed` dialect, its lowering passes, and the upstream dialects and passes
// the lowering produces or needs (func, arith, scf, cf, LLVM, NVVM, ROCDL and their conversions). The usual
// flags work: --split-input-file, --verify-diagnostics, --pass-pipeline, --mlir-print-ir-after-all.
//
//===----------------------------------------------------------------------===//

#include "TritonDistributed/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::triton_dist::registerAllDialects(registry);
  mlir::triton_dist::registerAllPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "triton-dist optimizer driver\n", registry));
}
