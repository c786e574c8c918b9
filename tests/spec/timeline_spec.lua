-- Step timelines (docs/timeline.md): the selection a user gives, the decode of
-- synthetic raw buffers through the C part (known true times), the statistics
-- (hand-made cases, and random ones against NumPy), the critical path
-- (hand-made cases, and random ones against an exhaustive search of the
-- event graph), the report and the Gantt SVG, the experiment's --help and
-- its no-GPU exit; on a GPU, the demo kernel end to end: stamps monotone per
-- block, the same bits with and without the timeline build, the output
-- against an f64 reference, and the overhead measured.
local spk = require "spk"
local timeline = spk.timeline
local report = require "spk.report"
local plot = require "spk.plot"
local xml = require "xml_check"

local NAN = 0 / 0

-- ---------------------------------------------------------------- helpers

-- A small generator of the spec's own (the cases never change).
local function generator(seed)
  local state = seed * 2654435761 % 4294967296 + 1
  return function()
    state = (state * 1103515245 + 12345) % 2147483648
    return state / 2147483648
  end
end

-- A simulated recording: every block runs `steps` steps of `stages`; a wait
-- stage named in `waits` ends `latency` ns after the last publish of the
-- previous step over all blocks, or after its own minimum if that is later.
-- Returns a timeline table (rows of plain numbers, as a decode gives them)
-- and the true mark times truth[b][s][m] (m from 1: start).
local function simulate(o)
  local rand = generator(o.seed or 1)
  local stages, waits = o.stages or { "wait", "dot", "cell", "publish" }, o.waits or { wait = "publish" }
  local number = {}
  for k, name in ipairs(stages) do number[name] = k end
  local S, B, T = #stages, o.blocks or 4, o.steps or 6
  local first_step, first_block = o.first_step or 1, o.first_block or 0
  local truth, clock0 = {}, {}
  local t = {}
  for b = 0, B - 1 do
    t[b] = 1000 + 40 * rand()
    truth[b], clock0[b] = {}, 1e6 * (b + 1)
  end
  local publish_end = nil
  for s = first_step, first_step + T - 1 do
    local this_publish = {}
    for b = 0, B - 1 do
      local marks = { t[b] + (o.gap or 5) * rand() }
      for k = 1, S do
        local d = 10 + 200 * rand()
        local e = marks[k] + d
        local target = waits[stages[k]]
        if target and publish_end and publish_end[target] then
          e = math.max(marks[k] + 5 * rand(), publish_end[target] + (o.latency or 60) * rand())
        end
        marks[k + 1] = e
        this_publish[stages[k]] = math.max(this_publish[stages[k]] or -math.huge, e)
      end
      truth[b + first_block] = truth[b + first_block] or {}
      truth[b + first_block][s] = marks
      t[b] = marks[S + 1]
    end
    publish_end = this_publish
  end
  -- rows: block, step, marks (ns), marks (cycles at 2 GHz from the block's first stamp), marks (globaltimer)
  local columns = { "block", "step", "start" }
  for _, name in ipairs(stages) do columns[#columns + 1] = name end
  columns[#columns + 1] = "start_cycles"
  for _, name in ipairs(stages) do columns[#columns + 1] = name .. "_cycles" end
  columns[#columns + 1] = "start_globaltimer"
  for _, name in ipairs(stages) do columns[#columns + 1] = name .. "_globaltimer" end
  local rows = {}
  for b = first_block, first_block + B - 1 do
    local base = truth[b][first_step][1]
    for s = first_step, first_step + T - 1 do
      local m = truth[b][s]
      local row = { b, s }
      for i = 1, S + 1 do row[#row + 1] = m[i] end
      for i = 1, S + 1 do row[#row + 1] = (m[i] - base) * 2 end
      for i = 1, S + 1 do row[#row + 1] = math.floor(m[i]) end
      if o.drop and o.drop(b, s) then
        for i = 1, S + 1 do
          if o.drop(b, s, i) then row[2 + i], row[3 + S + i], row[4 + 2 * S + i] = NAN, NAN, NAN end
        end
      end
      rows[#rows + 1] = row
    end
  end
  local cols = {}
  for i, n in ipairs(columns) do cols[i] = { name = n } end
  return { stamps = rows, columns = cols, stages = stages, waits_for = waits, kernel = "simulated",
           selection = { layer = 1, direction = "forward", step_range = { first_step, first_step + T - 1 },
                         blocks = { first_block, first_block + B - 1 }, warp = 0 } }, truth
end

-- A timeline from explicit mark times: marks[b][s] = {start, end of stage 1, ...}.
local function from_marks(stages, waits, marks)
  local rows, blocks = {}, {}
  for b in pairs(marks) do blocks[#blocks + 1] = b end
  table.sort(blocks)
  for _, b in ipairs(blocks) do
    local steps = {}
    for s in pairs(marks[b]) do steps[#steps + 1] = s end
    table.sort(steps)
    for _, s in ipairs(steps) do
      local row = { b, s }
      for _, v in ipairs(marks[b][s]) do row[#row + 1] = v end
      for _, v in ipairs(marks[b][s]) do row[#row + 1] = v * 2 end
      rows[#rows + 1] = row
    end
  end
  local cols = { { name = "block" }, { name = "step" }, { name = "start" } }
  for _, n in ipairs(stages) do cols[#cols + 1] = { name = n } end
  cols[#cols + 1] = { name = "start_cycles" }
  for _, n in ipairs(stages) do cols[#cols + 1] = { name = n .. "_cycles" } end
  return { stamps = rows, columns = cols, stages = stages, waits_for = waits, kernel = "hand-made",
           selection = { layer = 1, direction = "forward", step_range = { 1, 1 }, blocks = { 0, 0 }, warp = 0 } }
end

-- ---------------------------------------------------------------- selection

describe("spk.timeline.selection", function()
  local defaults = { step_range = { 1, 64 }, blocks = { 0, 7 } }

  it("fills the defaults and gives the 0-based C form", function()
    local c, given = timeline.selection({}, defaults)
    assert.are.same({ layer = 0, direction = 0, first_step = 0, steps = 64, first_block = 0, blocks = 8, warp = 0 }, c)
    assert.are.same({ layer = 1, direction = "forward", step_range = { 1, 64 }, blocks = { 0, 7 }, warp = 0 }, given)
    -- a list of consecutive steps is the same selection
    local _, listed = timeline.selection({ steps = { 5, 6, 7 } }, defaults)
    assert.are.same({ 5, 7 }, listed.step_range)
    c = timeline.selection({ layer = 3, direction = "reverse", step_range = { 101, 164 }, blocks = { 2, 5 }, warp = 1 },
      defaults)
    assert.are.same({ layer = 2, direction = 1, first_step = 100, steps = 64, first_block = 2, blocks = 4, warp = 1 }, c)
  end)

  it("refuses what it cannot record, naming the option, at the caller's line", function()
    local cases = {
      { { layer = 0 }, "timeline.layer must be a layer number" },
      { { layer = 1.5 }, "timeline.layer must be a layer number" },
      { { direction = "up" }, 'timeline.direction must be "forward" or "reverse"' },
      { { step_range = 5 }, "timeline.step_range must be a range {first, last}" },
      { { step_range = { 1, 2, 3 } }, "a table of 3 entries" },
      { { step_range = { 10, 9 } }, "timeline.step_range = {10, 9}: needs 1 <= first <= last" },
      { { step_range = { 0, 9 } }, "needs 1 <= first" },
      -- steps is a list everywhere (as in traces): a range written there is named
      { { steps = { 101, 164 } }, "timeline.steps = {101, 164} is a list of steps, as in traces, and a timeline "
        .. "records consecutive ones; for the steps 101 to 164 write step_range = {101, 164}" },
      { { steps = { 3, 2, 1 } }, "timeline.steps = {3, 2, 1} is a list of steps" },
      { { steps = 5 }, "timeline.steps must be a list of steps" },
      { { steps = { 1, 2 }, step_range = { 1, 2 } }, "not both" },
      { { blocks = { -1, 3 } }, "timeline.blocks = {-1, 3}: needs 0 <= first" },
      { { warp = 32 }, "timeline.warp must be a warp of the block" },
      { { stepz = { 1, 2 } }, "unknown option 'stepz'" },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(timeline.selection, case[1], defaults)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(case[2], 1, true), tostring(err))
    end
    local ok, err = pcall(function() timeline.selection({ warp = -1 }, defaults) end)
    assert.is_false(ok)
    assert.matches("timeline_spec%.lua:%d+:", err)
    assert.is_false(pcall(timeline.selection, "all", defaults))
  end)
end)

-- ---------------------------------------------------------------- decode

-- A raw buffer as a timeline build leaves it: header, each block's anchor
-- (globaltimer, clock64 at SETUP), then for each block and step the marks'
-- (globaltimer, clock64), the globaltimer (rounded down to `quantum`) at the
-- step's start only, as SPK_TIMELINE_START reads it.
local function raw_buffer(truth, o)
  local marks, blocks, steps = o.marks, o.blocks, o.steps
  local words = 16 + 2 * blocks + blocks * steps * marks * 2
  local raw = spk.zeros({ words }, "u64")
  local header = { 0x31454d49544b5053, marks, o.direction or 0, o.first_step or 0, steps, o.first_block or 0,
                   blocks, o.warp or 0, o.layer or 0, marks }
  for i, v in ipairs(header) do raw:set(i, v) end
  local base = 1764580000000000000
  for b = 0, blocks - 1 do
    -- the anchor SETUP writes, 2 us before the block's first recorded step
    local t0 = truth[b][1][1] - 2000
    local g0 = base + math.floor(t0)
    raw:set(16 + 2 * b + 1, g0 - g0 % o.quantum)
    raw:set(16 + 2 * b + 2, 5000000000 * (b + 1) + math.floor(t0 * o.ghz + 0.5))
    for k = 0, steps - 1 do
      for m = 0, marks - 1 do
        local t = truth[b][k + 1][m + 1]
        if t then
          local at = 16 + 2 * blocks + ((b * steps + k) * marks + m) * 2
          local g = base + math.floor(t)
          raw:set(at + 1, m == 0 and g - g % o.quantum or 0) -- the globaltimer at a step's start only

          raw:set(at + 2, 5000000000 * (b + 1) + math.floor(t * o.ghz + 0.5))
        end
      end
    end
  end
  return raw, base
end

describe("spk.timeline.decode", function()
  it("turns a raw buffer into rows on one time base, named columns and the clock's fit", function()
    local stages = { "wait", "dot", "publish" }
    local _, truth0 = simulate { blocks = 3, steps = 40, stages = stages, seed = 7 }
    local truth = {}
    for b = 0, 2 do
      truth[b] = {}
      for s = 1, 40 do truth[b][s] = truth0[b][s] end
    end
    truth[1][5][3] = nil -- one mark never stamped
    local raw, base = raw_buffer(truth, { marks = 4, blocks = 3, steps = 40, quantum = 32, ghz = 1.755,
                                          first_step = 100, first_block = 8, direction = 1, layer = 2, warp = 1 })
    local tl = timeline.decode(raw, { stages = stages, waits_for = { wait = "publish" }, kernel = "synthetic" })
    assert.are.equal("synthetic", tl.kernel)
    assert.are.same({ layer = 3, direction = "reverse", step_range = { 101, 140 }, blocks = { 8, 10 }, warp = 1 },
      tl.selection)
    assert.are.same({ wait = "publish" }, tl.waits_for)
    local names = {}
    for i, c in ipairs(tl.columns) do names[i] = c.name end
    assert.are.same({ "block", "step", "start", "wait", "dot", "publish", "start_cycles", "wait_cycles", "dot_cycles",
                      "publish_cycles", "start_globaltimer", "wait_globaltimer", "dot_globaltimer",
                      "publish_globaltimer" }, names)
    assert.are.equal("cycles", tl.columns[8].unit)
    assert.are.same({ 120, 14 }, tl.stamps:shape())
    assert.is_true(tl.clock.fitted)
    assert.are.equal(32, tl.clock.quantum_ns)
    assert.near(1.755, tl.clock.cycles_per_ns, 1e-3)
    assert.are.equal(3, tl.clock.blocks)
    -- aligned times against the truth, from the earliest globaltimer reading
    local origin_offset = tl.clock.origin - base
    local worst = 0
    for r = 1, 120 do
      local b, s = tl.stamps:get(r, 1) - 8, tl.stamps:get(r, 2) - 100
      for m = 1, 4 do
        local v = tl.stamps:get(r, 2 + m)
        if truth[b][s][m] then
          worst = math.max(worst, math.abs(v - (truth[b][s][m] - origin_offset)))
        else
          assert.is_true(v ~= v) -- NaN where the kernel did not stamp
        end
      end
    end
    assert.is_true(worst < 3, "aligned within " .. worst .. " ns")
    -- block 8's first record, its first mark: 0 cycles; globaltimer columns only at the start
    assert.are.equal(8, tl.stamps:get(1, 1))
    assert.are.equal(101, tl.stamps:get(1, 2))
    assert.are.equal(0, tl.stamps:get(1, 7))
    assert.is_true(tl.stamps:get(1, 11) == tl.stamps:get(1, 11))
    local dot_globaltimer = tl.stamps:get(1, 13)
    assert.is_true(dot_globaltimer ~= dot_globaltimer)
  end)

  it("says what does not match", function()
    local raw = spk.zeros({ 16 + 2 + 2 * 4 * 2 }, "u64")
    local ok, err = pcall(timeline.decode, raw, { stages = { "a" } })
    assert.is_false(ok)
    assert.matches("does not start with a timeline header", err)
    ok, err = pcall(timeline.decode, raw, {})
    assert.is_false(ok)
    assert.matches("stages is required", err)
    -- the binding itself, with its optional rate left out
    ok, err = pcall(spk.core.timeline_decode, raw, { "a" })
    assert.is_false(ok)
    assert.matches("does not start with a timeline header", err)
    ok, err = pcall(spk.core.timeline_decode, raw, { "a", 3 })
    assert.is_false(ok)
    assert.matches("stage 2 must be named by a string", err)
    ok, err = pcall(timeline.decode, spk.zeros { 4 }, { stages = { "a" } })
    assert.is_false(ok)
    assert.matches("contiguous host u64 tensor", err)
  end)
end)

-- ---------------------------------------------------------------- statistics

local function find_row(rows, stage, block)
  for _, r in ipairs(rows) do
    if r.stage == stage and r.block == block then return r end
  end
end

describe("spk.timeline.stats", function()
  it("gives the median, p10 and p90 of every stage per block, the gap and the step", function()
    -- block 0: wait lasts 10, 20, 30, 40, 50 ns; work 5 each; gap 1; block 1 the same plus 100 on wait
    local marks = { [0] = {}, [1] = {} }
    for b = 0, 1 do
      local t = 0
      for s = 1, 5 do
        local wait = 10 * s + 100 * b
        marks[b][s] = { t, t + wait, t + wait + 5 }
        t = t + wait + 5 + 1
      end
    end
    local tl = from_marks({ "wait", "work" }, {}, marks)
    local rows = timeline.stats(tl)
    local w0 = find_row(rows, "wait", 0)
    assert.are.equal(5, w0.n)
    assert.are.equal(30, w0.median_ns)
    assert.near(14, w0.p10_ns, 1e-12) -- 10 + 0.4 * 10
    assert.near(46, w0.p90_ns, 1e-12)
    assert.are.equal(60, w0.median_cycles)
    local w1 = find_row(rows, "wait", 1)
    assert.are.equal(130, w1.median_ns)
    local all = find_row(rows, "wait", "all")
    assert.are.equal(10, all.n)
    assert.are.equal((50 + 110) / 2, all.median_ns)
    assert.are.equal(5, find_row(rows, "work", "all").median_ns)
    assert.are.equal(1, find_row(rows, "gap", 0).median_ns)
    assert.are.equal(4, find_row(rows, "gap", 0).n)
    -- step: start to next start = wait + 5 + 1 for steps 1..4: 16, 26, 36, 46
    local step = find_row(rows, "step", 0)
    assert.are.equal(4, step.n)
    assert.are.equal(31, step.median_ns)
  end)

  it("leaves out stages whose marks were not stamped", function()
    local tl = simulate { blocks = 2, steps = 5, drop = function(b, s, m)
      return b == 1 and s == 3 and (m == nil or m == 3)
    end }
    local rows = timeline.stats(tl)
    assert.are.equal(4, find_row(rows, "dot", 1).n)  -- its end (mark 3) is gone
    assert.are.equal(4, find_row(rows, "cell", 1).n) -- and so its start
    assert.are.equal(5, find_row(rows, "wait", 1).n)
    assert.are.equal(5, find_row(rows, "dot", 0).n)
  end)

  it("matches NumPy on random recordings", function()
    if not has_numpy() then pending("python3 with numpy is not available") return end
    local dir = spec_tmpdir()
    for seed = 1, 4 do
      local tl = simulate { blocks = 3 + seed % 3, steps = 20 + seed, seed = seed, gap = 30 }
      local rows = timeline.stats(tl)
      local m = spk.tensor(tl.stamps, "f64")
      local path = dir .. "/stamps.npy"
      m:save(path)
      local script = [[
import numpy as np, sys
a = np.load(sys.argv[1]); S = int(sys.argv[2])
for b in sorted(set(a[:, 0].astype(int))):
    r = a[a[:, 0] == b]; r = r[np.argsort(r[:, 1])]
    marks = r[:, 2:3 + S]
    series = {k: np.diff(marks, axis=1)[:, k] for k in range(S)}
    consecutive = np.diff(r[:, 1]) == 1
    series['gap'] = (marks[1:, 0] - marks[:-1, S])[consecutive]
    series['step'] = (marks[1:, 0] - marks[:-1, 0])[consecutive]
    for k, v in series.items():
        print(b, k, len(v), repr(float(np.percentile(v, 50))), repr(float(np.percentile(v, 10))),
              repr(float(np.percentile(v, 90))))
]]
      local sf = dir .. "/stats.py"
      local f = assert(io.open(sf, "w"))
      f:write(script)
      f:close()
      local p = io.popen(("%s %s %s %d"):format(PYTHON, shell_quote(sf), shell_quote(path), #tl.stages))
      local checked = 0
      for line in p:lines() do
        local b, k, n, med, p10, p90 = line:match("^(%d+) (%S+) (%d+) (%S+) (%S+) (%S+)$")
        local stage = tonumber(k) and tl.stages[tonumber(k) + 1] or k
        local row = find_row(rows, stage, tonumber(b))
        assert.is_truthy(row, line)
        assert.are.equal(tonumber(n), row.n)
        assert.near(tonumber(med), row.median_ns, 1e-9 * math.abs(tonumber(med)) + 1e-9)
        assert.near(tonumber(p10), row.p10_ns, 1e-9 * math.abs(tonumber(p10)) + 1e-9)
        assert.near(tonumber(p90), row.p90_ns, 1e-9 * math.abs(tonumber(p90)) + 1e-9)
        checked = checked + 1
      end
      p:close()
      assert.are.equal((#tl.stages + 2) * (3 + seed % 3), checked)
    end
    os.execute("rm -rf " .. shell_quote(dir))
  end)
end)

-- ---------------------------------------------------------------- critical path

-- The critical path by exhaustive search: every path of the event graph from
-- the end node back to a source (nodes: stamped marks of the window; edges:
-- the previous stamped mark of the same record, the gap from the same
-- block's previous step, and for a wait stage the waited-for stage's end in
-- every block at the previous step), keeping the one that takes at every node
-- its latest-arriving predecessor (ties: the same block's own mark first,
-- then the same block's publish, then the lowest block).
local function brute_force_path(tl, first, last)
  local rec = timeline.records(tl)
  local number = {}
  for k, n in ipairs(tl.stages) do number[n] = k end
  local function t(b, s, m)
    local r = rec.at[b] and rec.at[b][s]
    local v = r and r.t[m]
    return v and v == v and v or nil
  end
  local function preds(b, s, m)
    local out = {}
    if m == 1 then
      if s > first and rec.at[b][s - 1] then
        for j = #tl.stages + 1, 1, -1 do
          if t(b, s - 1, j) then
            out[#out + 1] = { b = b, s = s - 1, m = j, own = true, kind = "gap" }
            break
          end
        end
      end
      return out
    end
    for j = m - 1, 1, -1 do
      if t(b, s, j) then
        out[#out + 1] = { b = b, s = s, m = j, own = true }
        break
      end
    end
    local target = tl.waits_for[tl.stages[m - 1]]
    if target and s > first and #out > 0 then
      for _, b2 in ipairs(rec.blocks) do
        local m2 = number[target] + 1
        if t(b2, s - 1, m2) then out[#out + 1] = { b = b2, s = s - 1, m = m2, peer = true } end
      end
    end
    return out
  end
  local function better(p, q) -- p arrives later than q, or ties and comes first
    local tp, tq = t(p.b, p.s, p.m), t(q.b, q.s, q.m)
    if tp ~= tq then return tp > tq end
    local function rank(x) return x.own and 0 or (x.b == (x.self_b or -1) and 1 or 2) end
    if rank(p) ~= rank(q) then return rank(p) < rank(q) end
    return p.b < q.b
  end
  -- the end node
  local eb, em, et
  for _, b in ipairs(rec.blocks) do
    for m = #tl.stages + 1, 1, -1 do
      local v = t(b, last, m)
      if v then
        if not et or v > et then eb, em, et = b, m, v end
        break
      end
    end
  end
  -- every path back to a source, each as a list of edges (node, predecessor)
  local paths = {}
  local function walk(b, s, m, edges)
    local ps = preds(b, s, m)
    if #ps == 0 then
      paths[#paths + 1] = edges
      return
    end
    for _, p in ipairs(ps) do
      p.self_b = b
      local e = { b = b, s = s, m = m, p = p, choices = ps }
      local copy = { table.unpack(edges) }
      copy[#copy + 1] = e
      walk(p.b, p.s, p.m, copy)
    end
  end
  walk(eb, last, em, {})
  local chosen
  for _, edges in ipairs(paths) do
    local ok = true
    for _, e in ipairs(edges) do
      for _, q in ipairs(e.choices) do
        if q ~= e.p and better(q, e.p) then ok = false end
      end
    end
    if ok then
      assert.is_nil(chosen, "two paths both take their latest predecessors")
      chosen = edges
    end
  end
  -- as elements: an edge (node <- pred) is the interval [pred's time, node's time]
  local out = {}
  for i = #chosen, 1, -1 do
    local e = chosen[i]
    local stage = e.p.kind == "gap" and "gap" or tl.stages[e.m - 1]
    out[#out + 1] = { block = e.p.kind == "gap" and e.b or e.b, step = e.p.kind == "gap" and e.s - 1 or e.s,
                      stage = stage, from = t(e.p.b, e.p.s, e.p.m), to = t(e.b, e.s, e.m),
                      waited_for = e.p.peer and e.p.b or nil }
  end
  return out
end

local function same_elements(expected, path)
  assert.are.equal(#expected, #path.elements)
  for i, e in ipairs(expected) do
    local got = path.elements[i]
    for _, k in ipairs { "block", "step", "stage", "from", "to", "waited_for" } do
      assert.are.equal(e[k], got[k], ("element %d, %s"):format(i, k))
    end
  end
end

describe("spk.timeline.critical_path", function()
  local stages, waits = { "wait", "work", "publish" }, { wait = "publish" }

  it("follows the last publisher through the wait (two blocks, known times)", function()
    -- step 1: block 1 publishes late (at 100); step 2: both wait from 40 and 50, wake at 110 and 112
    local tl = from_marks(stages, waits, {
      [0] = { [1] = { 0, 5, 20, 30 }, [2] = { 40, 110, 130, 140 } },
      [1] = { [1] = { 0, 6, 60, 100 }, [2] = { 101, 112, 120, 125 } },
    })
    local path = timeline.critical_path(tl)
    same_elements({
      { block = 1, step = 1, stage = "wait", from = 0, to = 6 },
      { block = 1, step = 1, stage = "work", from = 6, to = 60 },
      { block = 1, step = 1, stage = "publish", from = 60, to = 100 },
      { block = 0, step = 2, stage = "wait", from = 100, to = 110, waited_for = 1 },
      { block = 0, step = 2, stage = "work", from = 110, to = 130 },
      { block = 0, step = 2, stage = "publish", from = 130, to = 140 },
    }, path)
    assert.are.equal(140, path.finish)
    assert.are.equal(0, path.start)
    assert.are.equal(140, path.total_ns)
    assert.are.equal(0, path.end_block)
    assert.are.same({ wait = 6 + 10, work = 54 + 20, publish = 40 + 10 }, path.by_stage)
  end)

  it("stays in its own block when the data was there before the wait began", function()
    local tl = from_marks(stages, waits, {
      [0] = { [1] = { 0, 5, 20, 30 }, [2] = { 200, 210, 230, 240 } },
      [1] = { [1] = { 0, 6, 60, 100 }, [2] = { 101, 112, 120, 125 } },
    })
    local path = timeline.critical_path(tl)
    same_elements({
      { block = 0, step = 1, stage = "wait", from = 0, to = 5 },
      { block = 0, step = 1, stage = "work", from = 5, to = 20 },
      { block = 0, step = 1, stage = "publish", from = 20, to = 30 },
      { block = 0, step = 1, stage = "gap", from = 30, to = 200 },
      { block = 0, step = 2, stage = "wait", from = 200, to = 210 },
      { block = 0, step = 2, stage = "work", from = 210, to = 230 },
      { block = 0, step = 2, stage = "publish", from = 230, to = 240 },
    }, path)
    -- a window of one step has no predecessor step to jump to
    local one = timeline.critical_path(tl, { step_range = { 2, 2 } })
    assert.are.same({ 2, 2 }, one.step_range)
    assert.are.equal(3, #one.elements)
    assert.are.equal(200, one.start)
  end)

  it("tiles the window and agrees with an exhaustive search on random recordings", function()
    local cases = 0
    for seed = 1, 40 do
      local blocks, steps = 2 + seed % 3, 3 + seed % 2
      local tl = simulate { blocks = blocks, steps = steps, seed = seed, latency = 30 + seed % 5 * 40,
        gap = seed % 2 == 0 and 80 or 4,
        drop = seed % 7 == 0 and function(b, s, m) return b == 1 and s == 2 and (m == nil or m == 3) end or nil }
      local path = timeline.critical_path(tl)
      same_elements(brute_force_path(tl, 1, steps), path)
      for i = 2, #path.elements do
        assert.are.equal(path.elements[i - 1].to, path.elements[i].from)
      end
      local sum = 0
      for _, e in ipairs(path.elements) do sum = sum + e.duration end
      assert.near(path.total_ns, sum, 1e-9 * path.total_ns)
      cases = cases + 1
    end
    assert.are.equal(40, cases)
  end)

  it("refuses a description that names no stage of the kernel", function()
    local tl = simulate { blocks = 2, steps = 2 }
    tl.waits_for = { wait = "push" }
    local ok, err = pcall(timeline.critical_path, tl)
    assert.is_false(ok)
    assert.matches("waits_for names stages of the kernel", err)
  end)
end)

-- ---------------------------------------------------------------- report and plot

describe("report.timeline and plot.timeline", function()
  it("prints every stage per block and for all blocks with its share of the critical path", function()
    local tl = simulate { blocks = 3, steps = 8, seed = 3 }
    local text = report.timeline(tl)
    assert.matches("step timeline: simulated, layer 1 forward, steps 1..8, blocks 0..2, warp 0", text)
    assert.matches("critical path over steps 1..8", text)
    for _, stage in ipairs { "wait", "dot", "cell", "publish", "gap", "step" } do
      assert.matches("\n" .. stage .. " +all", text)
      assert.matches("\n" .. stage .. " +2 ", text)
    end
    -- the shares of the path add up to the whole path
    local rows = report.timeline_rows(tl)
    local share = 0
    for _, r in ipairs(rows) do share = share + (r.path_share or 0) end
    assert.near(1, share, 1e-9)
    local short = report.timeline(tl, { per_block = false })
    assert.is_nil(short:find("\nwait +0 "))
    assert.truthy(report.csv_string(rows, { "stage", "block", "n", "median_ns", "path_share" }):find("wait,all,", 1, true))
  end)

  it("draws a well-formed Gantt of a few steps with the critical path outlined", function()
    local tl = simulate { blocks = 4, steps = 10, seed = 5 }
    local svg = plot.timeline(tl, { step_range = { 3, 6 } })
    assert.is_true(xml.check(svg))
    local bars, highlights, links, markers = 0, 0, 0, 0
    for _ in svg:gmatch('<rect class="bar"') do bars = bars + 1 end
    for _ in svg:gmatch('<rect class="highlight"') do highlights = highlights + 1 end
    for _ in svg:gmatch('<line class="link"') do links = links + 1 end
    for _ in svg:gmatch('<line class="marker"') do markers = markers + 1 end
    assert.are.equal(4 * 4 * 4, bars) -- 4 blocks x 4 steps x 4 stages
    local path = timeline.critical_path(tl, { step_range = { 3, 6 } })
    assert.are.equal(#path.elements, highlights)
    local jumps = 0
    for _, e in ipairs(path.elements) do
      if e.waited_for and e.waited_for ~= e.block then jumps = jumps + 1 end
    end
    assert.are.equal(jumps, links)
    assert.are.equal(4, markers)
    for b = 0, 3 do assert.truthy(svg:find(">block " .. b .. "<", 1, true)) end
    -- a bar sits inside the plot area, at its track's row
    local area_x, area_w = svg:match('<rect class="plot%-area" x="(%d+)" y="%d+" width="(%d+)"')
    for x, w in svg:gmatch('<rect class="bar"[^>]- x="([%d.]+)" y="[%d.]+" width="([%d.]+)"') do
      assert.is_true(tonumber(x) >= tonumber(area_x) - 0.01)
      assert.is_true(tonumber(x) + tonumber(w) <= tonumber(area_x) + tonumber(area_w) + 0.6)
    end
    -- the default window and the demo-like escaping of names
    tl.kernel = "a <kernel> & co"
    assert.is_true(xml.check(plot.timeline(tl)))
  end)

  it("refuses bad Gantt input, naming it", function()
    local ok, err = pcall(plot.gantt, { tracks = { "a" }, categories = { "x" },
                                        bars = { { track = 1, from = 2, to = 1, category = "x" } } })
    assert.is_false(ok)
    assert.matches("bar 1 needs finite from <= to", err)
    ok, err = pcall(plot.gantt, { tracks = { "a" }, categories = { "x" },
                                  bars = { { track = 2, from = 0, to = 1, category = "x" } } })
    assert.is_false(ok)
    assert.matches("track must be 1 .. 1", err)
    ok, err = pcall(plot.gantt, { tracks = { "a" }, categories = { "x" },
                                  bars = { { track = 1, from = 0, to = 1, category = "y" } } })
    assert.is_false(ok)
    assert.matches("category y is not among the categories", err)
    ok, err = pcall(plot.timeline, simulate { blocks = 2, steps = 3 }, { step_range = { 3, 1 } })
    assert.is_false(ok)
    assert.matches("plot.timeline.step_range = {3, 1}: needs 1 <= first <= last", err, 1, true)
    ok, err = pcall(plot.timeline, simulate { blocks = 2, steps = 3 }, { steps = { 1, 3 } })
    assert.is_false(ok)
    assert.matches("write step_range = {1, 3}", err, 1, true)
  end)
end)

-- ---------------------------------------------------------------- the experiment

describe("experiments/step_timeline.lua", function()
  local program = (os.getenv("BUILD") or "build") .. "/spk"
  local function run(args)
    local p = io.popen(program .. " run experiments/step_timeline.lua " .. args .. " 2>&1; echo \"exit=$?\"")
    local out = p:read("a")
    p:close()
    return tonumber(out:match("exit=(%d+)%s*$")), out
  end

  it("--help lists its options and exits 0; a bad option exits 2", function()
    local code, out = run("--help")
    assert.are.equal(0, code, out)
    for _, option in ipairs { "--quick", "--batch", "--backend", "--out", "--steps", "--warp", "--help" } do
      assert.truthy(out:find(option, 1, true), option)
    end
    assert.matches("Needs a CUDA GPU", out)
    code, out = run("--no-such-option")
    assert.are.equal(2, code)
    assert.matches("unknown option", out)
  end)

  it("takes --batch as well as --batches (every experiment)", function()
    local experiment = require "spk.experiment"
    local spec = { name = "x", batches = { 1, 8 }, options = { { "steps", 64 } } }
    assert.are.same({ 1, 8, 64 }, experiment.parse(spec, { "--batch", "1,8,64" }).batches)
    assert.are.same({ 4 }, experiment.parse(spec, { "--batch=4" }).batches)
    assert.are.same({ 2 }, experiment.parse(spec, { "--batches", "2" }).batches)
    -- a script with its own --batch option keeps it
    local own = experiment.parse({ name = "y", batches = { 1 }, options = { { "batch", 3 } } }, { "--batch", "5" })
    assert.are.same({ 1 }, own.batches)
    assert.are.equal(5, own.opts.batch)
  end)

  nogpu_it("without a GPU says so, exits 3 and writes nothing", function()
    local dir = spec_tmpdir()
    local code, out = run("--quick --out " .. shell_quote(dir .. "/out"))
    assert.are.equal(3, code, out)
    assert.matches("step_timeline: needs a CUDA GPU", out)
    assert.matches("Nothing was run", out)
    assert.is_false(os.execute("test -e " .. shell_quote(dir .. "/out")) == true)
    os.execute("rm -rf " .. shell_quote(dir))
  end)
end)

-- ---------------------------------------------------------------- on the GPU

-- The demo's recurrence in f64: h_d(t) = tanh(W_d h_d(prev) + x[b][t]), the
-- reverse direction from the last time position back.
local function demo_reference(weights, x)
  local s = x:shape()
  local B, T, H = s[1], s[2], s[3]
  local w = weights:tolist()
  local xs = x:tolist()
  local y = spk.zeros({ B, T, 2 * H }, "f64")
  local function tanh(v)
    if v > 20 then return 1 elseif v < -20 then return -1 end
    local e = math.exp(2 * v)
    return (e - 1) / (e + 1)
  end
  for b = 1, B do
    for d = 1, 2 do
      local h = {}
      for u = 1, H do h[u] = 0 end
      for step = 1, T do
        local t = d == 1 and step or T - step + 1
        local nh = {}
        for u = 1, H do
          local acc, row = 0, w[d][u]
          for j = 1, H do acc = acc + row[j] * h[j] end
          nh[u] = tanh(acc + xs[b][t][u])
          y:set(b, t, (d - 1) * H + u, nh[u])
        end
        h = nh
      end
    end
  end
  return y
end

local function sm90()
  if not spk.cuda.available() then return false end
  local ok, info = pcall(spk.cuda.device, 0)
  return ok and info and (info.cc_major or 0) >= 9
end

describe("the timeline demo on the GPU", function()
  gpu_it("records monotone stamps for every selected block and step, the same bits as the plain build", function()
    if not sm90() then pending("needs compute capability 9.0") return end
    local demo <close> = spk.timeline.demo { batch = 3, steps = 96, cluster = 4 }
    local x = spk.randn({ 3, 96, 64 }, { seed = 4 })
    local plain = demo:forward(x)
    local y, info = demo:forward(x, { timeline = { step_range = { 11, 42 }, blocks = { 0, 3 } } })
    assert.bits_equal(plain, y)
    local tl = info.timeline
    assert.are.same({ 4 * 32, 2 + 3 * 6 }, tl.stamps:shape())
    assert.are.same({ "wait", "dot", "reduce", "cell", "publish" }, tl.stages)
    local rec = timeline.records(tl)
    assert.are.same({ 0, 1, 2, 3 }, rec.blocks)
    assert.are.equal(32, #rec.steps)
    for _, b in ipairs(rec.blocks) do
      local previous_end, previous_cycles
      for _, s in ipairs(rec.steps) do
        local r = rec.at[b][s]
        for m = 1, 6 do
          assert.is_true(r.t[m] == r.t[m], ("block %d step %d mark %d stamped"):format(b, s, m))
          if m > 1 then
            assert.is_true(r.cycles[m] > r.cycles[m - 1], ("block %d step %d: cycles of mark %d"):format(b, s, m))
            assert.is_true(r.t[m] >= r.t[m - 1])
          end
        end
        if previous_end then
          assert.is_true(r.cycles[1] > previous_cycles)
          assert.is_true(r.t[1] >= previous_end)
        end
        previous_end, previous_cycles = r.t[6], r.cycles[6]
      end
    end
    local c = tl.clock
    print(("\n  demo clock: %.4f cycles/ns (%s), globaltimer step %g ns, residual %.1f ns"):format(c.cycles_per_ns,
      c.fitted and "fitted" or "given", c.quantum_ns, c.residual_ns))
    assert.is_true(c.cycles_per_ns > 0.5 and c.cycles_per_ns < 3.5)
    assert.is_true(c.residual_ns <= math.max(c.quantum_ns, 50))
    io.write(report.timeline(tl, { per_block = false }))
    local path = timeline.critical_path(tl)
    assert.is_true(#path.elements >= 5 * 30)
    assert.is_true(xml.check(plot.timeline(tl)))
  end)

  gpu_it("computes the demo's recurrence (f64 reference), in both directions", function()
    if not sm90() then pending("needs compute capability 9.0") return end
    local demo <close> = spk.timeline.demo { batch = 2, steps = 40, cluster = 8 }
    local x = spk.randn({ 2, 40, 64 }, { seed = 9 })
    local y = demo:forward(x, { timeline = { direction = "reverse", step_range = { 1, 40 }, blocks = { 4, 7 } } })
    assert.tensor_near(y:to("f64"), demo_reference(demo.weights, x), { rel_l2 = 1e-5, max_abs = 1e-5 })
  end)

  gpu_it("records exactly the blocks, direction and warp selected", function()
    if not sm90() then pending("needs compute capability 9.0") return end
    local demo <close> = spk.timeline.demo { batch = 20, steps = 30, cluster = 2 } -- 3 tiles: blocks 0..5
    local x = spk.randn({ 20, 30, 64 }, { seed = 2 })
    local _, info = demo:forward(x, { timeline = { direction = "reverse", step_range = { 30, 30 }, blocks = { 3, 5 },
                                                   warp = 3 } })
    local rec = timeline.records(info.timeline)
    assert.are.same({ 3, 4, 5 }, rec.blocks)
    assert.are.same({ 30 }, rec.steps)
    -- the last step publishes no h, but still stamps every mark
    for _, b in ipairs(rec.blocks) do assert.is_true(rec.at[b][30].t[6] == rec.at[b][30].t[6]) end
    local ok, err = pcall(demo.forward, demo, x, { timeline = { blocks = { 0, 6 } } })
    assert.is_false(ok)
    assert.matches("block 6 is past the last block of a direction, 5", err)
    ok, err = pcall(demo.forward, demo, x, { timeline = { warp = 8 } }) -- 256 threads a block
    assert.is_false(ok)
    assert.matches("warp 8 is past the last warp of a block, 7", err)
  end)

  gpu_it("measures what the timeline build costs", function()
    if not sm90() then pending("needs compute capability 9.0") return end
    local demo <close> = spk.timeline.demo { batch = 1, steps = 589, cluster = 8 }
    local x = spk.randn({ 1, 589, 64 }, { seed = 1 }):cuda()
    local sel = { step_range = { 1, 589 }, blocks = { 0, 7 } }
    local plain, idle, recording = {}, {}, {}
    for _ = 1, 3 do -- in turn, so clock changes hit all three alike
      plain[#plain + 1] = demo:time { x = x, rounds = 9 }.median_ms
      idle[#idle + 1] = demo:time { x = x, rounds = 9, build = "timeline" }.median_ms
      recording[#recording + 1] = demo:time { x = x, rounds = 9, timeline = sel }.median_ms
    end
    local function median(v)
      table.sort(v)
      return v[2]
    end
    local p, i, r = median(plain), median(idle), median(recording)
    print(("\n  demo, batch 1, 589 steps, cluster 8: plain %.4f ms, timeline build recording nothing %.4f ms "
      .. "(%+.1f%%), recording every step of 8 blocks %.4f ms (%+.1f%%, %+.1f ns a step)"):format(p, i,
      100 * (i / p - 1), r, 100 * (r / p - 1), (r - p) * 1e6 / 589))
    assert.is_true(r < 2 * p, "the recording build more than doubles the step")
    assert.is_true(i < 1.5 * p)
  end)
end)
