// A module that already holds a symbol of an NVSHMEM function's name with another type: a located error, no crash.
// RUN: triton-dist-opt --convert-distributed-to-nvvm %s --split-input-file --verify-diagnostics

llvm.func @nvshmem_signal_wait_until(!llvm.ptr, i32, i32) -> i32

func.func @wrong_declaration(%sig: !llvm.ptr<1>, %v: i64) {
  // expected-error @+1 {{'nvshmem_signal_wait_until' is already declared as '!llvm.func<i32 (ptr, i32, i32)>', but the lowering calls '!llvm.func<i64 (ptr, i32, i64)>'}}
  %t = distributed.signal_wait %sig, %v : !llvm.ptr<1>
  return
}

// -----

func.func private @nvshmemx_getmem_block(i32)

func.func @not_an_llvm_func(%p: !llvm.ptr<1>, %n: i64, %pe: i32) {
  // expected-error @+1 {{'nvshmemx_getmem_block' names a symbol that is not an llvm.func, but the lowering calls the library function of that name}}
  distributed.get %p, %p, %n, %pe : !llvm.ptr<1>, !llvm.ptr<1>
  return
}
