#!/usr/bin/env bash
# The CPU path on the H200 host's cores (no GPU used): spk's f32 cpu backend
# and the f64 reference at batch 1, 8, 32, 64 with 16 threads on cores 0-15
# and with 2 threads on cores 0-1, beside ONNX Runtime's CPU provider on the
# same cores (tools/onnx_ort_check.py --time); errors against the f64
# reference and the f64 reference against PyTorch float64; bits across thread
# counts and vector units; where the threads' time goes. Short verdict lines;
# every step runs whatever the others did. At most ~4 minutes.
#
# usage: OUT=/some/folder tools/cpu_host_check.sh [--help]
#        (run from the repository root, with build/ and .deps/ carried)
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/spk-cpu}
BATCHES=${BATCHES:-1,8,32,64}   # smaller lists and cores for a trial elsewhere
CORES16=${CORES16:-0-15}
mkdir -p "$OUT"
SPK=build/spk
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOGS=$WORK/logs
mkdir -p "$LOGS"
failed=0
say() { printf '%s\n' "$*" | tee -a "$OUT/summary.txt"; }
step() { # step NAME SECONDS COMMAND...: runs it with a time limit, its output to $LOGS/NAME.txt
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$LOGS/$name.txt" 2>&1
  local rc=$?
  say "step $name: exit $rc in $((SECONDS - start)) s"
  [ $rc -eq 0 ] || { failed=$((failed + 1)); tail -n 5 "$LOGS/$name.txt" | sed 's/^/  | /' | tee -a "$OUT/summary.txt"; }
  return $rc
}
: >"$OUT/summary.txt"

# ---- 1. the machine ----------------------------------------------------------
say "== machine"
say "$(grep -m1 'model name' /proc/cpuinfo)"
say "cores online: $(nproc --all), this process may use: $(nproc)"
say "vector flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512dq|avx512_bf16|amx_tile)$' | tr '\n' ' ')"
say "max MHz: $(lscpu 2>/dev/null | awk -F: '/max MHz/ {gsub(/ /, "", $2); print $2}')"
say "$($SPK info 2>&1 | grep 'CPU path')"
python3 -c 'import onnxruntime, torch, numpy; print("onnxruntime", onnxruntime.__version__, "torch", torch.__version__)' 2>&1 | tee -a "$OUT/summary.txt"

# ---- 2. the C test on this CPU: every vector unit it has, thread counts, bits --
say "== C test (every vector unit this CPU has against the naive loops, bit for bit)"
SPK_VERBOSE=1 step c_test 90 build/tests/test_lstm_reference
grep -E '^#|passed|not ok|check failed' "$LOGS/c_test.txt" | tee -a "$OUT/summary.txt"

# ---- 3. accuracy against PyTorch float64 (batch 8, 589 steps) ----------------------
cat >"$WORK/export.lua" <<'EOF'
local spk = require "spk"
local dir = arg[1]
local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
spk.lstm.save(dir, layers)
local x = spk.randn({ 8, 589, 60 }, { seed = 1 })
spk.save(dir .. "/x.npy", x)
spk.save(dir .. "/spk_f64.npy", (spk.lstm.reference(layers, x, { precision = "f64" })))
spk.save(dir .. "/spk_f32.npy", (spk.lstm.reference(layers, x, { precision = "f32" })))
EOF
cat >"$WORK/accuracy.lua" <<'EOF'
local spk = require "spk"
local dir = arg[1]
local torch = spk.load(dir .. "/y_f64.npy")
local c64 = spk.compare(spk.load(dir .. "/spk_f64.npy"), torch)
local c32 = spk.compare(spk.load(dir .. "/spk_f32.npy"), torch)
print(("accuracy: f64 reference vs torch float64 rel_l2 %.3e max_abs %.3e (bound 1e-14): %s"):format(c64.rel_l2,
  c64.max_abs, c64.rel_l2 <= 1e-14 and "ok" or "BEYOND"))
print(("accuracy: f32 cpu vs torch float64 rel_l2 %.3e max_abs %.3e (bound 2e-5): %s"):format(c32.rel_l2,
  c32.max_abs, c32.rel_l2 <= 2e-5 and "ok" or "BEYOND"))
EOF
say "== accuracy"
mkdir -p "$WORK/acc"
step export 60 $SPK run "$WORK/export.lua" "$WORK/acc" &&
  step torch 120 python3 tools/torch_lstm.py "$WORK/acc" &&
  step accuracy 30 $SPK run "$WORK/accuracy.lua" "$WORK/acc" && grep accuracy: "$LOGS/accuracy.txt" | tee -a "$OUT/summary.txt"

# ---- 4. bits across thread counts and vector units at the real shape -----------------
cat >"$WORK/bits.lua" <<'EOF'
local spk = require "spk"
local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local units = spk.lstm.cpu_info().vectors
for _, case in ipairs { { batch = 1, threads = { 16, 8, 2, 1 } }, { batch = 8, threads = { 16, 5, 2 } } } do
  local x = spk.randn({ case.batch, 589, 60 }, { seed = 2 })
  for _, precision in ipairs { "f64", "f32" } do
    local base = spk.lstm.reference(layers, x, { precision = precision, threads = case.threads[1] })
    local differ = {}
    local function against(label, opts)
      opts.precision = precision
      local c = spk.compare(spk.lstm.reference(layers, x, opts), base)
      if c.max_abs ~= 0 then differ[#differ + 1] = ("%s (max_abs %.3g)"):format(label, c.max_abs) end
    end
    for i = 2, #case.threads do against(case.threads[i] .. " threads", { threads = case.threads[i] }) end
    for _, u in ipairs(units) do
      if case.batch == 1 or u ~= "portable" then against(u, { vector = u, threads = 16 }) end
    end
    print(("bits: %s batch %d, threads %s and units %s: %s"):format(precision, case.batch,
      table.concat(case.threads, ","), table.concat(units, ","), #differ == 0 and "same" or "DIFFER " ..
      table.concat(differ, "; ")))
  end
end
EOF
say "== bits"
step bits 90 taskset -c "$CORES16" $SPK run "$WORK/bits.lua" && grep bits: "$LOGS/bits.txt" | tee -a "$OUT/summary.txt"

# ---- 5. where the threads' time goes (profile), GFLOP/s a core ------------------------
cat >"$WORK/profile.lua" <<'EOF'
local spk = require "spk"
local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
for _, c in ipairs { { "f32", 1, 16 }, { "f32", 8, 16 }, { "f32", 32, 16 }, { "f64", 64, 16 }, { "f64", 64, 2 } } do
  local x = spk.randn({ c[2], 589, 60 }, { seed = 1 })
  spk.lstm.reference(layers, x, { precision = c[1], threads = c[3] }) -- warm
  local _, info = spk.lstm.reference(layers, x, { precision = c[1], threads = c[3], profile = true })
  local p = info.profile
  print(("profile: %s batch %d, %d threads (%s, %d teams of %d): wall %.1f ms; a thread: projection %.1f ms "
    .. "(%.1f GFLOP/s a core), steps %.1f ms (%.1f GFLOP/s a core, cells included), waiting %.1f ms"):format(
    c[1], c[2], p.threads, p.vector, p.teams, p.team_threads, p.wall_ms, p.project_ms / p.threads,
    p.project_flops / p.project_ms / 1e6, p.step_ms / p.threads, p.step_flops / p.step_ms / 1e6,
    p.wait_ms / p.threads))
end
EOF
say "== profile"
step profile 90 taskset -c "$CORES16" $SPK run "$WORK/profile.lua" && grep profile: "$LOGS/profile.txt" | tee -a "$OUT/summary.txt"

# ---- 5b. the split of the work at small batches: threads a team (a barrier a step) ----------
cat >"$WORK/split.lua" <<'EOF'
local spk = require "spk"
local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
for _, precision in ipairs { "f32", "f64" } do
  for _, batch in ipairs { 1, 8 } do
    local x = spk.randn({ batch, 589, 60 }, { seed = 1 })
    local cells = {}
    for _, team in ipairs { 0, 1, 2, 4, 8 } do
      local opts = { precision = precision, threads = 16, team_threads = team > 0 and team or nil, profile = true }
      spk.lstm.reference(layers, x, opts)
      local best, shape = math.huge, ""
      for _ = 1, 3 do
        local _, info = spk.lstm.reference(layers, x, opts)
        best = math.min(best, info.profile.wall_ms)
        shape = ("%dx%d"):format(info.profile.teams, info.profile.team_threads)
      end
      cells[#cells + 1] = ("%s %s teams %.1f ms"):format(team > 0 and ("team " .. team) or "rule", shape, best)
    end
    print(("split: %s batch %d, 16 threads: %s"):format(precision, batch, table.concat(cells, "; ")))
  end
end
EOF
say "== split (teams x threads a team; rule = the default)"
step split 60 taskset -c "$CORES16" $SPK run "$WORK/split.lua" && grep split: "$LOGS/split.txt" | tee -a "$OUT/summary.txt"

# ---- 6. spk bench's CPU section beside ONNX Runtime, 16 cores and 2 cores ---------------
say "== spk bench --backends cpu (16 threads on cores 0-15, then 2 threads on cores 0-1)"
step bench16 120 taskset -c "$CORES16" $SPK bench --backends cpu --batches "$BATCHES" --threads 16 --rounds 5 --warmup 2 \
  --no-check --json "$OUT/bench16.json"
sed -n '/^CPU section/,$p' "$LOGS/bench16.txt" | tee -a "$OUT/summary.txt"
step bench2 150 taskset -c 0,1 $SPK bench --backends cpu --batches "$BATCHES" --threads 2 --rounds 3 --warmup 1 \
  --no-check --json "$OUT/bench2.json"
sed -n '/^CPU section/,$p' "$LOGS/bench2.txt" | tee -a "$OUT/summary.txt"

# ---- 7. verdicts against the targets ---------------------------------------------------
cat >"$WORK/verdict.lua" <<'EOF'
local spk = require "spk"
local report = require "spk.report"
local function rows(path)
  local ok, data = pcall(function() return report.json_decode(spk.files.read(path)) end)
  return ok and data.cpu and data.cpu.rows or {}
end
print("| batch | threads | spk f32 ms | ORT ms | spk vs ORT | f32 rel L2 | ORT rel L2 | f64 ms | target |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for _, file in ipairs { arg[1], arg[2] } do
  for _, r in ipairs(rows(file)) do
    local verdict = {}
    if r.vs_ort then verdict[#verdict + 1] = r.vs_ort >= 1 and "f32 >= ORT ok" or "f32 SLOWER than ORT" end
    if r.batch == 64 then
      local limit = r.threads >= 16 and 400 or r.threads == 2 and 2000 or nil
      if limit then verdict[#verdict + 1] = ("f64 <= %d ms %s"):format(limit, r.f64_ms <= limit and "ok" or "MISSED") end
    end
    if r.rel_l2 then verdict[#verdict + 1] = r.rel_l2 <= 1e-4 and "f32 bound ok" or "f32 BEYOND bound" end
    local function f(v, fmt) return v and (fmt):format(v) or "-" end
    print(("| %d | %d | %s | %s | %s | %s | %s | %s | %s |"):format(r.batch, r.threads, f(r.f32_ms, "%.1f"),
      f(r.ort_ms, "%.1f"), f(r.vs_ort, "%.2fx"), f(r.rel_l2, "%.2e"), f(r.ort_rel_l2, "%.2e"), f(r.f64_ms, "%.1f"),
      r.error or table.concat(verdict, ", ")))
  end
end
EOF
say "== targets (spk vs ORT > 1: spk faster)"
step verdict 30 $SPK run "$WORK/verdict.lua" "$OUT/bench16.json" "$OUT/bench2.json" && tee -a "$OUT/summary.txt" <"$LOGS/verdict.txt"

say "== done: $failed step(s) failed; total $SECONDS s"
# what comes back (at most 8 files): the summary, both bench runs (text and JSON), the C test's output
cp "$LOGS/bench16.txt" "$LOGS/bench2.txt" "$LOGS/c_test.txt" "$OUT/" 2>/dev/null
rm -rf "$WORK"
