; The built AMD device library compiles for gfx942 (wave64) and gfx1100 (wave32), and each ABI name gets the scope
; and ordering it names (gfx942 cache bits: workgroup sc0, agent sc1, system sc0 sc1).
; RUN: llc -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 %device_lib_dir/triton_dist.amdgcn.bc -o - | FileCheck %s
; RUN: llc -mtriple=amdgcn-amd-amdhsa -mcpu=gfx1100 %device_lib_dir/triton_dist.amdgcn.bc -o - | FileCheck %s --check-prefix=WAVE32

; WAVE32-LABEL: __triton_dist_wait_sys_acquire_eq_i32:
; WAVE32:         v_cmpx_gt_u32_e32 32, v{{[0-9]+}}
; WAVE32:         v_add_nc_u32_e32 v{{[0-9]+}}, 32, v{{[0-9]+}}
; WAVE32:         s_barrier

; CHECK-LABEL: __triton_dist_rank:
; CHECK-LABEL: __triton_dist_num_ranks:
; local_rank and local_num_ranks follow the heap bases (bytes 0x810, 0x814); node and num_nodes divide by the latter.
; CHECK-LABEL: __triton_dist_local_rank:
; CHECK:         s_load_dword s{{[0-9]+}}, s[{{[0-9]+:[0-9]+}}], 0x810
; CHECK-LABEL: __triton_dist_local_num_ranks:
; CHECK:         s_load_dword s{{[0-9]+}}, s[{{[0-9]+:[0-9]+}}], 0x814
; CHECK-LABEL: __triton_dist_node:
; CHECK-DAG:     s_load_dword [[PER_NODE:s[0-9]+]], s[{{[0-9]+:[0-9]+}}], 0x814
; CHECK-DAG:     s_load_dword [[RANK:s[0-9]+]], s[{{[0-9]+:[0-9]+}}], 0x0
; CHECK:         s_cmp_lg_u32 [[PER_NODE]], 0
; CHECK:         v_rcp_iflag_f32
; CHECK-LABEL: __triton_dist_num_nodes:
; CHECK-DAG:     s_load_dword s{{[0-9]+}}, s[{{[0-9]+:[0-9]+}}], 0x814
; CHECK-DAG:     s_load_dword s{{[0-9]+}}, s[{{[0-9]+:[0-9]+}}], 0x4
; CHECK:         v_rcp_iflag_f32
; CHECK-LABEL: __triton_dist_symm_at:
; heap_offset: heap_bases[rank] at byte 16 + 8 * rank; heap_size at byte 8.
; CHECK-LABEL: __triton_dist_heap_offset:
; CHECK:         s_load_dword [[ME:s[0-9]+]], s[{{[0-9]+:[0-9]+}}], 0x0
; CHECK:         s_lshl_b64 s[{{[0-9]+:[0-9]+}}], s[{{[0-9]+:[0-9]+}}], 3
; CHECK:         s_load_dwordx2 s[{{[0-9]+:[0-9]+}}], s[{{[0-9]+:[0-9]+}}], 0x10
; CHECK:         v_subrev_co_u32_e32
; CHECK-LABEL: __triton_dist_heap_size:
; CHECK:         s_load_dwordx2 s[{{[0-9]+:[0-9]+}}], s[{{[0-9]+:[0-9]+}}], 0x8
; CHECK-LABEL: __triton_dist_notify_set_gpu_i32:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc1
; CHECK-NEXT:    global_store_dword v{{.*}}, off sc1{{$}}
; CHECK-LABEL: __triton_dist_notify_set_gpu_i64:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc1
; CHECK-NEXT:    global_store_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-LABEL: __triton_dist_notify_set_intra_node_i32:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc0 sc1
; CHECK-NEXT:    global_store_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-LABEL: __triton_dist_notify_set_intra_node_i64:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc0 sc1
; CHECK-NEXT:    global_store_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-LABEL: __triton_dist_notify_set_inter_node_i32:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc0 sc1
; CHECK-NEXT:    global_store_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-LABEL: __triton_dist_notify_set_inter_node_i64:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc0 sc1
; CHECK-NEXT:    global_store_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-LABEL: __triton_dist_notify_add_gpu_i32:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc1
; CHECK-NEXT:    global_atomic_add v{{.*}}, off{{$}}
; CHECK-LABEL: __triton_dist_notify_add_gpu_i64:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc1
; CHECK-NEXT:    global_atomic_add_x2 v{{.*}}, off{{$}}
; CHECK-LABEL: __triton_dist_notify_add_intra_node_i32:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc0 sc1
; CHECK-NEXT:    global_atomic_add v{{.*}}, off sc1{{$}}
; CHECK-LABEL: __triton_dist_notify_add_intra_node_i64:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc0 sc1
; CHECK-NEXT:    global_atomic_add_x2 v{{.*}}, off sc1{{$}}
; CHECK-LABEL: __triton_dist_notify_add_inter_node_i32:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc0 sc1
; CHECK-NEXT:    global_atomic_add v{{.*}}, off sc1{{$}}
; CHECK-LABEL: __triton_dist_notify_add_inter_node_i64:
; CHECK:         s_barrier
; CHECK:         buffer_wbl2 sc0 sc1
; CHECK-NEXT:    global_atomic_add_x2 v{{.*}}, off sc1{{$}}
; CHECK-LABEL: __triton_dist_consume_token:
; CHECK-NOT:     global_load
; CHECK:         s_setpc_b64
; Each wait: the scope and ordering of its poll (acquire at gpu/sys scope invalidates the caches after the load),
; the signed comparison (the loop branches on its inverse: not yet arrived), the sleep, the barrier.
; CHECK-LABEL: __triton_dist_wait_cta_acquire_eq_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ne_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_ne_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_eq_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_ge_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_lt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_gt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_le_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_le_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_gt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_lt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ge_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_eq_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ne_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_ne_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_eq_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_ge_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_lt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_gt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_le_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_le_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_gt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_acquire_lt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ge_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_eq_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ne_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_ne_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_eq_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_ge_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_lt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_gt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_le_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_le_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_gt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_lt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ge_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_eq_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ne_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_ne_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_eq_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_ge_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_lt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_gt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_le_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_le_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_gt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_lt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ge_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_eq_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_ne_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_ne_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_eq_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_ge_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_lt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_gt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_le_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_le_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_gt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_lt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_ge_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_eq_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_ne_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_ne_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_eq_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_ge_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_lt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_gt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_le_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_le_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_gt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_lt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc1
; CHECK:         v_cmp_ge_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_eq_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ne_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_ne_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_eq_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_ge_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_lt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_gt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_le_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_le_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_gt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_lt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ge_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_eq_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ne_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_ne_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_eq_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_ge_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_lt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_gt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_le_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_le_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_gt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_lt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ge_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_eq_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_ne_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_ne_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_eq_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_ge_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_lt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_gt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_le_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_le_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_gt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_lt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_ge_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_eq_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_ne_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_ne_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_eq_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_ge_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_lt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_gt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_le_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_le_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_gt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_acquire_lt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NEXT:    s_waitcnt vmcnt(0)
; CHECK-NEXT:    buffer_inv sc0 sc1
; CHECK:         v_cmp_ge_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_eq_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ne_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_ne_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_eq_u32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_ge_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_lt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_gt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_le_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_le_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_gt_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_lt_i32:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dword v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ge_i32_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_eq_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ne_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_ne_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_eq_u64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_ge_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_lt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_gt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_le_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_le_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_gt_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_lt_i64:
; CHECK:         v_cmp_gt_u32_e32 vcc, 64, v{{[0-9]+}}
; CHECK:         global_load_dwordx2 v{{.*}}, off sc0 sc1{{$}}
; CHECK-NOT:     buffer_inv
; CHECK:         v_cmp_ge_i64_e32 vcc, v{{.*}}, v{{.*}}
; CHECK:         s_sleep 1
; CHECK:         s_barrier
