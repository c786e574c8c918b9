-- The built-in kernels' timeline builds (docs/timeline.md): the plans' wiring
-- of plan:forward(x, {timeline = ...}) and plan:time{timeline = ...} (a
-- stand-in C plan records what the wrapper hands it: the selection's
-- defaults, its C form, info.timeline, the hook a kernel of one's own
-- compiles its timeline build in), the refusals of plans without a
-- timeline build, the experiment's no-GPU exit; on a GPU of compute
-- capability 9.0, the cluster kernel (its defaults at batch 1, 8 and 64 and
-- the baseline) and the persistent kernel: the same output bits with and
-- without the timeline build, every selected block and step stamped and
-- nothing else, marks increasing within a record and from step to step, and
-- what the build costs. (tests/c/test_timeline.c compiles every default's
-- timeline build and checks its arithmetic; tools/sass_compare.sh that the
-- plain builds are unchanged.)
local spk = require "spk"
local timeline = spk.timeline
local report = require "spk.report"
local plot = require "spk.plot"
local xml = require "xml_check"

local NAN = 0 / 0

-- ---------------------------------------------------------------- the wiring, without a GPU

-- A stand-in for a C plan with a timeline build: it records the arguments of
-- its forward and time and answers with a recording of two blocks and two
-- steps of stages "wait" and "publish".
local function stand_in(impl)
  local calls = {}
  local handle = { calls = calls }
  function handle.forward(_, x, opts)
    calls[#calls + 1] = { "forward", x, opts }
    if opts == nil then return "y" end
    local rows = {}
    for b = 0, 1 do
      for s = 1, 2 do
        local t0 = 100 * s + 10 * b
        rows[#rows + 1] = { b, s, t0, t0 + 5, t0 + 9, 2 * t0, 2 * t0 + 10, 2 * t0 + 18, t0, NAN, NAN }
      end
    end
    local columns = {}
    for i, n in ipairs { "block", "step", "start", "wait", "publish", "start_cycles", "wait_cycles",
                         "publish_cycles", "start_globaltimer", "wait_globaltimer", "publish_globaltimer" } do
      columns[i] = { name = n }
    end
    return "y", rows, columns, { cycles_per_ns = 2, selection = opts.timeline }, { registers = 40, spills = 0 }
  end
  function handle.time(_, x, rounds, warmup, selection)
    calls[#calls + 1] = { "time", x, rounds, warmup, selection }
    local ms = {}
    for i = 1, rounds do ms[i] = 1 + i / 100 end
    return ms
  end
  function handle.close() end
  local plan = spk.lstm.new_plan({ backend = "stand-in", variant = "two blocks", batch = 1, steps = 589, input = 3,
                                   hidden = 2, math = "fp32", handle = handle,
                                   timeline = { stages = { "wait", "publish" }, waits_for = { wait = "publish" },
                                                blocks = 24, warps = 4, group = 8 } }, impl)
  return plan, calls
end

describe("a plan's timeline option", function()
  it("hands the selection's C form to the plan, the first 64 steps of the first group when left out", function()
    local plan, calls = stand_in()
    local x = spk.zeros({ 1, 589, 3 }, "f32")
    local y, info = plan:forward(x, { timeline = {} })
    assert.are.equal("y", y)
    assert.are.same({ timeline = { layer = 0, direction = 0, first_step = 0, steps = 64, first_block = 0, blocks = 8,
                                   warp = 0 } }, calls[1][3])
    local tl = info.timeline
    assert.are.same({ "wait", "publish" }, tl.stages)
    assert.are.same({ wait = "publish" }, tl.waits_for)
    assert.are.equal("stand-in: two blocks", tl.kernel)
    assert.are.same({ layer = 1, direction = "forward", step_range = { 1, 64 }, blocks = { 0, 7 }, warp = 0 }, tl.selection)
    assert.are.same({ registers = 40, spills = 0 }, tl.build)
    -- what it hands back is a timeline spk.timeline reads
    local rec = timeline.records(tl)
    assert.are.same({ 0, 1 }, rec.blocks)
    assert.is_true(#timeline.critical_path(tl).elements > 0)
    -- a selection of its own, as given
    plan:forward(x, { timeline = { layer = 3, direction = "reverse", step_range = { 500, 589 }, blocks = { 16, 23 },
                                   warp = 2 } })
    assert.are.same({ layer = 2, direction = 1, first_step = 499, steps = 90, first_block = 16, blocks = 8, warp = 2 },
      calls[2][3].timeline)
    -- without the option, the plain forward
    plan:forward(x)
    assert.is_nil(calls[3][3])
  end)

  it("times the timeline build recording the selection", function()
    local plan, calls = stand_in()
    local t = plan:time { rounds = 3, warmup = 1, timeline = { step_range = { 2, 9 } } }
    assert.are.equal(3, #t.samples)
    local call = calls[1]
    assert.are.same({ "time", 3, 1 }, { call[1], call[3], call[4] })
    assert.are.same({ layer = 0, direction = 0, first_step = 1, steps = 8, first_block = 0, blocks = 8, warp = 0 },
      call[5])
    plan:time { rounds = 2 }
    assert.is_nil(calls[2][5])
  end)

  it("runs the plan's prepare_timeline before its first timeline forward or timing, and not before a plain one",
    function()
    local prepared = {}
    local plan, calls
    plan, calls = stand_in { prepare_timeline = function(p)
      prepared[#prepared + 1] = #calls
      assert.are.equal(plan, p)
    end }
    local x = spk.zeros({ 1, 589, 3 }, "f32")
    plan:forward(x)
    plan:time { rounds = 1 }
    assert.are.same({}, prepared)
    plan:forward(x, { timeline = {} })
    assert.are.same({ 2 }, prepared) -- after the plain forward and timing, before the timeline forward
    plan:time { rounds = 1, timeline = {} }
    assert.are.same({ 2, 3 }, prepared)
    assert.are.equal(4, #calls)
  end)

  it("refuses a bad selection before the plan runs, at the caller's line", function()
    local plan, calls = stand_in()
    local x = spk.zeros({ 1, 589, 3 }, "f32")
    local ok, err = pcall(function() return plan:forward(x, { timeline = { step_range = { 9, 2 } } }) end)
    assert.is_false(ok)
    assert.matches("timeline_kernels_spec%.lua:%d+: .*timeline.step_range = {9, 2}: needs 1 <= first <= last", err)
    ok, err = pcall(plan.forward, plan, x, { timeline = { blocks = 3 } })
    assert.is_false(ok)
    assert.matches("timeline.blocks must be a range {first, last}", err)
    ok, err = pcall(plan.time, plan, { timeline = { stepz = { 1, 2 } } })
    assert.is_false(ok)
    assert.matches("unknown option 'stepz'", err)
    ok, err = pcall(plan.forward, plan, x, { timeline = {}, trace = {} })
    assert.is_false(ok)
    assert.matches("unknown option 'trace'", err)
    assert.are.equal(0, #calls)
  end)

  it("is refused by a plan without a timeline build, naming the backends that have one", function()
    local layers = spk.lstm.random { layers = 1, input = 3, hidden = 4, seed = 1 }
    local plan = spk.lstm.stack { layers = layers, batch = 1, steps = 2, backend = "cpu" }
    local x = spk.zeros({ 1, 2, 3 }, "f32")
    assert.is_nil(plan.timeline)
    local ok, err = pcall(function() return plan:forward(x, { timeline = {} }) end)
    assert.is_false(ok)
    assert.matches("timeline_kernels_spec%.lua:%d+: forward: the cpu plan has no timeline build %(backends "
      .. "persistent, cluster and tensor_core have one, and a kernel stack whose spec names its timeline stages%)", err)
    ok, err = pcall(function() return plan:time { timeline = {} } end)
    assert.is_false(ok)
    assert.matches("time: the cpu plan has no timeline build", err)
  end)

  nogpu_it("is refused by backend auto's plan on a machine without a GPU (the C reference)", function()
    local layers = spk.lstm.random { layers = 1, input = 3, hidden = 4, seed = 1 }
    local plan = spk.lstm.stack { layers = layers, batch = 1, steps = 2 }
    local ok, err = pcall(plan.forward, plan, spk.zeros({ 1, 2, 3 }, "f32"), { timeline = {} })
    assert.is_false(ok)
    assert.matches("the cpu plan has no timeline build", err)
  end)
end)

describe("experiments/step_timeline.lua with a stack backend", function()
  local program = (os.getenv("BUILD") or "build") .. "/spk"

  it("runs the cluster kernel unless told otherwise", function()
    local out, err, code = run_spk { "run", "experiments/step_timeline.lua", "--help" }
    assert.are.equal(0, code, err)
    assert.matches("%-%-backend VALUE [^\n]*%(default cluster%)", out .. err)
  end)

  nogpu_it("without a GPU says so for every backend and exits 3", function()
    for _, backend in ipairs { "cluster", "persistent", "experiments/kernels/skeleton.lua" } do
      local dir = spec_tmpdir()
      local p = io.popen(("%s run experiments/step_timeline.lua --quick --backend %s --out %s 2>&1; echo \"exit=$?\"")
        :format(program, backend, shell_quote(dir .. "/out")))
      local out = p:read("a")
      p:close()
      assert.are.equal("3", out:match("exit=(%d+)%s*$"), out)
      assert.matches("step_timeline: needs a CUDA GPU", out)
      assert.is_false(os.execute("test -e " .. shell_quote(dir .. "/out")) == true)
      os.execute("rm -rf " .. shell_quote(dir))
    end
  end)
end)

-- ---------------------------------------------------------------- on the GPU

local function sm90()
  if not spk.cuda.available() then return false end
  local ok, info = pcall(spk.cuda.device, 0)
  return ok and info and (info.cc_major or 0) >= 9
end

local STEPS = 48
local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 3 }

local function range(first, last)
  local out = {}
  for v = first, last do out[#out + 1] = v end
  return out
end

-- The recording of `selection` through plan's timeline build: the same bits
-- as the plain forward, exactly the selected blocks and steps, every mark
-- stamped but those `unstamped(stage, step)` names (the direct pushes' last
-- step fetches nothing), marks increasing within a record and from a step to
-- the next, and a timeline the analysis, the report and the Gantt read.
local function check_recording(plan, x, selection, what, unstamped)
  local plain = plan:forward(x)
  local y, info = plan:forward(x, { timeline = selection })
  assert.bits_equal(plain, y, what)
  local tl = info.timeline
  assert.are.same(plan.timeline.stages, tl.stages)
  assert.are.equal(selection.direction or "forward", tl.selection.direction)
  local c = tl.clock.selection
  assert.are.equal((selection.layer or 1) - 1, c.layer)
  assert.are.equal(selection.direction == "reverse" and 1 or 0, c.direction)
  local rec = timeline.records(tl)
  assert.are.same(range(selection.blocks[1], selection.blocks[2]), rec.blocks, what)
  assert.are.same(range(selection.step_range[1], selection.step_range[2]), rec.steps, what)
  local marks = #tl.stages + 1
  for _, b in ipairs(rec.blocks) do
    local previous
    for _, s in ipairs(rec.steps) do
      local r = rec.at[b][s]
      local last_cycles, last_t
      for m = 1, marks do
        local where = ("%s: block %d step %d mark %d (%s)"):format(what, b, s, m, m == 1 and "start" or tl.stages[m - 1])
        local skip = m > 1 and unstamped and unstamped(tl.stages[m - 1], s)
        if skip then
          assert.is_true(r.t[m] ~= r.t[m], where .. " stamped")
        else
          assert.is_true(r.t[m] == r.t[m], where .. " not stamped")
          if last_cycles then
            assert.is_true(r.cycles[m] > last_cycles, where .. ": cycles do not increase")
            assert.is_true(r.t[m] >= last_t, where .. ": time goes back")
          end
          last_cycles, last_t = r.cycles[m], r.t[m]
        end
      end
      if previous then
        assert.is_true(r.cycles[1] > previous.cycles, ("%s: block %d step %d starts before step %d ended"):format(what,
          b, s, s - 1))
        assert.is_true(r.t[1] >= previous.t)
      end
      previous = { cycles = last_cycles, t = last_t }
    end
  end
  local clock = tl.clock
  assert.is_true(clock.cycles_per_ns > 0.5 and clock.cycles_per_ns < 3.5, what)
  assert.is_true(clock.residual_ns <= math.max(clock.quantum_ns, 50), what)
  assert.is_true(tl.build.registers > 0 and tl.build.spills >= 0)
  local path = timeline.critical_path(tl)
  assert.is_true(path.total_ns > 0)
  local text = report.timeline(tl, { path = path, per_block = false })
  for _, stage in ipairs(tl.stages) do assert.truthy(text:find(stage, 1, true), stage) end
  assert.is_true(xml.check(plot.timeline(tl)))
  return tl
end

local function last_step_fetch(stage, step) return stage == "fetch" and step == STEPS end

describe("the cluster kernel's timeline build", function()
  gpu_it("gives the plain build's bits at the defaults of batch 1, 8 and 64, every selected mark stamped", function()
    if not sm90() then pending("needs compute capability 9.0") return end
    for _, batch in ipairs { 1, 8, 64 } do
      local plan <close> = spk.lstm.stack { layers = layers, batch = batch, steps = STEPS, backend = "cluster" }
      local x = spk.randn({ batch, STEPS, 60 }, { seed = batch })
      local about = plan.timeline
      assert.are.same({ "wait", "gates", "dot", "reduce", "cell", "publish", "fetch" }, about.stages)
      assert.are.same({ wait = "publish" }, about.waits_for)
      assert.are.equal(plan.kernel.cluster, about.group)
      assert.are.equal(plan.kernel.cluster * plan.schedule.tiles, about.blocks)
      local what = ("cluster batch %d (%s)"):format(batch, plan.variant)
      -- the first cluster, the last steps of layer 1 (the last one fetches nothing)
      local tl = check_recording(plan, x, { step_range = { STEPS - 20, STEPS }, blocks = { 0, about.group - 1 } }, what,
        last_step_fetch)
      -- the last cluster of layer 2's reverse direction, another warp
      local blocks = { about.blocks - about.group, about.blocks - 1 }
      check_recording(plan, x, { layer = 2, direction = "reverse", step_range = { 3, 30 }, blocks = blocks,
                                 warp = about.warps - 1 }, what .. ", last cluster")
      local b = tl.build
      print(("\n  %s: the timeline build has %d registers, %d bytes of spills, %d clusters at once (the plain "
        .. "build %d, %d, %d)"):format(what, b.registers, b.spills, b.max_active_clusters, plan.kernel.registers,
        plan.kernel.spills, plan.kernel.max_active_clusters))
    end
  end)

  gpu_it("stamps the baseline (scalar pushes, a cluster barrier a step) with the plain build's bits", function()
    if not sm90() then pending("needs compute capability 9.0") return end
    local plan <close> = spk.lstm.stack { layers = layers, batch = 3, steps = STEPS, backend = "cluster",
                                          kernel = { push = "scalar", cluster = 4 } }
    assert.are.same({ "fetch", "wait", "dot", "reduce", "sync", "cell", "publish" }, plan.timeline.stages)
    local x = spk.randn({ 3, STEPS, 60 }, { seed = 5 })
    check_recording(plan, x, { step_range = { 1, STEPS }, blocks = { 0, plan.timeline.blocks - 1 } }, "cluster baseline")
  end)

  gpu_it("stamps two row phases, each with its own wait and publish", function()
    if not sm90() then pending("needs compute capability 9.0") return end
    local plan <close> = spk.lstm.stack { layers = layers, batch = 16, steps = STEPS, backend = "cluster",
                                          kernel = { push = "warp", gate_block = 4, cluster = 2, tile_rows = 8,
                                                     row_phases = 2 } }
    assert.are.same({ wait = "publish", wait_2 = "publish_2" }, plan.timeline.waits_for)
    local x = spk.randn({ 16, STEPS, 60 }, { seed = 6 })
    check_recording(plan, x, { step_range = { 10, 20 }, blocks = { 0, 1 } }, "cluster, two row phases")
  end)

  gpu_it("refuses a selection past the plan's blocks or warps, naming it", function()
    if not sm90() then pending("needs compute capability 9.0") return end
    local plan <close> = spk.lstm.stack { layers = layers, batch = 1, steps = STEPS, backend = "cluster" }
    local x = spk.randn({ 1, STEPS, 60 }, { seed = 1 })
    local last = plan.timeline.blocks - 1
    local ok, err = pcall(plan.forward, plan, x, { timeline = { blocks = { 0, last + 1 } } })
    assert.is_false(ok)
    assert.matches(("block %d is past the last block of a direction, %d"):format(last + 1, last), err)
    ok, err = pcall(plan.forward, plan, x, { timeline = { warp = plan.timeline.warps } })
    assert.is_false(ok)
    assert.matches("is past the last warp of a block", err)
    ok, err = pcall(plan.forward, plan, x, { timeline = { layer = 3 } })
    assert.is_false(ok)
    assert.matches("layer 3 is past the last layer, 2", err)
    ok, err = pcall(plan.time, plan, { timeline = { step_range = { 40, STEPS + 1 } } })
    assert.is_false(ok)
    assert.matches(("step %d is past the last step, %d"):format(STEPS + 1, STEPS), err)
  end)
end)

describe("the persistent kernel's timeline build", function()
  gpu_it("gives the plain build's bits at the defaults of batch 1 and 40, every selected mark stamped", function()
    if not spk.cuda.available() then pending("needs a GPU") return end
    for _, batch in ipairs { 1, 40 } do
      local plan <close> = spk.lstm.stack { layers = layers, batch = batch, steps = STEPS, backend = "persistent" }
      local about = plan.timeline
      assert.are.same({ "wait", "fetch", "dot", "reduce", "cell", "publish" }, about.stages)
      assert.are.same({ wait = "publish" }, about.waits_for)
      assert.are.equal(plan.kernel.groups, about.group)
      local x = spk.randn({ batch, STEPS, 60 }, { seed = 7 })
      local what = ("persistent batch %d (%s)"):format(batch, plan.variant)
      check_recording(plan, x, { step_range = { 1, STEPS }, blocks = { 0, about.group - 1 } }, what)
      -- the last tile, layer 2 reverse, another warp
      check_recording(plan, x, { layer = 2, direction = "reverse", step_range = { 30, STEPS },
                                 blocks = { about.blocks - about.group, about.blocks - 1 }, warp = about.warps - 1 },
        what .. ", last tile")
    end
  end)

  gpu_it("takes a trace or a timeline, not both at once", function()
    if not spk.cuda.available() then pending("needs a GPU") return end
    local plan <close> = spk.lstm.stack { layers = layers, batch = 1, steps = STEPS, backend = "persistent" }
    local x = spk.randn({ 1, STEPS, 60 }, { seed = 1 })
    local ok, err = pcall(plan.forward, plan, x, { timeline = {}, trace = { layer = 1, steps = { 1 } } })
    assert.is_false(ok)
    assert.matches("trace and timeline are separate builds", err)
    ok, err = pcall(plan.handle.forward, plan.handle, x, { timeline = { layer = 0, direction = 0, first_step = 0,
      steps = 1, first_block = 0, blocks = 1 }, trace = { layer = 1, steps = { 1 } } })
    assert.is_false(ok)
    assert.matches("trace and timeline are separate builds", err)
  end)
end)

describe("the timeline builds' cost", function()
  -- The plain build and the build recording steps 101..164 of layer 1 in the
  -- first cluster or tile, in turn, so clock changes hit both alike.
  local function cost(backend, batch)
    local plan <close> = spk.lstm.stack { layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 },
                                          batch = batch, steps = 589, backend = backend }
    local x = spk.randn({ batch, 589, 60 }, { seed = 1 }):cuda()
    local sel = { step_range = { 101, 164 } }
    local plain, recording = {}, {}
    for _ = 1, 3 do
      plain[#plain + 1] = plan:time { x = x, rounds = 7 }.median_ms
      recording[#recording + 1] = plan:time { x = x, rounds = 7, timeline = sel }.median_ms
    end
    table.sort(plain)
    table.sort(recording)
    local p, r = plain[2], recording[2]
    local _, info = plan:forward(x, { timeline = sel })
    local b = info.timeline.build
    print(("\n  %s batch %d (%s): plain %.4f ms, timeline build recording 64 steps of %d blocks %.4f ms (%+.1f%%, "
      .. "%+.1f ns a step; %d registers, %d bytes of spills)"):format(backend, batch, plan.variant, p,
      plan.timeline.group, r, 100 * (r / p - 1), (r - p) * 1e6 / (4 * 589), b.registers, b.spills))
    assert.is_true(r < 1.5 * p, "the timeline build costs more than half the forward")
  end

  gpu_it("is measured beside the plain build (cluster at batch 1, 8 and 64, persistent at batch 1)", function()
    if not sm90() then pending("needs compute capability 9.0") return end
    for _, batch in ipairs { 1, 8, 64 } do cost("cluster", batch) end
    cost("persistent", 1)
  end)
end)

describe("backend auto's plan", function()
  gpu_it("hands the timeline option to the plan it built", function()
    local plan <close> = spk.lstm.stack { layers = layers, batch = 1, steps = STEPS }
    local x = spk.randn({ 1, STEPS, 60 }, { seed = 2 })
    local backend = plan.auto.backend
    if backend == "cluster" or backend == "persistent" then
      local plain = plan:forward(x)
      local y, info = plan:forward(x, { timeline = { step_range = { 1, 8 } } })
      assert.bits_equal(plain, y)
      assert.truthy(info.timeline.kernel:find(backend, 1, true))
      assert.are.same(range(1, 8), timeline.records(info.timeline).steps)
    else
      local ok, err = pcall(plan.forward, plan, x, { timeline = {} })
      assert.is_false(ok)
      assert.matches("no timeline build", err)
    end
  end)
end)
