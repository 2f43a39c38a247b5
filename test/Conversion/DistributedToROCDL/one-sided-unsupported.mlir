// AMD has no one-sided lowering (rocSHMEM is not wired; docs/design.md): every put_signal, get and signal_wait is a
// located error, and nothing is converted.
// RUN: triton-dist-opt --convert-distributed-to-rocdl %s --verify-diagnostics

func.func @one_sided(%p: !llvm.ptr<1>, %n: i64, %v: i64, %pe: i32) {
  // expected-error @+1 {{'distributed.put_signal' op has no lowering for 'amdgcn-amd-amdhsa': the one-sided inter-node ops lower to NVSHMEM device calls, on NVIDIA targets only (a rocSHMEM lowering is not implemented; docs/design.md)}}
  distributed.put_signal %p, %p, %n, %p, %v, %pe sig_op(set) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  // expected-error @+1 {{'distributed.get' op has no lowering for 'amdgcn-amd-amdhsa'}}
  distributed.get %p, %p, %n, %pe : !llvm.ptr<1>, !llvm.ptr<1>
  // expected-error @+1 {{'distributed.signal_wait' op has no lowering for 'amdgcn-amd-amdhsa'}}
  %t = distributed.signal_wait %p, %v : !llvm.ptr<1>
  return
}
