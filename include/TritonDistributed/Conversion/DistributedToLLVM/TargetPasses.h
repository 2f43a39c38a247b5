//===- TargetPasses.h - the passes and pipeline of every target -*- C++ -*-===//
//
// Each target (third_party/<vendor>) declares its passes in its own Passes.td
// and instantiates their bodies from here, so the NVVM and ROCDL passes share
// one runOnOperation each:
//
//   --convert-distributed-to-<dialect>   the op lowering
//   (lowerDistributedToLLVM)
//   --triton-dist-set-<arch>-target      stamps llvm.target_triple and
//                                        llvm.data_layout (the device-library
//                                        build), a step of its own
//   --triton-dist-lower-to-<dialect>     the named pipeline to the LLVM dialect
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_TARGETPASSES_H
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_TARGETPASSES_H

#include "TritonDistributed/Conversion/DistributedToLLVM/DistributedToLLVM.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <functional>
#include <memory>

namespace mlir {
namespace triton_dist {

/// Stamps `triple` and `dataLayout` (empty: the target's own) on `module`.
/// Fails with a located error when the triple is not the target's, or when the
/// module already carries a different triple or data layout.
LogicalResult setTargetAttributes(ModuleOp module, const TargetInfoBase &target,
                                  StringRef triple, StringRef dataLayout);

/// The body of `--convert-distributed-to-<dialect>`: `BaseT` is the pass base
/// class mlir-tblgen generated from the target's Passes.td.
template <typename Derived, typename Target, template <typename> class BaseT>
class LowerDistributedPass : public BaseT<Derived> {
public:
  using Base = BaseT<Derived>;
  using Base::Base;
  /// For the target's pass: `using Wrapper::Wrapper;`.
  using Wrapper = LowerDistributedPass;

  void runOnOperation() override {
    LoweringOptions options;
    options.backoff.tightPolls = this->tightPolls;
    options.backoff.maxSleepNs = this->maxSleepNs;
    options.waitTimeoutNs = this->waitTimeoutNs;
    options.waitTimeoutFromRuntime = this->waitTimeoutFromRuntime;
    Target target;
    if (failed(lowerDistributedToLLVM(this->getOperation(), target, options)))
      this->signalPassFailure();
  }
};

/// The body of `--triton-dist-set-<arch>-target`.
template <typename Derived, typename Target, template <typename> class BaseT>
class SetTargetPass : public BaseT<Derived> {
public:
  using Base = BaseT<Derived>;
  using Base::Base;
  using Wrapper = SetTargetPass;

  void runOnOperation() override {
    Target target;
    if (failed(setTargetAttributes(this->getOperation(), target, this->triple,
                                   this->dataLayout)))
      this->signalPassFailure();
  }
};

/// The options of `--triton-dist-lower-to-<dialect>`.
struct LowerToLLVMPipelineOptions
    : public PassPipelineOptions<LowerToLLVMPipelineOptions> {
  PassOptions::Option<unsigned> tightPolls{
      *this, "tight-polls",
      llvm::cl::desc("polls of a flag word made back to back before the first "
                     "sleep"),
      llvm::cl::init(WaitBackoff().tightPolls)};
  PassOptions::Option<unsigned> maxSleepNs{
      *this, "max-sleep-ns",
      llvm::cl::desc("cap, in nanoseconds, of the sleep between two polls; 0: "
                     "never sleep"),
      llvm::cl::init(WaitBackoff().maxSleepNs)};
  PassOptions::Option<uint64_t> waitTimeoutNs{
      *this, "wait-timeout-ns",
      llvm::cl::desc("watchdog of the waits without a timeout_ns attribute, "
                     "in nanoseconds; 0: none"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> waitTimeoutFromRuntime{
      *this, "wait-timeout-from-runtime",
      llvm::cl::desc("watch the waits without a timeout_ns attribute with the "
                     "timeout the runtime writes into "
                     "@__triton_dist_wait_watchdog; overrides wait-timeout-ns"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> setTarget{
      *this, "set-target",
      llvm::cl::desc("finally stamp the target's triple and data layout on the "
                     "module (the device-library build)"),
      llvm::cl::init(false)};
};

/// A target's passes, as the pipeline needs them.
struct TargetPassFactories {
  std::function<std::unique_ptr<Pass>(const LoweringOptions &)> createLowering;
  std::function<std::unique_ptr<Pass>()> createSetTarget;
};

/// scf -> cf (wait needs a multi-block region), the target's lowering, the
/// upstream arith/cf/func conversions to LLVM, reconcile-unrealized-casts, and
/// with `set-target` the target's triple and data layout.
void buildLowerToLLVMPipeline(OpPassManager &pm,
                              const LowerToLLVMPipelineOptions &options,
                              const TargetPassFactories &target);

/// Registers the named pipeline `name` (buildLowerToLLVMPipeline with the
/// target's passes). It lowers a whole module: nested under another anchor
/// (`func.func(name)`), it is a pipeline-parsing error that says so, not an
/// abort.
void registerLowerToLLVMPipeline(StringRef name, StringRef description,
                                 TargetPassFactories target);

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_TARGETPASSES_H
