-- The analysis behind spk.timeline (lua/spk/timeline.lua installs it, with
-- the decode and the demo that need spk's C part): plain Lua over the table a
-- timeline forward returns (docs/timeline.md), so spk.report and spk.plot use
-- it without the C part and specs feed it hand-made recordings:
--
--   local y, info = plan:forward(x, {timeline = {layer = 1, direction = "forward",
--                                                step_range = {101, 164}, blocks = {0, 7}, warp = 0}})
--   local tl = info.timeline
--   tl.stamps      host f64 tensor [records, columns]: one row per (block, step) recorded
--   tl.columns     {{name =, unit =, about =}, ...}: block, step, then for each mark (start,
--                  then the end of each stage) its aligned time (ns), its cycles, its globaltimer
--   tl.stages      {"wait", "dot", ...}: the kernel's stages, in the order a step runs them
--   tl.waits_for   {wait = "publish"}: a stage that waits for every block's end of a stage at
--                  the previous step (the exchange of h); the critical path follows it
--   tl.clock       {cycles_per_ns =, fitted =, quantum_ns =, residual_ns =, origin =, ...}
--   tl.selection   the selection, as given (1-based layer and step_range, 0-based blocks and warp)
--   tl.kernel      what recorded it ("timeline demo", "cluster", ...)
--
--   timeline.selection(t[, defaults]) -> the C form (0-based) of a user's selection, and
--                              the selection as recorded (defaults filled in)
--   timeline.make(stamps, columns, clock, description, selection) -> the table a timeline
--                              forward returns (description: {stages =, waits_for =, kernel =})
--   timeline.records(tl)       -> {blocks = {b, ...}, steps = {s, ...}, at = {[b] = {[s] = record}}}
--                                 record = {t = {start, end of stage 1, ...}, cycles = {...}} (NaN: unstamped)
--   timeline.durations(tl)     -> {[name] = {[block] = {ns...}, all = {ns...}}, cycles alike}
--   timeline.stats(tl[, {path = critical_path}])
--                              -> rows {stage =, block = b | "all", n =, median_ns =, p10_ns =,
--                                 p90_ns =, median_cycles =, p10_cycles =, p90_cycles =}
--                                 for every stage, then "gap" and "step" (see below); with a
--                                 path, the "all" rows also carry path_ns and path_share (of
--                                 the path's total time, that stage's intervals on it)
--   timeline.critical_path(tl[, {step_range = {first, last}}]) -> path (see below)
--   timeline.critical_view(tl[, {step_range =, wait_floor_ns = 20}]) -> view: the path read a step
--                              at a time, the exchange as a stage (see below)
--   timeline.describe_view(view) -> its text: the chain, what ran under the exchange, the
--                              stage to attack next
--   timeline.load_stamps(path[, {waits_for =, kernel =}]) -> tl from a stamps CSV as
--                              experiments/step_timeline.lua writes it (stamps_b<B>.csv): the
--                              stages are the columns after start, before the first _cycles one;
--                              waits_for defaults to {wait = "publish"} (and wait_2 = "publish_2")
--   timeline.step_range(t, where) -> first, last: the steps an option table names (below)
--
-- Steps: `steps` is a list of steps everywhere in spk (traces' steps = {1, 5}
-- are steps 1 and 5); a timeline records consecutive steps, so its options
-- take step_range = {first, last}, or steps = a list of consecutive steps
-- ({5, 6, 7}). A list that is not consecutive ({5, 9}: steps 5 and 9) is an
-- error that names step_range.
--   timeline.percentile(sorted, p) -> linear interpolation between closest ranks (NumPy's default)
--   spk.timeline.decode and spk.timeline.demo: lua/spk/timeline.lua (they need spk's C part)
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
--           start =, finish =, total_ns =, by_stage = {[name] = ns}, step_range = {first, last}}
-- Only recorded blocks are candidates for b*: record a whole cluster to see the path.
--
-- The view (critical_view): a publish's stamp says when the last push was issued, not when
-- it landed, so a waiter may start waiting after every block's publish and still wait (the
-- data in flight). The view treats a wait longer than wait_floor_ns (what a wait costs when
-- its data is there) as held by the exchange: its element is "exchange", from the latest
-- end of the stage it waits for at the previous step (over the recorded blocks) to the
-- wait's end, and the waiting block's own stages in that interval (the fetch, the gap) ran
-- under it: they hold the step only once the exchange is shorter than they are.
--   view = {path =, steps = the whole steps read (the window's but its first and last), step_ns = the
--           path's ns a step, chain = {{stage =, ns =, share =}, ...} (a step, in step order, "exchange" first), hidden = {{stage =, ns =}, ...} (under the
--           exchange, a step), attack = {stage =, ns =, share =[, room_ns =, under_ns =]} (the
--           longest element; for the exchange, how much of it can go before the work under it
--           holds the step), jumps =, blocks =, wait_floor_ns =}
local options = require "spk.options"

local M = {}

local function is_number(x) return type(x) == "number" and x == x end

-- ---------------------------------------------------------------- selection

-- (Errors need no level: spk.errors reports them at the caller's line.)
local function range(value, name, base, where)
  where = where or "timeline"
  if type(value) ~= "table" or #value ~= 2 or math.type(value[1]) ~= "integer" or math.type(value[2]) ~= "integer" then
    error(("%s.%s must be a range {first, last} of integers (from %d), got %s"):format(where, name, base,
      type(value) == "table" and ("a table of %d entries"):format(#value) or tostring(value)))
  end
  if value[1] < base or value[2] < value[1] then
    error(("%s.%s = {%d, %d}: needs %d <= first <= last"):format(where, name, value[1], value[2], base))
  end
  return value[1], value[2]
end

function M.step_range(t, where)
  if t.step_range ~= nil and t.steps ~= nil then
    error(("%s: give steps (a list of steps) or step_range = {first, last}, not both"):format(where))
  end
  if t.step_range ~= nil then return range(t.step_range, "step_range", 1, where) end
  local s = t.steps
  if s == nil then return nil end
  if type(s) ~= "table" or #s == 0 then
    error(("%s.steps must be a list of steps (or give step_range = {first, last}), got %s"):format(where,
      type(s) == "table" and "an empty table" or tostring(s)))
  end
  for i = 1, #s do
    if math.type(s[i]) ~= "integer" or s[i] ~= s[1] + i - 1 then
      local shown = {}
      for j = 1, math.min(#s, 6) do shown[j] = tostring(s[j]) end
      local hint = #s == 2 and math.type(s[1]) == "integer" and math.type(s[2]) == "integer"
        and ("; for the steps %d to %d write step_range = {%d, %d}"):format(s[1], s[2], s[1], s[2]) or ""
      error(("%s.steps = {%s%s} is a list of steps, as in traces, and a timeline records consecutive ones%s")
        :format(where, table.concat(shown, ", "), #s > 6 and ", ..." or "", hint))
    end
  end
  if s[1] < 1 then error(("%s.steps: steps count from 1, got %d"):format(where, s[1])) end
  return s[1], s[#s]
end

-- t: {layer = 1, direction = "forward" | "reverse", step_range = {first, last} (from 1;
-- or steps = a list of consecutive steps), blocks = {first, last} (from 0), warp = 0};
-- defaults: {step_range = {..}, blocks = {..}}.
-- Returns the C selection (0-based) and the selection as recorded (defaults filled).
function M.selection(t, defaults)
  if type(t) ~= "table" then
    error(("timeline must be a table {layer =, direction =, step_range = {first, last}, blocks = {first, last}, "
      .. "warp =}, got %s"):format(options.type_name(t)))
  end
  options.check_keys(t, { "layer", "direction", "steps", "step_range", "blocks", "warp" }, "timeline")
  defaults = options.check_keys(defaults, { "step_range", "blocks" }, "timeline.selection defaults")
  local layer = t.layer == nil and 1 or t.layer
  if math.type(layer) ~= "integer" or layer < 1 then
    error(("timeline.layer must be a layer number (from 1), got %s"):format(tostring(layer)))
  end
  local direction = t.direction == nil and "forward" or t.direction
  if direction ~= "forward" and direction ~= "reverse" then
    error(("timeline.direction must be \"forward\" or \"reverse\", got %s"):format(tostring(direction)))
  end
  local s1, s2 = M.step_range(t, "timeline")
  if s1 == nil then s1, s2 = range(defaults.step_range, "step_range", 1) end
  local b1, b2 = range(t.blocks == nil and defaults.blocks or t.blocks, "blocks", 0)
  local warp = t.warp == nil and 0 or t.warp
  if math.type(warp) ~= "integer" or warp < 0 or warp > 31 then
    error(("timeline.warp must be a warp of the block (0 .. 31), got %s"):format(tostring(warp)))
  end
  local c = { layer = layer - 1, direction = direction == "reverse" and 1 or 0, first_step = s1 - 1,
              steps = s2 - s1 + 1, first_block = b1, blocks = b2 - b1 + 1, warp = warp }
  local given = { layer = layer, direction = direction, step_range = { s1, s2 }, blocks = { b1, b2 }, warp = warp }
  return c, given
end

-- The table every timeline forward returns, from what the decode gave.
function M.make(stamps, columns, clock, description, selection)
  if type(description) ~= "table" then
    error(("timeline.make: description must be a table {stages =, waits_for =, kernel =}, got %s")
      :format(options.type_name(description)))
  end
  options.check_keys(description, { "stages", "waits_for", "kernel" }, "timeline.make: description")
  local waits_for = {}
  for stage, target in pairs(description.waits_for or {}) do waits_for[stage] = target end
  return { stamps = stamps, columns = columns, clock = clock, stages = description.stages, waits_for = waits_for,
           selection = selection, kernel = description.kernel }
end

-- ---------------------------------------------------------------- a recording read back

-- The waits of the built-in kernels' stage lists and what each waits for ({wait = "publish", ...}: the
-- families' own tables, kernels/lstm_timeline_stages.cuh), for a stamps CSV that names its stages only.
local function builtin_waits()
  local spk = require "spk"
  local out = {}
  for _, f in ipairs(require("spk.core").kernel_families()) do
    for _, batch in ipairs { 1, 256 } do -- one row phase and two
      local v = spk.lstm.kernel_variant { backend = f.backend, batch = batch }
      for wait, publish in pairs(v.timeline.waits_for) do out[wait] = publish end
    end
  end
  return out
end

function M.load_stamps(path, opts)
  opts = options.check_keys(opts, { "waits_for", "kernel" }, "timeline.load_stamps")
  if type(path) ~= "string" then
    error(("timeline.load_stamps: path must be a string, got %s"):format(options.type_name(path)))
  end
  local f, why = io.open(path)
  if not f then error(("timeline.load_stamps: cannot open %s: %s"):format(path, tostring(why))) end
  local header = f:read("l") or ""
  local names = {}
  for n in header:gmatch("[^,]+") do names[#names + 1] = n end
  if names[1] ~= "block" or names[2] ~= "step" or names[3] ~= "start" then
    f:close()
    error(("timeline.load_stamps: %s is no stamps CSV (its header must start block,step,start, got %q)")
      :format(path, header:sub(1, 40)))
  end
  local stages = {}
  for i = 4, #names do
    if names[i]:find("_cycles$") then break end
    stages[#stages + 1] = names[i]
  end
  local rows, n = {}, 1
  for line in f:lines() do
    n = n + 1
    local row = {}
    for v in line:gmatch("[^,]+") do
      local x = v == "nan" and 0 / 0 or tonumber(v)
      if x == nil then
        f:close()
        error(("timeline.load_stamps: %s line %d: %q is not a number"):format(path, n, v))
      end
      row[#row + 1] = x
    end
    if #row ~= #names then
      f:close()
      error(("timeline.load_stamps: %s line %d has %d fields, the header %d"):format(path, n, #row, #names))
    end
    rows[#rows + 1] = row
  end
  f:close()
  local waits_for = opts.waits_for
  if waits_for == nil then
    waits_for = {}
    local has = {}
    for _, name in ipairs(stages) do has[name] = true end
    for wait, publish in pairs(builtin_waits()) do
      if has[wait] and has[publish] then waits_for[wait] = publish end
    end
  end
  return { stamps = rows, columns = names, stages = stages, waits_for = waits_for, kernel = opts.kernel or path }
end

-- ---------------------------------------------------------------- records

-- The rows of tl.stamps as Lua tables (a tensor's tolist, or a list already).
local function rows_of(stamps)
  if type(stamps) == "table" then return stamps end
  if stamps == nil or type(stamps.tolist) ~= "function" then
    error("timeline: stamps must be a tensor [records, columns] or a list of rows")
  end
  local shape = stamps:shape()
  if #shape ~= 2 then error("timeline: stamps must be a 2-d tensor [records, columns]") end
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
    error("timeline: expects the table a timeline forward returns ({stamps =, columns =, stages =, ...})")
  end
  local col = column_index(tl)
  local marks = { "start" }
  for k, name in ipairs(tl.stages) do marks[k + 1] = name end
  local tcol, ccol = {}, {}
  for m, name in ipairs(marks) do
    tcol[m], ccol[m] = col[name], col[name .. "_cycles"]
    if not tcol[m] or not ccol[m] then
      error(("timeline: no column '%s' (and '%s_cycles') for mark %d"):format(name, name, m - 1))
    end
  end
  if not col.block or not col.step then error("timeline: the columns need block and step") end
  local at, blocks, steps, seen_b, seen_s = {}, {}, {}, {}, {}
  for _, row in ipairs(rows_of(tl.stamps)) do
    local b, s = math.tointeger(row[col.block]), math.tointeger(row[col.step])
    if not b or not s then error("timeline: a record's block and step must be integers") end
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
  local path = options.check_keys(opts, { "path" }, "timeline.stats").path
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
        :format(table.concat(tl.stages, ", "), tostring(stage), tostring(target)))
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

-- The walk behind critical_path and critical_view. floor nil: a wait is followed to the
-- block it waited for only when that block's end came after the wait began; floor a
-- number: also when the wait lasted longer than floor ns (it waited for data), and then
-- its element is the exchange, from that end to the wait's end.
local function walk(tl, opts, floor, where)
  local rec = M.records(tl)
  local waits = stage_numbers(tl)
  if #rec.steps == 0 then error("timeline: no records") end
  local first, last = rec.steps[1], rec.steps[#rec.steps]
  local f, l = M.step_range(opts, where)
  if f then first, last = f, l end
  -- the end: the latest last mark at the window's last step
  local b_end, m_end, t_end
  for _, b in ipairs(rec.blocks) do
    local r = rec.at[b][last]
    local m = r and last_mark(r)
    if m and (t_end == nil or r.t[m] > t_end) then b_end, m_end, t_end = b, m, r.t[m] end
  end
  if not b_end then error(("timeline: no block has a stamp at step %d"):format(last)) end
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
        local held = floor and r.t[m] - r.t[j] > floor
        if D and (D > r.t[j] or held) then
          local e = { block = b, step = s, stage = tl.stages[k], from = math.min(D, r.t[m]), to = r.t[m],
                      waited_for = b_star }
          if floor then e.stage, e.wait, e.waited_from = "exchange", tl.stages[k], r.t[j] end
          emit(e)
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
           step_range = { first, last }, end_block = b_end }, rec
end

function M.critical_path(tl, opts)
  opts = options.check_keys(opts, { "steps", "step_range" }, "timeline.critical_path")
  return (walk(tl, opts, nil, "timeline.critical_path"))
end

-- ---------------------------------------------------------------- the critical path, a step

-- The stages of block b between time `from` and `to` (its records' intervals clipped to
-- them, the gap between steps included): what ran under an exchange.
local function block_stages_between(tl, rec, b, s_from, s_to, from, to, into)
  for s = s_from, s_to do
    local r = rec.at[b] and rec.at[b][s]
    if r then
      local prev_t
      for m = 1, #r.t do
        local t = r.t[m]
        if is_number(t) then
          local name = m == 1 and "gap" or tl.stages[m - 1]
          local t0 = prev_t
          if m == 1 then
            local p = rec.at[b][s - 1]
            local pm = p and last_mark(p)
            t0 = pm and p.t[pm] or nil
          end
          if t0 then
            local a, z = math.max(t0, from), math.min(t, to)
            if z > a then into[name] = (into[name] or 0) + (z - a) end
          end
          prev_t = t
        end
      end
    end
  end
end

function M.critical_view(tl, opts)
  opts = options.check_keys(opts, { "steps", "step_range", "wait_floor_ns" }, "timeline.critical_view")
  local floor = opts.wait_floor_ns == nil and 20 or opts.wait_floor_ns
  if type(floor) ~= "number" or floor < 0 then
    error(("timeline.critical_view: wait_floor_ns must be a number of ns >= 0, got %s"):format(tostring(floor)))
  end
  local path, rec = walk(tl, opts, floor, "timeline.critical_view")
  -- the window's first and last steps are on the path only in part: a step's figures are
  -- those of the whole steps between them (an element's step: its record's; a gap's: the
  -- step it follows)
  local first, last = path.step_range[1] + 1, path.step_range[2] - 1
  local steps = last - first + 1
  if steps < 1 then error("timeline.critical_view: needs a window of at least three steps") end
  local by_stage, total, hidden, blocks, jumps = {}, 0, {}, {}, 0
  for _, e in ipairs(path.elements) do
    if e.step >= first and e.step <= last then
      blocks[e.block] = true
      by_stage[e.stage] = (by_stage[e.stage] or 0) + e.duration
      total = total + e.duration
      if e.waited_for and e.waited_for ~= e.block then jumps = jumps + 1 end
      if e.stage == "exchange" then
        block_stages_between(tl, rec, e.block, e.step - 1, e.step, e.from, e.waited_from, hidden)
      end
    end
  end
  local per_step = total / steps
  local chain = {}
  local order = { "exchange" }
  for _, name in ipairs(tl.stages) do order[#order + 1] = name end
  order[#order + 1] = "gap"
  for _, name in ipairs(order) do
    local ns = by_stage[name]
    if ns and ns > 0 then chain[#chain + 1] = { stage = name, ns = ns / steps, share = ns / total } end
  end
  local under = {}
  for _, name in ipairs(order) do
    if hidden[name] then under[#under + 1] = { stage = name, ns = hidden[name] / steps } end
  end
  local attack
  for _, c in ipairs(chain) do
    if not attack or c.ns > attack.ns then attack = { stage = c.stage, ns = c.ns, share = c.share } end
  end
  if attack and attack.stage == "exchange" then
    local beneath = 0
    for _, h in ipairs(under) do beneath = beneath + h.ns end
    attack.room_ns = math.max(0, attack.ns - beneath - floor)
    attack.under_ns = beneath
  end
  local n_blocks = 0
  for _ in pairs(blocks) do n_blocks = n_blocks + 1 end
  return { path = path, steps = steps, step_ns = per_step, chain = chain, hidden = under, attack = attack,
           jumps = jumps, blocks = n_blocks, wait_floor_ns = floor }
end

-- One paragraph of text for a view: the chain a step, what ran under the exchange, the
-- stage to attack next.
function M.describe_view(view)
  local parts = {}
  for _, c in ipairs(view.chain) do parts[#parts + 1] = ("%s %.1f (%.0f%%)"):format(c.stage, c.ns, 100 * c.share) end
  local lines = { ("critical path a step: %.1f ns = %s"):format(view.step_ns, table.concat(parts, " > ")) }
  if #view.hidden > 0 then
    local h = {}
    for _, x in ipairs(view.hidden) do h[#h + 1] = ("%s %.1f"):format(x.stage, x.ns) end
    lines[#lines + 1] = ("  under the exchange (off the path while it lasts longer): %s"):format(table.concat(h, ", "))
  end
  lines[#lines + 1] = ("  over %d whole steps; the path runs through %d block%s, %d of its exchanges from another "
    .. "block"):format(view.steps, view.blocks, view.blocks == 1 and "" or "s", view.jumps)
  local a = view.attack
  if a then
    local room = ""
    if a.room_ns then
      room = ("; %.1f ns of it can go before the %.1f ns under it hold the step"):format(a.room_ns, a.under_ns)
    end
    lines[#lines + 1] = ("  attack next: %s, %.1f ns a step (%.0f%%)%s"):format(a.stage, a.ns, 100 * a.share, room)
  end
  return table.concat(lines, "\n") .. "\n"
end

return M
