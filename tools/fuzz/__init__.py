"""A fuzzer for triton-dist's MLIR side: triton-dist-opt, its passes and pipelines, mlir-translate, the bindings.

It mutates the lit inputs (test/**/*.mlir) and generates programs (every `distributed` op inside scf.for / if /
while / execute_region / parallel regions and cf blocks, tokens through block arguments and loop results, nested
modules, deep nesting, bad attributes and types), and feeds garbage to the triton_dist.mlir bindings. Every run
must end in success or a diagnostic: never a signal, an assertion, a timeout or a failure without a diagnostic.
See tools/fuzz/run.py for the command line, test/python/test_fuzz.py for the CI run and test/fuzz/ for the
regression inputs and the allow-list of known-open findings.
"""
