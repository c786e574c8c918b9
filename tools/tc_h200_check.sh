#!/usr/bin/env bash
# The tensor-core recurrence (kernels/lstm_tc.cu) on an H200, in one run of a few minutes:
#
# usage: OUT=DIR tools/tc_h200_check.sh [--profile next|run1] [--dry-run]
#
# Runs from the root of a built tree (build/spk, build/spk.so; the machine needs no Lua
# or compiler of its own: NVRTC compiles the kernels there). Every step is bounded by
# `timeout` and runs whatever the one before did (a failing or timed-out step is named,
# the next runs); each prints its lines to stdout and into $OUT (default /tmp/tc_out):
#   correctness.txt   tools/tc_sweep.lua --part correctness: "ok"/"WRONG" a case against the f64
#                     reference, the first wrong element, "correctness: N cases failed"; the
#                     mma.sync form and the wgmma form each in a process of its own (a kernel
#                     that faults leaves its process's CUDA context unusable)
#   bench.txt/.json   spk bench: the tensor-core kernel file beside the built-in cluster kernel
#                     and cuDNN (the issue's table), FP32 and split-TF32 projections (the wgmma
#                     form's rows at the same shapes are the sweep's "wgmma" lines)
#   sweep.txt         tools/tc_sweep.lua --part sweep: every variant's ms, accuracy, bits,
#                     registers, spills, clusters / co-resident clusters and waves, and the
#                     fastest within the FP32 bound per batch
#   stamps.txt        tools/tc_sweep.lua --part stamps: per-stage clock64 cycles of a step, the
#                     step in ns, the clock, and the plain build's time a step
#   error_growth.txt  experiments/error_growth.lua over 4 layers x 1000 steps (each kernel file)
#   gpu_log.txt       the commit, the device, each step's exit status and seconds
# Profiles: next (default), the run docs/kernels.md's analysis asks for: batches 32, 64, 128,
# 256, the new variants (wgmma, the fetch before the wait, one-wave shapes) against the
# earlier bests and the cluster kernel; run1, the commands of the run of 2026-12-01
# (docs/results/2026-12-01-h200-tensor-core/README.md: run in a checkout of that commit).
# --dry-run prints the steps without running them. The whole run stops by DEADLINE seconds
# (default 355: a step's limit is cut to what is left). Exit status 0; the lines say what failed.
set -u
profile=next dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=${2:-}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "tc_h200_check: unknown argument '$1' (--profile next|run1, --dry-run, --help)" >&2; exit 2 ;;
  esac
done
case "$profile" in next|run1) ;; *) echo "tc_h200_check: --profile is next or run1, got '$profile'" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tc_out}
mkdir -p "$OUT"
export SPK_KERNEL_DIR="$PWD/kernels"
SPK=build/spk
DEADLINE=${DEADLINE:-355}
log="$OUT/gpu_log.txt"
: >"$log"
say() { echo "$*" | tee -a "$log"; }

commit=$(git rev-parse --short HEAD 2>/dev/null || cat .commit 2>/dev/null || echo '?')
say "== tc_h200_check ($profile) on $(hostname), $(date -u +%FT%TZ), commit $commit"
command -v nvidia-smi >/dev/null && nvidia-smi -L | tee -a "$log"
[ "$dry" = 1 ] || [ -x "$SPK" ] || { say "FAIL: $SPK is missing (build the tree first: make)"; exit 1; }

# step NAME SECONDS OUTFILE MODE command...: MODE new (truncate OUTFILE) or add (append)
step() {
  local name=$1 secs=$2 file=$3 mode=$4
  shift 4
  local t0=$SECONDS
  local left=$((DEADLINE - SECONDS))
  [ "$dry" = 0 ] && [ $left -lt $secs ] && secs=$left
  if [ $secs -le 0 ]; then
    say "== step $name: SKIPPED, the run's ${DEADLINE}s are spent"
    return
  fi
  say "== step $name (at most ${secs}s) -> $(basename "$file")"
  if [ "$dry" = 1 ]; then
    say "   $*"
    return
  fi
  [ "$mode" = new ] && : >"$file"
  timeout --signal=TERM --kill-after=10 "$secs" "$@" >"$file.part" 2>&1
  local rc=$?
  cat "$file.part" | tee -a "$file"
  rm -f "$file.part"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    say "step $name: TIMED OUT after ${secs}s (its lines so far are above)"
  elif [ $rc -ne 0 ]; then
    say "step $name: FAILED, exit status $rc"
  else
    say "step $name: done"
  fi
  say "step $name: $((SECONDS - t0))s"
}

SWEEP=tools/tc_sweep.lua
K=experiments/kernels
if [ "$profile" = run1 ]; then
  step correctness 80 "$OUT/correctness.txt" new "$SPK" run $SWEEP --part correctness
  step bench 140 "$OUT/bench.txt" new "$SPK" bench --kernel $K/tensor_core.lua,$K/tensor_core_tf32.lua \
    --backends cluster,cudnn --math fp32,3xtf32 --batches 32,64,128,256 --rounds 5 --json "$OUT/bench.json"
  step sweep 150 "$OUT/sweep.txt" new "$SPK" run $SWEEP --part sweep --batches 256,64 --rounds 5
  step stamps 40 "$OUT/stamps.txt" new "$SPK" run $SWEEP --part stamps --batches 64,256 --rounds 3
  rm -rf /tmp/tc_error_growth
  step error_growth 45 "$OUT/error_growth.txt" new "$SPK" run experiments/error_growth.lua --steps 1000 --batches 4 \
    --backends cpu,cluster --kernel $K/tensor_core.lua --out /tmp/tc_error_growth
else
  # correctness first, each product form in its own process
  step correctness 35 "$OUT/correctness.txt" new "$SPK" run $SWEEP --part correctness --mma sync
  step correctness_wgmma 25 "$OUT/correctness.txt" add "$SPK" run $SWEEP --part correctness --mma wgmma
  # the issue's table: the default kernel file (mma.sync) beside the cluster kernel and cuDNN
  step bench 90 "$OUT/bench.txt" new "$SPK" bench --kernel $K/tensor_core.lua \
    --backends cluster,cudnn --math fp32,3xtf32 --batches 32,64,128,256 --rounds 5 --json "$OUT/bench.json"
  # every variant at every batch (the largest first), each form in its own process
  step sweep 90 "$OUT/sweep.txt" new "$SPK" run $SWEEP --part sweep --batches 256,128,64,32 --rounds 5 --mma sync
  step sweep_wgmma 80 "$OUT/sweep.txt" add "$SPK" run $SWEEP --part sweep --batches 256,128,64,32 --rounds 5 --mma wgmma
  step stamps 15 "$OUT/stamps.txt" new "$SPK" run $SWEEP --part stamps --batches 32,64,128,256 --rounds 3 --mma sync
  step stamps_wgmma 15 "$OUT/stamps.txt" add "$SPK" run $SWEEP --part stamps --batches 32,64,128,256 --rounds 3 --mma wgmma
  for file in tensor_core tensor_core_wgmma; do
    rm -rf /tmp/tc_error_growth
    step "error_growth ($file)" 20 "$OUT/error_growth.txt" "$([ $file = tensor_core ] && echo new || echo add)" \
      "$SPK" run experiments/error_growth.lua --steps 1000 --batches 4 \
      --backends "$([ $file = tensor_core ] && echo cpu,cluster || echo cluster)" --kernel $K/$file.lua \
      --out /tmp/tc_error_growth
  done
fi
say "== tc_h200_check: $SECONDS s in all"
exit 0
