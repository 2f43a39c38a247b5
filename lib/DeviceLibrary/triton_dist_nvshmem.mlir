// The NVSHMEM device library of triton-dist (NVIDIA only), written in the `distributed` dialect: the functions the
// one-sided primitives of triton_dist.language (dl.put_signal, dl.get, dl.signal_wait) call, each one op.
//
// Built into triton_dist.nvshmem.nvptx64.bc (lib/DeviceLibrary/CMakeLists.txt) by the NVVM lowering, which turns
// each op into a call of an NVSHMEM device function (nvshmemx_putmem_signal_block, nvshmemx_getmem_block,
// nvshmem_signal_wait_until) that this bitcode only declares. The compiler links it, then NVSHMEM's own device
// bitcode (libnvshmem_device_sm_<N>.bc of the nvidia-nvshmem wheel) that defines those functions, only into kernels
// that call one of these symbols (python/triton_dist/compiler/stages_hook.py).
//
// As in triton_dist.mlir: addresses cross the ABI as i64, every function is always_inline and convergent (each
// lowers to block-collective calls and program barriers), and a token is an i32.

func.func @__triton_dist_nvshmem_put_signal_set(%dest: i64, %src: i64, %bytes: i64, %sig: i64, %signal: i64,
                                               %rank: i32) -> i32
    attributes {always_inline, passthrough = ["convergent"]} {
  %d = llvm.inttoptr %dest : i64 to !llvm.ptr<1>
  %s = llvm.inttoptr %src : i64 to !llvm.ptr<1>
  %g = llvm.inttoptr %sig : i64 to !llvm.ptr<1>
  distributed.put_signal %d, %s, %bytes, %g, %signal, %rank sig_op(set) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  %zero = arith.constant 0 : i32
  return %zero : i32
}

func.func @__triton_dist_nvshmem_put_signal_add(%dest: i64, %src: i64, %bytes: i64, %sig: i64, %signal: i64,
                                               %rank: i32) -> i32
    attributes {always_inline, passthrough = ["convergent"]} {
  %d = llvm.inttoptr %dest : i64 to !llvm.ptr<1>
  %s = llvm.inttoptr %src : i64 to !llvm.ptr<1>
  %g = llvm.inttoptr %sig : i64 to !llvm.ptr<1>
  distributed.put_signal %d, %s, %bytes, %g, %signal, %rank sig_op(add) : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  %zero = arith.constant 0 : i32
  return %zero : i32
}

func.func @__triton_dist_nvshmem_get(%dest: i64, %src: i64, %bytes: i64, %rank: i32) -> i32
    attributes {always_inline, passthrough = ["convergent"]} {
  %d = llvm.inttoptr %dest : i64 to !llvm.ptr<1>
  %s = llvm.inttoptr %src : i64 to !llvm.ptr<1>
  distributed.get %d, %s, %bytes, %rank : !llvm.ptr<1>, !llvm.ptr<1>
  %zero = arith.constant 0 : i32
  return %zero : i32
}

func.func @__triton_dist_nvshmem_signal_wait_eq(%sig: i64, %value: i64) -> !distributed.token
    attributes {always_inline, passthrough = ["convergent"]} {
  %g = llvm.inttoptr %sig : i64 to !llvm.ptr<1>
  %token = distributed.signal_wait %g, %value cmp(eq) : !llvm.ptr<1>
  return %token : !distributed.token
}

func.func @__triton_dist_nvshmem_signal_wait_ne(%sig: i64, %value: i64) -> !distributed.token
    attributes {always_inline, passthrough = ["convergent"]} {
  %g = llvm.inttoptr %sig : i64 to !llvm.ptr<1>
  %token = distributed.signal_wait %g, %value cmp(ne) : !llvm.ptr<1>
  return %token : !distributed.token
}

func.func @__triton_dist_nvshmem_signal_wait_ge(%sig: i64, %value: i64) -> !distributed.token
    attributes {always_inline, passthrough = ["convergent"]} {
  %g = llvm.inttoptr %sig : i64 to !llvm.ptr<1>
  %token = distributed.signal_wait %g, %value cmp(ge) : !llvm.ptr<1>
  return %token : !distributed.token
}

func.func @__triton_dist_nvshmem_signal_wait_gt(%sig: i64, %value: i64) -> !distributed.token
    attributes {always_inline, passthrough = ["convergent"]} {
  %g = llvm.inttoptr %sig : i64 to !llvm.ptr<1>
  %token = distributed.signal_wait %g, %value cmp(gt) : !llvm.ptr<1>
  return %token : !distributed.token
}

func.func @__triton_dist_nvshmem_signal_wait_le(%sig: i64, %value: i64) -> !distributed.token
    attributes {always_inline, passthrough = ["convergent"]} {
  %g = llvm.inttoptr %sig : i64 to !llvm.ptr<1>
  %token = distributed.signal_wait %g, %value cmp(le) : !llvm.ptr<1>
  return %token : !distributed.token
}

func.func @__triton_dist_nvshmem_signal_wait_lt(%sig: i64, %value: i64) -> !distributed.token
    attributes {always_inline, passthrough = ["convergent"]} {
  %g = llvm.inttoptr %sig : i64 to !llvm.ptr<1>
  %token = distributed.signal_wait %g, %value cmp(lt) : !llvm.ptr<1>
  return %token : !distributed.token
}
