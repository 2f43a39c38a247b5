// Input nested thousands of levels deep (4,000 scf.if regions, 20,000 attribute brackets) used to overflow the
// parser's stack and kill triton-dist-opt with SIGSEGV; the driver runs on a thread with a large stack, so such input
// ends in success or a diagnostic.
// RUN: awk 'BEGIN { print "func.func @deep(%c: i1) {"; for (i = 0; i < 4000; i++) print "scf.if %c {"; for (i = 0; i < 4000; i++) print "}"; print "return"; print "}" }' > %t.if.mlir
// RUN: triton-dist-opt --convert-scf-to-cf %t.if.mlir | FileCheck %s --check-prefix=IF
// RUN: awk 'BEGIN { printf "module attributes {test.a = "; for (i = 0; i < 20000; i++) printf "["; for (i = 0; i < 20000; i++) printf "]"; print "} {}" }' > %t.brackets.mlir
// RUN: triton-dist-opt %t.brackets.mlir | FileCheck %s --check-prefix=BRACKETS
// RUN: awk 'BEGIN { printf "module attributes {a = "; for (i = 0; i < 20000; i++) printf "["; for (i = 0; i < 20000; i++) printf "]"; print "} {}" }' > %t.bad.mlir
// RUN: not triton-dist-opt %t.bad.mlir 2>&1 | FileCheck %s --check-prefix=BAD

// IF: func.func @deep
// IF-COUNT-2: cf.cond_br
// BRACKETS: module attributes {test.a = {{\[\[\[}}
// BAD: error: 'builtin.module' op can only contain attributes with dialect-prefixed names, found: 'a'
