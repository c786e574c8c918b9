-- The tensor-core recurrence (kernels/lstm_tc.cu, spk.tensor_core) on a GPU,
-- in parts that each print one line per case:
--
--   build/spk run tools/tc_sweep.lua [--part correctness,sweep,stamps] [--batches 32,64,128,256]
--                                    [--rounds 5] [--steps 589] [--only LABEL,LABEL] [--mma sync,wgmma]
--                                    [--dry-run]
--
-- correctness  small and odd shapes (batch 1, 3, 5, 17, 37; steps 7 .. 50; hidden 32, 64,
--              128, 256; 1 or 2 layers; FP16x3 and 3xTF32 by mma.sync, FP16x3 by wgmma where
--              the shape has whole warpgroups) and every option at one shape, each against the
--              f64 reference (spk.lstm.reference): "ok"/"WRONG" with rel_l2 and max_abs, the
--              first wrong element in processing order (spk.debug.first_divergence, tol 1e-4)
--              when it is wrong, and whether two forwards give the same bits. Wrong: rel_l2
--              above 1e-6 (FP32-class stacks are near 1e-7; a layout mistake gives 1e-1).
-- sweep        at each --batches, the 4-layer stack (input 60, hidden 128, --steps): every
--              variant's median ms (plan:time, --rounds), rel_l2 and max_abs against f64,
--              bits across forwards, registers and spilled bytes a thread, its clusters and
--              the waves they take (the device's co-resident clusters of that launch: a
--              second wave doubles a step's time); the built-in cluster kernel's default
--              first, for reference. The table ends with the
--              fastest variant within the FP32 rows' bound (rel_l2 <= 1.1 x and max_abs
--              <= 2 x the cluster kernel's at that batch).
-- stamps       the timeline build (SPK_TIMELINE=1) of a few variants (the batch's default by
--              mma.sync and by wgmma, the earlier defaults), launched alone for one layer of
--              random weights at each --batches: median clock64 cycles of each stage
--              (TC_STAGES, kernels/lstm_tc_layout.cuh) over steps 101-132 of the first
--              cluster's blocks, warp 0 and the last warp, the step's cycles in ns at the
--              clock the launch ran (cycles / (globaltimer ns) of the same stamps), and the
--              plain build's time a step of the same launch (CUDA-graph replays) with its
--              waves: the plain time a step over the stamped one is the waves' cost.
-- check        no GPU needed: every variant of the parts above compiled by NVRTC for sm_90
--              through spk.lstm.kernel_check at its shape (the contract's parameters, the
--              launch), with ptxas's registers, stack and spills; and the timeline build's
--              parameters against the arguments the stamps part passes.
-- --mma keeps the variants of those product forms only (default both): a form whose kernel
-- faults leaves the process's CUDA context unusable, so tools/tc_h200_check.sh runs each
-- form in a process of its own.
-- The other parts need a GPU of compute capability 9.0; without one they say so and exit 3.
-- --dry-run lists every step of the parts asked for (no device needed).
local spk = require "spk"
local tc = require "spk.tensor_core"

local opts = { part = "correctness,sweep,stamps", batches = table.concat(tc.sweep_batches, ","), rounds = 5,
               steps = 589, only = nil, mma = "sync,wgmma" }
local options = require "spk.options"
local script = options.script {
  dry_run = true,
  usage = "spk run tools/tc_sweep.lua [--part correctness,sweep,stamps,check] [--batches LIST] [--rounds N] "
    .. "[--steps N] [--only LABEL,...] [--mma sync,wgmma] [--dry-run]",
}
local args = script.args
local i = 1
while i <= #args do
  local a = args[i]
  local key = a:match("^%-%-([%w_]+)$")
  if not key or opts[key] == nil and key ~= "only" then
    io.stderr:write(("tc_sweep: unknown argument '%s' (--part, --batches, --rounds, --steps, --only, --mma)\n"):format(a))
    os.exit(2)
  end
  opts[key] = args[i + 1]
  i = i + 2
end
-- Each value through options' readers: a bad one is a usage error naming its flag, never dropped.
local function read(key, reader, ...)
  if opts[key] == nil then script:usage_error(("--%s needs a value"):format(key)) end
  return script:value(tostring(opts[key]), key, reader, ...)
end
opts.rounds, opts.steps = read("rounds", options.positive), read("steps", options.positive)
local parts = {}
for _, p in ipairs(read("part", options.choices, "part",
  { correctness = true, sweep = true, stamps = true, check = true })) do parts[p] = true end
local batches = read("batches", options.positives)
local only
if opts.only then
  only = {}
  for l in opts.only:gmatch("[^,]+") do only[l] = true end
end

local mmas = {}
for m in tostring(opts.mma):gmatch("[^,]+") do
  if not tc.words.mma[m] then
    io.stderr:write(("tc_sweep: --mma lists sync and/or wgmma, got '%s'\n"):format(m))
    os.exit(2)
  end
  mmas[m] = true
end
-- Whether a variant (the options over the batch's defaults) at a shape is of a product form --mma
-- keeps (one the shape refuses: by the form it asks for, mma.sync where it names none).
local function wanted(variant, shape)
  local ok, v = pcall(tc.variant, { batch = shape.batch, hidden = shape.hidden or 128 }, variant)
  return mmas[ok and v.mma or variant.mma or "sync"] == true
end

local function needs_gpu() return parts.correctness or parts.sweep or parts.stamps end
if needs_gpu() and not script.dry_run and not spk.cuda.available() then
  os.exit(require("spk.options").no_gpu("tc_sweep"))
end
io.stdout:setvbuf("line")

local function fmt(x) return x and ("%.3e"):format(x) or "-" end

-- kernel_stack reads its options raw: copy the spec's keys in.
local function merged(spec, extra)
  local t = {}
  for k, v in pairs(spec) do t[k] = v end
  for k, v in pairs(extra) do t[k] = v end
  return t
end
-- A plan of the kernel with a variant, or nil and the error's first line.
local function plan_of(layers, batch, steps, variant, math_mode)
  local ok, plan = pcall(spk.lstm.kernel_stack, merged(tc.spec(variant), { layers = layers, batch = batch,
                                                                            steps = steps, math = math_mode }))
  if ok then return plan end
  return nil, tostring(plan):gsub("\n.*", "")
end

local function bits_repeat(plan, x, y)
  local y2 = plan:forward(x)
  local c = spk.compare(y, y2)
  return c.max_ulp == 0 and (c.nan_mismatch or 0) == 0
end

-- ---- correctness ---------------------------------------------------------------------


-- Every (case, options) the correctness part runs, in order: the small and odd shapes with
-- each split and wgmma, then every option at one shape.
local function correctness_jobs()
  local jobs = {}
  local function add(case, variant)
    if not wanted(variant, case) then return end
    local ok_v, v = pcall(tc.variant, case, variant)
    jobs[#jobs + 1] = { case = case, variant = variant,
                        what = ("correctness, %s: %s"):format(case.label, ok_v and tc.label(v) or "refused") }
  end
  for _, listed in ipairs(tc.correctness_cases) do
    local case = { label = ("batch %d steps %d hidden %d layers %d"):format(listed.batch, listed.steps, listed.hidden,
      listed.layers) }
    for k, x in pairs(listed) do case[k] = x end
    for _, split in ipairs(case.splits or { "f16", "tf32" }) do add(case, { split = split }) end
    add(case, { mma = "wgmma" })
  end
  local case = tc.correctness_cases[3]
  case = { label = ("batch %d steps %d hidden %d layers %d"):format(case.batch, case.steps, case.hidden, case.layers),
           batch = case.batch, steps = case.steps, hidden = case.hidden, layers = case.layers }
  for _, split in ipairs { "f16", "tf32" } do
    for k = 2, split == "f16" and #tc.correctness_variants or 4 do
      local v = { split = split }
      for key, value in pairs(tc.correctness_variants[k]) do v[key] = value end
      add(case, v)
    end
  end
  return jobs
end

local function correctness(progress)
  print("== correctness: the kernel against the f64 reference at small and odd shapes ==")
  local failed = 0
  local function run(case, variant)
    local label = case.label
    local layers = spk.lstm.random { layers = case.layers, input = 60, hidden = case.hidden, seed = 1 }
    local ok_v, v = pcall(tc.variant, case, variant)
    if not ok_v then
      print(("skip  %-38s %s"):format(label, tostring(v):gsub("^.-: ", "")))
      return
    end
    local x = spk.randn({ case.batch, case.steps, 60 }, { seed = 7 })
    local plan, err = plan_of(layers, case.batch, case.steps, variant)
    if not plan then
      failed = failed + 1
      print(("ERROR %-38s %-28s %s"):format(label, tc.label(v), err))
      return
    end
    local ok, why = pcall(function()
      local y = plan:forward(x)
      local ref = spk.lstm.reference(layers, x, { precision = "f64" })
      local host = y:cpu()
      local c = spk.compare(host, ref)
      local bits = bits_repeat(plan, x, y)
      local good = c.rel_l2 == c.rel_l2 and c.rel_l2 <= 1e-6 and (c.nan_mismatch or 0) == 0
      if not good or not bits then failed = failed + 1 end
      print(("%-5s %-38s %-28s rel_l2 %s max_abs %s bits %s"):format(good and "ok" or "WRONG", label, tc.label(v),
        fmt(c.rel_l2), fmt(c.max_abs), bits and "repeat" or "DIFFER"))
      if not good then
        local d = spk.debug.first_divergence(host, ref, { tol = 1e-4 })
        print("      first wrong element: " .. tostring(d))
      end
    end)
    if not ok then
      failed = failed + 1
      print(("ERROR %-38s %-28s %s"):format(label, tc.label(v), tostring(why):gsub("\n.*", "")))
    end
    plan:close()
    collectgarbage()
  end
  for _, job in ipairs(correctness_jobs()) do
    progress(job.what)
    run(job.case, job.variant)
  end
  print(("correctness: %d case%s failed"):format(failed, failed == 1 and "" or "s"))
end

-- ---- the variant sweep -----------------------------------------------------------------


-- Clusters of a plan's launch, the device's co-resident ones of it, and the waves.
local function waves_of(plan)
  local l = plan.launch.launches[1]
  local blocks = 1
  for _, g in ipairs(l.grid) do blocks = blocks * g end
  local per = 1
  for _, c in ipairs(l.cluster or { 1 }) do per = per * c end
  local clusters, fit = blocks // per, plan.kernel.capacity or 0
  return clusters, fit, fit > 0 and (clusters + fit - 1) // fit or -1
end

-- The variants the sweep times at a batch, each label once, --only and --mma applied.
local function sweep_jobs_at(batch)
  local jobs, seen = {}, {}
  for _, variant in ipairs(tc.sweep_variants) do
    local ok_v, v = pcall(tc.variant, { batch = batch, hidden = 128 }, variant)
    local label = ok_v and tc.label(v) or "?"
    if ok_v and not seen[label] and (not only or only[label]) and wanted(variant, { batch = batch }) then
      seen[label] = true
      jobs[#jobs + 1] = { variant = variant, label = label, what = ("sweep at batch %d: %s"):format(batch, label) }
    end
  end
  return jobs
end

local function sweep(progress)
  local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
  for _, batch in ipairs(batches) do
    print(("== sweep: batch %d, 4 layers, hidden 128, %d steps, ms per forward (median of %d) ==")
      :format(batch, opts.steps, opts.rounds))
    local x = spk.randn({ batch, opts.steps, 60 }, { seed = 1 })
    local ref = spk.lstm.reference(layers, x, { precision = "f64" })
    print(("%-40s %9s %10s %10s %7s %5s %6s %14s"):format("variant", "ms", "rel_l2", "max_abs", "bits", "regs", "spill",
      "clusters/fit"))
    local base
    do
      local plan = spk.lstm.stack { layers = layers, batch = batch, steps = opts.steps, backend = "cluster" }
      local y = plan:forward(x)
      local c = spk.compare(y:cpu(), ref)
      local t = plan:time { rounds = opts.rounds, warmup = 2, x = x }
      base = { rel = c.rel_l2, abs = c.max_abs }
      print(("%-40s %9.3f %10s %10s %7s"):format("cluster (built-in FP32)", t.median_ms, fmt(c.rel_l2),
        fmt(c.max_abs), bits_repeat(plan, x, y) and "repeat" or "DIFFER"))
      plan:close()
    end
    local best
    for _, job in ipairs(sweep_jobs_at(batch)) do
      local variant, label = job.variant, job.label
      progress(job.what)
      local plan, err = plan_of(layers, batch, opts.steps, variant)
      if not plan then
        print(("%-40s error: %s"):format(label, err))
      else
        local ok, why = pcall(function()
          local y = plan:forward(x)
          local c = spk.compare(y:cpu(), ref)
          local bits = bits_repeat(plan, x, y)
          local t = plan:time { rounds = opts.rounds, warmup = 2, x = x }
          local within = c.rel_l2 <= 1.1 * base.rel and c.max_abs <= 2 * base.abs
          local clusters, fit, waves = waves_of(plan)
          print(("%-40s %9.3f %10s %10s %7s %5d %6d %6d/%-3d %dw%s"):format(label, t.median_ms, fmt(c.rel_l2),
            fmt(c.max_abs), bits and "repeat" or "DIFFER", plan.kernel.registers or -1, plan.kernel.spills or -1,
            clusters, fit, waves, within and "" or "  (beyond the FP32 bound)"))
          if within and bits and (not best or t.median_ms < best.ms) then best = { ms = t.median_ms, label = label } end
        end)
        if not ok then print(("%-40s error: %s"):format(label, tostring(why):gsub("\n.*", ""))) end
        plan:close()
      end
      collectgarbage()
    end
    print(("fastest within the FP32 bound at batch %d: %s"):format(batch,
      best and ("%s, %.3f ms"):format(best.label, best.ms) or "none"))
  end
end

-- ---- stage stamps ----------------------------------------------------------------------

local arch

-- The variants whose stamps the part reads at a batch, each label once (a refused one listed, to
-- say why).
local function stamp_jobs_at(batch)
  local jobs, seen = {}, {}
  for _, variant in ipairs(tc.stamp_variants) do
    local ok_v, v = pcall(tc.variant, { batch = batch, hidden = 128 }, variant)
    local label = ok_v and tc.label(v) or "refused: " .. tostring(v):gsub("^.-: ", "")
    if wanted(variant, { batch = batch }) and not seen[label] then
      seen[label] = true
      jobs[#jobs + 1] = { variant = variant, what = ("stamps at batch %d: %s"):format(batch, label) }
    end
  end
  return jobs
end

local function stamps(progress)
  local H, steps = 128, opts.steps
  arch = "sm_" .. tostring(spk.cuda.device().cc):gsub("%.", "") .. "a" -- the spec's arch_specific target
  local first_step, nsteps = 100, 32
  for _, batch in ipairs(batches) do
    for _, job in ipairs(stamp_jobs_at(batch)) do
      local variant = job.variant
      local function stamp_one()
        local v = tc.variant({ batch = batch, hidden = H }, variant)
        local launch = tc.launch(v)
        local names = tc.stages(v)
        local sizes = tc.sizes(v, H)
        local blocks, marks = v.cluster, #names + 1
        local defines = tc.defines(v, H)
        local gates = spk.cuda.zeros({ 2, batch * steps, 4 * H }) -- (the stages' times do not depend on x·Wᵀ)
        local bound = 1 / math.sqrt(H)
        local r = spk.rand({ 2, 4 * H, H }, { low = -bound, high = bound, seed = 4 }):cuda()
        local bias = spk.rand({ 2, 4 * H }, { low = -bound, high = bound, seed = 5 }):cuda()
        local out = spk.cuda.zeros({ batch, steps, 2 * H })
        local status = spk.cuda.zeros({ 1 }, "i32")
        local args = { gates, r, bias, out, status, spk.i32(batch), spk.i32(steps), spk.u64(0), spk.u64(0), spk.i32(0),
                       spk.i32(-1) }
        local function kernel(timeline)
          local d = {}
          for k, x in pairs(defines) do d[k] = tostring(x) end
          if timeline then d.SPK_TIMELINE = "1" end
          local m = spk.cuda.compile { file = tc.kernel_dir() .. "/lstm_tc.cu", defines = d, arch = arch }
          local k = m:kernel("spk_lstm_tc")
          k:set_max_dynamic_smem(launch.smem)
          return k
        end
        local plain, timed = kernel(false), kernel(true)
        local cfg = { grid = launch.grid, block = { launch.block }, cluster = launch.cluster, smem = launch.smem,
                      args = args }
        local t = spk.bench(function(s) cfg.stream = s; plain:launch(cfg) end, { rounds = opts.rounds, graph = true })
        local rows = {}
        for _, warp in ipairs { 0, sizes.warps - 1 } do
          local words = 16 + 2 * blocks + blocks * nsteps * marks * 2
          local buf = spk.cuda.zeros({ words }, "u64")
          local targs = {}
          for k2, a in ipairs(args) do targs[k2] = a end
          for _, a in ipairs { buf, spk.i32(0), spk.i32(first_step), spk.i32(nsteps), spk.i32(0), spk.i32(blocks),
                                spk.i32(warp) } do targs[#targs + 1] = a end
          timed:launch { grid = launch.grid, block = { launch.block }, cluster = launch.cluster, smem = launch.smem,
                         args = targs }
          local host = buf:cpu()
          local per, ns = {}, {}
          for s = 1, #names + 1 do per[s] = {} end -- stage cycles, then the step
          for b = 0, blocks - 1 do
            for k = 0, nsteps - 2 do
              local function at(kk, m) return host:get(16 + 2 * blocks + ((b * nsteps + kk) * marks + m) * 2 + 2) end
              local prev = at(k, 0)
              for m = 1, marks - 1 do
                local c = at(k, m)
                if c ~= 0 and prev ~= 0 then table.insert(per[m], c - prev) end
                if c ~= 0 then prev = c end
              end
              table.insert(per[#names + 1], at(k + 1, 0) - at(k, 0))
              local function gt(kk) return host:get(16 + 2 * blocks + ((b * nsteps + kk) * marks) * 2 + 1) end
              table.insert(ns, gt(k + 1) - gt(k))
            end
          end
          local cells = {}
          for s = 1, #names + 1 do
            table.sort(per[s])
            cells[s] = per[s][1] and per[s][(#per[s] + 1) // 2] or -1
          end
          table.sort(ns)
          rows[#rows + 1] = { warp = warp, cells = cells, ns = ns[1] and ns[(#ns + 1) // 2] or -1 }
        end
        local st = status:cpu():get(1)
        local clusters = launch.grid[1] * launch.grid[2] * launch.grid[3] // v.cluster
        print(("== stamps: %s at batch %d (one layer, both directions, %d clusters of %d): %.2f us a step (plain "
          .. "build, %.3f ms a layer), status %d =="):format(tc.label(v), batch, clusters, v.cluster,
          t.median_ms * 1000 / steps, t.median_ms, st))
        local head = { ("%-8s"):format("warp") }
        for _, n in ipairs(names) do head[#head + 1] = ("%10s"):format(n) end
        head[#head + 1] = ("%10s %9s %6s"):format("step", "step ns", "GHz")
        print(table.concat(head, " ") .. "   (median clock64 cycles)")
        for _, row in ipairs(rows) do
          local line = { ("%-8d"):format(row.warp) }
          for _, c in ipairs(row.cells) do line[#line + 1] = ("%10d"):format(c) end
          local step = row.cells[#row.cells]
          line[#line + 1] = ("%9d %6.3f"):format(row.ns, row.ns > 0 and step / row.ns or 0)
          print(table.concat(line, " "))
        end
      end
      progress(job.what)
      local ok, why = pcall(stamp_one)
      if not ok then
        local ok_v, v = pcall(tc.variant, { batch = batch, hidden = H }, variant)
        print(("stamps %s batch %d: error: %s"):format(ok_v and tc.label(v) or "?", batch,
          tostring(why):gsub("\n.*", "")))
      end
      collectgarbage()
    end
  end
end

-- ---- the check without a GPU ----------------------------------------------------------

local function check()
  print("== check: every variant compiled for sm_90 (NVRTC, ptxas -v) and its contract checked ==")
  local todo, failed = {}, 0
  for _, job in ipairs(tc.sweep_jobs(batches, opts.steps)) do
    if wanted(job.options, job.shape) then todo[#todo + 1] = { shape = job.shape, variant = job.options } end
  end
  local seen = {}
  for _, job in ipairs(todo) do
    local ok_v, v = pcall(tc.variant, job.shape, job.variant)
    if ok_v then
      local key = tc.label(v) .. " h" .. job.shape.hidden
      if not seen[key] then
        seen[key] = true
        local spec = tc.spec(merged(job.variant, { options = { "--ptxas-options=-v" } }))
        local ok, rep = pcall(spk.lstm.kernel_check, spec, job.shape)
        if ok then
          local log = tostring(rep.log)
          local stack, st, ld = log:match("(%d+) bytes stack frame, (%d+) bytes spill stores, (%d+) bytes spill loads")
          local regs = log:match("Used (%d+) registers")
          local serialized = log:find("C7511", 1, true) or log:find("are serialized", 1, true)
          print(("ok    %-36s hidden %3d: %s regs, stack %s B, spills %s/%s B, %d threads, %d B shared, %s%s"):format(
            tc.label(v), job.shape.hidden, tostring(regs), tostring(stack), tostring(st), tostring(ld),
            rep.launches[1].block, rep.launches[1].smem or 0, rep.arch,
            serialized and ", wgmmas SERIALIZED by ptxas (C7511: too few registers)" or ""))
        else
          failed = failed + 1
          print(("ERROR %-36s hidden %3d: %s"):format(tc.label(v), job.shape.hidden, tostring(rep):gsub("\n.*", "")))
        end
      end
    end
  end
  -- the stamps part's arguments against the timeline build's parameters (sizes; pointers as 8-byte scalars)
  local v = tc.variant({ batch = 64, hidden = 128 }, {})
  local d = {}
  for k, x in pairs(tc.defines(v, 128)) do d[k] = tostring(x) end
  d.SPK_TIMELINE = "1"
  local ptx = spk.cuda.compile { file = tc.kernel_dir() .. "/lstm_tc.cu", defines = d, arch = "compute_90a" }
  local sizes = {}
  for k, p in ipairs(ptx:params("spk_lstm_tc")) do sizes[k] = p.size end
  ptx:close()
  local p8, i32 = spk.u64(0), spk.i32(0)
  local ok, why = pcall(spk.cuda.pack_args, sizes, { p8, p8, p8, p8, p8, i32, i32, p8, p8, i32, i32, p8, i32, i32, i32,
                                                      i32, i32, i32 })
  if not ok then failed = failed + 1 end
  print(("%-5s the timeline build's %d parameters and the stamps part's arguments%s"):format(ok and "ok" or "ERROR",
    #sizes, ok and "" or (": " .. tostring(why))))
  print(("check: %d variant%s failed"):format(failed, failed == 1 and "" or "s"))
  return failed
end

-- ---- the work, listed (--dry-run prints it), then run ---------------------------------

local work = {}
if parts.check then work[#work + 1] = "check: every variant of the parts compiled for sm_90a (no device)" end
if parts.correctness then
  for _, job in ipairs(correctness_jobs()) do work[#work + 1] = job.what end
end
if parts.sweep then
  for _, batch in ipairs(batches) do
    for _, job in ipairs(sweep_jobs_at(batch)) do work[#work + 1] = job.what end
  end
end
if parts.stamps then
  for _, batch in ipairs(batches) do
    for _, job in ipairs(stamp_jobs_at(batch)) do work[#work + 1] = job.what end
  end
end
local status = script:plan(work)
local function progress(what) status:step(what) end

if parts.check then
  progress(work[1])
  if check() > 0 then os.exit(1) end
end
if parts.correctness then correctness(progress) end
if parts.sweep then sweep(progress) end
if parts.stamps then stamps(progress) end
