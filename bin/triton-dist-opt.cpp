//===- triton-dist-opt.cpp - mlir-opt with the `distributed` dialect ------===//
//
// An mlir-opt-style driver: the `distributed` dialect, its lowering passes, and
// the upstream dialects and passes the lowering produces or needs (func, arith,
// scf, cf, LLVM, NVVM, ROCDL and their conversions). The usual flags work:
// --split-input-file, --verify-diagnostics, --pass-pipeline,
// --mlir-print-ir-after-all.
//
// Input nested deeper than kMaxNestingDepth (InputLimits.h) is refused before
// parsing with one located error, as the Python module refuses it.
//
//===----------------------------------------------------------------------===//

#include "TritonDistributed/InputLimits.h"
#include "TritonDistributed/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/thread.h"

#include <cstdio>
#include <optional>
#include <string>

using namespace mlir;

/// MLIR's parser, verifier, passes and printer recurse once per nesting level
/// of the input: input nested a few thousand levels deep (regions, attribute
/// brackets) overflows the 8 MiB main-thread stack. The driver runs on a
/// thread with this much stack instead (reserved, touched only as used).
constexpr unsigned kDriverStackBytes = 1024u << 20;

/// MlirOptMain(argc, argv, input, output, registry), with the input checked
/// for excessive nesting between reading and parsing it.
static LogicalResult runDriver(int argc, char **argv,
                               DialectRegistry &registry) {
  llvm::InitLLVM initLLVM(argc, argv);
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "triton-dist optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleave(registry.getDialectNames(), llvm::outs(), ",");
    llvm::outs() << "\n";
    return success();
  }
  if (config.shouldListPasses()) {
    printRegisteredPasses();
    return success();
  }
  if (inputFilename == "-" &&
      llvm::sys::Process::FileDescriptorIsDisplayed(fileno(stdin)))
    llvm::errs() << "(processing input from stdin now, hit ctrl-c/ctrl-d to "
                    "interrupt)\n";

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(inputFilename, &errorMessage);
  if (!file) {
    llvm::errs() << errorMessage << "\n";
    return failure();
  }
  if (std::optional<triton_dist::NestingExcess> where =
          triton_dist::findExcessiveNesting(file->getBuffer(),
                                            triton_dist::kMaxNestingDepth,
                                            config.inputSplitMarker())) {
    std::string name = inputFilename == "-" ? "<stdin>" : inputFilename;
    llvm::errs() << name << ":" << where->line << ":" << where->column
                 << ": error: " << triton_dist::describeExcessiveNesting()
                 << "\n";
    return failure();
  }

  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return failure();
  }
  if (failed(MlirOptMain(output->os(), std::move(file), registry, config)))
    return failure();
  output->keep();
  return success();
}

int main(int argc, char **argv) {
  DialectRegistry registry;
  triton_dist::registerAllDialects(registry);
  triton_dist::registerAllPasses();
  int status = 0;
  llvm::thread driver(std::optional<unsigned>(kDriverStackBytes), [&] {
    status = asMainReturnCode(runDriver(argc, argv, registry));
  });
  driver.join();
  return status;
}
