//===- MlirModule.cpp - triton_dist._C._mlir: IR text in, IR text out -----===//
//
// A small pybind11 module over Debian's shared libMLIR: parse IR text with the
// `distributed` dialect and everything triton-dist-opt knows, verify it, run a
// textual pass pipeline on it, translate it to LLVM IR.
//
// Nothing here throws into Python for a problem with the IR: every entry point
// returns its result together with the diagnostics MLIR emitted (severity,
// location, message, notes), captured by a ScopedDiagnosticHandler, and the
// typed wrapper (python/triton_dist/mlir.py) turns errors into a Python
// exception. Every Module owns its own MLIRContext (single-threaded), so
// modules never share state.
//
// Nor may bad input take the Python process down. MLIR's parser, printer,
// verifier and passes recurse once per level of nesting, so every entry point
// runs on a thread with a large stack (kWorkerStackBytes), and parse() first
// refuses text nested deeper than kMaxNestingDepth with a located diagnostic.
// Errors that MLIR only prints (a pass option that does not parse) are captured
// from stderr and returned as diagnostics.
//
//===----------------------------------------------------------------------===//

#include "TritonDistributed/Conversion/DistributedToLLVM/RuntimeContext.h"
#include "TritonDistributed/InputLimits.h"
#include "TritonDistributed/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/thread.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <unistd.h>

namespace py = pybind11;
using namespace mlir;

namespace {

//===----------------------------------------------------------------------===//
// Deep input
//===----------------------------------------------------------------------===//

/// The stack of the thread every entry point runs on: enough for
/// kMaxNestingDepth (InputLimits.h) levels of nested regions through the
/// parser, the verifier, the passes and the printer.
constexpr unsigned kWorkerStackBytes = 1024u << 20;

/// Runs `fn` on a fresh thread with a kWorkerStackBytes stack and waits for it.
template <typename Fn> auto onLargeStack(Fn &&fn) -> decltype(fn()) {
  std::optional<decltype(fn())> result;
  llvm::thread worker(std::optional<unsigned>(kWorkerStackBytes),
                      [&] { result.emplace(fn()); });
  worker.join();
  return std::move(*result);
}

/// Captures what is written to file descriptor 2 (LLVM's errs() and C's stderr)
/// while alive.
class StderrCapture {
public:
  StderrCapture() {
    std::fflush(stderr);
    llvm::errs().flush();
    file = std::tmpfile();
    saved = file ? ::dup(2) : -1;
    if (saved >= 0)
      ::dup2(fileno(file), 2);
  }
  ~StderrCapture() { release(); }

  /// Restores stderr and returns what was written meanwhile.
  std::string release() {
    std::string captured;
    if (saved < 0)
      return captured;
    llvm::errs().flush();
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    saved = -1;
    std::rewind(file);
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
      captured.append(buffer, n);
    std::fclose(file);
    file = nullptr;
    return captured;
  }

private:
  std::FILE *file = nullptr;
  int saved = -1;
};

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

/// Where a diagnostic points: "file:line:col" when the location has one, MLIR's
/// own spelling otherwise.
struct Place {
  std::string text;
  std::string file;
  int line = 0;
  int column = 0;
};

/// Finds the first file/line/column inside a (possibly nested) location.
std::optional<FileLineColLoc> findFileLineCol(Location loc) {
  if (auto flc = dyn_cast<FileLineColLoc>(loc))
    return flc;
  if (auto name = dyn_cast<NameLoc>(loc))
    return findFileLineCol(name.getChildLoc());
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return findFileLineCol(callSite.getCallee());
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations())
      if (auto flc = findFileLineCol(inner))
        return flc;
  }
  return std::nullopt;
}

Place describe(Location loc) {
  Place place;
  if (auto flc = findFileLineCol(loc)) {
    place.file = flc->getFilename().str();
    place.line = static_cast<int>(flc->getLine());
    place.column = static_cast<int>(flc->getColumn());
    place.text = place.file + ":" + std::to_string(place.line) + ":" +
                 std::to_string(place.column);
    return place;
  }
  llvm::raw_string_ostream os(place.text);
  loc.print(os);
  return place;
}

const char *severityName(DiagnosticSeverity severity) {
  switch (severity) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Remark:
    return "remark";
  case DiagnosticSeverity::Note:
    return "note";
  }
  return "error";
}

/// One diagnostic as it crosses into Python:
/// (severity, location text, file, line, column, message, [(note location text,
/// note message), ...]).
using PyDiagnostic =
    std::tuple<std::string, std::string, std::string, int, int, std::string,
               std::vector<std::pair<std::string, std::string>>>;

/// Collects every diagnostic emitted in a context while it is alive; nothing
/// reaches stderr.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext *context)
      : handler(context, [this](Diagnostic &diag) {
          record(diag);
          return success();
        }) {}

  /// Adds a diagnostic that did not come from MLIR's engine (a pipeline syntax
  /// error, say).
  void add(const std::string &severity, const std::string &where,
           const std::string &message) {
    diagnostics.emplace_back(
        severity, where, "", 0, 0, message,
        std::vector<std::pair<std::string, std::string>>{});
  }

  bool hasErrors() const {
    for (const PyDiagnostic &diag : diagnostics)
      if (std::get<0>(diag) == "error")
        return true;
    return false;
  }

  std::vector<PyDiagnostic> take() { return std::move(diagnostics); }

private:
  void record(Diagnostic &diag) {
    Place place = describe(diag.getLocation());
    std::vector<std::pair<std::string, std::string>> notes;
    for (Diagnostic &note : diag.getNotes())
      notes.emplace_back(describe(note.getLocation()).text, note.str());
    diagnostics.emplace_back(severityName(diag.getSeverity()), place.text,
                             place.file, place.line, place.column, diag.str(),
                             std::move(notes));
  }

  // Declared before the handler: the handler's callback writes into it.
  std::vector<PyDiagnostic> diagnostics;
  ScopedDiagnosticHandler handler;
};

//===----------------------------------------------------------------------===//
// Contexts and modules
//===----------------------------------------------------------------------===//

/// The dialects and translations every context gets, and the pass registration
/// (a process-wide registry in libMLIR), done once.
const DialectRegistry &registry() {
  static const DialectRegistry *instance = [] {
    auto *reg = new DialectRegistry();
    triton_dist::registerAllDialects(*reg);
    triton_dist::registerAllPasses();
    return reg;
  }();
  return *instance;
}

std::unique_ptr<MLIRContext> makeContext() {
  auto context = std::make_unique<MLIRContext>(
      registry(), MLIRContext::Threading::DISABLED);
  // A verifier error names its location; the whole operation printed after it
  // would bury the message.
  context->printOpOnDiagnostic(false);
  context->printStackTraceOnDiagnostic(false);
  return context;
}

/// A parsed module and the context that owns it. Python sees it as
/// triton_dist._C._mlir.Module.
class PyModule {
public:
  PyModule(std::unique_ptr<MLIRContext> context, OwningOpRef<ModuleOp> module)
      : context(std::move(context)), module(std::move(module)) {}

  ModuleOp get() { return *module; }
  MLIRContext *getContext() { return context.get(); }

  std::string print(bool generic, bool debugInfo) {
    OpPrintingFlags flags;
    if (generic)
      flags.printGenericOpForm();
    if (debugInfo)
      flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os, flags);
    return text;
  }

private:
  // The module is destroyed before the context that owns its storage.
  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
};

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::pair<std::unique_ptr<PyModule>, std::vector<PyDiagnostic>>
parse(const std::string &text, const std::string &sourceName, bool verify) {
  std::unique_ptr<MLIRContext> context = makeContext();
  OwningOpRef<ModuleOp> module;
  std::vector<PyDiagnostic> diagnostics;
  if (auto where = triton_dist::findExcessiveNesting(text)) {
    int line = static_cast<int>(where->line);
    int column = static_cast<int>(where->column);
    diagnostics.emplace_back(
        "error",
        sourceName + ":" + std::to_string(line) + ":" + std::to_string(column),
        sourceName, line, column, triton_dist::describeExcessiveNesting(),
        std::vector<std::pair<std::string, std::string>>{});
    return {nullptr, std::move(diagnostics)};
  }
  {
    DiagnosticCollector collector(context.get());
    ParserConfig config(context.get(), /*verifyAfterParse=*/verify);
    module = parseSourceString<ModuleOp>(text, config, sourceName);
    if (!module && !collector.hasErrors())
      collector.add("error", sourceName, "could not parse the module");
    diagnostics = collector.take();
  }
  if (!module)
    return {nullptr, std::move(diagnostics)};
  return {std::make_unique<PyModule>(std::move(context), std::move(module)),
          std::move(diagnostics)};
}

std::pair<bool, std::vector<PyDiagnostic>> verifyModule(PyModule &module) {
  DiagnosticCollector collector(module.getContext());
  bool ok = succeeded(mlir::verify(module.get()));
  if (!ok && !collector.hasErrors())
    collector.add("error", "<module>", "the module does not verify");
  return {ok, collector.take()};
}

/// Whether `pipeline` is anchored where triton-dist-opt's --pass-pipeline
/// would run it on the module itself: "builtin.module(...)" or "any(...)".
bool isAnchoredOnTheModule(llvm::StringRef pipeline) {
  size_t open = pipeline.find('(');
  if (open == llvm::StringRef::npos)
    return false;
  llvm::StringRef anchor = pipeline.take_front(open).rtrim();
  return anchor == ModuleOp::getOperationName() ||
         anchor == OpPassManager::getAnyOpAnchorName();
}

/// Accepts "builtin.module(a,b)" and "any(a,b)", which run on the module as
/// with triton-dist-opt --pass-pipeline, or a bare "a,b" (anchored on
/// builtin.module, so "func.func(a)" runs on each function).
std::pair<std::optional<std::string>, std::vector<PyDiagnostic>>
runPipeline(PyModule &module, const std::string &pipeline) {
  DiagnosticCollector collector(module.getContext());
  llvm::StringRef passes = llvm::StringRef(pipeline).trim();

  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  std::string parseErrors;
  llvm::raw_string_ostream errorStream(parseErrors);
  // A pass option that does not parse is reported on stderr by LLVM's option
  // parser, not to errorStream.
  StderrCapture optionErrors;
  bool parsed;
  if (isAnchoredOnTheModule(passes) && !passes.ends_with(")")) {
    collector.add("error", "<pipeline>",
                  "unbalanced parentheses in pass pipeline '" + pipeline + "'");
    return {std::nullopt, collector.take()};
  }
  if (isAnchoredOnTheModule(passes)) {
    FailureOr<OpPassManager> anchored = parsePassPipeline(passes, errorStream);
    parsed = succeeded(anchored);
    if (parsed)
      static_cast<OpPassManager &>(pm) = std::move(*anchored);
  } else {
    parsed = succeeded(parsePassPipeline(passes, pm, errorStream));
  }
  std::string printed =
      llvm::StringRef(optionErrors.release()).trim().ltrim(": ").str();
  if (!parsed) {
    std::string reason = llvm::StringRef(parseErrors).trim().str();
    if (!printed.empty())
      reason = printed + (reason.empty() ? "" : "\n" + reason);
    collector.add("error", "<pipeline>",
                  "invalid pass pipeline '" + pipeline + "': " + reason);
    return {std::nullopt, collector.take()};
  }

  // Run on a copy: the Module object stays what was parsed.
  OwningOpRef<ModuleOp> work(module.get().clone());
  if (failed(pm.run(*work))) {
    if (!collector.hasErrors())
      collector.add("error", "<pipeline>",
                    "pass pipeline '" + pipeline + "' failed");
    return {std::nullopt, collector.take()};
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  work->print(os);
  return {std::move(text), collector.take()};
}

/// The first element type of an !llvm.struct or !llvm.array in `type` (or
/// nested in it) that has no LLVM IR equivalent (index, tuple, f8E4M3FN, a
/// dialect's own type, memref...): the LLVM dialect's verifier accepts any
/// type there, and the translation dereferences a null LLVM type on it.
Type findElementWithoutLLVMType(Type type) {
  Type found;
  type.walk([&](Type nested) {
    if (found)
      return WalkResult::interrupt();
    auto check = [&](Type element) {
      if (!found && !LLVM::isCompatibleType(element))
        found = element;
    };
    if (auto structType = dyn_cast<LLVM::LLVMStructType>(nested)) {
      if (!structType.isOpaque())
        for (Type element : structType.getBody())
          check(element);
    } else if (auto arrayType = dyn_cast<LLVM::LLVMArrayType>(nested)) {
      check(arrayType.getElementType());
    }
    return found ? WalkResult::interrupt() : WalkResult::advance();
  });
  return found;
}

/// Every type `op` uses: its operands' and results', its blocks' arguments',
/// and the types in its attributes (a global's type, an alloca's element type,
/// a function's type).
void forEachTypeOf(Operation *op, llvm::function_ref<void(Type)> fn) {
  for (Type type : op->getOperandTypes())
    fn(type);
  for (Type type : op->getResultTypes())
    fn(type);
  for (Region &region : op->getRegions())
    for (Block &block : region)
      for (BlockArgument arg : block.getArguments())
        fn(arg.getType());
  op->getAttrDictionary().walk([&](Type type) { fn(type); });
  if (Attribute properties = op->getPropertiesAsAttribute())
    properties.walk([&](Type type) { fn(type); });
}

/// What LLVM IR cannot express and MLIR's translation does not check (it
/// crashes or drops it instead): an op with operands or results directly in a
/// module (LLVM IR has values only inside functions), a target triple or data
/// layout that is not a string, an !llvm.struct or !llvm.array whose elements
/// are not LLVM types, a nested module (the translation translates only the
/// top-level one and would drop the nested module's functions). Emits a
/// located error for each.
LogicalResult checkTranslatable(ModuleOp top) {
  bool ok = true;
  top.walk([&](ModuleOp module) {
    if (module != top && !module.getBody()->empty()) {
      module.emitError()
          << "a nested module does not translate to LLVM IR: the translation "
             "takes only the top-level module, and would drop this module's "
          << module.getBody()->getOperations().size()
          << " operation(s); translate each module on its own";
      ok = false;
      return WalkResult::skip();
    }
    for (llvm::StringRef name : {LLVM::LLVMDialect::getTargetTripleAttrName(),
                                 LLVM::LLVMDialect::getDataLayoutAttrName()})
      if (Attribute attr = module->getAttr(name);
          attr && !isa<StringAttr>(attr)) {
        module.emitError() << "'" << name
                           << "' must be a string to translate to LLVM IR, got "
                           << attr;
        ok = false;
      }
    for (Operation &op : module.getBody()->getOperations())
      if (op.getNumOperands() || op.getNumResults()) {
        op.emitError() << "'" << op.getName()
                       << "' is directly in a module: LLVM IR has values and "
                          "instructions only inside functions";
        ok = false;
      }
    return WalkResult::advance();
  });
  top.walk([&](Operation *op) {
    Type bad, container;
    forEachTypeOf(op, [&](Type type) {
      if (!bad && (bad = findElementWithoutLLVMType(type)))
        container = type;
    });
    if (bad) {
      op->emitError() << "'" << op->getName() << "' uses " << container
                      << ", whose element type " << bad
                      << " has no LLVM IR equivalent: an !llvm.struct or "
                         "!llvm.array holds LLVM-compatible types only";
      ok = false;
    }
  });
  return success(ok);
}

std::pair<std::optional<std::string>, std::vector<PyDiagnostic>>
translateToLLVMIR(PyModule &module) {
  DiagnosticCollector collector(module.getContext());
  // A module parsed with verify=False may be malformed in ways the translation
  // dereferences (a module region without a block): verify it first.
  if (failed(mlir::verify(module.get())) ||
      failed(checkTranslatable(module.get()))) {
    if (!collector.hasErrors())
      collector.add("error", "<module>", "the module does not verify");
    return {std::nullopt, collector.take()};
  }
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module.get(), llvmContext);
  if (!llvmModule) {
    if (!collector.hasErrors())
      collector.add("error", "<module>", "translation to LLVM IR failed");
    return {std::nullopt, collector.take()};
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  llvmModule->print(os, /*AAW=*/nullptr);
  return {std::move(text), collector.take()};
}

/// The ABI facts the lowering is compiled with (RuntimeContext.h), for the test
/// that compares them with python/triton_dist/abi.py: (context symbol, max
/// ranks, context type as MLIR prints it, context size in bytes under the
/// default data layout, which both targets share for its i32/i64 fields).
std::tuple<std::string, unsigned, std::string, uint64_t> contextABI() {
  std::unique_ptr<MLIRContext> context = makeContext();
  context->loadDialect<LLVM::LLVMDialect>();
  LLVM::LLVMStructType type = triton_dist::getContextType(context.get());
  std::string spelling;
  llvm::raw_string_ostream os(spelling);
  os << Type(type);
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(UnknownLoc::get(context.get()));
  uint64_t bytes = DataLayout(*module).getTypeSize(type).getFixedValue();
  return {triton_dist::kContextSymbol.str(), triton_dist::kMaxRanks, spelling,
          bytes};
}

std::vector<std::string> dialectNames() {
  std::vector<std::string> names;
  for (llvm::StringRef name : registry().getDialectNames())
    names.push_back(name.str());
  return names;
}

} // namespace

PYBIND11_MODULE(_mlir, m) {
  m.doc() = "triton-dist's MLIR tools (the `distributed` dialect over Debian's "
            "libMLIR). Use triton_dist.mlir.";
  m.attr("LLVM_VERSION") = LLVM_VERSION_STRING;

  py::class_<PyModule>(m, "Module",
                       "A parsed MLIR module and the MLIRContext that owns it.")
      .def(
          "to_string",
          [](PyModule &module, bool generic, bool debugInfo) {
            return onLargeStack(
                [&] { return module.print(generic, debugInfo); });
          },
          py::arg("generic") = false, py::arg("debug_info") = false,
          "The module's textual IR (pretty form unless generic=True; locations "
          "with debug_info=True).");

  // Parsing builds a fresh context, so other threads may run meanwhile. The
  // functions that take a Module keep the GIL: its (single-threaded) context
  // must not be used from two threads at once.
  m.def(
      "parse",
      [](const std::string &text, const std::string &sourceName, bool verify) {
        py::gil_scoped_release release;
        return onLargeStack([&] { return parse(text, sourceName, verify); });
      },
      py::arg("text"), py::arg("source_name") = "<string>",
      py::arg("verify") = true,
      "Parses a module: (Module or None, diagnostics).");
  m.def(
      "verify",
      [](PyModule &module) {
        return onLargeStack([&] { return verifyModule(module); });
      },
      py::arg("module"), "Verifies a module: (ok, diagnostics).");
  m.def(
      "run_pipeline",
      [](PyModule &module, const std::string &pipeline) {
        return onLargeStack([&] { return runPipeline(module, pipeline); });
      },
      py::arg("module"), py::arg("pipeline"),
      "Runs a textual pass pipeline on a copy of the module: (IR text or None, "
      "diagnostics).");
  m.def(
      "translate_to_llvmir",
      [](PyModule &module) {
        return onLargeStack([&] { return translateToLLVMIR(module); });
      },
      py::arg("module"),
      "Translates an LLVM-dialect module to LLVM IR: (LLVM IR text or None, "
      "diagnostics).");
  m.attr("MAX_NESTING_DEPTH") = triton_dist::kMaxNestingDepth;
  m.def("dialects", &dialectNames, "The dialects a module may use.");
  m.def("context_abi", &contextABI,
        "The runtime context the lowering targets: (symbol, max ranks, MLIR "
        "type, size in bytes).");
}
