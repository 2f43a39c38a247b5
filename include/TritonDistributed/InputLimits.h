//===- InputLimits.h - input refused before parsing -------------*- C++ -*-===//
//
// MLIR's parser, verifier, passes and printer recurse once per nesting level,
// and the verifier's dominance checks cost time proportional to the depth of
// every use: deeply nested input takes quadratic time (20,000 nested scf.if
// regions: 14 s). The tools (triton-dist-opt, the Python module) refuse text
// nested deeper than kMaxNestingDepth before parsing it, with one located
// error, so they agree on what they accept.
//
//===----------------------------------------------------------------------===//

#ifndef TRITON_DIST_INPUTLIMITS_H
#define TRITON_DIST_INPUTLIMITS_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir {
namespace triton_dist {

/// Deeper bracket nesting than this is refused before parsing (real IR nests a
/// few dozen levels).
constexpr unsigned kMaxNestingDepth = 10000;

/// Where the bracket nesting ((, [, {, <) of IR text first exceeds `limit`,
/// ignoring strings and comments.
struct NestingExcess {
  unsigned line;
  unsigned column;
};

/// The first place where the nesting exceeds `limit`, or std::nullopt. With a
/// non-empty `splitMarker` (--split-input-file), the depth starts again at 0
/// after each occurrence of the marker, as every chunk is parsed on its own.
std::optional<NestingExcess>
findExcessiveNesting(llvm::StringRef text, unsigned limit = kMaxNestingDepth,
                     llvm::StringRef splitMarker = "");

/// The message of the error for input nested deeper than `limit`.
std::string describeExcessiveNesting(unsigned limit = kMaxNestingDepth);

} // namespace triton_dist
} // namespace mlir

#endif // TRITON_DIST_INPUTLIMITS_H
