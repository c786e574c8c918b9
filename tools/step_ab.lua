-- The cluster kernel's step variants against each batch's default, in one
-- process, timed in alternation (GPU only):
--
--   build/spk run tools/step_ab.lua [--batches 1,8,32] [--wide 64,128,256] [--passes 3] [--rounds 5]
--                                   [--only "name,name"] [--cudnn] [--budget 240] [--dry-run]
--
-- Stack: 4 layers, input 60, hidden 128, 589 steps, spk.lstm.random{seed = 1},
-- x standard normal (seed = batch). For each batch every plan is built first
-- (the default: no kernel options; each variant: its options on top of the
-- batch's default, which takes the gates early and the trimmed cell), then
-- `passes` rounds of plan:time{rounds, warmup = 2} go over all of them in
-- turn, and a plan's figure is the median of its passes' medians: drift
-- between passes touches every plan alike. "plain" is the default as it was
-- before it took the step options (the gates after the wait, the reference
-- cell), so its ratio is the default's gain measured in the same process.
-- --wide batches run only the candidates for a default there (marked wide
-- below). --cudnn adds a line with cuDNN's best algorithm of each batch (not
-- --wide), timed before the passes.
--
-- A line per plan: "batch B  NAME  MS ms  xRATIO  VERDICT  regs R spills S  [variant]",
-- RATIO = default ms / plan ms (above 1: faster than the default); VERDICT
-- "same bits" (every output bit the default's), "bound rel_l2 E" (other bits,
-- within 1e-6 relative L2 of the default: another order of the same sums,
-- as another chunk split gives, or the fused cell; the GPU specs check the
-- FP32 bound against f64 on the fixtures) or "DIFFERS rel_l2 E" (past it: a
-- bug). Then per batch "best B: NAME MS ms xRATIO (same bits|bound)
-- kernel=k=v,k=v" for the fastest same-bits and the fastest within-bound
-- plan (experiments/step_timeline.lua --kernel takes that text). Last line
-- "step_ab: N plans, N failed, N s".
local spk = require "spk"

local options = require "spk.options"
local script = options.script {
  gpu = "required", dry_run = true,
  usage = "spk run tools/step_ab.lua [--batches 1,8,32] [--wide 64,128,256] [--passes 3] [--rounds 5] "
    .. "[--only \"name,name\"] [--cudnn] [--budget 240] [--dry-run]" }
local batches = script:read("--batches", { 1, 8, 32 }, options.positives)
local wide = script:read("--wide", { 64, 128, 256 }, options.positives)
local passes = script:read("--passes", 3, options.positive)
local rounds = script:read("--rounds", 5, options.positive)
local budget = script:read("--budget", 240, options.positive)
local with_cudnn = script:option("--cudnn") ~= nil
local only = script:option("--only")
local steps = 589

local function say(fmt, ...)
  io.stdout:write(fmt:format(...), "\n")
  io.stdout:flush()
end

-- The variants, as options on top of the batch's default. wide = true: run at the wide batches too;
-- k2: one gate row a thread over two k-chunks (one shuffle level and the gather), threads from the
-- batch's cluster size; k8: gate blocks over eight k-chunks; same_threads: the default's threads (so
-- the default's chunk split, where another push would fit another); before_mapped: the rows' pushes before
-- the mapped ones (the warp pushes, where a row maps its pushes now); small: batch 8 and below only.
local variants = {
  { name = "plain", kernel = { early_gates = 0, cell = "reference" }, wide = true },
  { name = "late gates", kernel = { early_gates = 0 }, wide = true },
  { name = "reference cell", kernel = { cell = "reference" }, wide = true },
  { name = "fused", kernel = { cell = "fused" }, wide = true },
  { name = "late fused", kernel = { early_gates = 0, cell = "fused" } },
  { name = "k2 direct", kernel = { push = "direct", gate_block = 1 }, k2 = true },
  { name = "c16", kernel = { cluster = 16 }, small = true },
  -- batch 8 in the batch-1 row's blocks: 16 units a block (chunks 8), twice the blocks, another chunk split
  { name = "c8", kernel = { cluster = 8 }, small = true },
  { name = "c8 ga2", kernel = { cluster = 8, gates_ahead = 2 }, small = true },
  -- k8: gate blocks over eight k-chunks (threads from the batch's cluster size)
  { name = "k8", kernel = {}, k8 = true, small = true },
  -- the pushes as they were before the mapped ones: warp pushes up to batch 64, mapa at every push
  { name = "unmapped", kernel = { mapped_pushes = 0 }, before_mapped = true, wide = true },
  { name = "warp", kernel = { push = "warp" }, same_threads = true, wide = true },
  -- the direct pushes' addresses of a step made after the step before's publish
  { name = "ahead", kernel = { push = "direct", mapped_pushes = 2 }, same_threads = true, wide = true },
  -- the addresses made at each push (the rows' form before the addresses ahead)
  { name = "once", kernel = { mapped_pushes = 1 }, wide = true },
}
if type(only) == "string" then
  local wanted, picked = {}, {}
  for name in only:gmatch("[^,]+") do wanted[name] = true end
  for _, v in ipairs(variants) do
    if wanted[v.name] then picked[#picked + 1], wanted[v.name] = v, nil end
  end
  local unknown = next(wanted)
  if unknown then
    say("step_ab: unknown variant %q (the names in tools/step_ab.lua's list)", unknown)
    os.exit(2)
  end
  variants = picked
end

local function kernel_text(k)
  local keys = {}
  for key in pairs(k) do keys[#keys + 1] = key end
  table.sort(keys)
  local parts = {}
  for _, key in ipairs(keys) do parts[#parts + 1] = ("%s=%s"):format(key, tostring(k[key])) end
  return table.concat(parts, ",")
end

-- The plans of a batch: the default, then each variant that runs there.
local function lines_at(batch, is_wide)
  local default_variant = spk.lstm.cluster_variant(nil, batch)
  local lines = { { name = "default", kernel = nil } }
  for _, v in ipairs(variants) do
    local keep = not is_wide or v.wide
    if v.small and batch > 8 then keep = false end
    if keep then
      local k = {}
      for key, value in pairs(v.kernel) do k[key] = value end
      if v.k2 then k.threads = 4 * 128 // default_variant.cluster * 2 end
      if v.k8 then k.threads = 128 // default_variant.cluster * 8 end
      if v.same_threads then k.threads = default_variant.threads end
      if v.before_mapped and default_variant.mapped_pushes == 1 then
        k.push, k.threads = "warp", default_variant.threads
      end
      lines[#lines + 1] = { name = v.name, kernel = k }
    end
  end
  return lines
end

local work = {}
for _, list in ipairs { { batches, false }, { wide, true } } do
  for _, batch in ipairs(list[1]) do
    for _, line in ipairs(lines_at(batch, list[2])) do
      work[#work + 1] = ("batch %d: %s%s"):format(batch, line.name,
        line.kernel and (" (kernel=" .. kernel_text(line.kernel) .. ")") or "")
    end
    if with_cudnn and not list[2] then work[#work + 1] = ("batch %d: cuDNN's best algorithm"):format(batch) end
  end
end
local status = script:plan(work, ("step_ab (dry run): %d steps, each plan then timed in %d passes of %d rounds; "
  .. "nothing is measured"):format(#work, passes, rounds))

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local wall0 = os.time()
local function elapsed() return os.difftime(os.time(), wall0) end
local total, failed = 0, 0

local function median(values)
  local s = {}
  for i, v in ipairs(values) do s[i] = v end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local function run_batch(batch, is_wide)
  local x = spk.randn({ batch, steps, 60 }, { seed = batch })
  local lines = lines_at(batch, is_wide)
  -- build every plan (compiles), check its output against the default's
  local reference
  for _, line in ipairs(lines) do
    status:step(("batch %d: %s"):format(batch, line.name))
    if elapsed() > budget then
      line.error = ("skipped: past the %d s budget"):format(budget)
    else
      total = total + 1
      local ok, err = pcall(function()
        line.plan = spk.lstm.stack { backend = "cluster", layers = layers, batch = batch, steps = steps,
                                     kernel = line.kernel }
        local y = line.plan:forward(x)
        if not reference then
          reference = y
          line.verdict = "same bits"
        else
          local c = spk.compare(y, reference)
          if c.max_ulp == 0 and c.nan_mismatch == 0 then
            line.verdict, line.same = "same bits", true
          elseif c.rel_l2 < 1e-6 then
            line.verdict = ("bound rel_l2 %.2e"):format(c.rel_l2)
          else
            line.verdict = ("DIFFERS rel_l2 %.2e"):format(c.rel_l2)
          end
          line.rel_l2 = c.rel_l2
        end
      end)
      if not ok then
        failed = failed + 1
        line.error = (tostring(err):gsub("\n", " "))
        if line.plan then line.plan:close() end
        line.plan = nil
      end
    end
  end
  if with_cudnn and not is_wide then
    status:step(("batch %d: cuDNN's best algorithm"):format(batch))
    local best
    for _, algo in ipairs(spk.lstm.cudnn_algorithm_names) do
      if not (batch >= 32 and (algo == "persist_static" or algo == "persist_dynamic")) then
        local ok, ms = pcall(function()
          local p = spk.lstm.cudnn_stack { layers = layers, batch = batch, steps = steps, algo = algo }
          local t = p:time { rounds = rounds, warmup = 1, x = x }.median_ms
          p:close()
          return t
        end)
        if ok and (not best or ms < best.ms) then best = { ms = ms, algo = algo } end
      end
    end
    if best then say("batch %4d  cudnn best (%s) %9.4f ms", batch, best.algo, best.ms) end
  end
  -- the passes: every plan in turn, `passes` times
  for _ = 1, passes do
    for _, line in ipairs(lines) do
      if line.plan then
        local ok, t = pcall(function() return line.plan:time { rounds = rounds, warmup = 2, x = x } end)
        if ok then
          line.ms = line.ms or {}
          line.ms[#line.ms + 1] = t.median_ms
        else
          line.error = (tostring(t):gsub("\n", " "))
        end
      end
    end
  end
  local default_ms = lines[1].ms and median(lines[1].ms)
  local best_same, best_bound
  for _, line in ipairs(lines) do
    if line.plan and line.ms then
      local ms = median(line.ms)
      local k = line.plan.kernel
      line.median = ms
      say("batch %4d  %-24s %9.4f ms  x%.3f  %-22s regs %d spills %d  [%s]", batch, line.name, ms,
        default_ms and default_ms / ms or 0, line.verdict or "-", k.registers, k.spills, line.plan.variant)
      if line.name ~= "default" then
        if line.same and (not best_same or ms < best_same.median) then best_same = line end
        if line.verdict and not line.verdict:find("DIFFERS") and (not best_bound or ms < best_bound.median) then
          best_bound = line
        end
      end
      line.plan:close()
    else
      say("batch %4d  %-24s failed: %s", batch, line.name, line.error or "no timing")
    end
  end
  for _, pick in ipairs { { "same bits", best_same }, { "bound", best_bound } } do
    local line = pick[2]
    if line and default_ms then
      say("best %d: %s %.4f ms x%.3f (%s) kernel=%s", batch, line.name, line.median, default_ms / line.median,
        pick[1], kernel_text(line.kernel))
    end
  end
  collectgarbage()
end

say("step_ab: 4 layers, H 128, input 60, %d steps; %d passes of %d rounds, medians; batches %s, wide %s", steps,
  passes, rounds, table.concat(batches, ","), table.concat(wide, ","))
for _, batch in ipairs(batches) do run_batch(batch, false) end
for _, batch in ipairs(wide) do run_batch(batch, true) end
say("step_ab: %d plans, %d failed, %d s", total, failed, elapsed())
