//===- InputLimits.cpp - input refused before parsing ---------------------===//

#include "TritonDistributed/InputLimits.h"

using namespace mlir;
using namespace mlir::triton_dist;

std::optional<NestingExcess>
mlir::triton_dist::findExcessiveNesting(llvm::StringRef text, unsigned limit,
                                        llvm::StringRef splitMarker) {
  unsigned depth = 0;
  unsigned line = 1, column = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (!splitMarker.empty() && c == splitMarker.front() &&
        text.substr(i).starts_with(splitMarker)) {
      depth = 0;
      i += splitMarker.size() - 1;
      column += splitMarker.size() - 1;
    } else if (c == '\n') {
      ++line;
      column = 0;
    } else if (c == '"') { // skip the string, escapes included
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        ++column;
        if (text[i] == '\\') {
          ++i;
          ++column;
        } else if (text[i] == '\n') {
          ++line;
          column = 0;
          break;
        }
      }
      ++column;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      // A comment, unless it holds the split marker ("// -----").
      while (i + 1 < text.size() && text[i + 1] != '\n' &&
             !(!splitMarker.empty() &&
               text.substr(i + 1).starts_with(splitMarker)))
        ++i;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > limit)
        return NestingExcess{line, column};
    } else if (c == ')' || c == ']' || c == '}' ||
               (c == '>' && (i == 0 || text[i - 1] != '-'))) {
      depth = depth ? depth - 1 : 0;
    }
  }
  return std::nullopt;
}

std::string mlir::triton_dist::describeExcessiveNesting(unsigned limit) {
  return "nesting deeper than " + std::to_string(limit) +
         " levels of brackets; refused before parsing (MLIR's parser, "
         "verifier and passes take time and stack per level)";
}
