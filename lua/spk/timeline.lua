-- spk.timeline: reading a kernel's step timeline (docs/timeline.md). The
-- analysis is plain Lua over the table a timeline forward returns, so
-- spk.report and spk.plot use it and specs feed it hand-made recordings:
--
--   local y, info = plan:forward(x, {timeline = {layer = 1, direction = "forward",
--                                                steps = {101, 164}, blocks = {0, 7}, warp = 0}})
--   local tl = info.timeline
--   tl.stamps      host f64 tensor [records, columns]: one row per (block, step) recorded
--   tl.columns     {{name =, unit =, about =}, ...}: block, step, then for each mark (start,
--                  then the end of each stage) its aligned time (ns), its cycles, its globaltimer
--   tl.stages      {"wait", "dot", ...}: the kernel's stages, in the order a step runs them
--   tl.waits_for   {wait = "publish"}: a stage that waits for every block's end of a stage at
--                  the previous step (the exchange of h); the critical path follows it
--   tl.clock       {cycles_per_ns =, fitted =, quantum_ns =, residual_ns =, origin =, ...}
--   tl.selection   the selection, as given (1-based layer and steps, 0-based blocks and warp)
--   tl.kernel      what recorded it ("timeline demo", "cluster", ...)
--
--   timeline.selection(t, defaults[, level]) -> the C form (0-based) of a user's selection
--   timeline.records(tl)       -> {blocks = {b, ...}, steps = {s, ...}, at = {[b] = {[s] = record}}}
--                                 record = {t = {start, end of stage 1, ...}, cycles = {...}} (NaN: unstamped)
--   timeline.durations(tl)     -> {[name] = {[block] = {ns...}, all = {ns...}}, cycles alike}
--   timeline.stats(tl[, {path = critical_path}])
--                              -> rows {stage =, block = b | "all", n =, median_ns =, p10_ns =,
--                                 p90_ns =, median_cycles =, p10_cycles =, p90_cycles =}
--                                 for every stage, then "gap" and "step" (see below); with a
--                                 path, the "all" rows also carry path_ns and path_share (of
--                                 the path's total time, that stage's intervals on it)
--   timeline.critical_path(tl[, {steps = {first, last}}]) -> path (see below)
--   timeline.percentile(sorted, p) -> linear interpolation between closest ranks (NumPy's default)
--   timeline.decode(raw, {stages =, waits_for =, cycles_per_ns =, kernel =}) -> tl from a raw
--                  u64 buffer (spk.core.timeline_decode); timeline.demo{...}: the demo kernel as a
--                  plan with plan:forward(x, {timeline = ...}) -> y, info (both need spk's C part)
--
-- Durations: stage k of a record lasts mark k - mark k-1 (mark 0 = start); "gap" is the
-- time from a step's last mark to the next step's start in the same block (loop overhead
-- and whatever the kernel does not stamp); "step" is start to next start in the same
-- block, the step's period. All in ns of the aligned time base; cycles from clock64.
--
-- The critical path (the chain of stage intervals that determines when the last step
-- ends), walked back from the latest end of the last step of the window:
--   - a stage that is not a wait, or whose wait began after the data was there: its own
--     interval, preceded by the previous stage of the same block (mark k-1); the first
--     stage of a step is preceded by the gap from the same block's previous step;
--   - a stage k that waits for stage p (tl.waits_for) and began before the data was
--     there: D = the latest end of stage p over the recorded blocks at the previous step,
--     from block b*. If D is after the wait began, the interval is [D, end of the wait]
--     (the exchange: the last push landing and the waiter waking), preceded by stage p of
--     block b* at the previous step. Ties go to the waiting block's own chain.
-- The intervals tile [start of the window's first step on the path, its end]:
--   path = {elements = {{block =, step =, stage =, from =, to =, waited_for = b* | nil}, ...},
--           start =, finish =, total_ns =, by_stage = {[name] = ns}, steps = {first, last}}
-- Only recorded blocks are candidates for b*: record a whole cluster to see the path.
local M = {}

local function is_number(x) return type(x) == "number" and x == x end

-- ---------------------------------------------------------------- selection

local function range(value, name, level, base)
  if type(value) ~= "table" or #value ~= 2 or math.type(value[1]) ~= "integer" or math.type(value[2]) ~= "integer" then
    error(("timeline.%s must be a range {first, last} of integers (from %d), got %s"):format(name, base,
      type(value) == "table" and ("a table of %d entries"):format(#value) or tostring(value)), level)
  end
  if value[1] < base or value[2] < value[1] then
    error(("timeline.%s = {%d, %d}: needs %d <= first <= last"):format(name, value[1], value[2], base), level)
  end
  return value[1], value[2]
end

local known_keys = { layer = true, direction = true, steps = true, blocks = true, warp = true }

-- t: {layer = 1, direction = "forward" | "reverse", steps = {first, last} (from 1),
-- blocks = {first, last} (from 0), warp = 0}; defaults: {steps = {..}, blocks = {..}}.
-- Returns the C selection (0-based) and the selection as recorded (defaults filled).
function M.selection(t, defaults, level)
  level = (level or 1) + 1
  defaults = defaults or {}
  if type(t) ~= "table" then
    error(("timeline must be a table {layer =, direction =, steps = {first, last}, blocks = {first, last}, warp =}, "
      .. "got %s"):format(type(t)), level)
  end
  for k in pairs(t) do
    if not known_keys[k] then
      error(("timeline: unknown option '%s' (known: layer, direction, steps, blocks, warp)"):format(tostring(k)), level)
    end
  end
  local layer = t.layer == nil and 1 or t.layer
  if math.type(layer) ~= "integer" or layer < 1 then
    error(("timeline.layer must be a layer number (from 1), got %s"):format(tostring(layer)), level)
  end
  local direction = t.direction == nil and "forward" or t.direction
  if direction ~= "forward" and direction ~= "reverse" then
    error(("timeline.direction must be \"forward\" or \"reverse\", got %s"):format(tostring(direction)), level)
  end
  local s1, s2 = range(t.steps == nil and defaults.steps or t.steps, "steps", level + 1, 1)
  local b1, b2 = range(t.blocks == nil and defaults.blocks or t.blocks, "blocks", level + 1, 0)
  local warp = t.warp == nil and 0 or t.warp
  if math.type(warp) ~= "integer" or warp < 0 or warp > 31 then
    error(("timeline.warp must be a warp of the block (0 .. 31), got %s"):format(tostring(warp)), level)
  end
  local c = { layer = layer - 1, direction = direction == "reverse" and 1 or 0, first_step = s1 - 1,
              steps = s2 - s1 + 1, first_block = b1, blocks = b2 - b1 + 1, warp = warp }
  local given = { layer = layer, direction = direction, steps = { s1, s2 }, blocks = { b1, b2 }, warp = warp }
  return c, given
end

-- The table every timeline forward returns, from what the decode gave.
function M.make(stamps, columns, clock, description, selection)
  local waits_for = {}
  for stage, target in pairs(description.waits_for or {}) do waits_for[stage] = target end
  return { stamps = stamps, columns = columns, clock = clock, stages = description.stages, waits_for = waits_for,
           selection = selection, kernel = description.kernel }
end

-- ---------------------------------------------------------------- records

-- The rows of tl.stamps as Lua tables (a tensor's tolist, or a list already).
local function rows_of(stamps)
  if type(stamps) == "table" then return stamps end
  if stamps == nil or type(stamps.tolist) ~= "function" then
    error("timeline: stamps must be a tensor [records, columns] or a list of rows", 3)
  end
  local shape = stamps:shape()
  if #shape ~= 2 then error("timeline: stamps must be a 2-d tensor [records, columns]", 3) end
  if shape[1] == 0 then return {} end
  return stamps:tolist()
end

local function column_index(tl)
  local index = {}
  for i, c in ipairs(tl.columns or {}) do index[type(c) == "table" and c.name or c] = i end
  return index
end

function M.records(tl)
  if type(tl) ~= "table" or type(tl.stages) ~= "table" or #tl.stages < 1 then
    error("timeline: expects the table a timeline forward returns ({stamps =, columns =, stages =, ...})", 2)
  end
  local col = column_index(tl)
  local marks = { "start" }
  for k, name in ipairs(tl.stages) do marks[k + 1] = name end
  local tcol, ccol = {}, {}
  for m, name in ipairs(marks) do
    tcol[m], ccol[m] = col[name], col[name .. "_cycles"]
    if not tcol[m] or not ccol[m] then
      error(("timeline: no column '%s' (and '%s_cycles') for mark %d"):format(name, name, m - 1), 2)
    end
  end
  if not col.block or not col.step then error("timeline: the columns need block and step", 2) end
  local at, blocks, steps, seen_b, seen_s = {}, {}, {}, {}, {}
  for _, row in ipairs(rows_of(tl.stamps)) do
    local b, s = math.tointeger(row[col.block]), math.tointeger(row[col.step])
    if not b or not s then error("timeline: a record's block and step must be integers", 2) end
    local r = { t = {}, cycles = {} }
    for m = 1, #marks do
      r.t[m], r.cycles[m] = row[tcol[m]], row[ccol[m]]
    end
    at[b] = at[b] or {}
    at[b][s] = r
    if not seen_b[b] then seen_b[b], blocks[#blocks + 1] = true, b end
    if not seen_s[s] then seen_s[s], steps[#steps + 1] = true, s end
  end
  table.sort(blocks)
  table.sort(steps)
  return { blocks = blocks, steps = steps, at = at, marks = marks }
end

-- ---------------------------------------------------------------- statistics

function M.percentile(sorted, p)
  local n = #sorted
  if n == 0 then return nil end
  local h = (n - 1) * p
  local lo = math.floor(h)
  local hi = math.min(lo + 1, n - 1)
  return sorted[lo + 1] + (h - lo) * (sorted[hi + 1] - sorted[lo + 1])
end

-- The last stamped mark of a record (its index), or nil.
local function last_mark(r)
  for m = #r.t, 1, -1 do
    if is_number(r.t[m]) then return m end
  end
end

function M.durations(tl)
  local rec = M.records(tl)
  local names = {}
  for k, name in ipairs(tl.stages) do names[k] = name end
  names[#names + 1], names[#names + 2] = "gap", "step"
  local ns, cycles = {}, {}
  for _, name in ipairs(names) do ns[name], cycles[name] = { all = {} }, { all = {} } end
  local function add(name, b, d, dc)
    ns[name][b] = ns[name][b] or {}
    cycles[name][b] = cycles[name][b] or {}
    table.insert(ns[name][b], d)
    table.insert(ns[name].all, d)
    table.insert(cycles[name][b], dc)
    table.insert(cycles[name].all, dc)
  end
  local S = #tl.stages
  for _, b in ipairs(rec.blocks) do
    for _, s in ipairs(rec.steps) do
      local r = rec.at[b][s]
      if r then
        for k = 1, S do
          local t0, t1 = r.t[k], r.t[k + 1]
          if is_number(t0) and is_number(t1) then add(tl.stages[k], b, t1 - t0, r.cycles[k + 1] - r.cycles[k]) end
        end
        local nxt = rec.at[b][s + 1]
        if nxt and is_number(nxt.t[1]) then
          if is_number(r.t[S + 1]) then add("gap", b, nxt.t[1] - r.t[S + 1], nxt.cycles[1] - r.cycles[S + 1]) end
          if is_number(r.t[1]) then add("step", b, nxt.t[1] - r.t[1], nxt.cycles[1] - r.cycles[1]) end
        end
      end
    end
  end
  return { ns = ns, cycles = cycles, names = names, blocks = rec.blocks }
end

local function summary(values)
  local s = {}
  for i, v in ipairs(values) do s[i] = v end
  table.sort(s)
  return #s, M.percentile(s, 0.5), M.percentile(s, 0.1), M.percentile(s, 0.9)
end

function M.stats(tl, opts)
  local path = opts and opts.path
  local d = M.durations(tl)
  local rows = {}
  for _, name in ipairs(d.names) do
    local groups = { "all" }
    for _, b in ipairs(d.blocks) do groups[#groups + 1] = b end
    for _, g in ipairs(groups) do
      local values = d.ns[name][g]
      if values and #values > 0 then
        local n, med, p10, p90 = summary(values)
        local _, cmed, c10, c90 = summary(d.cycles[name][g])
        local row = { stage = name, block = g, n = n, median_ns = med, p10_ns = p10, p90_ns = p90,
                      median_cycles = cmed, p10_cycles = c10, p90_cycles = c90 }
        if path and g == "all" and name ~= "step" then
          row.path_ns = path.by_stage[name] or 0
          row.path_share = path.total_ns > 0 and row.path_ns / path.total_ns or nil
        end
        rows[#rows + 1] = row
      end
    end
  end
  return rows
end

-- ---------------------------------------------------------------- critical path

local function stage_numbers(tl)
  local number = {}
  for k, name in ipairs(tl.stages) do number[name] = k end
  local waits = {}
  for stage, target in pairs(tl.waits_for or {}) do
    if not number[stage] or not number[target] then
      error(("timeline: waits_for names stages of the kernel (%s), got %s = %s")
        :format(table.concat(tl.stages, ", "), tostring(stage), tostring(target)), 3)
    end
    waits[number[stage]] = number[target]
  end
  return waits
end

-- The nearest stamped mark before mark m of a record (an index), or nil.
local function previous_mark(r, m)
  for j = m - 1, 1, -1 do
    if is_number(r.t[j]) then return j end
  end
end

function M.critical_path(tl, opts)
  opts = opts or {}
  local rec = M.records(tl)
  local waits = stage_numbers(tl)
  if #rec.steps == 0 then error("timeline: no records", 2) end
  local first, last = rec.steps[1], rec.steps[#rec.steps]
  if opts.steps then first, last = range(opts.steps, "steps", 3, 1) end
  -- the end: the latest last mark at the window's last step
  local b_end, m_end, t_end
  for _, b in ipairs(rec.blocks) do
    local r = rec.at[b][last]
    local m = r and last_mark(r)
    if m and (t_end == nil or r.t[m] > t_end) then b_end, m_end, t_end = b, m, r.t[m] end
  end
  if not b_end then error(("timeline: no block has a stamp at step %d"):format(last), 2) end
  local elements = {}
  local function emit(e) elements[#elements + 1] = e end
  local b, s, m = b_end, last, m_end
  while true do
    local r = rec.at[b][s]
    if m == 1 then
      -- the step's start: the gap from the same block's previous step
      local prev = s > first and rec.at[b][s - 1]
      local pm = prev and last_mark(prev)
      if not pm then break end
      emit { block = b, step = s - 1, stage = "gap", from = prev.t[pm], to = r.t[1] }
      s, m = s - 1, pm
    else
      local j = previous_mark(r, m)
      if not j then break end -- the record starts here: nothing earlier is known
      local k = m - 1         -- the stage that ends at mark m
      local target = waits[k]
      local jumped = false
      if target and s > first then
        local D, b_star
        for _, b2 in ipairs(rec.blocks) do
          local p = rec.at[b2][s - 1]
          local v = p and p.t[target + 1]
          if is_number(v) and (D == nil or v > D or (v == D and b2 == b)) then D, b_star = v, b2 end
        end
        if D and D > r.t[j] then
          emit { block = b, step = s, stage = tl.stages[k], from = math.min(D, r.t[m]), to = r.t[m],
                 waited_for = b_star }
          b, s, m = b_star, s - 1, target + 1
          jumped = true
        end
      end
      if not jumped then
        emit { block = b, step = s, stage = tl.stages[k], from = r.t[j], to = r.t[m] }
        m = j
      end
    end
  end
  -- chronological order
  local n = #elements
  for i = 1, n // 2 do elements[i], elements[n - i + 1] = elements[n - i + 1], elements[i] end
  local by_stage = {}
  for _, e in ipairs(elements) do
    e.duration = e.to - e.from
    by_stage[e.stage] = (by_stage[e.stage] or 0) + e.duration
  end
  local start = n > 0 and elements[1].from or t_end
  return { elements = elements, start = start, finish = t_end, total_ns = t_end - start, by_stage = by_stage,
           steps = { first, last }, end_block = b_end }
end

-- ---------------------------------------------------------------- with spk's C part

-- Installed by lua/spk/init.lua as the "timeline" area: spk.timeline is this table, plus
-- decode and demo.
local function install(_, spk, core)
  spk.timeline = M

  function M.decode(raw, opts)
    if type(opts) ~= "table" or type(opts.stages) ~= "table" then
      error("timeline.decode(raw, {stages = {...}, waits_for =, cycles_per_ns =}): stages is required", 2)
    end
    local ok, stamps, columns, clock = pcall(core.timeline_decode, raw, opts.stages, opts.cycles_per_ns)
    if not ok then error(stamps, 2) end
    local sel = clock.selection
    local selection = { layer = sel.layer + 1, direction = sel.direction == 1 and "reverse" or "forward",
                        steps = { sel.first_step + 1, sel.first_step + sel.steps },
                        blocks = { sel.first_block, sel.first_block + sel.blocks - 1 }, warp = sel.warp }
    return M.make(stamps, columns, clock, { stages = opts.stages, waits_for = opts.waits_for,
                                            kernel = opts.kernel or "raw" }, selection)
  end

  -- The demo kernel's description: its stages and what its wait waits for.
  local function demo_description()
    local d = core.timeline_demo_stages()
    local waits_for = {}
    for k, target in ipairs(d.waits_for) do
      if target then waits_for[d.names[k]] = d.names[target] end
    end
    return { stages = d.names, waits_for = waits_for, kernel = "timeline demo" }
  end
  M.demo_description = demo_description

  -- The methods, and apart from them the metamethods (so a method list holds only methods).
  local Demo = {}
  local demo_mt = { __index = Demo, __name = "spk.timeline.demo",
                    __close = function(self) self:close() end,
                    __tostring = function(self) return self.core and tostring(self.core) or "timeline demo (closed)" end }

  local function open(self, level)
    if not self.core then error("timeline demo: the plan is closed", level + 1) end
    return self.core
  end

  --- timeline.demo{batch =, steps = 589, cluster = 8, seed = 1}: the demo kernel as a plan.
  -- Its weights are spk.randn({2, 64, 64}, {seed =, std = 1/8}); x is [batch, steps, 64].
  function M.demo(opts)
    if type(opts) ~= "table" then error("timeline.demo expects a table {batch =, steps =, cluster =, seed =}", 2) end
    for k in pairs(opts) do
      if k ~= "batch" and k ~= "steps" and k ~= "cluster" and k ~= "seed" then
        error(("timeline.demo: unknown option '%s' (known: batch, steps, cluster, seed)"):format(tostring(k)), 2)
      end
    end
    local steps = opts.steps or 589
    local cluster = opts.cluster or 8
    local weights = spk.randn({ 2, 64, 64 }, { seed = opts.seed or 1, std = 0.125 })
    local ok, c = pcall(core.timeline_demo_new, { cluster = cluster, batch = opts.batch, steps = steps,
                                                   weights = weights })
    if not ok then error(c, 2) end
    local info = c:info()
    return setmetatable({ core = c, batch = opts.batch, steps = steps, cluster = cluster, hidden = info.hidden,
                          input = info.hidden, weights = weights, blocks = info.blocks, warps = info.warps,
                          threads = info.threads, tiles = info.tiles, tile_rows = info.tile_rows,
                          description = demo_description() }, demo_mt)
  end

  -- What a selection leaves out: the first 64 steps, the blocks of the first cluster.
  local function selection_defaults(self)
    return { steps = { 1, math.min(self.steps, 64) }, blocks = { 0, self.cluster - 1 } }
  end

  --- demo:forward(x[, {timeline = {...}}]) -> y[, info with info.timeline]
  function Demo:forward(x, opts)
    local c = open(self, 2)
    if opts == nil then
      local ok, y = pcall(c.forward, c, x)
      if not ok then error(y, 2) end
      return y
    end
    if type(opts) ~= "table" then error("forward: options must be a table {timeline = {...}}", 2) end
    for k in pairs(opts) do
      if k ~= "timeline" then error(("forward: unknown option '%s' (known: timeline)"):format(tostring(k)), 2) end
    end
    if opts.timeline == nil then return self:forward(x) end
    local sel, given = M.selection(opts.timeline, selection_defaults(self), 2)
    local ok, y, stamps, columns, clock = pcall(c.forward, c, x, sel)
    if not ok then error(y, 2) end
    return y, { timeline = M.make(stamps, columns, clock, self.description, given) }
  end

  --- demo:time{rounds = 7, warmup = 2, build = "plain" | "timeline", timeline = {...}} -> spk.bench's keys
  -- build "timeline" without a selection runs the instrumented kernel recording nothing.
  function Demo:time(opts)
    local c = open(self, 2)
    opts = opts or {}
    if type(opts) ~= "table" then error("time: options must be a table {rounds =, warmup =, x =, build =, timeline =}", 2) end
    for k in pairs(opts) do
      if k ~= "rounds" and k ~= "warmup" and k ~= "x" and k ~= "build" and k ~= "timeline" then
        error(("time: unknown option '%s' (known: rounds, warmup, x, build, timeline)"):format(tostring(k)), 2)
      end
    end
    local x = opts.x or spk.randn({ self.batch, self.steps, self.hidden }, { seed = 1 })
    local build = opts.build or (opts.timeline and "timeline" or "plain")
    local sel = opts.timeline and M.selection(opts.timeline, selection_defaults(self), 2) or nil
    local ok, ms = pcall(c.time, c, x, build, opts.rounds or 7, opts.warmup or 2, sel)
    if not ok then error(ms, 2) end
    local sorted = {}
    for i, v in ipairs(ms) do sorted[i] = v end
    table.sort(sorted)
    local median = M.percentile(sorted, 0.5)
    return { median_ms = median, min_ms = sorted[1], max_ms = sorted[#sorted],
             spread = (sorted[#sorted] - sorted[1]) / median, samples = ms }
  end

  function Demo:close()
    if self.core then self.core:close() end
    self.core = nil
  end

  function Demo:is_closed() return self.core == nil end
end

return setmetatable(M, { __call = install })
