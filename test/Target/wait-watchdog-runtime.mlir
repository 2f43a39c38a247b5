// RUN: triton-dist-opt --triton-dist-lower-to-nvvm="wait-timeout-from-runtime=true set-target=true" %s \
// RUN:   | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 \
// RUN:   | FileCheck %s --check-prefix=NVPTX
// RUN: triton-dist-opt --triton-dist-lower-to-rocdl="wait-timeout-from-runtime=true set-target=true" %s \
// RUN:   | mlir-translate --mlir-to-llvmir | llc -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 \
// RUN:   | FileCheck %s --check-prefix=GFX942

// The runtime-timeout watchdog (what the watchdog device libraries hold) in machine code: the steady counter, the
// timeout read from @__triton_dist_wait_watchdog (zero: the check never fires), the record's address read from it
// past the timeout, the system-scope claim and release of the record through that address (host-mapped memory), the
// trap.

// NVPTX: .visible .global .align 8 .b8 __triton_dist_wait_watchdog[16];
// NVPTX-LABEL: runtime_watched(
// NVPTX:         mov.u64 %[[START:rd[0-9]+]], %globaltimer;
// NVPTX:         ld.global.nc.b64 %[[TIMEOUT:rd[0-9]+]], [__triton_dist_wait_watchdog];
// NVPTX:         setp.eq.b64 %[[OFF:p[0-9]+]], %[[TIMEOUT]], 0;
// NVPTX:         ld.acquire.sys.global.b32
// NVPTX:         mov.u64 %[[NOW:rd[0-9]+]], %globaltimer;
// NVPTX:         sub.s64 %[[ELAPSED:rd[0-9]+]], %[[NOW]], %[[START]];
// NVPTX:         setp.le.u64 %[[EARLY:p[0-9]+]], %[[ELAPSED]], %[[TIMEOUT]];
// NVPTX:         or.pred %{{p[0-9]+}}, %[[EARLY]], %[[OFF]];
// NVPTX:         ld.global.nc.b64 %[[RECORD:rd[0-9]+]], [__triton_dist_wait_watchdog+8];
// NVPTX:         atom.relaxed.sys.global.cas.b32 %{{r[0-9]+}}, [%[[RECORD]]], 0, 1;
// NVPTX:         mov.u32 %{{r[0-9]+}}, %ctaid.x;
// NVPTX:         st.global.{{.*}} [%[[RECORD]]+48], %[[TIMEOUT]];
// NVPTX:         st.release.sys.global.b32 [%[[RECORD]]], 2;
// NVPTX:         trap;

// GFX942-LABEL: runtime_watched:
// GFX942:         s_memrealtime
// GFX942:         __triton_dist_wait_watchdog@gotpcrel32
// GFX942:         global_load_dword {{.*}} sc0 sc1
// GFX942:         s_memrealtime
// GFX942:         __triton_dist_wait_watchdog@gotpcrel32
// GFX942:         global_atomic_cmpswap {{.*}} sc0 sc1
// GFX942:         global_store_dwordx2 {{.*}} offset:48
// GFX942:         buffer_wbl2 sc0 sc1
// GFX942:         global_store_dword {{.*}} sc0 sc1
// GFX942:         s_trap 2
// GFX942: .size __triton_dist_wait_watchdog, 16
func.func @runtime_watched(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}
