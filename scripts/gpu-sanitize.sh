#!/usr/bin/env bash
# On a machine with a GPU: runs scripts/gpu-sanitize.lua (every stack backend
# at batch 3, steps 5, 2 layers, hidden 128, and the self-test kernels) under
# compute-sanitizer's memcheck, racecheck and synccheck, and prints each
# tool's summary line ("ERROR SUMMARY: 0 errors", "RACECHECK SUMMARY: ...").
# The exit status is 0 only if every tool ran clean and the workload passed.
#
# With memcheck among the tools it then runs a kernel that reads out of
# bounds (tests/fixtures/kernels/out_of_bounds.cu) and requires memcheck to
# report it, naming the kernel.
#
# usage (repository root, $BUILD built and carried; no Lua needed: build/spk
# carries its interpreter):
#   scripts/gpu-sanitize.sh [tool ...]     (default: memcheck racecheck synccheck)
#   scripts/gpu-sanitize.sh --kernel FILE [tool ...]
#                                          a kernel of one's own alone: its kernel file
#                                          (spk.lstm.kernel_file, e.g. experiments/kernels/row_block.lua)
# SPK_SANITIZE_TIMEOUT (seconds, default 600) bounds each tool's run; a run
# that hits it counts as failed and says so.
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
sanitizer=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
[ -x "$sanitizer" ] || { echo "gpu-sanitize: compute-sanitizer not found (looked in PATH and $CUDA_HOME/bin)" >&2; exit 1; }
[ -x "$BUILD/spk" ] || { echo "gpu-sanitize: $BUILD/spk is missing: build it first (make BUILD=$BUILD)" >&2; exit 1; }
export SPK_KERNEL_DIR="$PWD/kernels"
# Kernels compile once, outside the sanitized runs' timing.
export SPK_CACHE_DIR=${SPK_CACHE_DIR:-$(mktemp -d)}

workload=()
if [ "${1:-}" = "--kernel" ]; then
  [ -n "${2:-}" ] || { echo "gpu-sanitize: --kernel needs a kernel file" >&2; exit 2; }
  workload=(--kernel "$2")
  shift 2
fi
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck synccheck)
"$sanitizer" --version | head -n 3

status=0
summaries=()
for tool in "${tools[@]}"; do
  extra=()
  case "$tool" in
    # --report-api-errors no: src/cuda/kernel.c counts a kernel's parameters
    # by asking for the one past the last (the runtime has no count), and
    # memcheck would list each such refusal as an error.
    memcheck) extra=(--leak-check full --report-api-errors no) ;;
    racecheck) extra=(--racecheck-report all) ;;
  esac
  log=$(mktemp)
  echo "== compute-sanitizer --tool $tool"
  timeout --kill-after=10 "${SPK_SANITIZE_TIMEOUT:-600}" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 50 \
    "$BUILD/spk" run scripts/gpu-sanitize.lua "${workload[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  summary=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$log" | tail -n 1)
  [ -n "$summary" ] || summary="(no summary printed)"
  case "$rc" in 124|137) summary="$summary; stopped after ${SPK_SANITIZE_TIMEOUT:-600} s" ;; esac
  summaries+=("$tool: $summary (exit $rc)")
  [ "$rc" -eq 0 ] || status=1
  rm -f "$log"
done

# The out-of-bounds kernel: memcheck must find its read (exit 99 and the kernel named).
for tool in "${tools[@]}"; do
  [ "$tool" = memcheck ] && [ ${#workload[@]} -eq 0 ] || continue
  log=$(mktemp)
  echo "== compute-sanitizer --tool memcheck: a kernel that reads out of bounds (it must be reported)"
  timeout --kill-after=10 "${SPK_SANITIZE_TIMEOUT:-600}" "$sanitizer" --tool memcheck --report-api-errors no \
    --error-exitcode 99 --print-limit 5 "$BUILD/spk" run scripts/gpu-sanitize.lua --out-of-bounds 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  errors=$(grep -E 'ERROR SUMMARY' "$log" | tail -n 1)
  if [ "$rc" -eq 99 ] && grep -q 'Invalid __global__ read' "$log" && grep -q 'out_of_bounds' "$log"; then
    summaries+=("memcheck, out-of-bounds kernel: found, as it must ($errors)")
  else
    summaries+=("memcheck, out-of-bounds kernel: NOT found (exit $rc; ${errors:-no summary})")
    status=1
  fi
  rm -f "$log"
done

echo "== summaries"
printf '%s\n' "${summaries[@]}"
exit "$status"
