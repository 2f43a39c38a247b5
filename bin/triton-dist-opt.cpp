//===- triton-dist-opt.cpp - mlir-opt with the `distributed` dialect ------===//
//
// An mlir-opt-style driver: the `distributed` dialect, its lowering passes, and
// the upstream dialects and passes the lowering produces or needs (func, arith,
// scf, cf, LLVM, NVVM, ROCDL and their conversions). The usual flags work:
// --split-input-file, --verify-diagnostics, --pass-pipeline,
// --mlir-print-ir-after-all.
//
//===----------------------------------------------------------------------===//

#include "TritonDistributed/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Support/thread.h"

#include <optional>

/// MLIR's parser, verifier, passes and printer recurse once per nesting level
/// of the input: input nested a few thousand levels deep (regions, attribute
/// brackets) overflows the 8 MiB main-thread stack. The driver runs on a
/// thread with this much stack instead (reserved, touched only as used).
constexpr unsigned kDriverStackBytes = 1024u << 20;

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::triton_dist::registerAllDialects(registry);
  mlir::triton_dist::registerAllPasses();
  int status = 0;
  llvm::thread driver(std::optional<unsigned>(kDriverStackBytes), [&] {
    status = mlir::asMainReturnCode(mlir::MlirOptMain(
        argc, argv, "triton-dist optimizer driver\n", registry));
  });
  driver.join();
  return status;
}
