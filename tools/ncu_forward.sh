#!/usr/bin/env bash
# Hardware counters of the recurrence kernel (first layer's launch) of one
# forward, through Nsight Compute, on a machine with a GPU and ncu:
#
# usage: tools/ncu_forward.sh BACKEND BATCH [MATH] [KERNEL OPTIONS] > report.txt
#
# KERNEL OPTIONS: key=value pairs for the cluster backend's kernel table (see
# tools/profile_forward.lua); without them the backend's default for BATCH.
# KERNELS (a regex, default the recurrence) picks other launches, e.g. the
# input projections' GEMM: KERNELS='gemm|sgemm|cutlass' LAUNCHES=2.
# Clocks are left as they are (--clock-control none). Sections: speed of
# light, compute and memory workload, warp states, scheduler, occupancy,
# launch, and the warp stall reasons (cycles per issued instruction spent in
# each, smsp__average_warps_issue_stalled_*). BUILD selects the build folder (default build).
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
backend=${1:?usage: tools/ncu_forward.sh BACKEND BATCH [MATH] [KERNEL OPTIONS]}
batch=${2:?usage: tools/ncu_forward.sh BACKEND BATCH [MATH] [KERNEL OPTIONS]}
mathmode=${3:-fp32}
options=${4:-}
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -n 1)
[ -n "$ncu" ] && [ -x "$ncu" ] || { echo "ncu_forward: ncu not found" >&2; exit 1; }
export SPK_KERNEL_DIR="$PWD/kernels"
"$ncu" --clock-control none --target-processes all \
  --kernel-name regex:"${KERNELS:-spk_lstm_(cluster|recurrence)}" --launch-count "${LAUNCHES:-1}" \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' \
  "$BUILD/spk" run tools/profile_forward.lua "$backend" "$batch" "$mathmode" "$options"
