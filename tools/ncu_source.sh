#!/usr/bin/env bash
# Warp-stall samples per SASS instruction of the recurrence kernel (the first
# layer's launch) of one forward, through Nsight Compute's source counters,
# on a machine with a GPU and ncu; tools/stall_stages.py reads the result
# anywhere (the step loop, its samples by kind and by stage):
#
# usage: tools/ncu_source.sh OUT.csv BACKEND BATCH [MATH] [KERNEL OPTIONS]
#
# KERNEL OPTIONS: key=value pairs for the backend's kernel table, as
# tools/ncu_forward.sh takes them (tools/profile_forward.lua runs the
# forward); without them the backend's default for BATCH. KERNELS (a regex,
# default the recurrence kernels) picks other launches. Clocks are left as
# they are (--clock-control none). Writes OUT.csv (`ncu -i REPORT --page
# source --csv --print-source sass`) and nothing else: the report itself is
# removed. BUILD selects the build folder (default build).
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
usage="usage: tools/ncu_source.sh OUT.csv BACKEND BATCH [MATH] [KERNEL OPTIONS]"
out=${1:?$usage}
backend=${2:?$usage}
batch=${3:?$usage}
mathmode=${4:-fp32}
options=${5:-}
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -n 1)
[ -n "$ncu" ] && [ -x "$ncu" ] || { echo "ncu_source: ncu not found" >&2; exit 1; }
report=$(mktemp -d)/source
trap 'rm -rf "$(dirname "$report")"' EXIT
export SPK_KERNEL_DIR="$PWD/kernels"
"$ncu" --clock-control none --target-processes all \
  --kernel-name regex:"${KERNELS:-spk_lstm_(cluster|recurrence|tc)}" --launch-count 1 \
  --section SourceCounters --section WarpStateStats -o "$report" \
  "$BUILD/spk" run tools/profile_forward.lua "$backend" "$batch" "$mathmode" "$options" >&2 || exit 1
"$ncu" -i "$report.ncu-rep" --page source --csv --print-source sass > "$out" || exit 1
echo "ncu_source: $out (python3 tools/stall_stages.py $out)"
