; The built nvptx64 device library (<build>/device/triton_dist.nvptx64.bc) against docs/abi.md: every symbol with
; its ABI signature, the context global, nothing else defined and nothing external referenced.
; RUN: llvm-dis %device_lib_dir/triton_dist.nvptx64.bc -o - | FileCheck %s
; RUN: llvm-nm --defined-only %device_lib_dir/triton_dist.nvptx64.bc | FileCheck %s --check-prefix=SYMBOLS
; RUN: llvm-nm --undefined-only %device_lib_dir/triton_dist.nvptx64.bc | count 0
; RUN: llvm-dis %device_lib_dir/triton_dist.nvptx64.bc -o - | FileCheck %s --check-prefix=PORTABLE

; CHECK: target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
; CHECK: target triple = "nvptx64-nvidia-cuda"
; CHECK: @__triton_dist_context = addrspace(1) externally_initialized global { i32, i32, i64, [256 x i64], i32, i32 } zeroinitializer, align 8

; CHECK: define i32 @__triton_dist_rank() #[[INLINE:[0-9]+]] {
; CHECK: define i32 @__triton_dist_num_ranks() #[[INLINE]] {
; CHECK: define i32 @__triton_dist_local_rank() #[[INLINE]] {
; CHECK: define i32 @__triton_dist_local_num_ranks() #[[INLINE]] {
; CHECK: define i32 @__triton_dist_node() #[[INLINE]] {
; CHECK: define i32 @__triton_dist_num_nodes() #[[INLINE]] {
; CHECK: define i64 @__triton_dist_symm_at(i64 %{{.*}}, i32 %{{.*}}) #[[INLINE]] {
; CHECK: define i64 @__triton_dist_heap_offset(i64 %{{.*}}) #[[INLINE]] {
; CHECK: define i64 @__triton_dist_heap_size() #[[INLINE]] {
; CHECK: define i32 @__triton_dist_notify_set_gpu_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER:[0-9]+]] {
; CHECK: define i32 @__triton_dist_notify_set_gpu_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_set_intra_node_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_set_intra_node_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_set_inter_node_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_set_inter_node_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_add_gpu_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_add_gpu_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_add_intra_node_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_add_intra_node_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_add_inter_node_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_notify_add_inter_node_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i64 @__triton_dist_consume_token(i64 %{{.*}}, i32 %{{.*}}) #[[INLINE]] {
; The generated wait functions.
; CHECK: define i32 @__triton_dist_wait_cta_acquire_eq_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_ne_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_ge_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_gt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_le_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_lt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_eq_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_ne_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_ge_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_gt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_le_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_acquire_lt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_eq_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_ne_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_ge_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_gt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_le_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_lt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_eq_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_ne_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_ge_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_gt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_le_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_cta_relaxed_lt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_eq_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_ne_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_ge_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_gt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_le_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_lt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_eq_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_ne_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_ge_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_gt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_le_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_acquire_lt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_eq_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_ne_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_ge_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_gt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_le_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_lt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_eq_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_ne_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_ge_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_gt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_le_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_gpu_relaxed_lt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_eq_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_ne_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_ge_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_gt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_le_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_lt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_eq_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_ne_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_ge_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_gt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_le_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_acquire_lt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_eq_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_ne_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_ge_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_gt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_le_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_lt_i32(i64 %{{.*}}, i32 %{{.*}}, i32 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_eq_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_ne_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_ge_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_gt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_le_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK: define i32 @__triton_dist_wait_sys_relaxed_lt_i64(i64 %{{.*}}, i32 %{{.*}}, i64 %{{.*}}) #[[BARRIER]] {
; CHECK-DAG: attributes #[[INLINE]] = { alwaysinline }
; CHECK-DAG: attributes #[[BARRIER]] = { alwaysinline convergent }

; Exactly the ABI symbols are defined (llvm-nm sorts by name).
; SYMBOLS: T __triton_dist_consume_token
; SYMBOLS-NEXT: D __triton_dist_context
; SYMBOLS-NEXT: T __triton_dist_heap_offset
; SYMBOLS-NEXT: T __triton_dist_heap_size
; SYMBOLS-NEXT: T __triton_dist_local_num_ranks
; SYMBOLS-NEXT: T __triton_dist_local_rank
; SYMBOLS-NEXT: T __triton_dist_node
; SYMBOLS-NEXT: T __triton_dist_notify_add_gpu_i32
; SYMBOLS-NEXT: T __triton_dist_notify_add_gpu_i64
; SYMBOLS-NEXT: T __triton_dist_notify_add_inter_node_i32
; SYMBOLS-NEXT: T __triton_dist_notify_add_inter_node_i64
; SYMBOLS-NEXT: T __triton_dist_notify_add_intra_node_i32
; SYMBOLS-NEXT: T __triton_dist_notify_add_intra_node_i64
; SYMBOLS-NEXT: T __triton_dist_notify_set_gpu_i32
; SYMBOLS-NEXT: T __triton_dist_notify_set_gpu_i64
; SYMBOLS-NEXT: T __triton_dist_notify_set_inter_node_i32
; SYMBOLS-NEXT: T __triton_dist_notify_set_inter_node_i64
; SYMBOLS-NEXT: T __triton_dist_notify_set_intra_node_i32
; SYMBOLS-NEXT: T __triton_dist_notify_set_intra_node_i64
; SYMBOLS-NEXT: T __triton_dist_num_nodes
; SYMBOLS-NEXT: T __triton_dist_num_ranks
; SYMBOLS-NEXT: T __triton_dist_rank
; SYMBOLS-NEXT: T __triton_dist_symm_at
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_eq_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_eq_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_ge_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_ge_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_gt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_gt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_le_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_le_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_lt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_lt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_ne_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_acquire_ne_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_eq_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_eq_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_ge_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_ge_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_gt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_gt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_le_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_le_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_lt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_lt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_ne_i32
; SYMBOLS-NEXT: T __triton_dist_wait_cta_relaxed_ne_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_eq_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_eq_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_ge_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_ge_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_gt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_gt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_le_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_le_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_lt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_lt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_ne_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_acquire_ne_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_eq_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_eq_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_ge_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_ge_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_gt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_gt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_le_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_le_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_lt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_lt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_ne_i32
; SYMBOLS-NEXT: T __triton_dist_wait_gpu_relaxed_ne_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_eq_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_eq_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_ge_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_ge_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_gt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_gt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_le_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_le_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_lt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_lt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_ne_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_acquire_ne_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_eq_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_eq_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_ge_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_ge_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_gt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_gt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_le_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_le_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_lt_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_lt_i64
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_ne_i32
; SYMBOLS-NEXT: T __triton_dist_wait_sys_relaxed_ne_i64
; SYMBOLS-NOT: {{.}}

; Bitcode the LLVM inside Triton 3.6 can read: LLVM 22.1 tags min/max intrinsics with 'nocreateundeforpoison',
; which that reader rejects; and no device-library dependency of its own (ockl, libdevice).
; PORTABLE-NOT: nocreateundeforpoison
; PORTABLE-NOT: @llvm.{{u?(min|max)}}
; PORTABLE-NOT: __ockl
; PORTABLE-NOT: __nv_
