//===- Registration.cpp - everything triton-dist tools register -----------===//

#include "TritonDistributed/Registration.h"

#include "TritonDistributed/Conversion/DistributedToNVVM/Passes.h"
#include "TritonDistributed/Conversion/DistributedToROCDL/Passes.h"
#include "TritonDistributed/Dialect/Distributed/IR/Dialect.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

void mlir::triton_dist::registerAllDialects(DialectRegistry &registry) {
  registry.insert<TritonDistributedDialect, arith::ArithDialect,
                  cf::ControlFlowDialect, func::FuncDialect, LLVM::LLVMDialect,
                  NVVM::NVVMDialect, ROCDL::ROCDLDialect, scf::SCFDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registerROCDLDialectTranslation(registry);
  // The upstream *-to-llvm passes find their patterns through these
  // interfaces.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
}

void mlir::triton_dist::registerAllPasses() {
  registerTritonDistributedToNVVMPasses();
  registerTritonDistributedToROCDLPasses();
  registerLowerToNVVMPipeline();
  registerLowerToROCDLPipeline();
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();
  registerSCFToControlFlowPass();
  registerArithToLLVMConversionPass();
  registerConvertControlFlowToLLVMPass();
  registerConvertFuncToLLVMPass();
  registerReconcileUnrealizedCastsPass();
}
