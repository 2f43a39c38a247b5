// Input nested thousands of levels deep (4,000 scf.if regions, 10,000 attribute brackets) used to overflow the
// parser's stack and kill triton-dist-opt with SIGSEGV; the driver runs on a thread with a large stack, so such input
// ends in success or a diagnostic.
// RUN: awk 'BEGIN { print "func.func @deep(%c: i1) {"; for (i = 0; i < 4000; i++) print "scf.if %c {"; for (i = 0; i < 4000; i++) print "}"; print "return"; print "}" }' > %t.if.mlir
// RUN: triton-dist-opt --convert-scf-to-cf %t.if.mlir | FileCheck %s --check-prefix=IF
// RUN: awk 'BEGIN { printf "module attributes {test.a = "; for (i = 0; i < 9999; i++) printf "["; for (i = 0; i < 9999; i++) printf "]"; print "} {}" }' > %t.brackets.mlir
// RUN: triton-dist-opt %t.brackets.mlir | FileCheck %s --check-prefix=BRACKETS
// RUN: awk 'BEGIN { printf "module attributes {a = "; for (i = 0; i < 9999; i++) printf "["; for (i = 0; i < 9999; i++) printf "]"; print "} {}" }' > %t.bad.mlir
// RUN: not triton-dist-opt %t.bad.mlir 2>&1 | FileCheck %s --check-prefix=BAD

// Deeper than 10,000 levels (the Python module's limit too), input is refused before parsing with a located error:
// the verifier's dominance checks take time proportional to each use's depth, so 20,000 nested scf.if regions took
// 14 s to lower. The depth counts per chunk with --split-input-file.
// RUN: awk 'BEGIN { print "func.func @deep(%c: i1) {"; for (i = 0; i < 20000; i++) print "scf.if %c {"; for (i = 0; i < 20000; i++) print "}"; print "return"; print "}" }' > %t.deep-if.mlir
// RUN: not triton-dist-opt --triton-dist-lower-to-nvvm %t.deep-if.mlir 2>&1 | FileCheck %s --check-prefix=DEEP-IF -DFILE=%t.deep-if.mlir
// RUN: awk 'BEGIN { printf "module attributes {test.a = "; for (i = 0; i < 10000; i++) printf "["; for (i = 0; i < 10000; i++) printf "]"; print "} {}" }' > %t.deep-brackets.mlir
// RUN: not triton-dist-opt < %t.deep-brackets.mlir 2>&1 | FileCheck %s --check-prefix=DEEP-BRACKETS
// A first chunk that leaves 6,000 brackets open is a parse error of its own; the second chunk starts again at 0.
// RUN: awk 'BEGIN { printf "module attributes {test.a = "; for (i = 0; i < 6000; i++) printf "["; print ""; print "// -----"; printf "module attributes {test.b = "; for (i = 0; i < 6000; i++) printf "["; for (i = 0; i < 6000; i++) printf "]"; print "} {}" }' > %t.split.mlir
// RUN: not triton-dist-opt --split-input-file %t.split.mlir 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not triton-dist-opt %t.split.mlir 2>&1 | FileCheck %s --check-prefix=JOINED

// IF: func.func @deep
// IF-COUNT-2: cf.cond_br
// BRACKETS: module attributes {test.a = {{\[\[\[}}
// BAD: error: 'builtin.module' op can only contain attributes with dialect-prefixed names, found: 'a'
// DEEP-IF: [[FILE]]:10001:11: error: nesting deeper than 10000 levels of brackets; refused before parsing
// DEEP-IF-NOT: scf.if
// DEEP-BRACKETS: <stdin>:1:10028: error: nesting deeper than 10000 levels of brackets
// SPLIT-NOT: nesting deeper
// SPLIT: module attributes {test.b = {{\[\[\[}}
// SPLIT-NOT: nesting deeper
// JOINED: error: nesting deeper than 10000 levels of brackets
