//===- PassOptions.td - options every target's passes share -*- tablegen -*-===//
//
// Included by each target's Passes.td (third_party/<vendor>/include/...), so that
// the NVVM and ROCDL passes spell their common options once.
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_PASSOPTIONS_TD
#define TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_PASSOPTIONS_TD

include "mlir/Pass/PassBase.td"

// The backoff of the polling loop `distributed.wait` lowers to.
defvar Distributed_LoweringOptions = [
  Option<"tightPolls", "tight-polls", "unsigned", /*default=*/"16",
         "polls of a flag word made back to back before the first sleep">,
  Option<"maxSleepNs", "max-sleep-ns", "unsigned", /*default=*/"256",
         "cap, in nanoseconds, of the sleep between two polls (it starts at 32 ns and doubles); 0: never sleep">,
  Option<"waitTimeoutNs", "wait-timeout-ns", "uint64_t", /*default=*/"0",
         "watchdog of the waits without a `timeout_ns` attribute: after this many nanoseconds a polling lane "
         "records the wait in @__triton_dist_wait_timeout and traps; 0: no watchdog">,
  Option<"waitTimeoutFromRuntime", "wait-timeout-from-runtime", "bool", /*default=*/"false",
         "watch the waits without a `timeout_ns` attribute with the timeout the runtime writes into "
         "@__triton_dist_wait_watchdog (0 there: no watchdog), recording a timeout through the record pointer "
         "written beside it (host-mapped memory, docs/abi.md); overrides wait-timeout-ns">,
];

// The target a set-target pass stamps on the module; empty: the target's own (its TargetInfo).
defvar Distributed_SetTargetOptions = [
  Option<"triple", "triple", "std::string", /*default=*/"\"\"",
         "`llvm.target_triple` to stamp; empty: the target's default triple">,
  Option<"dataLayout", "data-layout", "std::string", /*default=*/"\"\"",
         "`llvm.data_layout` to stamp; empty: the target's default data layout (clang-22's for the triple)">,
];

#endif // TRITON_DIST_CONVERSION_DISTRIBUTEDTOLLVM_PASSOPTIONS_TD
