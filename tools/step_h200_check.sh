#!/usr/bin/env bash
# One H200 run (at most about 9 minutes) that measures and checks the cluster
# kernel's step: the defaults (the gates early, the trimmed cell, up to batch
# 64 the direct pushes to peers mapped, each step's addresses made ahead) against the previous defaults
# and the other step options, the timelines behind them, the batch-1 step's
# warp-stall samples per instruction, and the GPU specs that hold their bits.
#
# usage: [OUT=DIR] tools/step_h200_check.sh [--help]     (OUT: where its files go; default results/step_h200_check)
#
# Run from the root of a copy of the tree with build/ (built here: build/spk,
# build/spk.so, build/tests/) and .deps/ (scripts/fetch-deps.sh) carried, and
# docs/results/ in the copy (timeline_view_spec reads the recordings there).
# Each step runs within its time limit and what is left of the whole (560 s);
# a step that fails or runs out does not stop the others. In $OUT at the end:
#   gpu.txt          this log (the machine, every step's output, the verdicts)
#   step_ab.txt      tools/step_ab.lua at batch 1, 8, 32 (and 16, 48, 64, 128,
#                    256: the batch table's other rows): every variant against
#                    the default in alternation in one process, cuDNN's best
#   timelines.tar.gz experiments/step_timeline.lua at batch 1, 8, 32:
#                    default/ (today's defaults), plain/ (early_gates=0,
#                    cell=reference), fused/ (cell=fused on top of the
#                    defaults), once/ (mapped_pushes=1: the addresses made at the push)
#   source_b1_default.csv, source_b1_once.csv   tools/ncu_source.sh at batch 1
#                    (the default, mapped_pushes=1), read by
#                    tools/stall_stages.py into gpu.txt (where ncu is found)
#   specs_1.tap      default_bits_spec (the defaults' digests against the
#                    records), cell_spec (the cell forms for all 2^32 inputs),
#                    timeline_view_spec
#   specs_2.tap      cluster_spec's cases of the step options and the bits
#   specs_3.tap      timeline_kernels_spec (the timeline builds' bits)
# The verdict lines at the end: step_ab's lines and best lines, each
# timeline's "critical path a step" and "attack next", each spec file's
# "N passed, N failed", and "step_h200_check: every step ended with status 0"
# or the failed steps. docs/results/2026-12-01-h200-step/README.md reads the
# first run's.
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
OUT=${OUT:-results/step_h200_check}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee "$OUT/gpu.txt") 2>&1
t0=$(date +%s)
deadline=$((t0 + 560))
root="$PWD/.deps/root"
[ -x "$root/usr/bin/lua5.4" ] && export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SPK_KERNEL_DIR="$PWD/kernels"
failures=()

# step NAME LIMIT command...: runs it within min(LIMIT, what is left), says how it ended
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - $(date +%s)))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 10 ]; then
    echo "== $name: SKIPPED (no time left)"
    failures+=("$name (skipped)")
    return
  fi
  echo "== $name (limit ${limit}s, at $(($(date +%s) - t0))s)"
  timeout -k 5 "$limit" "$@"
  local rc=$?
  echo "== $name: exit $rc at $(($(date +%s) - t0))s"
  [ "$rc" -eq 0 ] || failures+=("$name (exit $rc)")
}

echo "== machine"
nvidia-smi -L 2>&1 || echo "nvidia-smi not found"
git log --oneline -1 2>/dev/null || echo "commit: not known here (no .git in this copy)"
[ -x build/spk ] || echo "step_h200_check: build/spk is missing: build it (make) and carry build/"
[ -d docs/results/2026-12-01-h200-stack ] ||
  echo "step_h200_check: docs/results/ is missing from this copy: timeline_view_spec will fail"
build/spk info 2>&1 | head -20

# (a) the variants against the defaults, in alternation
step "step_ab" 230 build/spk run tools/step_ab.lua --batches 1,8,32 --wide 64,128,256,16,48 --passes 3 \
  --rounds 5 --cudnn --budget 200 > "$OUT/step_ab.txt"
cat "$OUT/step_ab.txt"

# (b) the timelines: today's defaults, the previous defaults, the fused cell
mkdir -p "$OUT/timelines"
step "timeline default" 40 build/spk run experiments/step_timeline.lua --quick --batches 1,8,32 \
  --out "$OUT/timelines/default"
step "timeline plain (early_gates=0,cell=reference)" 40 build/spk run experiments/step_timeline.lua --quick \
  --batches 1,8,32 --kernel "early_gates=0,cell=reference" --out "$OUT/timelines/plain"
step "timeline fused (cell=fused)" 40 build/spk run experiments/step_timeline.lua --quick --batches 1,8,32 \
  --kernel "cell=fused" --out "$OUT/timelines/fused"
step "timeline once (mapped_pushes=1)" 40 build/spk run experiments/step_timeline.lua --quick --batches 1,8,32 \
  --kernel "mapped_pushes=1" --out "$OUT/timelines/once"
tar -czf "$OUT/timelines.tar.gz" -C "$OUT" timelines && rm -rf "$OUT/timelines"

# (c) the batch-1 step's warp-stall samples per instruction, the default's and mapped_pushes=1's
for form in default once; do
  options=""
  [ "$form" = once ] && options="mapped_pushes=1"
  step "ncu source, batch 1, $form" 40 tools/ncu_source.sh "$OUT/source_b1_$form.csv" cluster 1 fp32 "$options"
  [ -s "$OUT/source_b1_$form.csv" ] && python3 tools/stall_stages.py "$OUT/source_b1_$form.csv"
done

# (d) the GPU specs, each group its own TAP file
export SPK_SKIP_C_TESTS=1
export SPK_TAP_FILE="$OUT/specs_1.tap"
step "specs: default bits, cell (2^32), timeline view" 120 scripts/gpu-test.sh --no-bench \
  tests/spec/default_bits_spec.lua tests/spec/cell_spec.lua tests/spec/timeline_view_spec.lua
export SPK_TAP_FILE="$OUT/specs_2.tap"
step "specs: cluster, the step options and the bits" 150 scripts/gpu-test.sh --no-bench \
  --filter "with the step variants" --filter "every option set gives the baseline's bits" \
  --filter "the exchange %(" --filter "the same bits as the persistent kernel" \
  --filter "the default's bits are the persistent kernel's" --filter "checks the options" \
  --filter "takes every option left out" tests/spec/cluster_spec.lua
export SPK_TAP_FILE="$OUT/specs_3.tap"
step "specs: timeline kernels" 60 scripts/gpu-test.sh --no-bench tests/spec/timeline_kernels_spec.lua

echo
echo "== verdicts ($(($(date +%s) - t0)) s)"
grep -E "^batch .*(default|x[0-9])|^best |cudnn best|^step_ab:" "$OUT/step_ab.txt" | cut -c1-150
grep -E "^== timeline|^step timeline:|^timeline build|critical path a step|attack next" "$OUT/gpu.txt" |
  grep -v "^== timeline.*(limit" | cut -c1-200
grep -E "^== specs.*exit|^[0-9]+ passed, [0-9]+ failed" "$OUT/gpu.txt" | uniq
if [ ${#failures[@]} -eq 0 ]; then
  echo "step_h200_check: every step ended with status 0"
else
  echo "step_h200_check: FAILED steps: ${failures[*]}"
fi
