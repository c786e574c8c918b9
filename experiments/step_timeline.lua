-- step_timeline: one step of a recurrence kernel seen from inside. For each
-- batch, the kernel's timeline build records every stage boundary of a run
-- of steps in the blocks of one cluster (docs/timeline.md); the script prints
-- each stage's duration per block (median, p10, p90) with its share of the
-- critical path, the critical path a step at a time (the exchange as a stage,
-- what ran under it, the stage to attack next: spk.timeline.critical_view),
-- checks that the instrumented build gives the same bits as the plain one,
-- measures what it costs, and draws a Gantt of four steps across the blocks
-- with the critical path outlined.
--
-- GPU: required (the demo and the cluster kernel need compute capability
-- 9.0). Without one it says so and exits 3; nothing is written.
-- Run: build/spk run experiments/step_timeline.lua [--quick] [--batch 1,8,64]
--      [--backend cluster] [--steps 64] [--first 101] [--layer 1] [--direction forward]
--      [--warp 0] [--rounds 7] [--kernel "early_gates=0,cell=reference"] [--out DIR]
-- Backends: "demo" (kernels/timeline_demo.cu, a small cluster recurrence with
-- the stamps), or a stack backend whose plan takes
-- plan:forward(x, {timeline = {...}}) -> y, info and plan:time{timeline = ...}
-- (the contract in docs/timeline.md: "cluster", "persistent", or "auto" where
-- it picks one of them), or a kernel file of one's own whose spec names its
-- timeline stages (--backend experiments/kernels/skeleton.lua: its
-- spk.lstm.kernel_stack plan, docs/kernels.md), run on spk.lstm.random{seed =
-- 1}, 4 layers, input 60, hidden 128, 589 steps, each batch's default kernel
-- (--kernel: these kernel options on top of it, for every batch; a built-in
-- backend's). The blocks recorded are the first cluster (cluster), tile
-- (persistent) or the kernel file's plan.timeline.group blocks.
-- Writes: step_timeline.csv (a row per batch, stage and block), step_timeline.json
-- (everything, with the critical paths and the clock fits), stamps_b<B>.csv
-- (the decoded records), timeline_b<B>.svg (the Gantt).
local spk = require "spk"
local experiment = require "spk.experiment"
local timeline = spk.timeline
local plot = require "spk.plot"
local report = require "spk.report"

local ex = experiment.start {
  name = "step_timeline", gpu = "required",
  about = "Per-stage durations, critical path and a Gantt of a kernel's steps, from its timeline build.",
  batches = { 1, 8, 64 }, quick_batches = { 1, 8, 64 },
  options = { { "backend", "cluster", help = "cluster or persistent (a stack backend's timeline build), demo, or a "
                .. "kernel file (.lua) whose spec names its timeline stages" },
              { "steps", 64, quick = 32, help = "steps recorded" },
              { "first", 101, help = "first step recorded (from 1)" },
              { "layer", 1, help = "layer recorded (from 1)" },
              { "direction", "forward", help = "forward or reverse" },
              { "warp", 0, help = "warp whose lane 0 stamps (from 0)" },
              { "rounds", 7, quick = 3, help = "timed rounds for the overhead" },
              { "kernel", "", help = "kernel options on top of each batch's default: name=value,name=value" } },
}
local o = ex.opts
local T = 589

-- --kernel "early_gates=0,cell=reference": the kernel table (integers as integers)
local kernel
for name, value in tostring(o.kernel or ""):gmatch("([%w_]+)=([^,]+)") do
  kernel = kernel or {}
  kernel[name] = math.tointeger(tonumber(value)) or value
end

-- A plan for the backend at a batch: forward(x[, {timeline =}]), time{}, close(),
-- and the input it takes.
local kernel_file = tostring(o.backend):match("%.lua$") and spk.lstm.kernel_file(o.backend) or nil
if kernel_file and kernel then
  io.stderr:write("step_timeline: --kernel sets a built-in backend's kernel options; a kernel file's plan takes none\n")
  os.exit(require("spk.options").EXIT.usage)
end

local function runner(batch)
  if o.backend == "demo" then
    local demo = spk.timeline.demo { batch = batch, steps = T, cluster = 8 }
    return demo, { batch, T, demo.input }
  end
  local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
  if kernel_file then
    local opts = { layers = layers, batch = batch, steps = T }
    for k, v in pairs(kernel_file) do opts[k] = v end
    return spk.lstm.kernel_stack(opts), { batch, T, 60 }
  end
  return spk.lstm.stack { layers = layers, batch = batch, steps = T, backend = o.backend, kernel = kernel },
    { batch, T, 60 }
end

local function reason(err)
  local text = experiment.reason(err)
  if text:find("has no timeline build", 1, true) then
    return ("%s; --backend demo runs the instrumented demo kernel (a kernel file: name its stages in its spec's "
      .. "timeline = {stages = ...})"):format(text)
  end
  return text
end

local first = math.max(1, math.min(o.first, T - o.steps + 1))
local selection = { layer = o.layer, direction = o.direction, step_range = { first, math.min(T, first + o.steps - 1) },
                    warp = o.warp }

ex:describe { seeds = { weights = 1, input = 1 }, dtype = "f32", math = { "fp32" }, backends = { o.backend },
              variants = { "each batch's default kernel, plain and timeline builds" },
              shape = o.backend == "demo" and { steps = T, hidden = 64, input = 64, layers = 1 }
                or { layers = 4, input = 60, hidden = 128, steps = T } }
local work = {}
for _, batch in ipairs(ex.batches) do
  work[#work + 1] = ("batch %d: %s backend, steps %d..%d of layer %d %s recorded, %d rounds each build"):format(
    batch, o.backend, selection.step_range[1], selection.step_range[2], o.layer, o.direction, o.rounds)
end
ex:plan(work)

local stats_rows, summary, results = {}, {}, {}
for _, batch in ipairs(ex.batches) do
  ex:progress("batch %d: %s backend, recording steps %d..%d", batch, o.backend, selection.step_range[1],
    selection.step_range[2])
  ex:step(("batch %d"):format(batch))
  local ok, err = pcall(function()
    local plan, shape = runner(batch)
    local x = spk.randn(shape, { seed = 1 })
    local plain = plan:forward(x)
    local y, info = plan:forward(x, { timeline = selection })
    local d = spk.compare(plain, y)
    local same_bits = d.max_ulp == 0 and d.nan_mismatch == 0
    local tl = info.timeline
    local path = timeline.critical_path(tl)
    local rows = report.timeline_rows(tl, { path = path })
    local view_ok, view = pcall(timeline.critical_view, tl)
    -- what the timeline build costs: the plain build and the recording one, in turn
    local plain_ms, timeline_ms = {}, {}
    for _ = 1, 2 do
      plain_ms[#plain_ms + 1] = plan:time { rounds = o.rounds, x = x }.median_ms
      timeline_ms[#timeline_ms + 1] = plan:time { rounds = o.rounds, x = x, timeline = selection }.median_ms
    end
    local p, t = experiment.median(plain_ms), experiment.median(timeline_ms)
    -- a stack's forward runs 4 layers of T steps; the demo one layer
    local dependent_steps = o.backend == "demo" and T or 4 * T
    local overhead = { plain_ms = p, timeline_ms = t, overhead = t / p - 1, ns_a_step = (t - p) * 1e6 / dependent_steps,
                       build = tl.build }
    plan:close()

    io.write(("\nbatch %d%s\n"):format(batch, same_bits and "" or "  (the timeline build changed the bits!)"))
    io.write(report.timeline(tl, { path = path, per_block = #timeline.records(tl).blocks <= 8 }))
    local build = ""
    if tl.build then
      build = (" (%d registers, %d bytes of spills%s)"):format(tl.build.registers, tl.build.spills,
        tl.build.waves and (", %d wave%s"):format(tl.build.waves, tl.build.waves == 1 and "" or "s") or "")
    end
    print(("timeline build%s: %.4f ms against %.4f ms plain (%+.1f%%, %+.1f ns a step), same bits: %s"):format(build,
      t, p, 100 * overhead.overhead, overhead.ns_a_step, tostring(same_bits)))
    io.write(view_ok and timeline.describe_view(view) or ("critical path a step: %s\n"):format(tostring(view)))
    for _, r in ipairs(rows) do
      r.batch = batch
      stats_rows[#stats_rows + 1] = r
    end
    -- the decoded records, as they are
    local names = {}
    for i, c in ipairs(tl.columns) do names[i] = c.name end
    local records = {}
    for i, row in ipairs(tl.stamps:tolist()) do
      local r = {}
      for j, v in ipairs(row) do r[names[j]] = v end
      records[i] = r
    end
    ex:csv(("stamps_b%d.csv"):format(batch), records, names)
    ex:svg(("timeline_b%d.svg"):format(batch), plot.timeline(tl))
    local line = { batch = batch, same_bits = same_bits, overhead = overhead.overhead, path_ns = path.total_ns,
                   attack = view_ok and view.attack and ("%s %.1f ns"):format(view.attack.stage, view.attack.ns) or nil }
    for _, r in ipairs(rows) do
      if r.block == "all" then
        line[r.stage] = r.median_ns
        if r.path_share then line[r.stage .. "_path"] = r.path_share end
      end
    end
    summary[#summary + 1] = line
    local elements = {}
    for i, e in ipairs(path.elements) do elements[i] = e end
    results[#results + 1] = { batch = batch, selection = tl.selection, kernel = tl.kernel, clock = tl.clock,
                              stages = tl.stages, waits_for = tl.waits_for, stats = rows, same_bits = same_bits,
                              overhead = overhead,
                              critical_path = { step_range = path.step_range, total_ns = path.total_ns,
                                                by_stage = path.by_stage, end_block = path.end_block,
                                                elements = elements },
                              critical_view = view_ok and { step_ns = view.step_ns, steps = view.steps,
                                                            chain = view.chain, hidden = view.hidden,
                                                            attack = view.attack, jumps = view.jumps,
                                                            wait_floor_ns = view.wait_floor_ns } or nil }
  end)
  if not ok then
    local why = reason(err)
    ex:progress("batch %d failed: %s", batch, why)
    summary[#summary + 1] = { batch = batch, error = why }
    results[#results + 1] = { batch = batch, error = why }
  end
end

-- one line a batch: each stage's median (ns) and share of the critical path
local columns = { "batch" }
local stages = results[1] and results[1].stages
for _, r in ipairs(results) do stages = stages or r.stages end
for _, name in ipairs(stages or {}) do
  columns[#columns + 1] = { key = name, title = name .. " ns", format = "%.1f" }
  columns[#columns + 1] = { key = name .. "_path", title = "path", format = report.fmt_pct }
end
for _, c in ipairs {
  { key = "step", title = "step ns", format = "%.1f" }, { key = "attack", title = "attack next" },
  { key = "overhead", title = "overhead", format = report.fmt_pct },
  { key = "same_bits", title = "same bits" }, { key = "error", title = "error" } } do
  columns[#columns + 1] = c
end
io.write("\n")
ex:table(summary, columns, { title = ("medians over the blocks, steps %d..%d of layer %d %s (%s backend)")
  :format(selection.step_range[1], selection.step_range[2], o.layer, o.direction, o.backend) })
ex:csv("step_timeline.csv", stats_rows, { "batch", "stage", "block", "n", "median_ns", "p10_ns", "p90_ns",
                                          "median_cycles", "p10_cycles", "p90_cycles", "path_ns", "path_share" })
ex:json("step_timeline.json", { backend = o.backend, steps = T, selection = selection, kernel = kernel,
                                batches = results })
local failed = 0
for _, r in ipairs(results) do
  if r.error then failed = failed + 1 end
end
ex:finish()
if failed == #results then os.exit(1) end
