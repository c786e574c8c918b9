#!/usr/bin/env bash
# The split-TF32 projection GEMM on an H200 in one run of at most about 8
# minutes: its correctness and speed alone and in the stack, the TMA form's
# variants, the GPU specs, Nsight Compute's tensor-pipe share, the SASS.
#
# usage:
#   tools/gemm_h200_check.sh            # from the root of a built tree (build/, .deps/root carried)
#   OUT=dir tools/gemm_h200_check.sh    # where the outputs go (default results-gemm-h200/)
#
# Built here first: `make -j2 && scripts/fetch-deps.sh` (build/spk, build/spk.so,
# build/tests/, .deps/root); the machine that runs it needs CUDA 13 and no Lua.
# Every step has its own time limit and a share of a 465 s budget; a step
# that fails, times out or is skipped says so on a line of its own and the
# others go on (no set -e). Outputs in $OUT (8 files; one run read line by
# line: docs/results/2026-12-01-h200-gemm/README.md):
#   summary.txt       the verdict lines of every step (read this first)
#   gemm_check.txt    tools/gemm_3xtf32_check.lua, every shape and form, the default kernels
#   gemm_variants.txt the TMA form's variants (C by its own stores; 4 stages), ncu, SASS
#   bench.txt, .json  spk bench: cluster + cuDNN, fp32 and 3xtf32 (the default form), batch 1..256
#   bench_more.txt    odd batches, the variant in the stack, the classic form, hidden 64 and 256, 2 layers
#   specs.tap         the GEMM, math3x and tuning specs; then the TMA-form specs on the variant
#   log.txt           every step's command, stderr and time
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-results-gemm-h200}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt" LOG="$OUT/log.txt"
: >"$SUMMARY"
: >"$LOG"
START=$(date +%s)
BUDGET=${BUDGET:-465}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gemm-h200-XXXXXX")
export SPK_CACHE_DIR="$TMP/cache"
export SPK_KERNEL_DIR="$PWD/kernels"
export SPK_DEPS=${SPK_DEPS:-.deps/root}
SPK=build/spk
CHECK=tools/gemm_3xtf32_check.lua
# The variant this run times against the default (C through shared memory
# and TMA's bulk store, beside 3 stages): the consumer threads' own stores of
# C, which leave room for 4 stages.
OWN_STORES="SPK_TMA_STORE_C=0,SPK_TMA_STAGES=4"

exec 3>&1 # the terminal: a step's stdout goes to its file, its verdicts here and to the summary
say() { echo "$*" | tee -a "$SUMMARY" >&3; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
# step NAME LIMIT CMD...: CMD under `timeout`, at most LIMIT seconds and what the budget has left.
step() {
  local name=$1 limit=$2
  shift 2
  local l
  l=$(left)
  if [ "$l" -lt 15 ]; then
    say "SKIPPED $name: the budget is spent"
    return 1
  fi
  [ "$limit" -gt "$l" ] && limit=$l
  local t0 rc
  t0=$(date +%s)
  echo "== $name (limit ${limit}s): $*" >>"$LOG"
  timeout -k 5 "$limit" "$@" 2>>"$LOG"
  rc=$?
  echo "== $name: rc $rc, $(($(date +%s) - t0)) s" >>"$LOG"
  [ $rc -eq 124 ] && say "TIMEOUT $name after ${limit}s (partial output kept)"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && say "FAILED $name: exit $rc (see log.txt)"
  return $rc
}

say "gemm_h200_check.sh: commit $(git rev-parse --short HEAD 2>/dev/null || echo "unknown (no git here)")"
{ nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader 2>&1 || true; } | sed 's/^/device: /' | tee -a "$SUMMARY"
[ -x "$SPK" ] || say "FAILED: $SPK is missing (build the tree before carrying it)"

# ---- the variant's kernel folder (no device needed) ------------------------------
VARIANT="$TMP/kernels-own-stores"
VARIANT_OK=0
step write_variant 20 "$SPK" run "$CHECK" --tma-define "$OWN_STORES" --write-variant "$VARIANT" >>"$LOG" && VARIANT_OK=1

# ---- smoke: one small TMA-form gemm per kernel folder first, so that a hang
# or a wrong result costs 45 s and the later steps leave that folder out ----------
cat >"$TMP/smoke.lua" <<'EOF'
local spk = require "spk"
local ok, err = pcall(function()
  for _, k in ipairs { 60, 256 } do
    for _, beta in ipairs { 0, 1 } do -- beta 1: C's own stores in every variant
      local a = spk.randn({ 300, k }, { seed = 1 }):cuda()
      local w = spk.rand({ 2, 200, k }, { low = -0.09, high = 0.09, seed = 2 }):cuda()
      local c0 = spk.randn({ 2, 300, 200 }, { seed = 3 })
      local hi, lo = spk.blas.split_tf32(w)
      local c1, c2 = c0:cuda(), c0:cuda()
      spk.blas.gemm { a = a, b = hi, b_lo = lo, c = c1, transb = true, beta = beta, math = "3xtf32" }
      spk.blas.gemm { a = a, b = w, c = c2, transb = true, beta = beta, math = "fp32" }
      local cmp = spk.compare(c1:cpu(), c2:cpu())
      print(("smoke %s k %d beta %d: TMA form against cuBLAS FP32 rel_l2 %.3e, worst at %s: %.9g against %.9g"):format(
        os.getenv("SMOKE_NAME") or "", k, beta, cmp.rel_l2, table.concat(cmp.worst, ","), cmp.a_worst or 0 / 0,
        cmp.b_worst or 0 / 0))
      assert(cmp.rel_l2 <= 1e-6, "smoke: the TMA form's output is wrong")
    end
  end
end)
print(ok and "smoke: ok" or ("smoke: FAIL " .. tostring(err)))
os.exit(ok and 0 or 1)
EOF
smoke() { # NAME KERNEL_DIR: 0 when the TMA form is right there
  SMOKE_NAME=$1 SPK_KERNEL_DIR=$2 step "smoke_$1" 45 "$SPK" run "$TMP/smoke.lua" >"$TMP/smoke_$1.out"
  local rc=$?
  grep -E "^smoke" "$TMP/smoke_$1.out" | tee -a "$SUMMARY"
  if [ $rc -ne 0 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    SMOKE_NAME=$1 SPK_KERNEL_DIR=$2 step "sanitize_smoke_$1" 60 compute-sanitizer --tool memcheck \
      --report-api-errors no "$SPK" run "$TMP/smoke.lua" >>"$OUT/gemm_variants.txt" 2>&1
    grep -E "ERROR SUMMARY|Invalid|out of bounds" "$OUT/gemm_variants.txt" | head -5 | sed "s/^/sanitizer $1: /" |
      tee -a "$SUMMARY"
  fi
  return $rc
}
: >"$OUT/gemm_variants.txt"
TMA_OK=1
smoke default "$PWD/kernels" || TMA_OK=0
[ $TMA_OK = 1 ] || say "smoke default FAILED: the later steps run the classic 3xtf32 form (SPK_GEMM_3XTF32=classic)"
if [ $VARIANT_OK = 1 ]; then
  smoke own_stores "$VARIANT" || { VARIANT_OK=0; say "smoke own_stores FAILED: the variant's steps are left out"; }
fi
FORMS=tma,f16,classic,fp32,tf32
# the stack's default (the TMA form on this GPU) unless its smoke failed
[ $TMA_OK = 1 ] || { FORMS=classic,fp32,tf32; export SPK_GEMM_3XTF32=classic; }

# ---- (a) the GEMM alone: every form, every shape, the default kernels ------------
step gemm_check 150 "$SPK" run "$CHECK" --rounds 5 --forms "$FORMS" >"$OUT/gemm_check.txt"
grep -E "^(target|gemm check|gemm_3xtf32_check)" "$OUT/gemm_check.txt" | tee -a "$SUMMARY"
grep -E "FAIL|WORSE" "$OUT/gemm_check.txt" | head -12 | sed 's/^/  /' | tee -a "$SUMMARY"
grep -E "^M 150784 .* (tma|classic|fp32|tf32) " "$OUT/gemm_check.txt" | sed 's/^/  /' | tee -a "$SUMMARY"

# ---- (a, variant) C by its own stores with 4 stages: every shape, then C's own
# stores alone (3 stages), the variant's other half, on the targets ----------------
var="$OUT/gemm_variants.txt"
if [ $VARIANT_OK = 1 ]; then
  echo "== variant own_stores ($OWN_STORES), every shape" >>"$var"
  step variant_own_stores 90 "$SPK" run "$CHECK" --tma-define "$OWN_STORES" --forms tma,fp32 --rounds 5 >>"$var"
  echo "== variant own stores, 3 stages (SPK_TMA_STORE_C=0), the targets" >>"$var"
  step variant_own_stores3 40 "$SPK" run "$CHECK" --tma-define SPK_TMA_STORE_C=0 --shapes targets --forms tma,fp32 \
    --rounds 5 >>"$var"
fi
grep -E "^(== variant|M 150784 .* tma |target|gemm check|gemm_3xtf32_check)" "$var" | sed 's/^/variants: /' |
  tee -a "$SUMMARY"
grep -E "FAIL" "$var" | head -6 | sed 's/^/variants:   /' | tee -a "$SUMMARY"

# ---- (c) the specs on the GPU: the default kernels, then the TMA form's on the variant
SPK_TAP_FILE="$OUT/specs.tap" SPK_SKIP_C_TESTS=1 step specs 100 scripts/gpu-test.sh --no-bench \
  tests/spec/gemm_3xtf32_spec.lua tests/spec/math3x_spec.lua tests/spec/tuning_spec.lua >"$TMP/specs.out" 2>&1
cat "$TMP/specs.out" >>"$LOG"
tail -1 "$TMP/specs.out" | sed 's/^/specs: /' | tee -a "$SUMMARY"
grep -E "^not ok" "$OUT/specs.tap" 2>/dev/null | sed 's/^/  /' | tee -a "$SUMMARY"
grep -E "# SKIP" "$OUT/specs.tap" 2>/dev/null | head -5 | sed 's/^/  skipped: /' | tee -a "$SUMMARY"
if [ $VARIANT_OK = 1 ]; then
  SPK_TAP_FILE="$TMP/specs_own_stores.tap" SPK_SKIP_C_TESTS=1 step specs_own_stores 60 scripts/gpu-test.sh --no-bench \
    --kernel-dir "$VARIANT" --filter "TMA form" tests/spec/gemm_3xtf32_spec.lua tests/spec/math3x_spec.lua \
    >"$TMP/specs_own_stores.out" 2>&1
  cat "$TMP/specs_own_stores.out" >>"$LOG"
  { echo "# the TMA form's specs with SPK_KERNEL_DIR = the own_stores variant"; cat "$TMP/specs_own_stores.tap"; } \
    >>"$OUT/specs.tap" 2>/dev/null
  tail -1 "$TMP/specs_own_stores.out" | sed 's/^/specs own_stores: /' | tee -a "$SUMMARY"
  grep -E "^not ok" "$TMP/specs_own_stores.tap" 2>/dev/null | sed 's/^/  /' | tee -a "$SUMMARY"
fi

# ---- (b) the stack: spk bench with cuDNN, 3xtf32 on the default form ----------------
bench_verdict() { # FILE.json [targets]: spk's rows against their bounds (and the stack's targets)
  python3 - "$1" "${2:-}" <<'EOF' 2>&1 | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("bench verdict: no JSON (%s)" % e); sys.exit(0)
rows = d.get("rows", [])
targets = {64: 3.0, 128: 4.8, 256: 8.8} if sys.argv[2] == "targets" else {}
fails = 0
for r in rows:
    if r.get("backend") == "cudnn":
        continue
    m = r.get("math") or "fp32"
    ok = r.get("bound_ok")
    if ok is False or r.get("error"):
        fails += 1
    t = targets.get(r.get("batch")) if m == "3xtf32" else None
    print("bench %-8s batch %4s %-7s %9s ms  rel_l2 %-9s max_abs %-9s bound %-9s %s%s" % (
        r.get("backend"), r.get("batch"), m, "%.3f" % r["median_ms"] if r.get("median_ms") else "-",
        "%.3g" % r["rel_l2"] if r.get("rel_l2") is not None else "-",
        "%.3g" % r["max_abs"] if r.get("max_abs") is not None else "-",
        "%.3g" % r["bound"] if r.get("bound") is not None else "-",
        "ok" if ok else ("FAIL" if ok is False else (r.get("error") or "no bound")),
        "" if t is None or not r.get("median_ms") else ("  target %.1f: %s" % (t, "met" if r["median_ms"] <= t else "missed"))))
print("bench verdict: %d rows of spk's kernels, %d beyond their bound or failed" % (
    sum(1 for r in rows if r.get("backend") != "cudnn"), fails))
EOF
}
step bench 120 "$SPK" bench --backends cluster,cudnn --math fp32,3xtf32 --batches 1,8,32,64,128,256 --rounds 5 \
  --json "$OUT/bench.json" >"$OUT/bench.txt"
bench_verdict "$OUT/bench.json" targets

# ---- (b, variant) the stack's projections on the own_stores variant -------------------
more="$OUT/bench_more.txt"
: >"$more"
if [ $VARIANT_OK = 1 ] && [ $TMA_OK = 1 ]; then
  echo "== 3xtf32 on the own_stores variant ($OWN_STORES), no cuDNN" >>"$more"
  SPK_KERNEL_DIR=$VARIANT step bench_own_stores 60 "$SPK" bench --backends cluster --math 3xtf32 \
    --batches 1,8,32,64,128,256 --rounds 5 --json "$TMP/bench_own_stores.json" >>"$more"
  bench_verdict "$TMP/bench_own_stores.json" targets | sed 's/^/own_stores: /'
fi

# ---- extras: ncu's counters, default and variant; the SASS --------------------------
cat >"$TMP/ncu_gemm.lua" <<'EOF'
local spk = require "spk"
for _, k in ipairs { 256, 60 } do
  local m = 150784
  local a = spk.randn({ m, k }, { seed = 1 }):cuda()
  local w = spk.rand({ 2, 512, k }, { low = -0.09, high = 0.09, seed = 2 }):cuda()
  local hi, lo = spk.blas.split_tf32(w)
  local c = spk.cuda.zeros({ 2, m, 512 })
  spk.blas.gemm { a = a, b = hi, b_lo = lo, c = c, transb = true, math = "3xtf32" }
  if os.getenv("NCU_ALL") then spk.blas.gemm { a = a, b = w, c = c, transb = true, math = "tf32" } end
  spk.cuda.synchronize()
end
EOF
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_write.sum.per_second,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active
if [ $TMA_OK = 1 ] && command -v ncu >/dev/null 2>&1; then
  echo "== ncu: the TMA form (default kernels) and cuBLAS TF32, M 150784, K 256 then 60" >>"$var"
  NCU_ALL=1 step ncu_default 45 ncu --clock-control none --kernel-name regex:"spk_gemm_3xtf32_tma|sm90_xmma|gemm" \
    --launch-count 4 --metrics "$METRICS" "$SPK" run "$TMP/ncu_gemm.lua" >>"$var"
  if [ $VARIANT_OK = 1 ]; then
    echo "== ncu: the own_stores variant, M 150784, K 256 then 60" >>"$var"
    SPK_KERNEL_DIR=$VARIANT step ncu_own_stores 40 ncu --clock-control none --kernel-name spk_gemm_3xtf32_tma \
      --launch-count 2 --metrics "$METRICS" "$SPK" run "$TMP/ncu_gemm.lua" >>"$var"
  fi
  grep -E "^== ncu|spk_gemm|xmma|hmma_cycles|duration|dram__" "$var" | sed 's/^/ncu: /' | tee -a "$SUMMARY"
else
  say "ncu: not on this machine, or the TMA form failed its smoke"
fi
if command -v nvcc >/dev/null 2>&1 && command -v cuobjdump >/dev/null 2>&1; then
  for dir in kernels "$VARIANT"; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir")
    nvcc -cubin -arch=sm_90a -I"$dir" -o "$TMP/$name.cubin" "$dir/gemm_3xtf32_tma.cu" 2>>"$LOG" &&
      cuobjdump -sass "$TMP/$name.cubin" >"$TMP/$name.sass" 2>>"$LOG" || continue
    {
      echo "== SASS of spk_gemm_3xtf32_tma from $name: counts, and the main loop's shape"
      for op in HGMMA UTMALDG UTMASTG SYNCS WARPGROUP LDS STS STG BAR DEPBAR; do
        printf '%s %s\n' "$op" "$(grep -c "$op" "$TMP/$name.sass")"
      done
      grep -nE "HGMMA|UTMALDG|UTMASTG|SYNCS|WARPGROUP|BAR|DEPBAR|LDS|STS" "$TMP/$name.sass" | head -80
    } >>"$var"
    say "sass $name: $(for op in HGMMA UTMALDG UTMASTG STS STG; do printf '%s %s ' "$op" "$(grep -c "$op" "$TMP/$name.sass")"; done)"
  done
fi

# ---- (b, more) odd batches, the classic form, other shapes --------------------------
echo "== odd batches, 3xtf32 on the default form" >>"$more"
step bench_odd 60 "$SPK" bench --backends cluster,cudnn --algos standard,persist_static_small_h \
  --math fp32,3xtf32 --batches 37,129,300 --rounds 3 --json "$TMP/bench_odd.json" >>"$more"
bench_verdict "$TMP/bench_odd.json"
echo "== classic 3xtf32 form (SPK_GEMM_3XTF32=classic), no cuDNN, no f64 check" >>"$more"
SPK_GEMM_3XTF32=classic step bench_classic 30 "$SPK" bench --backends cluster --math 3xtf32 \
  --batches 1,8,32,64,128,256 --rounds 5 --no-check >>"$more"
grep -E "^ +[0-9]+ +cluster" "$more" | tail -6 | sed 's/^/classic: /' | tee -a "$SUMMARY"
if [ $VARIANT_OK = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  for tool in memcheck synccheck; do
    SMOKE_NAME=own_stores SPK_KERNEL_DIR=$VARIANT step "sanitize_$tool" 45 compute-sanitizer --tool "$tool" \
      "$SPK" run "$TMP/smoke.lua" >"$TMP/sanitize_$tool.txt" 2>&1
    { echo "== compute-sanitizer --tool $tool on the own_stores variant's smoke"; cat "$TMP/sanitize_$tool.txt"; } >>"$var"
    grep -E "ERROR SUMMARY" "$TMP/sanitize_$tool.txt" | sed "s/^/sanitizer $tool own_stores: /" | tee -a "$SUMMARY"
  done
fi
for shape in "--layers 2" "--hidden 64" "--hidden 256"; do
  name=$(echo "$shape" | tr -d ' -')
  limit=40
  [ "$name" = hidden256 ] && limit=120 # its kernels compile first: 50 s was not enough
  echo "== $shape, 3xtf32 on the default form" >>"$more"
  # shellcheck disable=SC2086
  step "bench_$name" $limit "$SPK" bench --backends cluster,cudnn --algos standard \
    --math fp32,3xtf32 --batches 64,256 --rounds 3 $shape --json "$TMP/bench_$name.json" >>"$more"
  bench_verdict "$TMP/bench_$name.json"
done

say "gemm_h200_check.sh: done in $(($(date +%s) - START)) s"
rm -rf "$TMP"
