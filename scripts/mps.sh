# Sourced by the GPU scripts: run more ranks than GPUs (TRITON_DIST_SHARED_GPUS=1, every rank on one GPU) through
# an MPS daemon, so the ranks' kernels run at the same time. Without MPS the GPU time-slices between the ranks'
# processes and a wait on a peer progresses only once per slice (a 2-rank check_primitives on one GPU took > 150 s;
# under MPS 17 s). Correctness only: ranks split the SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and talk through one
# GPU's L2, not NVLink, so their timings mean nothing.
#
#   mps_start <dir> <log file>   start a daemon whose pipe and logs live under <dir> (keep it out of packed output:
#                                it holds sockets); what the start prints goes to <log file>
#   mps_stop                     stop it (a no-op when none runs)
#   mps_share <ranks> <gpus>     the SM percentage each rank gets

mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY="$1/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$1/mps/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d >>"$2" 2>&1 || echo "WARNING: nvidia-cuda-mps-control -d failed (see $2)"
}

mps_stop() {
  [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] || return 0
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  sleep 1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}

mps_share() {
  local share=$((100 * $2 / $1))
  [ "$share" -gt 100 ] && share=100
  echo "$share"
}
