-- spk.timeline: a kernel's step timeline (docs/timeline.md). A kernel's
-- timeline build stamps globaltimer and clock64 at the stage boundaries of
-- chosen steps and blocks; a plan's forward(x, {timeline = {...}}) returns
-- y, info with info.timeline = {stamps =, columns =, stages =, waits_for =,
-- clock =, selection =, kernel =}, which these functions read:
--
--   spk.timeline.selection(t[, defaults]) -> the C selection (0-based), the selection as recorded
--   spk.timeline.make(stamps, columns, clock, description, selection) -> info.timeline
--   spk.timeline.records(tl) -> {blocks =, steps =, at = {[b] = {[s] = {t =, cycles =}}}}
--   spk.timeline.durations(tl) -> {ns =, cycles =, names =, blocks =}
--   spk.timeline.stats(tl[, {path = critical_path}]) -> rows {stage =, block =, n =, median_ns =, ...}
--   spk.timeline.critical_path(tl[, {step_range = {first, last}}]) -> {elements =, total_ns =, by_stage =, ...}
--   spk.timeline.percentile(sorted, p) -> NumPy's default interpolation
--   spk.timeline.decode(raw, {stages =, waits_for =, cycles_per_ns =, kernel =}) -> tl from a raw
--     u64 buffer (what a timeline build leaves on the device, copied to the host)
--   spk.timeline.demo{batch =, steps = 589, cluster = 8, seed = 1} -> plan: a small cluster
--     recurrence with the stamps (compute capability 9.0), following the contract:
--     plan:forward(x[, {timeline = {...}}]) -> y[, info], plan:time{rounds =, warmup =, x =,
--     build =, timeline =}, plan:close()
--   spk.timeline.demo_description() -> {stages =, waits_for =, kernel =} of the demo kernel
-- report.timeline and plot.timeline format and draw the same table. The
-- definitions (durations, the critical path): lua/spk/timeline_analysis.lua.
return function(spk, core)
  local analysis = require "spk.timeline_analysis"
  local options = require "spk.options"
  local doc = require "spk.doc"
  local timeline = {}
  spk.timeline = timeline

  function timeline.decode(raw, opts)
    if type(opts) == "table" then
      options.check_keys(opts, { "stages", "waits_for", "cycles_per_ns", "kernel" }, "timeline.decode")
    end
    if type(opts) ~= "table" or type(opts.stages) ~= "table" then
      error("timeline.decode(raw, {stages = {...}, waits_for =, cycles_per_ns =}): stages is required")
    end
    local stamps, columns, clock = core.timeline_decode(raw, opts.stages, opts.cycles_per_ns)
    local sel = clock.selection
    local selection = { layer = sel.layer + 1, direction = sel.direction == 1 and "reverse" or "forward",
                        step_range = { sel.first_step + 1, sel.first_step + sel.steps },
                        blocks = { sel.first_block, sel.first_block + sel.blocks - 1 }, warp = sel.warp }
    return analysis.make(stamps, columns, clock, { stages = opts.stages, waits_for = opts.waits_for,
                                                   kernel = opts.kernel or "raw" }, selection)
  end

  -- The demo kernel's description: its stages and what its wait waits for.
  function timeline.demo_description()
    local d = core.timeline_demo_stages()
    local waits_for = {}
    for k, target in ipairs(d.waits_for) do
      if target then waits_for[d.names[k]] = d.names[target] end
    end
    return { stages = d.names, waits_for = waits_for, kernel = "timeline demo" }
  end

  -- The methods, and apart from them the metamethods (so a method list holds only methods).
  local Demo = {}
  local demo_mt = { __index = Demo, __name = "spk.timeline.demo",
                    __close = function(self) self:close() end,
                    __tostring = function(self) return self.core and tostring(self.core) or "timeline demo (closed)" end }

  local function open(self)
    if not self.core then error("timeline demo: the plan is closed") end
    return self.core
  end

  -- Its weights are spk.randn({2, 64, 64}, {seed =, std = 1/8}); x is [batch, steps, 64].
  function timeline.demo(opts)
    if type(opts) ~= "table" then error("timeline.demo expects a table {batch =, steps =, cluster =, seed =}") end
    options.check_keys(opts, { "batch", "steps", "cluster", "seed" }, "timeline.demo")
    local steps = opts.steps or 589
    local cluster = opts.cluster or 8
    local weights = spk.randn({ 2, 64, 64 }, { seed = opts.seed or 1, std = 0.125 })
    local c = core.timeline_demo_new { cluster = cluster, batch = opts.batch, steps = steps, weights = weights }
    local info = c:info()
    return setmetatable({ core = c, batch = opts.batch, steps = steps, cluster = cluster, hidden = info.hidden,
                          input = info.hidden, weights = weights, blocks = info.blocks, warps = info.warps,
                          threads = info.threads, tiles = info.tiles, tile_rows = info.tile_rows,
                          description = timeline.demo_description() }, demo_mt)
  end

  -- What a selection leaves out: the first 64 steps, the blocks of the first cluster.
  local function selection_defaults(self)
    return { step_range = { 1, math.min(self.steps, 64) }, blocks = { 0, self.cluster - 1 } }
  end

  function Demo:forward(x, opts)
    local c = open(self)
    if opts == nil then return c:forward(x) end
    if type(opts) ~= "table" then
      error(("forward: options must be a table {timeline = {...}}, got %s"):format(options.type_name(opts)))
    end
    options.check_keys(opts, { "timeline" }, "forward")
    if opts.timeline == nil then return c:forward(x) end
    local sel, given = analysis.selection(opts.timeline, selection_defaults(self))
    local y, stamps, columns, clock = c:forward(x, sel)
    return y, { timeline = analysis.make(stamps, columns, clock, self.description, given) }
  end

  -- build "timeline" without a selection runs the instrumented kernel recording nothing.
  function Demo:time(opts)
    local c = open(self)
    opts = options.check_keys(opts, { "rounds", "warmup", "x", "build", "timeline" }, "time")
    local x = opts.x or spk.randn({ self.batch, self.steps, self.hidden }, { seed = 1 })
    local build = opts.build or (opts.timeline and "timeline" or "plain")
    local sel = opts.timeline and analysis.selection(opts.timeline, selection_defaults(self)) or nil
    local ms = c:time(x, build, opts.rounds or 7, opts.warmup or 2, sel)
    local sorted = {}
    for i, v in ipairs(ms) do sorted[i] = v end
    table.sort(sorted)
    local median = analysis.percentile(sorted, 0.5)
    return { median_ms = median, min_ms = sorted[1], max_ms = sorted[#sorted],
             spread = (sorted[#sorted] - sorted[1]) / median, samples = ms }
  end

  function Demo:close()
    if self.core then self.core:close() end
    self.core = nil
  end

  function Demo:is_closed() return self.core == nil end

  -- An argument a function does not take is an error that names it.
  local takes = {
    selection = 2, make = 5, records = 1, durations = 1, stats = 2, critical_path = 2, percentile = 2,
    critical_view = 2, describe_view = 1, load_stamps = 2,
  }
  for name, max in pairs(takes) do
    timeline[name] = options.takes(max, "spk.timeline." .. name, analysis[name])
  end
  timeline.decode = options.takes(2, "spk.timeline.decode", timeline.decode)
  timeline.demo = options.takes(1, "spk.timeline.demo", timeline.demo)
  timeline.demo_description = options.takes(0, "spk.timeline.demo_description", timeline.demo_description)
  for name, max in pairs { forward = 3, time = 2, close = 1, is_closed = 1 } do
    Demo[name] = options.takes(max, name, Demo[name])
  end

  doc(timeline.selection, [[
spk.timeline.selection(t[, defaults]) -> c_selection, given
t = {layer = 1, direction = "forward" | "reverse", step_range = {first, last} (from 1; or steps = a list of
consecutive steps), blocks = {first, last} (from 0), warp = 0}, defaults = {step_range =, blocks =} for the
ranges left out; c_selection is the 0-based form a binding takes, given the selection as recorded.]])
  doc(timeline.make, [[
spk.timeline.make(stamps, columns, clock, description, selection) -> tl
The table a timeline forward returns as info.timeline, from a decode's stamps, columns and clock,
the kernel's description {stages =, waits_for =, kernel =} and the selection as recorded.]])
  doc(timeline.records, [[
spk.timeline.records(tl) -> {blocks = {b, ...}, steps = {s, ...}, at = {[b] = {[s] = record}}, marks =}
record = {t = {start, end of stage 1, ...} (ns), cycles = {...}}; NaN where a mark was not stamped.]])
  doc(timeline.durations, [[
spk.timeline.durations(tl) -> {ns = {[stage] = {[block] = {...}, all = {...}}}, cycles =, names =, blocks =}
Each stage's durations (mark k - mark k-1), then "gap" (a step's last mark to the next start) and
"step" (start to next start), per block and over all blocks.]])
  doc(timeline.stats, [[
spk.timeline.stats(tl[, {path = critical_path}]) -> rows
{stage =, block = b | "all", n =, median_ns =, p10_ns =, p90_ns =, median_cycles =, p10_cycles =,
p90_cycles =} for every stage, "gap" and "step"; with a path the "all" rows carry path_ns and
path_share (that stage's share of the path).]])
  doc(timeline.critical_path, [[
spk.timeline.critical_path(tl[, {step_range = {first, last}}]) -> path
The chain of stage intervals that ends the window's last step, through the waits for the other
blocks (tl.waits_for): {elements = {{block =, step =, stage =, from =, to =, waited_for =}, ...},
start =, finish =, total_ns =, by_stage =, step_range =, end_block =}.]])
  doc(timeline.critical_view, [[
spk.timeline.critical_view(tl[, {step_range = {first, last}, wait_floor_ns = 20}]) -> view
The critical path a step at a time: a wait longer than wait_floor_ns was held by the exchange, from
the latest end of the stage it waits for to the wait's end, with the waiting block's own stages
in that interval under it. {chain = {{stage =, ns =, share =}, ...}, hidden =, attack = {stage =,
ns =, share =, room_ns =}, step_ns =, steps =, jumps =, blocks =, path =} (docs/timeline.md).]])
  doc(timeline.describe_view, [[
spk.timeline.describe_view(view) -> text
A view's chain a step, what ran under the exchange and the stage to attack next.]])
  doc(timeline.load_stamps, [[
spk.timeline.load_stamps(path[, {waits_for =, kernel =}]) -> tl
A stamps CSV as experiments/step_timeline.lua writes it (stamps_b<B>.csv) read back as a timeline
(its stages from the columns; waits_for {wait = "publish"} where both are there), for the analysis.]])
  doc(timeline.percentile, [[
spk.timeline.percentile(sorted, p) -> value
Linear interpolation between the closest ranks of a sorted list (NumPy's default); nil when empty.]])
  doc(timeline.decode, [[
spk.timeline.decode(raw, {stages =, waits_for =, cycles_per_ns =, kernel =}) -> tl
A timeline build's raw buffer (host u64 [words]) as the table a timeline forward returns, every
block's clock aligned to one time base (cycles_per_ns: a known clock rate instead of the fitted one).]])
  doc(timeline.demo, [[
spk.timeline.demo{batch =, steps = 589, cluster = 8, seed = 1} -> plan
A small cluster recurrence (64 units, tanh) with a timeline build, as a plan following the contract
of docs/timeline.md; x f32 [batch, steps, 64]. Needs compute capability 9.0.]])
  doc(timeline.demo_description, [[
spk.timeline.demo_description() -> {stages =, waits_for =, kernel =}
The demo kernel's stages, in the order a step runs them, and what its wait waits for.]])
  doc.type("timeline demo plan", Demo, [[
timeline demo plan: spk.timeline.demo{...}'s plan; fields batch, steps, cluster, hidden, input,
weights, blocks, warps, threads, tiles, tile_rows, description and core (the C demo).]])
  doc(Demo.forward, [[
plan:forward(x[, {timeline = {layer =, direction =, step_range = {first, last}, blocks = {first, last}, warp =}}])
  -> y[, info]
y f32 [batch, steps, 128] on x's side; with a timeline, the instrumented build records the selection
(default: steps 1..64, the first cluster) and info.timeline is what it recorded, the same bits in y.]])
  doc(Demo.time, [[
plan:time{rounds = 7, warmup = 2, x = tensor, build = "plain" | "timeline", timeline = {...}}
  -> {median_ms, min_ms, max_ms, spread, samples}
Launches timed by CUDA events: the plain build, or the timeline build recording the selection
(build "timeline" without one: recording nothing).]])
  doc(Demo.close, "plan:close()\nFrees the demo's device memory now (also <close>).")
  doc(Demo.is_closed, "plan:is_closed() -> boolean")
  doc.area { name = "timeline", source = "spk.timeline",
             summary = "step timelines: stage stamps of a kernel's steps, their statistics and critical path",
             contents = { timeline, "timeline demo plan" } }
end
