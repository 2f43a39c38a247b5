// Every verifier rule of the `distributed` dialect, and the type constraints ODS enforces.
// RUN: triton-dist-opt %s --split-input-file --verify-diagnostics

func.func @unknown_axis() -> i32 {
  // expected-error @+1 {{custom op 'distributed.get_rank' expected string or keyword containing one of the following enum values for attribute 'axis' [world, local, node]}}
  %r = distributed.get_rank axis(mesh)
  return %r : i32
}

// -----

func.func @integer_axis() -> i32 {
  // expected-error @+1 {{custom op 'distributed.get_num_ranks' expected string or keyword containing one of the following enum values for attribute 'axis' [world, local, node]}}
  %r = distributed.get_num_ranks axis(-1)
  return %r : i32
}

// -----

func.func @generic_form_axis_out_of_range() -> i32 {
  // expected-error @+1 {{'distributed.get_rank' op attribute 'axis' failed to satisfy constraint: which ranks a rank query counts}}
  %r = "distributed.get_rank"() {axis = 3 : i32} : () -> i32
  return %r : i32
}

// -----

func.func @generic_form_num_ranks_axis_negative() -> i32 {
  // expected-error @+1 {{'distributed.get_num_ranks' op attribute 'axis' failed to satisfy constraint: which ranks a rank query counts}}
  %r = "distributed.get_num_ranks"() {axis = -1 : i32} : () -> i32
  return %r : i32
}

// -----

func.func @symm_at_shared_memory(%p: !llvm.ptr<3>, %rank: i32) -> !llvm.ptr<3> {
  // expected-error @+1 {{'distributed.symm_at' op operand #0 must be LLVM pointer to global memory (address space 0 or 1), but got '!llvm.ptr<3>'}}
  %q = distributed.symm_at %p, %rank : !llvm.ptr<3>
  return %q : !llvm.ptr<3>
}

// -----

func.func @symm_at_negative_rank(%p: !llvm.ptr<1>) -> !llvm.ptr<1> {
  %rank = arith.constant -1 : i32
  // expected-error @+1 {{'distributed.symm_at' op rank must be non-negative, got -1}}
  %q = distributed.symm_at %p, %rank : !llvm.ptr<1>
  return %q : !llvm.ptr<1>
}

// -----

func.func @symm_at_not_a_pointer(%p: i64, %rank: i32) {
  // expected-error @+1 {{'distributed.symm_at' op operand #0 must be LLVM pointer to global memory (address space 0 or 1), but got 'i64'}}
  %q = "distributed.symm_at"(%p, %rank) : (i64, i32) -> i64
  return
}

// -----

func.func @symm_at_rank_not_i32(%p: !llvm.ptr<1>, %rank: i64) {
  // expected-error @+1 {{'distributed.symm_at' op operand #1 must be 32-bit signless integer, but got 'i64'}}
  %q = "distributed.symm_at"(%p, %rank) : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>
  return
}

// -----

func.func @wait_zero_barriers(%flags: !llvm.ptr<1>, %v: i32) {
  %zero = arith.constant 0 : i32
  // expected-error @+1 {{'distributed.wait' op num_barriers must be positive, got 0}}
  %t = distributed.wait %flags, %zero, %v scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  return
}

// -----

func.func @wait_shared_memory(%flags: !llvm.ptr<3>, %n: i32, %v: i32) {
  // expected-error @+1 {{'distributed.wait' op operand #0 must be LLVM pointer to global memory (address space 0 or 1), but got '!llvm.ptr<3>'}}
  %t = distributed.wait %flags, %n, %v scope(cta) semantic(acquire) : !llvm.ptr<3>, i32
  return
}

// -----

func.func @wait_bad_scope(%flags: !llvm.ptr<1>, %n: i32, %v: i32) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'scope' [cta, gpu, sys]}}
  %t = distributed.wait %flags, %n, %v scope(system) semantic(acquire) : !llvm.ptr<1>, i32
  return
}

// -----

func.func @wait_bad_semantic(%flags: !llvm.ptr<1>, %n: i32, %v: i32) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'semantic' [acquire, relaxed]}}
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(release) : !llvm.ptr<1>, i32
  return
}

// -----

func.func @wait_value_not_i32_or_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i16) {
  // expected-error @+1 {{'distributed.wait' op operand #2 must be 32-bit signless integer or 64-bit signless integer, but got 'i16'}}
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) : !llvm.ptr<1>, i16
  return
}

// -----

func.func @consume_token_without_a_token(%v: i32, %not_a_token: i32) {
  // expected-error @+1 {{'distributed.consume_token' op operand #1 must be token returned by distributed.wait, but got 'i32'}}
  %r = "distributed.consume_token"(%v, %not_a_token) : (i32, i32) -> i32
  return
}

// -----

func.func @consume_token_generic_form_type_mismatch(%v: i32, %t: !distributed.token) {
  // expected-error @+1 {{'distributed.consume_token' op failed to verify that all of {value, result} have same type}}
  %r = "distributed.consume_token"(%v, %t) : (i32, !distributed.token) -> i64
  return
}

// -----

func.func @consume_token_unsupported_type(%v: i8, %t: !distributed.token) {
  // expected-error @+1 {{'distributed.consume_token' op operand #0 must be 32-bit signless integer or 64-bit signless integer or 32-bit float or 64-bit float or LLVM pointer type, but got 'i8'}}
  %r = distributed.consume_token %v, %t : i8
  return
}

// -----

func.func @notify_negative_rank(%flag: !llvm.ptr<1>, %s: i32) {
  %rank = arith.constant -3 : i32
  // expected-error @+1 {{'distributed.notify' op rank must be non-negative, got -3}}
  distributed.notify %flag, %rank, %s sig_op(set) comm_scope(intra_node) : !llvm.ptr<1>, i32
  return
}

// -----

func.func @notify_shared_memory(%flag: !llvm.ptr<3>, %rank: i32, %s: i32) {
  // expected-error @+1 {{'distributed.notify' op operand #0 must be LLVM pointer to global memory (address space 0 or 1), but got '!llvm.ptr<3>'}}
  distributed.notify %flag, %rank, %s sig_op(set) comm_scope(gpu) : !llvm.ptr<3>, i32
  return
}

// -----

func.func @notify_bad_sig_op(%flag: !llvm.ptr<1>, %rank: i32, %s: i32) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'sig_op' [set, add]}}
  distributed.notify %flag, %rank, %s sig_op(xor) comm_scope(gpu) : !llvm.ptr<1>, i32
  return
}

// -----

func.func @notify_bad_comm_scope(%flag: !llvm.ptr<1>, %rank: i32, %s: i32) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'comm_scope' [gpu, intra_node, inter_node]}}
  distributed.notify %flag, %rank, %s sig_op(set) comm_scope(cluster) : !llvm.ptr<1>, i32
  return
}

// -----

func.func @notify_float_signal(%flag: !llvm.ptr<1>, %rank: i32, %s: f32) {
  // expected-error @+1 {{'distributed.notify' op operand #2 must be 32-bit signless integer or 64-bit signless integer, but got 'f32'}}
  distributed.notify %flag, %rank, %s sig_op(add) comm_scope(gpu) : !llvm.ptr<1>, f32
  return
}

// -----

// expected-error @+1 {{unknown  type `flag` in dialect `distributed`}}
func.func @unknown_type(%x: !distributed.flag) {
  return
}

// -----

func.func @wait_bad_comparison(%flags: !llvm.ptr<1>, %n: i32, %v: i32) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'cmp' [eq, ne, ge, gt, le, lt]}}
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(uge) : !llvm.ptr<1>, i32
  return
}

// -----

// No flag is greater than the largest signed value: the wait could never return.
func.func @wait_gt_max(%flags: !llvm.ptr<1>, %n: i32) {
  %max = arith.constant 2147483647 : i32
  // expected-error @+1 {{'distributed.wait' op no i32 flag is greater than 2147483647: the wait (cmp gt) could never return}}
  %t = distributed.wait %flags, %n, %max scope(sys) semantic(acquire) cmp(gt) : !llvm.ptr<1>, i32
  return
}

// -----

func.func @wait_lt_min(%flags: !llvm.ptr<1>, %n: i32) {
  %min = arith.constant -9223372036854775808 : i64
  // expected-error @+1 {{'distributed.wait' op no i64 flag is less than -9223372036854775808: the wait (cmp lt) could never return}}
  %t = distributed.wait %flags, %n, %min scope(sys) semantic(acquire) cmp(lt) : !llvm.ptr<1>, i64
  return
}

// -----

// The bounds themselves are fine for the other comparisons.
func.func @wait_bounds_ok(%flags: !llvm.ptr<1>, %n: i32) {
  %max = arith.constant 2147483647 : i32
  %min = arith.constant -2147483648 : i32
  %a = distributed.wait %flags, %n, %max scope(sys) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i32
  %b = distributed.wait %flags, %n, %min scope(sys) semantic(acquire) cmp(le) : !llvm.ptr<1>, i32
  return
}

// -----

func.func @heap_offset_shared_memory(%p: !llvm.ptr<3>) -> i64 {
  // expected-error @+1 {{'distributed.heap_offset' op operand #0 must be LLVM pointer to global memory (address space 0 or 1), but got '!llvm.ptr<3>'}}
  %o = distributed.heap_offset %p : !llvm.ptr<3>
  return %o : i64
}

// -----

// The heap-base table has 256 entries (kMaxRanks): a constant rank past it would index out of bounds.
func.func @symm_at_rank_past_the_table(%ptr: !llvm.ptr<1>) -> !llvm.ptr<1> {
  %rank = arith.constant 300 : i32
  // expected-error @+1 {{'distributed.symm_at' op rank must be below 256 (the largest world size the runtime context describes), got 300}}
  %0 = distributed.symm_at %ptr, %rank : !llvm.ptr<1>
  return %0 : !llvm.ptr<1>
}

// -----

func.func @notify_rank_at_the_table_size(%flag: !llvm.ptr<1>, %s: i32) {
  %rank = arith.constant 256 : i32
  // expected-error @+1 {{'distributed.notify' op rank must be below 256}}
  distributed.notify %flag, %rank, %s sig_op(set) comm_scope(gpu) : !llvm.ptr<1>, i32
  return
}

// -----

// The last entry is fine.
func.func @symm_at_last_rank(%ptr: !llvm.ptr<1>) -> !llvm.ptr<1> {
  %rank = arith.constant 255 : i32
  %0 = distributed.symm_at %ptr, %rank : !llvm.ptr<1>
  return %0 : !llvm.ptr<1>
}

// -----

func.func @wait_zero_timeout(%flags: !llvm.ptr<1>, %n: i32, %v: i32) {
  // expected-error @+1 {{'distributed.wait' op timeout_ns must be positive, got 0}}
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) {timeout_ns = 0 : i64} : !llvm.ptr<1>, i32
  return
}
