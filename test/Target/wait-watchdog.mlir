// RUN: triton-dist-opt --triton-dist-lower-to-nvvm %s | mlir-translate --mlir-to-llvmir \
// RUN:   | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | FileCheck %s --check-prefix=NVPTX
// RUN: triton-dist-opt --triton-dist-lower-to-rocdl %s | mlir-translate --mlir-to-llvmir \
// RUN:   | llc -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 | FileCheck %s --check-prefix=GFX942

// The watchdog in machine code: the steady counter (%globaltimer / s_memrealtime), the claim of the record (a
// system-scope compare-and-swap), its publication (system-scope release store of 2), and the trap.

// NVPTX: .visible .global .align 8 .b8 __triton_dist_wait_timeout[56];
// NVPTX-LABEL: watched(
// NVPTX:         mov.u64 %{{rd[0-9]+}}, %globaltimer;
// NVPTX:         ld.acquire.sys.global.b32
// NVPTX:         mov.u64 %{{rd[0-9]+}}, %globaltimer;
// NVPTX:         atom.relaxed.sys.global.cas.b32 %{{r[0-9]+}}, [__triton_dist_wait_timeout], 0, 1;
// NVPTX:         mov.u32 %{{r[0-9]+}}, %ctaid.x;
// NVPTX:         st.release.sys.global.b32 [__triton_dist_wait_timeout], 2;
// NVPTX:         trap;

// GFX942-LABEL: watched:
// GFX942:         s_memrealtime
// GFX942:         global_load_dword {{.*}} sc0 sc1
// GFX942:         s_memrealtime
// GFX942:         global_atomic_cmpswap {{.*}} sc0 sc1
// GFX942:         buffer_wbl2 sc0 sc1
// GFX942:         s_trap 2
// GFX942: .size __triton_dist_wait_timeout, 56
func.func @watched(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) {timeout_ns = 2000000000 : i64} : !llvm.ptr<1>, i32
  return %t : !distributed.token
}
