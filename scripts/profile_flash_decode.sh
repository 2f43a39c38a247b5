#!/usr/bin/env bash
# flash_decode on one GPU: the context sweep of bench/flash_decode_anatomy.py (fixed cost and streaming rate beside
# the single-GPU baseline), then Nsight Compute on flash_decode's kernel and on the baseline's kernels at batch 1:
# the details page (throughput, occupancy, warp states) and the SASS with its stall samples, as text under $OUT.
#
#   bash scripts/profile_flash_decode.sh          # on a GPU machine, with python/triton_dist/_device built
#   PROFILE_CONTEXTS_K="1 32" PROFILE_SWEEP=1 bash scripts/profile_flash_decode.sh   # contexts (k tokens) to profile;
#                                                 # the sweep also times forced split counts; PROFILE_ANATOMY=0 skips it
# Everything lands in $OUT/profile.tar.gz.
#
# Exit code 0 iff the sweep ran; a profiler that cannot run here is reported and skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT/profile"
CONTEXTS="${PROFILE_CONTEXTS_K:-1 32}"
PROFILE_ANATOMY="${PROFILE_ANATOMY:-1}"
SWEEP_ARGS=()
[[ "${PROFILE_SWEEP:-0}" == 1 ]] && SWEEP_ARGS=(--sweep "${PROFILE_SWEEP_CONFIGS:-8,12,16,24,32}")

status=0
if [[ "$PROFILE_ANATOMY" == 1 ]]; then
  timeout 300 torchrun --nproc-per-node=1 bench/flash_decode_anatomy.py --out-dir "$OUT/profile" "${SWEEP_ARGS[@]}" \
    2>&1 | tee "$OUT/profile/anatomy.log" || status=1
fi

NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
if [[ -z "$NCU" ]]; then
  echo "SKIP ncu: not found" | tee -a "$OUT/profile/ncu.log"
  CONTEXTS=""
fi
for ctx in $CONTEXTS; do
  # kernel regex : launches to skip (warm-up) : launches to profile
  for target in "_flash_decode_kernel:3:1:ours" "(cudnn|lean_reduction|flash_fwd):6:2:baseline"; do
    IFS=: read -r regex skip count name <<<"$target"
    rep="$OUT/profile/${name}_b1_${ctx}k"
    timeout 240 "$NCU" --clock-control none --set full --import-source yes -k "regex:$regex" \
      --launch-skip "$skip" --launch-count "$count" -f -o "$rep" \
      torchrun --nproc-per-node=1 bench/flash_decode_anatomy.py --profile --batches 1 --contexts-k "$ctx" \
      >"$rep.log" 2>&1 || echo "ncu $name ${ctx}k failed (rc $?), see $rep.log" | tee -a "$OUT/profile/ncu.log"
    if [[ -f "$rep.ncu-rep" ]]; then
      "$NCU" -i "$rep.ncu-rep" --page details >"$rep.details.txt" 2>&1
      "$NCU" -i "$rep.ncu-rep" --page source --print-source sass --csv >"$rep.sass.csv" 2>&1
      gzip -f "$rep.sass.csv"
      rm -f "$rep.ncu-rep"   # large; the text pages are what comes back
    fi
  done
done
# One archive: the device tool brings back a limited number of files.
tar -czf "$OUT/profile.tar.gz" -C "$OUT" profile && rm -rf "$OUT/profile"
exit $status
