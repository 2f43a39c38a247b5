// The verifier rules and type constraints of put_signal, get and signal_wait.
// RUN: triton-dist-opt %s --split-input-file --verify-diagnostics

func.func @put_signal_negative_rank(%p: !llvm.ptr<1>, %n: i64, %v: i64) {
  %rank = arith.constant -3 : i32
  // expected-error @+1 {{'distributed.put_signal' op rank must be non-negative, got -3}}
  distributed.put_signal %p, %p, %n, %p, %v, %rank sig_op(set) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// -----

func.func @put_signal_rank_too_large(%p: !llvm.ptr<1>, %n: i64, %v: i64) {
  %rank = arith.constant 256 : i32
  // expected-error @+1 {{'distributed.put_signal' op rank must be below 256 (the largest world size the runtime context describes), got 256}}
  distributed.put_signal %p, %p, %n, %p, %v, %rank sig_op(set) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// -----

func.func @put_signal_negative_bytes(%p: !llvm.ptr<1>, %v: i64, %rank: i32) {
  %n = arith.constant -1 : i64
  // expected-error @+1 {{'distributed.put_signal' op bytes must be non-negative, got -1}}
  distributed.put_signal %p, %p, %n, %p, %v, %rank sig_op(add) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// -----

func.func @put_signal_shared_memory_source(%p: !llvm.ptr<1>, %s: !llvm.ptr<3>, %n: i64, %v: i64, %rank: i32) {
  // expected-error @+1 {{'distributed.put_signal' op operand #1 must be LLVM pointer to global memory (address space 0 or 1), but got '!llvm.ptr<3>'}}
  distributed.put_signal %p, %s, %n, %p, %v, %rank sig_op(set) : !llvm.ptr<1>, !llvm.ptr<3>, !llvm.ptr<1>
  return
}

// -----

func.func @put_signal_unknown_sig_op(%p: !llvm.ptr<1>, %n: i64, %v: i64, %rank: i32) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'sig_op' [set, add]}}
  distributed.put_signal %p, %p, %n, %p, %v, %rank sig_op(xor) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// -----

func.func @get_negative_rank(%p: !llvm.ptr<1>, %n: i64) {
  %rank = arith.constant -1 : i32
  // expected-error @+1 {{'distributed.get' op rank must be non-negative, got -1}}
  distributed.get %p, %p, %n, %rank : !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// -----

func.func @get_negative_bytes(%p: !llvm.ptr<1>, %rank: i32) {
  %n = arith.constant -4096 : i64
  // expected-error @+1 {{'distributed.get' op bytes must be non-negative, got -4096}}
  distributed.get %p, %p, %n, %rank : !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// -----

func.func @get_private_memory_destination(%d: !llvm.ptr<5>, %p: !llvm.ptr<1>, %n: i64, %rank: i32) {
  // expected-error @+1 {{'distributed.get' op operand #0 must be LLVM pointer to global memory (address space 0 or 1), but got '!llvm.ptr<5>'}}
  distributed.get %d, %p, %n, %rank : !llvm.ptr<5>, !llvm.ptr<1>
  return
}

// -----

func.func @signal_wait_gt_max(%s: !llvm.ptr<1>) {
  %max = arith.constant -1 : i64
  // expected-error @+1 {{'distributed.signal_wait' op no unsigned 64-bit signal is greater than 18446744073709551615: the wait (cmp gt) could never return}}
  %t = distributed.signal_wait %s, %max cmp(gt) : !llvm.ptr<1>
  return
}

// -----

func.func @signal_wait_lt_zero(%s: !llvm.ptr<1>) {
  %zero = arith.constant 0 : i64
  // expected-error @+1 {{'distributed.signal_wait' op no unsigned 64-bit signal is less than 0: the wait (cmp lt) could never return}}
  %t = distributed.signal_wait %s, %zero cmp(lt) : !llvm.ptr<1>
  return
}
