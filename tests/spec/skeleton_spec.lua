-- The recurrence kernel to copy (experiments/kernels/lstm_skeleton.cu and
-- skeleton.lua, docs/kernels.md): without a GPU, NVRTC compiles it for sm_90
-- in several gate orders and both layouts and checks it against its argument
-- list, and its timeline build (the stages its spec names) takes the
-- timeline's seven parameters after its own, a timeline the kernel does not
-- stamp as named being refused; on a GPU it is within the bound spk bench
-- holds every kernel to, the same bits every forward and in every order,
-- traced like the reference, and its timeline forward records dot and cell
-- of the selected blocks and steps with the plain build's bits.
local spk = require "spk"

local SKELETON = spk.find_dir("experiments") .. "/kernels/skeleton.lua"

local function with(spec, extra)
  local out = {}
  for k, v in pairs(spec) do out[k] = v end
  for k, v in pairs(extra) do out[k] = v end
  return out
end

describe("the kernel to copy", function()
  it("compiles for sm_90 without a device in any gate order and layout, and keeps the contract", function()
    local spec = spk.lstm.kernel_file(SKELETON)
    assert.are.equal("skeleton", spec.name)
    for _, case in ipairs { { "ifco", "units" }, { "iofc", "rows" }, { "ocif", "units" } } do
      local r = spk.lstm.kernel_check(with(spec, { packing = { order = case[1], layout = case[2] } }), { batch = 3 })
      assert.are.equal(#spec.args, #r.params)
      assert.truthy(r.cubin_bytes > 0)
      assert.are.same({ "forward", "reverse" }, { r.launches[1].direction, r.launches[2].direction })
      assert.are.same({ 3, 1, 1 }, r.launches[1].grid)
      assert.are.equal(128, r.launches[1].block)
    end
  end)

  it("stamps its stages in a timeline build: the timeline's seven parameters after its own", function()
    local spec = spk.lstm.kernel_file(SKELETON)
    assert.are.same({ stages = { "dot", "cell" }, waits_for = {} }, spec.timeline)
    local report = spk.lstm.kernel_check(spec)
    local defines = report.defines
    assert.are.same({ "dot", "cell" }, report.timeline.stages)
    assert.are.same({}, report.timeline.waits_for)
    assert.are.equal(#spec.args + spk.core.timeline_args, #report.timeline.params)
    local function params(extra)
      local d = {}
      for k, v in pairs(defines) do d[k] = v end
      for k, v in pairs(extra) do d[k] = v end
      local m = spk.cuda.compile { file = spec.dir .. "/" .. spec.file, defines = d, arch = "compute_90" }
      local p = m:params(spec.entry)
      local ptx = m:code()
      m:close()
      return p, ptx
    end
    local plain, plain_ptx = params {}
    local built, built_ptx = params { SPK_TIMELINE = 1 }
    assert.are.equal(#spec.args, #plain)
    assert.are.equal(#spec.args + 7, #built)
    assert.are.same({ 8, 4, 4, 4, 4, 4, 4 }, (function()
      local sizes = {}
      for i = #spec.args + 1, #built do sizes[#sizes + 1] = built[i].size end
      return sizes
    end)())
    assert.is_nil(plain_ptx:find("globaltimer", 1, true)) -- the normal build has no stamp at all
    assert.truthy(built_ptx:find("globaltimer", 1, true))
    local _, zero_ptx = params { SPK_TIMELINE = 0 }
    assert.are.equal(plain_ptx, zero_ptx)
    -- the stage count the plan names does not change the build: it is only checked
    local _, counted_ptx = params { SPK_TIMELINE = 1, SPK_TIMELINE_STAGE_COUNT = 2 }
    assert.are.equal(built_ptx, counted_ptx)
  end)

  it("refuses a timeline its kernel does not stamp as the spec names it, without a device", function()
    local spec = spk.lstm.kernel_file(SKELETON)
    local ok, err = pcall(spk.lstm.kernel_check, with(spec, { timeline = { stages = { "dot", "cell", "publish" } } }))
    assert.is_false(ok)
    assert.matches("kernel skeleton: .*static assertion failed with \"the kernel's SPK_TIMELINE_SETUP stamps another "
      .. "number of stages than its spec's timeline.stages names\"", err)
    local bare = { name = "bare", entry = "bare", args = { "gates", "r", "bias", "output", "batch", "steps", "direction" },
                   launch = spec.launch, timeline = { stages = { "dot" } } }
    local head = 'extern "C" __global__ void bare(const float *gates, const float *r, const float *bias, float *output, '
      .. "int batch, int steps, int direction"
    ok, err = pcall(spk.lstm.kernel_check, with(bare, { source = head .. ") {}" }))
    assert.is_false(ok)
    assert.matches("kernel bare: built with SPK_TIMELINE=1 it takes 7 parameters, but a timeline forward passes 14 "
      .. "%(its 7 and the recording's 7%): put SPK_TIMELINE_PARAMS right after its last parameter", err)
    ok, err = pcall(spk.lstm.kernel_check, with(bare, { source = '#include "spk_timeline.cuh"\n' .. head
      .. " SPK_TIMELINE_PARAMS) {}" }))
    assert.is_false(ok)
    assert.matches("kernel bare: its timeline build stamps nothing: call SPK_TIMELINE_SETUP", err)
  end)

  it("refuses timeline options that name no stage, twice the same or a reserved one, naming them", function()
    local desc = { name = "k", args = { "gates", "output", "batch", "steps" },
                   launches = { { grid = { 1, 1, 1 }, block = { 32, 1, 1 } } } }
    local function refused(timeline)
      local ok, err = pcall(spk.core.kernel_stack_check, with(desc, { timeline = timeline }))
      assert.is_false(ok)
      return err
    end
    assert.is_true(spk.core.kernel_stack_check(with(desc, { timeline = { stages = { "wait", "dot", "publish" },
                                                                          waits_for = { wait = "publish" } } })))
    assert.matches('timeline.waits_for.dot: "publish" is not one of timeline.stages %(dot, cell%)',
      refused { stages = { "dot", "cell" }, waits_for = { dot = "publish" } })
    assert.matches('timeline.waits_for: "wait" is not one of timeline.stages %(dot, cell%)',
      refused { stages = { "dot", "cell" }, waits_for = { wait = "cell" } })
    assert.matches("timeline.waits_for.cell: number 2 is not one of timeline.stages",
      refused { stages = { "dot", "cell" }, waits_for = { cell = 2 } })
    assert.matches("timeline: stages 1 and 2 are both named 'dot'", refused { stages = { "dot", "dot" } })
    assert.matches("timeline: stage 2 is named 'step', which names a column of its own",
      refused { stages = { "dot", "step" } })
    assert.matches("timeline.stages: a step has 1 to 31 stages, got 0 names", refused { stages = {} })
    assert.matches("timeline.stages%[2%] must be a string, got number 3", refused { stages = { "dot", 3 } })
    assert.matches("timeline: unknown", refused { stages = { "dot" }, wait = {} })
    local ok, err = pcall(spk.lstm.kernel_check, with(spk.lstm.kernel_file(SKELETON), { timeline = "dot, cell" }))
    assert.is_false(ok)
    assert.matches('spk.lstm.kernel_check: timeline must be a table {stages = {"dot", ...}, waits_for = {...}}, got '
      .. '"dot, cell"', err, 1, true)
  end)

  gpu_it("is within spk bench's bound of the f64 reference, the same bits always, traced like the reference", function()
    local spec = spk.lstm.kernel_file(SKELETON)
    local layers = spk.lstm.random { layers = 2, input = 6, hidden = 128, seed = 5 }
    local x = spk.randn({ 3, 21, 6 }, { seed = 5 })
    local plan <close> = spk.lstm.kernel_stack(with(spec, { layers = layers, batch = 3, steps = 21 }))
    local y = plan:forward(x)
    assert.within_reference(y, layers, x) -- spk.lstm.bound's: cuDNN standard's error on x, measured
    assert.bits_equal(y, plan:forward(x), "a second forward")
    local rows <close> = spk.lstm.kernel_stack(with(spec, { layers = layers, batch = 3, steps = 21,
                                                            packing = { order = "ocif", layout = "rows" } }))
    assert.bits_equal(y, rows:forward(x), "gate order ocif, rows")
    local trace = { layer = 1, direction = "reverse", steps = { 1, 9, 21 } }
    local _, info = plan:forward(x, { trace = trace })
    local _, ref = spk.lstm.reference(layers, x, { precision = "f64", trace = trace })
    assert.is_nil(spk.debug.first_divergence(info.trace, ref.trace, { tol = 1e-6 }))
  end)

  -- The records of a timeline forward: exactly the selected blocks and steps, each mark stamped,
  -- cycles increasing within a step and from a step's end to the next start.
  local function check_records(tl, blocks, steps, what)
    local rec = spk.timeline.records(tl)
    local function range(r)
      local out = {}
      for v = r[1], r[2] do out[#out + 1] = v end
      return out
    end
    assert.are.same(range(blocks), rec.blocks, what)
    assert.are.same(range(steps), rec.steps, what)
    for _, b in ipairs(rec.blocks) do
      local previous
      for _, s in ipairs(rec.steps) do
        local r = rec.at[b][s]
        for m = 1, #tl.stages + 1 do
          local where = ("%s: block %d step %d mark %d"):format(what, b, s, m)
          assert.is_true(r.t[m] == r.t[m], where .. " not stamped")
          if m > 1 then
            assert.is_true(r.cycles[m] > r.cycles[m - 1], where .. ": cycles do not increase")
            assert.is_true(r.t[m] >= r.t[m - 1], where .. ": time goes back")
          end
        end
        if previous then
          assert.is_true(r.cycles[1] > previous, ("%s: block %d step %d starts before the step before ended"):format(
            what, b, s))
        end
        previous = r.cycles[#tl.stages + 1]
      end
    end
  end

  gpu_it("records its stages dot and cell through its timeline build, with the plain build's bits", function()
    local spec = spk.lstm.kernel_file(SKELETON)
    local layers = spk.lstm.random { layers = 2, input = 6, hidden = 128, seed = 5 }
    local x = spk.randn({ 3, 21, 6 }, { seed = 5 })
    local plan <close> = spk.lstm.kernel_stack(with(spec, { layers = layers, batch = 3, steps = 21 }))
    -- a block a batch row and direction, 128 threads; no block waits for another
    assert.are.same({ stages = { "dot", "cell" }, waits_for = {}, blocks = 3, warps = 4, group = 1 }, plan.timeline)
    assert.are.same(plan.timeline, plan.handle:info().timeline)
    local plain = plan:forward(x)
    local y, info = plan:forward(x, { timeline = { step_range = { 1, 21 }, blocks = { 0, 2 } } })
    assert.bits_equal(plain, y, "the timeline build")
    local tl = info.timeline
    assert.are.same({ "dot", "cell" }, tl.stages)
    assert.are.same({}, tl.waits_for)
    assert.matches("^kernel: ", tl.kernel)
    assert.is_true(tl.build.registers > 0 and tl.build.spills >= 0)
    check_records(tl, { 0, 2 }, { 1, 21 }, "layer 1 forward")
    -- layer 2's reverse direction, the last warp, some blocks and steps
    local y2, info2 = plan:forward(x, { timeline = { layer = 2, direction = "reverse", step_range = { 5, 15 },
                                                      blocks = { 1, 2 }, warp = 3 } })
    assert.bits_equal(plain, y2, "the timeline build, layer 2 reverse")
    assert.are.same({ layer = 1, direction = 1, first_step = 4, steps = 11, first_block = 1, blocks = 2, warp = 3 },
      info2.timeline.clock.selection)
    check_records(info2.timeline, { 1, 2 }, { 5, 15 }, "layer 2 reverse")
    -- left out: layer 1 forward, its first 21 steps (at most 64), the first group's block
    local _, info3 = plan:forward(x, { timeline = {} })
    check_records(info3.timeline, { 0, 0 }, { 1, 21 }, "the default selection")
    local path = spk.timeline.critical_path(tl)
    assert.is_true(path.total_ns > 0)
    local text = require("spk.report").timeline(tl, { path = path, per_block = false })
    for _, stage in ipairs(tl.stages) do assert.truthy(text:find(stage, 1, true), stage) end
    assert.is_true(plan:time { rounds = 3, warmup = 1, x = x, timeline = { blocks = { 0, 2 } } }.median_ms > 0)
    assert.bits_equal(plain, plan:forward(x), "the plain build after the timeline build")
  end)

  gpu_it("refuses a selection past its blocks or warps, and a plan without spec.timeline refuses the option", function()
    local spec = spk.lstm.kernel_file(SKELETON)
    local layers = spk.lstm.random { layers = 1, input = 6, hidden = 128, seed = 5 }
    local x = spk.randn({ 3, 21, 6 }, { seed = 5 })
    local plan <close> = spk.lstm.kernel_stack(with(spec, { layers = layers, batch = 3, steps = 21 }))
    local ok, err = pcall(plan.forward, plan, x, { timeline = { blocks = { 0, 3 } } })
    assert.is_false(ok)
    assert.matches("block 3 is past the last block of a direction, 2", err)
    ok, err = pcall(plan.forward, plan, x, { timeline = { warp = 4 } })
    assert.is_false(ok)
    assert.matches("warp 4 is past the last warp of a block, 3", err)
    local plain_spec = with(spec, { layers = layers, batch = 3, steps = 21 })
    plain_spec.timeline = nil
    local untimed <close> = spk.lstm.kernel_stack(plain_spec)
    assert.is_nil(untimed.timeline)
    assert.is_nil(untimed.handle:info().timeline)
    ok, err = pcall(untimed.forward, untimed, x, { timeline = {} })
    assert.is_false(ok)
    assert.matches("forward: the kernel plan has no timeline build", err)
    local built <close> = spk.cuda.compile { file = spec.dir .. "/" .. spec.file, defines = { SPK_TIMELINE = 1 } }
    ok, err = pcall(spk.core.kernel_stack_set_timeline, untimed.handle, built, spec.entry)
    assert.is_false(ok)
    assert.matches("kernel skeleton names no timeline stages", err)
  end)
end)
