// RUN: triton-dist-opt --triton-dist-lower-to-nvvm %s \
// RUN:   | mlir-translate --mlir-to-llvmir \
// RUN:   | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 \
// RUN:   | FileCheck %s --check-prefix=NVPTX
// RUN: triton-dist-opt --triton-dist-lower-to-rocdl %s \
// RUN:   | mlir-translate --mlir-to-llvmir \
// RUN:   | llc -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 \
// RUN:   | FileCheck %s --check-prefix=GFX942

// The machine compare each `cmp` of `distributed.wait` becomes: signed for the orderings, on the flag just loaded.
// NVPTX leaves the poll loop when the predicate holds; gfx942 stays in it while the inverse holds.

// NVPTX-LABEL: wait_eq_i32(
// NVPTX:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.eq.b32 %[[OK:p[0-9]+]], %[[SEEN]], %{{r[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_eq_i64(
// NVPTX:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.eq.b64 %[[OK:p[0-9]+]], %[[SEEN]], %{{rd[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_ne_i32(
// NVPTX:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.ne.b32 %[[OK:p[0-9]+]], %[[SEEN]], %{{r[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_ne_i64(
// NVPTX:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.ne.b64 %[[OK:p[0-9]+]], %[[SEEN]], %{{rd[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_ge_i32(
// NVPTX:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.ge.s32 %[[OK:p[0-9]+]], %[[SEEN]], %{{r[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_ge_i64(
// NVPTX:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.ge.s64 %[[OK:p[0-9]+]], %[[SEEN]], %{{rd[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_gt_i32(
// NVPTX:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.gt.s32 %[[OK:p[0-9]+]], %[[SEEN]], %{{r[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_gt_i64(
// NVPTX:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.gt.s64 %[[OK:p[0-9]+]], %[[SEEN]], %{{rd[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_le_i32(
// NVPTX:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.le.s32 %[[OK:p[0-9]+]], %[[SEEN]], %{{r[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_le_i64(
// NVPTX:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.le.s64 %[[OK:p[0-9]+]], %[[SEEN]], %{{rd[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_lt_i32(
// NVPTX:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.lt.s32 %[[OK:p[0-9]+]], %[[SEEN]], %{{r[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// NVPTX-LABEL: wait_lt_i64(
// NVPTX:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]], [%{{rd[0-9]+}}];
// NVPTX-NEXT:    setp.lt.s64 %[[OK:p[0-9]+]], %[[SEEN]], %{{rd[0-9]+}};
// NVPTX-NEXT:    @%[[OK]] bra

// GFX942-LABEL: wait_eq_i32:
// GFX942:         global_load_dword v[[SEEN:[0-9]+]], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_ne_u32_e32 vcc, v[[SEEN]], v

// GFX942-LABEL: wait_eq_i64:
// GFX942:         global_load_dwordx2 v{{\[}}[[SEEN:[0-9]+]]:{{[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_ne_u64_e32 vcc, v{{\[}}[[SEEN]]:{{[0-9]+}}], v

// GFX942-LABEL: wait_ne_i32:
// GFX942:         global_load_dword v[[SEEN:[0-9]+]], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_eq_u32_e32 vcc, v[[SEEN]], v

// GFX942-LABEL: wait_ne_i64:
// GFX942:         global_load_dwordx2 v{{\[}}[[SEEN:[0-9]+]]:{{[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_eq_u64_e32 vcc, v{{\[}}[[SEEN]]:{{[0-9]+}}], v

// GFX942-LABEL: wait_ge_i32:
// GFX942:         global_load_dword v[[SEEN:[0-9]+]], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_lt_i32_e32 vcc, v[[SEEN]], v

// GFX942-LABEL: wait_ge_i64:
// GFX942:         global_load_dwordx2 v{{\[}}[[SEEN:[0-9]+]]:{{[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_lt_i64_e32 vcc, v{{\[}}[[SEEN]]:{{[0-9]+}}], v

// GFX942-LABEL: wait_gt_i32:
// GFX942:         global_load_dword v[[SEEN:[0-9]+]], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_le_i32_e32 vcc, v[[SEEN]], v

// GFX942-LABEL: wait_gt_i64:
// GFX942:         global_load_dwordx2 v{{\[}}[[SEEN:[0-9]+]]:{{[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_le_i64_e32 vcc, v{{\[}}[[SEEN]]:{{[0-9]+}}], v

// GFX942-LABEL: wait_le_i32:
// GFX942:         global_load_dword v[[SEEN:[0-9]+]], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_gt_i32_e32 vcc, v[[SEEN]], v

// GFX942-LABEL: wait_le_i64:
// GFX942:         global_load_dwordx2 v{{\[}}[[SEEN:[0-9]+]]:{{[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_gt_i64_e32 vcc, v{{\[}}[[SEEN]]:{{[0-9]+}}], v

// GFX942-LABEL: wait_lt_i32:
// GFX942:         global_load_dword v[[SEEN:[0-9]+]], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_ge_i32_e32 vcc, v[[SEEN]], v

// GFX942-LABEL: wait_lt_i64:
// GFX942:         global_load_dwordx2 v{{\[}}[[SEEN:[0-9]+]]:{{[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc0 sc1
// GFX942:         v_cmp_ge_i64_e32 vcc, v{{\[}}[[SEEN]]:{{[0-9]+}}], v

func.func @wait_eq_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(eq) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

func.func @wait_eq_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(eq) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

func.func @wait_ne_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ne) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

func.func @wait_ne_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ne) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

func.func @wait_ge_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

func.func @wait_ge_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

func.func @wait_gt_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(gt) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

func.func @wait_gt_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(gt) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

func.func @wait_le_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(le) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

func.func @wait_le_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(le) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

func.func @wait_lt_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(lt) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

func.func @wait_lt_i64(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(lt) : !llvm.ptr<1>, i64
  return %t : !distributed.token
}
