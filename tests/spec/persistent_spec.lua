-- spk.lstm.stack: argument validation and the cpu backend everywhere; the
-- persistent GPU backend against f64 references, cuDNN's error, bitwise
-- repeatability and schedules on a GPU (gpu_it: skipped without one).
local spk = require "spk"
local core = require "spk.core"

-- The persistent backend (spk.lstm.stack's default is "auto").
local function stack(opts)
  if opts.backend == nil then opts.backend = "persistent" end
  return spk.lstm.stack(opts)
end

local function small_layers(seed, scale)
  return spk.lstm.random { layers = 2, input = 6, hidden = 128, seed = seed or 1, scale = scale or 1 }
end

describe("spk.lstm.stack arguments", function()
  local layers = small_layers()

  it("refuses batch or steps of 0 and unknown backends or options", function()
    assert.has_error(function() stack { layers = layers, batch = 0, steps = 3 } end,
      "spk.lstm.stack (persistent): batch must be a positive integer, got 0")
    assert.has_error(function() stack { layers = layers, batch = 2, steps = 0 } end,
      "spk.lstm.stack (persistent): steps must be a positive integer, got 0")
    assert.has_error(function() stack { layers = layers, batch = 2, steps = 3, backend = "tpu" } end)
    assert.has_error(function() stack { layers = layers, batch = 2, steps = 3, stride = 2 } end)
    assert.has_error(function() stack { layers = {}, batch = 2, steps = 3 } end)
  end)

  it("refuses wrong weight shapes before looking for a device", function()
    local bad = { { W = layers[1].W, R = spk.zeros({ 2, 512, 64 }, "f32"), B = layers[1].B } }
    local ok, err = pcall(stack, { layers = bad, batch = 1, steps = 2 })
    assert.is_false(ok)
    assert.matches("R", tostring(err))
  end)

  it("refuses non-finite weights with the layer named", function()
    local W = layers[2].W:clone()
    W:set(1, 1, 1, 0 / 0)
    local ok, err = pcall(stack, { layers = { layers[1], { W = W, R = layers[2].R, B = layers[2].B } },
                                            batch = 1, steps = 2, backend = "persistent" })
    assert.is_false(ok)
    assert.matches("layer 2: W has a non%-finite value", tostring(err))
  end)

  it("refuses kernel variants the kernel cannot compile", function()
    local ok, err = pcall(stack, { layers = layers, batch = 1, steps = 2, kernel = { units = 5 } })
    assert.is_false(ok)
    assert.matches("kernel.units must be 4, 8, 16 or 32", tostring(err))
    ok, err = pcall(stack, { layers = layers, batch = 1, steps = 2, kernel = { threads = 96 } })
    assert.is_false(ok)
    assert.matches("kernel.threads 96", tostring(err))
    ok, err = pcall(stack, { layers = layers, batch = 1, steps = 2, kernel = { hidden = 64 } })
    assert.is_false(ok)
    assert.matches("hidden size 128, the kernel variant 64", tostring(err))
  end)

  it("derives the launch geometry of a variant as the kernel does", function()
    local v = spk.lstm.persistent_variant { units = 8, gate_block = 1, row_group = 1 }
    assert.are.equal(256, v.threads)
    assert.are.equal(16, v.groups)
    assert.are.equal(2 * 32 * 128, v.state_tile)
    assert.are.equal("8", v.defines.UNITS)
  end)

  it("takes every option left out from the batch's default, by each option's rule", function()
    local function variant(kernel, batch) return spk.lstm.persistent_variant(kernel, batch) end
    assert.are.equal(4, variant(nil, 1).units)
    assert.are.equal(4, variant(nil, 8).units)
    assert.are.equal(4, variant(nil, 32).units)
    assert.are.equal(16, variant(nil, 33).units)
    assert.are.equal(8, variant(nil, 256).units)
    assert.are.equal(4, variant(nil, 256).gate_block)
    assert.are.equal(8, variant(nil, 32).row_group)
    -- kernel = {} is the batch's default too, option for option
    for _, batch in ipairs { 1, 8, 32, 33, 64, 256, 1000 } do
      assert.are.same(variant(nil, batch), variant({}, batch))
    end
    assert.are.equal(4, variant({ units = 4 }, 64).units)
    -- units from the script, the layout (gate blocks of 4) from batch 256's row
    local v16 = variant({ units = 16 }, 256)
    assert.are.equal(4, v16.gate_block)
    assert.are.equal(128, v16.threads)
    assert.are.equal(8, v16.groups)
    assert.are.equal(512, variant({ units = 16, gate_block = 1 }, 256).threads)
    -- threads that give fewer chunks than the row's row group: the fit picks one that fits
    local few = variant({ units = 4, threads = 64, gate_block = 1 }, 8)
    assert.are.same({ 4, 1 }, { few.chunks, few.row_group })
    assert.are.equal(8, variant({ units = 4, threads = 128, gate_block = 1 }, 8).row_group)
    -- batch 1's row: no row groups, no gate blocks
    local rg = variant({ units = 16, row_group = 8 }, 1)
    assert.are.equal(8, rg.row_group)
    assert.are.equal(1, rg.gate_block)
    assert.are.equal("8", rg.defines.ROW_GROUP)
    local gb = variant({ units = 16, gate_block = 4 }, 1)
    assert.are.equal(128, gb.threads)
    assert.are.equal(8, gb.row_group)
    assert.are.equal(32, gb.max_tile_rows)
    assert.are.equal(0, gb.tile_rows) -- the schedule picks the tile height
    local forced = variant({ units = 16, gate_block = 4, tile_rows = 16 }, 1)
    assert.are.same({ 16, 16, "16" }, { forced.tile_rows, forced.max_tile_rows, forced.defines.MAX_TILE_ROWS })
    assert.are.equal("4", gb.defines.GATE_BLOCK)
    -- units 32 needs gate blocks: left out, gate_block follows
    local gb32 = variant({ units = 32 }, 1)
    assert.are.same({ 4, 256, 4 }, { gb32.gate_block, gb32.threads, gb32.groups })
    assert.are.equal(1, variant(nil, 1).row_group)
    local function refused(kernel, pattern)
      local ok, err = pcall(variant, kernel, 1)
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    refused({ units = 16, gate_block = 2 }, "kernel.gate_block must be 1 or 4")
    refused({ units = 16, row_group = 3 }, "kernel.row_group must be 1, 2, 4 or 8")
    refused({ units = 16, gate_block = 4, row_group = 4, tile_rows = 32 }, "kernel.tile_rows")
    refused({ gather = 2 }, "kernel: unknown option 'gather'")
    refused({ units = 32, gate_block = 1 }, "kernel.units 32 needs kernel.gate_block 4")
    refused({ units = "four" }, 'kernel.units must be 4, 8, 16 or 32 %(.*%), got "four"')
    refused({ units = {} }, "kernel.units must be 4, 8, 16 or 32 %(.*%), got table")
    refused("units", "kernel must be a table of kernel options, got string")
  end)

  it("checks trace requests as the reference does (layers and steps from 1)", function()
    assert.is_true(core.trace_check({ layer = 2, direction = "reverse", steps = { 1, 5, 5 } }, 2, 5))
    local function refused(trace, pattern)
      local ok, err = pcall(core.trace_check, trace, 2, 5)
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    refused({ layer = 1, steps = { 6 } }, "trace: step 6 is outside 1%.%.5")
    refused({ layer = 1, steps = { 0 } }, "trace: step 0 is outside 1%.%.5")
    refused({ layer = 3, steps = { 1 } }, "trace: layer 3 is outside 1%.%.2")
    refused({ layer = 0, steps = { 1 } }, "trace: layer 0 is outside 1%.%.2")
    refused({ layer = 1, steps = {} }, "trace.steps must list 1 to 1024")
    refused({ layer = 1, steps = { 1.5 } }, "trace.steps%[1%] must be an integer")
    refused({ layer = 1, direction = "sideways", steps = { 1 } }, "trace.direction")
    refused({ layer = 1, steps = { 1 }, step = 2 }, "trace: unknown option 'step' %(known: layer, direction, steps%)")
    refused({ layer = 1, steps = { 1 }, true }, "trace: unknown option number 1 %(a number key; known: layer, direction, steps%)")
    refused({ steps = { 1 } }, "trace.layer must be a layer number")
  end)

  it("backend cpu traces as the reference does", function()
    local x = lcg_uniform({ 2, 5, 6 }, 3)
    local plan = stack { layers = layers, batch = 2, steps = 5, backend = "cpu" }
    local trace = { layer = 2, direction = "reverse", steps = { 5, 1 } }
    local y, info = plan:forward(x, { trace = trace })
    local yref, ref = spk.lstm.reference(layers, x, { precision = "f32", trace = trace })
    assert.is_true(same_bits(y, yref))
    assert.are.same({ 2, 2, 128 }, info.trace.h:shape())
    assert.is_true(same_bits(info.trace.h, ref.trace.h))
    assert.is_true(same_bits(info.trace.c, ref.trace.c))
    assert.are.same({ 5, 1 }, info.trace.steps)
    -- the reverse direction's h at time position 1 is y's features H+1..2H there
    assert.are.equal(y:get(1, 1, 129), info.trace.h:get(2, 1, 1))
  end)

  it("refuses a schedule that does not fit the capacity", function()
    local s = spk.schedule.new { batch = 32, capacity = 350, concurrent_capacity = 350 }
    assert.is_true(core.persistent_schedule_fits(s, { units = 4, gate_block = 1, row_group = 1 }, 350, 350))
    local ok, err = pcall(core.persistent_schedule_fits, s, { units = 4, gate_block = 1, row_group = 1 }, 100, 100)
    assert.is_false(ok)
    assert.matches("co%-resident blocks", tostring(err))
  end)

  it("backend cpu equals the f32 reference and checks x", function()
    local x = lcg_uniform({ 3, 5, 6 }, 7)
    local plan = stack { layers = layers, batch = 3, steps = 5, backend = "cpu" }
    local y = plan:forward(x)
    local ref = spk.lstm.reference(layers, x, { precision = "f32" })
    assert.are.same(ref:shape(), y:shape())
    assert.is_true(same_bits(y, ref))
    assert.has_error(function() plan:forward(spk.zeros({ 3, 4, 6 }, "f32")) end,
      "forward: x has shape [3, 4, 6], expected [3, 5, 6]")
    assert.has_error(function() plan:forward(spk.zeros({ 3, 5, 6 }, "f64")) end,
      "forward: x has dtype f64, expected f32")
  end)
end)

-- ---- GPU ---------------------------------------------------------------------

local fixtures = "tests/fixtures"

describe("spk.lstm.stack persistent (GPU)", function()
  for _, case in ipairs(fixture_cases(fixtures)) do
    gpu_it("matches fixture " .. case .. " within cuDNN FP32's error", function()
      local dir = fixtures .. "/" .. case
      local layers = spk.lstm.load(dir)
      local x = spk.load(dir .. "/x.npy")
      local s = x:shape()
      local plan = stack { layers = layers, batch = s[1], steps = s[2] }
      local y = plan:forward(x)
      check_against_cudnn(y, spk.load(dir .. "/y_f64.npy"), spk.load(dir .. "/y_cudnn_f32.npy"))
      assert.are.equal(0, plan.kernel.spills, ("local memory per thread (hidden %d, %d threads)"):format(
        plan.kernel.hidden or -1, plan.kernel.threads or -1))
    end)
  end

  local cases = {}
  for _, b in ipairs { 1, 3, 7, 8, 32, 33, 64, 256 } do
    for _, t in ipairs { 1, 2, 589 } do cases[#cases + 1] = { b, t } end
  end
  cases[#cases + 1] = { 2, 5000 }
  for _, case in ipairs(cases) do
    local batch, steps = case[1], case[2]
    gpu_it(("batch %d steps %d: within cuDNN's error, bitwise repeatable"):format(batch, steps), function()
      local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = batch * 7919 + steps }
      local x = lcg_uniform({ batch, steps, 60 }, batch + steps)
      local plan = stack { layers = layers, batch = batch, steps = steps }
      local y = plan:forward(x)
      local ycudnn, y64 = cudnn_oracle(layers, x)
      y64 = y64 or spk.lstm.reference(layers, x, { precision = "f64" })
      check_against_cudnn(y, y64, ycudnn)
      local rounds = steps >= 589 and batch >= 64 and 3 or 10
      for _ = 1, rounds - 1 do assert.is_true(same_bits(plan:forward(x), y)) end
      -- device input gives the output on the device, the same bits
      if spk.cuda.to_device or x.cuda then
        local yd = plan:forward(x:cuda())
        assert.is_true(same_bits(yd:cpu(), y))
      end
    end)
  end

  gpu_it("a schedule forced to sequential launches gives the same bits as the concurrent one", function()
    local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 3 }
    local x = lcg_uniform({ 64, 589, 60 }, 11)
    local concurrent = stack { layers = layers, batch = 64, steps = 589 }
    assert.is_true(concurrent.schedule.concurrent)
    local sequential = stack { layers = layers, batch = 64, steps = 589, capacity = 32,
      kernel = { units = 4 } }
    assert.is_false(sequential.schedule.concurrent)
    assert.is_true(#sequential.schedule.launches() > 1)
    assert.is_true(same_bits(concurrent:forward(x), sequential:forward(x)))
    local tile8 = stack { layers = layers, batch = 64, steps = 589, kernel = { units = 4 },
      schedule = { batch = 64, groups = 32, tile_rows = 8, tiles = 8, tiles_per_launch = 8, concurrent = false } }
    assert.is_true(same_bits(tile8:forward(x), concurrent:forward(x)))
  end)

  gpu_it("a schedule needing more blocks than the device holds is refused before launch", function()
    local layers = spk.lstm.random { layers = 1, input = 60, hidden = 128, seed = 1 }
    local ok, err = pcall(stack, { layers = layers, batch = 1, steps = 2, capacity = 31 })
    assert.is_false(ok)
    assert.matches("co%-resident", tostring(err))
    ok, err = pcall(stack, { layers = layers, batch = 4096, steps = 2, kernel = { units = 4 },
      schedule = { batch = 4096, groups = 32, tile_rows = 32, tiles = 128, tiles_per_launch = 128 } })
    assert.is_false(ok)
    assert.matches("co%-resident blocks", tostring(err))
  end)

  gpu_it("refuses wrong x shapes and dtypes; NaN in x gives NaN, not a hang", function()
    local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 2 }
    local plan = stack { layers = layers, batch = 2, steps = 4 }
    assert.has_error(function() plan:forward(spk.zeros({ 2, 5, 60 }, "f32")) end)
    assert.has_error(function() plan:forward(spk.zeros({ 2, 4, 60 }, "f64")) end)
    local x = spk.zeros({ 2, 4, 60 }, "f32")
    x:set(1, 2, 1, 0 / 0)
    local y = plan:forward(x)
    local v = y:get(1, 4, 1)
    assert.is_true(v ~= v)
    local clean = y:get(2, 4, 1)
    assert.is_true(clean == clean)
  end)

  gpu_it("every unit count, layout, row group and tile height gives the same bits", function()
    local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 9 }
    local x = lcg_uniform({ 33, 50, 60 }, 5)
    local base = stack { layers = layers, batch = 33, steps = 50,
                                  kernel = { units = 4, gate_block = 1, row_group = 1 } }
    local y = base:forward(x)
    for _, kernel in ipairs { {}, { units = 8, gate_block = 1 }, { units = 16, gate_block = 1, row_group = 1 },
                              { units = 8, gate_block = 1, tile_rows = 8 }, { units = 4, gate_block = 1 },
                              { units = 4, row_group = 8, gate_block = 1 }, { units = 16, row_group = 8, gate_block = 1 },
                              { units = 16, row_group = 4, gate_block = 1 }, { units = 8, row_group = 2, gate_block = 1 },
                              { units = 4, gate_block = 4 }, { units = 8, gate_block = 4, tile_rows = 16 },
                              { units = 16, gate_block = 4 }, { units = 16, gate_block = 4, row_group = 4 },
                              { units = 32 } } do
      local plan = stack { layers = layers, batch = 33, steps = 50, kernel = kernel }
      assert.is_true(same_bits(plan:forward(x), y), plan.variant)
      assert.are.equal(0, plan.kernel.spills)
      plan:close()
    end
  end)

  gpu_it("the trace build records h and c as the reference traces them", function()
    local layers = spk.lstm.random { layers = 3, input = 60, hidden = 128, seed = 4 }
    local x = lcg_uniform({ 3, 9, 60 }, 8)
    for _, kernel in ipairs { { units = 4 }, { units = 8 }, { units = 8, row_group = 8 },
                              { units = 16, gate_block = 4 } } do
      local plan = stack { layers = layers, batch = 3, steps = 9, kernel = kernel }
      local plain = plan:forward(x)
      for _, trace in ipairs { { layer = 1, direction = "forward", steps = { 1, 2, 9 } },
                               { layer = 2, direction = "reverse", steps = { 9, 5, 1, 5 } },
                               { layer = 3, direction = "forward", steps = { 9 } } } do
        local y, info = plan:forward(x, { trace = trace })
        assert.is_true(same_bits(y, plain)) -- the trace build computes the same bits
        local _, ref = spk.lstm.reference(layers, x, { precision = "f64", trace = trace })
        assert.are.same(ref.trace.h:shape(), info.trace.h:shape())
        assert.are.same(trace.steps, info.trace.steps)
        assert.are.equal(trace.layer, info.trace.layer)
        assert.are.equal(trace.direction, info.trace.direction)
        for e = 1, #trace.steps do
          local h = spk.compare(info.trace.h:select(1, e), ref.trace.h:select(1, e))
          local c = spk.compare(info.trace.c:select(1, e), ref.trace.c:select(1, e))
          assert.is_true(h.max_abs <= 1e-5 and c.max_abs <= 1e-5,
            ("layer %d %s step %d: h %.3g, c %.3g"):format(trace.layer, trace.direction, trace.steps[e],
              h.max_abs, c.max_abs))
        end
      end
      -- out of range: a clear error, and the plan still works
      local ok, err = pcall(plan.forward, plan, x, { trace = { layer = 1, steps = { 10 } } })
      assert.is_false(ok)
      assert.matches("trace: step 10 is outside 1%.%.9", tostring(err))
      assert.is_true(same_bits(plan:forward(x), plain))
      plan:close()
    end
  end)

  gpu_it("reports the compiled variant and times with CUDA graphs", function()
    local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 5 }
    local plan = stack { layers = layers, batch = 8, steps = 589, kernel = { units = 8 } }
    assert.are.equal(16, plan.kernel.groups)
    assert.is_true(plan.kernel.registers > 0 and plan.kernel.capacity >= 16)
    local t = plan:time { rounds = 3, warmup = 1 }
    assert.are.equal(3, #t.samples)
    assert.is_true(t.median_ms > 0 and t.min_ms <= t.median_ms and t.median_ms <= t.max_ms)
  end)
end)
