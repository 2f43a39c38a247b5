; The built NVIDIA device library compiles for sm_90, and each ABI name gets the scope and ordering it names.
; RUN: llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 %device_lib_dir/triton_dist.nvptx64.bc -o - | FileCheck %s

; CHECK: .visible .global .align 8 .b8 __triton_dist_context[2072];
; CHECK-LABEL: __triton_dist_rank()
; CHECK:         ld.global.nc.b32 %{{r[0-9]+}}, [__triton_dist_context];
; CHECK-LABEL: __triton_dist_num_ranks()
; CHECK:         ld.global.nc.b32 %{{r[0-9]+}}, [__triton_dist_context+4];
; local_rank and local_num_ranks follow the heap bases (bytes 2064, 2068); node and num_nodes divide by the latter,
; read as 1 when 0.
; CHECK-LABEL: __triton_dist_local_rank()
; CHECK:         ld.global.nc.b32 %{{r[0-9]+}}, [__triton_dist_context+2064];
; CHECK-LABEL: __triton_dist_local_num_ranks()
; CHECK:         ld.global.nc.b32 %{{r[0-9]+}}, [__triton_dist_context+2068];
; CHECK-LABEL: __triton_dist_node()
; CHECK:         ld.global.nc.b32 %[[RANK:r[0-9]+]], [__triton_dist_context];
; CHECK:         ld.global.nc.b32 %[[PER_NODE:r[0-9]+]], [__triton_dist_context+2068];
; CHECK:         setp.eq.b32 %[[UNFILLED:p[0-9]+]], %[[PER_NODE]], 0;
; CHECK:         selp.b32 %[[DIVISOR:r[0-9]+]], 1, %[[PER_NODE]], %[[UNFILLED]];
; CHECK:         div.u32 %{{r[0-9]+}}, %[[RANK]], %[[DIVISOR]];
; CHECK-LABEL: __triton_dist_num_nodes()
; CHECK:         ld.global.nc.b32 %[[WORLD:r[0-9]+]], [__triton_dist_context+4];
; CHECK:         ld.global.nc.b32 %[[PER_NODE:r[0-9]+]], [__triton_dist_context+2068];
; CHECK:         div.u32 %{{r[0-9]+}}, %[[WORLD]], %{{r[0-9]+}};
; CHECK-LABEL: __triton_dist_symm_at(
; CHECK:         sub.s64
; CHECK:         add.s64
; heap_offset: addr - heap_bases[rank], heap_bases at byte 16; heap_size at byte 8.
; CHECK-LABEL: __triton_dist_heap_offset(
; CHECK:         ld.global.nc.b32 %[[ME:r[0-9]+]], [__triton_dist_context];
; CHECK:         mul.wide.s32 %{{rd[0-9]+}}, %[[ME]], 8;
; CHECK:         ld.global.nc.b64 %[[BASE:rd[0-9]+]], [%{{rd[0-9]+}}+16];
; CHECK:         sub.s64 %{{rd[0-9]+}}, %{{rd[0-9]+}}, %[[BASE]];
; CHECK-LABEL: __triton_dist_heap_size()
; CHECK:         ld.global.nc.b64 %{{rd[0-9]+}}, [__triton_dist_context+8];
; CHECK-LABEL: __triton_dist_notify_set_gpu_i32(
; CHECK:         bar.sync 0;
; CHECK:         st.release.gpu.global.b32
; CHECK-LABEL: __triton_dist_notify_set_gpu_i64(
; CHECK:         bar.sync 0;
; CHECK:         st.release.gpu.global.b64
; CHECK-LABEL: __triton_dist_notify_set_intra_node_i32(
; CHECK:         bar.sync 0;
; CHECK:         st.release.sys.global.b32
; CHECK-LABEL: __triton_dist_notify_set_intra_node_i64(
; CHECK:         bar.sync 0;
; CHECK:         st.release.sys.global.b64
; CHECK-LABEL: __triton_dist_notify_set_inter_node_i32(
; CHECK:         bar.sync 0;
; CHECK:         st.release.sys.global.b32
; CHECK-LABEL: __triton_dist_notify_set_inter_node_i64(
; CHECK:         bar.sync 0;
; CHECK:         st.release.sys.global.b64
; CHECK-LABEL: __triton_dist_notify_add_gpu_i32(
; CHECK:         bar.sync 0;
; CHECK:         atom.release.gpu.global.add.u32
; CHECK-LABEL: __triton_dist_notify_add_gpu_i64(
; CHECK:         bar.sync 0;
; CHECK:         atom.release.gpu.global.add.u64
; CHECK-LABEL: __triton_dist_notify_add_intra_node_i32(
; CHECK:         bar.sync 0;
; CHECK:         atom.release.sys.global.add.u32
; CHECK-LABEL: __triton_dist_notify_add_intra_node_i64(
; CHECK:         bar.sync 0;
; CHECK:         atom.release.sys.global.add.u64
; CHECK-LABEL: __triton_dist_notify_add_inter_node_i32(
; CHECK:         bar.sync 0;
; CHECK:         atom.release.sys.global.add.u32
; CHECK-LABEL: __triton_dist_notify_add_inter_node_i64(
; CHECK:         bar.sync 0;
; CHECK:         atom.release.sys.global.add.u64
; consume_token: the value goes straight back through an empty inline asm.
; CHECK-LABEL: __triton_dist_consume_token(
; CHECK:         ld.param.b64 %[[VALUE:rd[0-9]+]], [__triton_dist_consume_token_param_0];
; CHECK:         // begin inline asm
; CHECK-NEXT:    // end inline asm
; CHECK-NEXT:    st.param.b64 [func_retval0], %[[VALUE]];
; Each wait: the scope and ordering of its poll, the signed comparison of the flag with the value (32/64 bits),
; the backoff sleep, the barrier.
; CHECK-LABEL: __triton_dist_wait_cta_acquire_eq_i32(
; CHECK:         ld.acquire.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.eq.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_ne_i32(
; CHECK:         ld.acquire.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ne.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_ge_i32(
; CHECK:         ld.acquire.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ge.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_gt_i32(
; CHECK:         ld.acquire.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.gt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_le_i32(
; CHECK:         ld.acquire.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.le.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_lt_i32(
; CHECK:         ld.acquire.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.lt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_eq_i64(
; CHECK:         ld.acquire.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.eq.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_ne_i64(
; CHECK:         ld.acquire.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ne.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_ge_i64(
; CHECK:         ld.acquire.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ge.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_gt_i64(
; CHECK:         ld.acquire.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.gt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_le_i64(
; CHECK:         ld.acquire.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.le.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_acquire_lt_i64(
; CHECK:         ld.acquire.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.lt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_eq_i32(
; CHECK:         ld.relaxed.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.eq.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_ne_i32(
; CHECK:         ld.relaxed.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ne.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_ge_i32(
; CHECK:         ld.relaxed.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ge.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_gt_i32(
; CHECK:         ld.relaxed.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.gt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_le_i32(
; CHECK:         ld.relaxed.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.le.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_lt_i32(
; CHECK:         ld.relaxed.cta.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.lt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_eq_i64(
; CHECK:         ld.relaxed.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.eq.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_ne_i64(
; CHECK:         ld.relaxed.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ne.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_ge_i64(
; CHECK:         ld.relaxed.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ge.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_gt_i64(
; CHECK:         ld.relaxed.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.gt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_le_i64(
; CHECK:         ld.relaxed.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.le.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_cta_relaxed_lt_i64(
; CHECK:         ld.relaxed.cta.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.lt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_eq_i32(
; CHECK:         ld.acquire.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.eq.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_ne_i32(
; CHECK:         ld.acquire.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ne.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_ge_i32(
; CHECK:         ld.acquire.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ge.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_gt_i32(
; CHECK:         ld.acquire.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.gt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_le_i32(
; CHECK:         ld.acquire.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.le.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_lt_i32(
; CHECK:         ld.acquire.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.lt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_eq_i64(
; CHECK:         ld.acquire.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.eq.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_ne_i64(
; CHECK:         ld.acquire.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ne.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_ge_i64(
; CHECK:         ld.acquire.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ge.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_gt_i64(
; CHECK:         ld.acquire.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.gt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_le_i64(
; CHECK:         ld.acquire.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.le.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_acquire_lt_i64(
; CHECK:         ld.acquire.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.lt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_eq_i32(
; CHECK:         ld.relaxed.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.eq.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_ne_i32(
; CHECK:         ld.relaxed.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ne.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_ge_i32(
; CHECK:         ld.relaxed.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ge.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_gt_i32(
; CHECK:         ld.relaxed.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.gt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_le_i32(
; CHECK:         ld.relaxed.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.le.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_lt_i32(
; CHECK:         ld.relaxed.gpu.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.lt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_eq_i64(
; CHECK:         ld.relaxed.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.eq.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_ne_i64(
; CHECK:         ld.relaxed.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ne.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_ge_i64(
; CHECK:         ld.relaxed.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ge.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_gt_i64(
; CHECK:         ld.relaxed.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.gt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_le_i64(
; CHECK:         ld.relaxed.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.le.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_gpu_relaxed_lt_i64(
; CHECK:         ld.relaxed.gpu.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.lt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_eq_i32(
; CHECK:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.eq.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_ne_i32(
; CHECK:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ne.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_ge_i32(
; CHECK:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ge.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_gt_i32(
; CHECK:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.gt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_le_i32(
; CHECK:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.le.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_lt_i32(
; CHECK:         ld.acquire.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.lt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_eq_i64(
; CHECK:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.eq.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_ne_i64(
; CHECK:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ne.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_ge_i64(
; CHECK:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ge.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_gt_i64(
; CHECK:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.gt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_le_i64(
; CHECK:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.le.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_acquire_lt_i64(
; CHECK:         ld.acquire.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.lt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_eq_i32(
; CHECK:         ld.relaxed.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.eq.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_ne_i32(
; CHECK:         ld.relaxed.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ne.b32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_ge_i32(
; CHECK:         ld.relaxed.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.ge.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_gt_i32(
; CHECK:         ld.relaxed.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.gt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_le_i32(
; CHECK:         ld.relaxed.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.le.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_lt_i32(
; CHECK:         ld.relaxed.sys.global.b32 %[[SEEN:r[0-9]+]]
; CHECK-NEXT:    setp.lt.s32 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_eq_i64(
; CHECK:         ld.relaxed.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.eq.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_ne_i64(
; CHECK:         ld.relaxed.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ne.b64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_ge_i64(
; CHECK:         ld.relaxed.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.ge.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_gt_i64(
; CHECK:         ld.relaxed.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.gt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_le_i64(
; CHECK:         ld.relaxed.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.le.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
; CHECK-LABEL: __triton_dist_wait_sys_relaxed_lt_i64(
; CHECK:         ld.relaxed.sys.global.b64 %[[SEEN:rd[0-9]+]]
; CHECK-NEXT:    setp.lt.s64 %{{p[0-9]+}}, %[[SEEN]], %{{rd?[0-9]+}};
; CHECK:         nanosleep.u32
; CHECK:         bar.sync 0;
