-- spk.timeline.critical_view (lua/spk/timeline_analysis.lua): the critical path
-- read a step at a time, the exchange as a stage, and the stage to attack next;
-- on the cluster kernel's recorded timelines of the H200 (batch 1, 8 and 64:
-- docs/results/2026-12-01-h200-stack/step_timeline/stamps_b*.csv, as
-- experiments/step_timeline.lua wrote them) and on hand-made ones. No GPU.
local spk = require "spk"
local timeline = spk.timeline

local RECORDED = "docs/results/2026-12-01-h200-stack/step_timeline/stamps_b%d.csv"

local function load_recording(batch) return timeline.load_stamps(RECORDED:format(batch)) end

local function median_of(tl, stage)
  for _, r in ipairs(timeline.stats(tl)) do
    if r.stage == stage and r.block == "all" then return r.median_ns end
  end
end

local function chain_of(view)
  local names, ns = {}, {}
  for _, c in ipairs(view.chain) do names[#names + 1], ns[c.stage] = c.stage, c.ns end
  return names, ns
end

-- A hand-made recording: `blocks` blocks, steps 1..n, stages wait, dot, publish, fetch;
-- durations(b, s) -> {wait =, dot =, publish =, fetch =, gap =} (ns), each step starting
-- after the previous one's gap. Time is placed as the kernel would see it: the wait of
-- step s ends no earlier than `landing` after the latest publish of step s - 1.
local function hand_made(blocks, n, durations, landing)
  local stages = { "wait", "dot", "publish", "fetch" }
  local rows, starts, publish_end = {}, {}, {}
  for b = 0, blocks - 1 do starts[b] = 0 end
  local columns = { "block", "step", "start" }
  for _, s in ipairs(stages) do columns[#columns + 1] = s end
  columns[#columns + 1] = "start_cycles"
  for _, s in ipairs(stages) do columns[#columns + 1] = s .. "_cycles" end
  for s = 1, n do
    local ends = {}
    for b = 0, blocks - 1 do
      local d = durations(b, s)
      local t0 = starts[b]
      local wait_end = t0 + d.wait
      if s > 1 then
        local latest = -math.huge
        for b2 = 0, blocks - 1 do latest = math.max(latest, publish_end[b2]) end
        wait_end = math.max(wait_end, latest + landing)
      end
      local t = { t0, wait_end }
      t[3] = t[2] + d.dot
      t[4] = t[3] + d.publish
      t[5] = t[4] + d.fetch
      ends[b] = t
      starts[b] = t[5] + d.gap
    end
    for b = 0, blocks - 1 do
      publish_end[b] = ends[b][4]
      local t = ends[b]
      rows[#rows + 1] = { b, s, t[1], t[2], t[3], t[4], t[5], 2 * t[1], 2 * t[2], 2 * t[3], 2 * t[4], 2 * t[5] }
    end
  end
  table.sort(rows, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  return { stamps = rows, columns = columns, stages = stages, waits_for = { wait = "publish" }, kernel = "hand" }
end

describe("spk.timeline.critical_view", function()
  it("reads the H200's batch-1, 8 and 64 recordings: the exchange, the chain and the stage to attack", function()
    for _, case in ipairs { { 1, "exchange" }, { 8, "exchange" }, { 64, "dot" } } do
      local batch, attack = case[1], case[2]
      local tl = load_recording(batch)
      local view = timeline.critical_view(tl)
      local names, ns = chain_of(view)
      -- a step: the exchange, then the block's own stages from the wait's end to its publish
      assert.are.same({ "exchange", "gates", "dot", "reduce", "cell", "publish" }, names, "batch " .. batch)
      -- fetch and gap ran under the exchange, which is the wait plus them (the publish's stamp
      -- is when the last push was issued)
      local hidden = {}
      for _, h in ipairs(view.hidden) do hidden[h.stage] = h.ns end
      assert.is_truthy(hidden.fetch and hidden.gap, "batch " .. batch)
      local wait, fetch, gap = median_of(tl, "wait"), median_of(tl, "fetch"), median_of(tl, "gap")
      assert.is_true(math.abs(ns.exchange - (wait + fetch + gap)) < 0.03 * ns.exchange,
        ("batch %d: exchange %.1f against wait + fetch + gap %.1f"):format(batch, ns.exchange, wait + fetch + gap))
      -- the chain is the step: within 2 % of the median step, and its shares add up to 1
      local step = median_of(tl, "step")
      assert.is_true(math.abs(view.step_ns - step) < 0.02 * step, ("%.1f against %.1f"):format(view.step_ns, step))
      local share = 0
      for _, c in ipairs(view.chain) do share = share + c.share end
      assert.is_true(math.abs(share - 1) < 1e-9)
      assert.are.equal(attack, view.attack.stage, "batch " .. batch)
      assert.are.equal(30, view.steps) -- steps 102 .. 131 of the recorded 101 .. 132
      local text = timeline.describe_view(view)
      assert.matches("attack next: " .. attack, text)
      assert.matches("under the exchange", text)
    end
    -- batch 1: the exchange can shrink by what is not under it before the fetch and gap hold the step
    local view = timeline.critical_view(load_recording(1))
    assert.is_true(view.attack.room_ns > 0 and view.attack.room_ns < view.attack.ns)
    assert.is_true(math.abs(view.attack.ns - view.attack.under_ns - view.wait_floor_ns - view.attack.room_ns) < 1e-9)
  end)

  it("without a floor it is the critical path, a step at a time", function()
    local tl = load_recording(8)
    local view = timeline.critical_view(tl, { wait_floor_ns = math.huge })
    local names = chain_of(view)
    assert.is_nil(names[1] == "exchange" or nil)
    local path = timeline.critical_path(tl)
    -- the same walk: every element of the whole steps, summed per stage, is the view's chain
    local by_stage = {}
    for _, e in ipairs(path.elements) do
      if e.step >= 102 and e.step <= 131 then by_stage[e.stage] = (by_stage[e.stage] or 0) + e.duration end
    end
    for _, c in ipairs(view.chain) do
      assert.is_true(math.abs(c.ns * 30 - by_stage[c.stage]) < 1e-6, c.stage)
    end
    assert.are.same({}, view.hidden)
  end)

  it("puts the fetch and the gap on the path when the data is there at the wait", function()
    -- the exchange lands 30 ns after the publish, sooner than the fetch and gap take
    local tl = hand_made(2, 8, function() return { wait = 5, dot = 100, publish = 40, fetch = 50, gap = 20 } end, 30)
    local view = timeline.critical_view(tl)
    local names, ns = chain_of(view)
    assert.are.same({ "wait", "dot", "publish", "fetch", "gap" }, names)
    assert.are.equal("dot", view.attack.stage)
    assert.is_nil(view.attack.room_ns)
    assert.is_true(math.abs(view.step_ns - 215) < 1e-9)
    assert.is_true(math.abs(ns.dot - 100) < 1e-9)
  end)

  it("follows a late publisher: the exchange from its publish to the wait's end", function()
    -- the blocks take turns at a dot 60 ns longer; the exchange takes 150 ns from the last publish
    local tl = hand_made(2, 8, function(b, step)
      return { wait = 5, dot = b == step % 2 and 160 or 100, publish = 40, fetch = 50, gap = 20 }
    end, 150)
    local view = timeline.critical_view(tl)
    local names, ns = chain_of(view)
    assert.are.same({ "exchange", "dot", "publish" }, names)
    assert.is_true(math.abs(ns.exchange - 150) < 1e-9, tostring(ns.exchange))
    assert.is_true(math.abs(ns.dot - 160) < 1e-9, tostring(ns.dot)) -- the late block's, in turn
    assert.are.equal(view.steps, view.jumps) -- every exchange from the other block
    assert.are.equal(2, view.blocks)
    assert.are.equal("dot", view.attack.stage)
    -- what the waiting block did after the other's publish ran under the exchange: the last 10 ns
    -- of its gap (it published 60 ns earlier, then fetched for 50 ns and paused for 20)
    assert.are.equal(1, #view.hidden)
    assert.are.equal("gap", view.hidden[1].stage)
    assert.is_true(math.abs(view.hidden[1].ns - 10) < 1e-9, tostring(view.hidden[1].ns))
  end)

  it("reads a stamps CSV back: the stages from its columns, the waits, and refuses what is no stamps CSV", function()
    local tl = load_recording(1)
    assert.are.same({ "wait", "gates", "dot", "reduce", "cell", "publish", "fetch" }, tl.stages)
    assert.are.same({ wait = "publish" }, tl.waits_for)
    assert.are.equal(256, #tl.stamps) -- 8 blocks, 32 steps
    local dir = spec_tmpdir()
    finally(function() os.execute("rm -rf " .. shell_quote(dir)) end)
    local f = assert(io.open(dir .. "/bad.csv", "w"))
    f:write("a,b\n1,2\n")
    f:close()
    local ok, err = pcall(timeline.load_stamps, dir .. "/bad.csv")
    assert.is_false(ok)
    assert.matches("no stamps CSV", tostring(err))
    f = assert(io.open(dir .. "/short.csv", "w"))
    f:write("block,step,start,wait,start_cycles,wait_cycles\n0,1,2,3\n")
    f:close()
    ok, err = pcall(timeline.load_stamps, dir .. "/short.csv")
    assert.is_false(ok)
    assert.matches("line 2 has 4 fields, the header 6", tostring(err))
    ok, err = pcall(timeline.load_stamps, dir .. "/none.csv")
    assert.is_false(ok)
    assert.matches("cannot open", tostring(err))
  end)

  it("refuses a bad floor, a short window and unknown options, naming them", function()
    local tl = load_recording(1)
    local ok, err = pcall(timeline.critical_view, tl, { wait_floor_ns = -1 })
    assert.is_false(ok)
    assert.matches("wait_floor_ns must be a number of ns >= 0, got %-1", tostring(err))
    ok, err = pcall(timeline.critical_view, tl, { steps = { 101, 102 } })
    assert.is_false(ok)
    assert.matches("needs a window of at least three steps", tostring(err))
    ok, err = pcall(timeline.critical_view, tl, { floor = 3 })
    assert.is_false(ok)
    assert.matches("floor", tostring(err))
  end)
end)
