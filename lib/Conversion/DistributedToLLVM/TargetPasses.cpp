//===- TargetPasses.cpp - the passes and pipeline of every target ---------===//

#include "TritonDistributed/Conversion/DistributedToLLVM/TargetPasses.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::triton_dist;

LogicalResult
mlir::triton_dist::setTargetAttributes(ModuleOp module,
                                       const TargetInfoBase &target,
                                       StringRef triple, StringRef dataLayout) {
  if (triple.empty())
    triple = target.getTriple();
  if (dataLayout.empty())
    dataLayout = target.getDataLayout();
  if (!target.acceptsTriple(triple))
    return module.emitError()
           << "'" << triple << "' is not a triple of this target ('"
           << target.getTriple() << "')";
  MLIRContext *context = module.getContext();
  for (auto [name, value] :
       {std::pair(LLVM::LLVMDialect::getTargetTripleAttrName(), triple),
        std::pair(LLVM::LLVMDialect::getDataLayoutAttrName(), dataLayout)}) {
    auto wanted = StringAttr::get(context, value);
    if (Attribute existing = module->getAttr(name);
        existing && existing != wanted)
      return module.emitError()
             << "the module already has " << name << " = " << existing
             << "; refusing to replace it by " << wanted;
    module->setAttr(name, wanted);
  }
  return success();
}

void mlir::triton_dist::buildLowerToLLVMPipeline(
    OpPassManager &pm, const LowerToLLVMPipelineOptions &options,
    const TargetPassFactories &target) {
  LoweringOptions lowering;
  lowering.backoff.tightPolls = options.tightPolls;
  lowering.backoff.maxSleepNs = options.maxSleepNs;
  lowering.waitTimeoutNs = options.waitTimeoutNs;
  lowering.waitTimeoutFromRuntime = options.waitTimeoutFromRuntime;
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(target.createLowering(lowering));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (options.setTarget)
    pm.addPass(target.createSetTarget());
}

void mlir::triton_dist::registerLowerToLLVMPipeline(
    StringRef name, StringRef description, TargetPassFactories target) {
  registerPassPipeline(
      name, description,
      [name = name.str(), target = std::move(target)](
          OpPassManager &pm, StringRef optionsText,
          function_ref<LogicalResult(const Twine &)> errorHandler) {
        // Its passes run on builtin.module: OpPassManager::addPass would abort
        // the process on a pass manager anchored elsewhere.
        StringRef anchor = pm.getOpAnchorName();
        if (anchor != ModuleOp::getOperationName() &&
            anchor != OpPassManager::getAnyOpAnchorName())
          return errorHandler(
              "'" + name + "' lowers a whole module: it runs on '" +
              ModuleOp::getOperationName() + "', not nested in '" + anchor +
              "' (write 'builtin.module(" + name + ")')");
        LowerToLLVMPipelineOptions options;
        if (failed(options.parseFromString(optionsText)))
          return failure();
        buildLowerToLLVMPipeline(pm, options, target);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(LowerToLLVMPipelineOptions());
      });
}
