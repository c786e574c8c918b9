-- The cluster backend (kernels/lstm_cluster.cu, src/lstm/cluster.c): option
-- checks, fitted variants and tile-height choice everywhere; on a GPU
-- (gpu_it: skipped without one) the fixtures and random stacks against
-- cuDNN's FP32 error, bitwise repeatability across runs, tile heights and
-- cluster sizes, the step-latency options (cell in lanes, late store, vector
-- pushes, mbarrier exchange) bit for bit, bitwise agreement with the
-- persistent kernel, NaN handling and timing.
local spk = require "spk"
local core = require "spk.core"

local function cluster(opts)
  opts.backend = "cluster"
  return spk.lstm.stack(opts)
end

describe("cluster backend options", function()
  local layers = spk.lstm.random { layers = 2, input = 6, hidden = 128, seed = 1 }

  it("is registered as a backend", function()
    assert.are.equal(spk.lstm.cluster_stack, spk.lstm.backends.cluster)
  end)

  it("refuses bad options before any device work, naming them", function()
    local function refuses(opts, pattern)
      local ok, err = pcall(cluster, opts)
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    refuses({ layers = layers, batch = 0, steps = 3 }, "batch must be a positive integer, got 0")
    refuses({ layers = layers, batch = 2, steps = 0 }, "steps must be a positive integer, got 0")
    refuses({ layers = layers, batch = 2, steps = 3, capacity = 4 }, "unknown option 'capacity'")
    refuses({ layers = {}, batch = 2, steps = 3 }, "layers must be a non%-empty list")
    refuses({ layers = layers, batch = 2, steps = 3, kernel = { cluster = 3 } }, "kernel.cluster 3 must be 1, 2, 4, 8 or 16")
    refuses({ layers = layers, batch = 2, steps = 3, kernel = { threads = 384 } }, "kernel.threads 384")
    refuses({ layers = layers, batch = 2, steps = 3, kernel = { tile_rows = 33 } }, "kernel.tile_rows must be 1 .. 32")
    refuses({ layers = layers, batch = 2, steps = 3, kernel = { weights = "global" } }, "kernel.weights must be")
    refuses({ layers = layers, batch = 2, steps = 3, kernel = { math = "tf32" } }, "plan option math = \"tf32\"")
    refuses({ layers = layers, batch = 2, steps = 3, kernel = { math = "fp16" } }, "kernel.math must be")
    refuses({ layers = layers, batch = 2, steps = 3, kernel = { unroll = 2 } }, "kernel: unknown option 'unroll' %(known: ")
    refuses({ layers = layers, batch = 2, steps = 3, kernel = { hidden = 64 } }, "hidden size 128, the kernel variant 64")
    local bad = { { W = layers[1].W, R = spk.zeros({ 2, 512, 64 }, "f32"), B = layers[1].B } }
    refuses({ layers = bad, batch = 1, steps = 2 }, "R")
    local W = layers[2].W:clone()
    W:set(1, 1, 1, 0 / 0)
    refuses({ layers = { layers[1], { W = W, R = layers[2].R, B = layers[2].B } }, batch = 1, steps = 2 },
      "layer 2: W has a non%-finite value")
    local odd = spk.lstm.random { layers = 1, input = 6, hidden = 100, seed = 1 }
    refuses({ layers = odd, batch = 1, steps = 2, kernel = { cluster = 8 } }, "not divisible by kernel.cluster 8")
  end)

  it("fits variants to the hidden size as the kernel derives them", function()
    local v = spk.lstm.cluster_variant {}
    assert.are.same({ 8, 512, 16, 64, 8, 1 }, { v.cluster, v.threads, v.units, v.gate_rows, v.chunks, v.cells })
    assert.are.equal("registers", v.weights)
    assert.are.equal("8", v.defines.CLUSTER)
    assert.are.equal(4 * (2 * 32 * 128 + 32 * 68), v.smem_bytes)
    v = spk.lstm.cluster_variant { cluster = 16, weights = "shared" }
    assert.are.same({ 16, 256, 8, "shared", "1" }, { v.cluster, v.threads, v.units, v.weights, v.defines.WEIGHTS_SHARED })
    v = spk.lstm.cluster_variant { hidden = 256 }
    assert.are.same({ 8, 512, 4 }, { v.cluster, v.threads, v.chunks })
  end)

  it("checks the step-latency options and describes them", function()
    local function refuses(kernel, pattern)
      local ok, err = pcall(cluster, { layers = layers, batch = 2, steps = 3, kernel = kernel })
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    refuses({ cell = "registers" }, 'kernel.cell must be "shared" or "lanes", got registers')
    refuses({ store = "never" }, 'kernel.store must be "step" or "late"')
    refuses({ push = 4 }, 'kernel.push must be "scalar", "vector", "direct" or "warp"')
    refuses({ push = "warp", cell = "lanes", exchange = "mbarrier" }, 'kernel.push "warp" needs kernel.gate_block 4')
    refuses({ push = "warp", gate_block = 4 }, 'kernel.push "warp" needs kernel.exchange "mbarrier"')
    refuses({ push = "direct", exchange = "mbarrier" },
      'kernel.push "direct" needs kernel.exchange "mbarrier" and kernel.cell "lanes"')
    refuses({ push = "direct", cell = "lanes" }, 'kernel.push "direct" needs')
    refuses({ exchange = "flags" }, 'kernel.exchange must be "barrier" or "mbarrier"')
    refuses({ exchange = "mbarrier", push = "scalar" }, 'needs kernel.push "vector" or "direct"')
    refuses({ gate_block = 2 }, "kernel.gate_block must be 1 or 4, got 2")
    refuses({ gates_ahead = 5, cell = "lanes", exchange = "mbarrier", push = "direct" },
      "kernel.gates_ahead must be 1 .. 4")
    refuses({ gates_ahead = 2 }, 'more than 1 needs kernel.push "direct" or "warp"')
    refuses({ gate_block = 4, cell = "lanes", exchange = "mbarrier" }, 'kernel.gate_block 4 needs kernel.push "direct"')
    refuses({ gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "direct", weights = "shared" },
      'kernel.weights "registers"')
    refuses({ directions = 3 }, "kernel.directions must be 1 or 2 %(directions a block runs%), got 3")
    refuses({ directions = 0 }, "kernel.directions must be a positive integer, got 0")
    refuses({ directions = 2 }, 'kernel.directions 2 needs kernel.push "direct" or "warp"')
    local both = spk.lstm.cluster_variant { gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "warp",
                                            tile_rows = 2, directions = 2 }
    local single = spk.lstm.cluster_variant { gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "warp",
                                              tile_rows = 2 }
    assert.are.same({ 2, "2", 128 }, { both.directions, both.defines.DIRECTIONS, both.threads })
    assert.are.same({ 1, "1" }, { single.directions, single.defines.DIRECTIONS })
    assert.are.equal(2 * single.smem_bytes, both.smem_bytes)
    refuses({ row_phases = 3 }, "kernel.row_phases must be 1 or 2 %(halves of a tile that take turns%), got 3")
    refuses({ row_phases = 2 }, 'kernel.row_phases 2 needs kernel.push "direct" or "warp"')
    refuses({ gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "warp", tile_rows = 1, row_phases = 2 },
      "kernel.row_phases 2 needs two row groups a tile: tile_rows 1, row_group 1")
    local halves = spk.lstm.cluster_variant { gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "warp",
                                              tile_rows = 2, row_phases = 2 }
    assert.are.same({ 2, "2", 1, "1" }, { halves.row_phases, halves.defines.ROW_PHASES, halves.row_group,
                                         single.defines.ROW_PHASES })
    assert.are.equal(2, single.row_group) -- one phase: the whole tile in a group
    assert.are.equal(single.smem_bytes + 16, halves.smem_bytes) -- two more mbarriers; h holds 2 rows in both
    local g = spk.lstm.cluster_variant { gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "direct",
                                         tile_rows = 4 }
    assert.are.same({ 4, 128, 8, 4, "4" }, { g.gate_block, g.threads, g.chunks, g.row_group, g.defines.GATE_BLOCK })
    local w = spk.lstm.cluster_variant { gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "warp" }
    assert.are.same({ "warp", "1", "1", "0" },
      { w.push, w.defines.WARP_PUSH, w.defines.DIRECT_PUSH, w.defines.VECTOR_PUSH })
    local d = spk.lstm.cluster_variant { exchange = "mbarrier", cell = "lanes", push = "direct", tile_rows = 2 }
    assert.are.same({ "direct", "1", "0", "1" },
      { d.push, d.defines.DIRECT_PUSH, d.defines.VECTOR_PUSH, d.defines.MBARRIER_EXCHANGE })
    local v = spk.lstm.cluster_variant { exchange = "mbarrier", cell = "lanes", tile_rows = 8 }
    assert.are.same({ "lanes", "step", "vector", "mbarrier", 8, "1", "1" },
      { v.cell, v.store, v.push, v.exchange, v.row_group, v.defines.MBARRIER_EXCHANGE, v.defines.VECTOR_PUSH })
    assert.are.equal(16 + 4 * 2 * 8 * 128, v.smem_bytes) -- mbarriers, two h buffers, no pre-activations
    v = spk.lstm.cluster_variant { cell = "lanes", tile_rows = 3 }
    assert.are.equal(2, v.row_group) -- groups never wider than the tile
    local narrow = spk.lstm.random { layers = 1, input = 6, hidden = 16, seed = 1 }
    local ok, err = pcall(cluster, { layers = narrow, batch = 1, steps = 2, kernel = { push = "vector" } })
    assert.is_false(ok)
    assert.matches("multiple of 4 units", tostring(err))
  end)

  it("takes a default per batch from the batch table", function()
    for _, batch in ipairs { 1, 2, 8, 9, 17, 32, 33, 49, 64, 65, 129, 256, 257, 1000 } do
      local k = spk.lstm.cluster_default(batch)
      local v = spk.lstm.cluster_variant { cluster = k.cluster, threads = k.threads, tile_rows = k.tile_rows,
        gate_block = k.gate_block, gates_ahead = k.gates_ahead, cell = k.cell_in_lanes and "lanes" or "shared",
        store = k.late_store and "late" or "step",
        push = k.warp_push and "warp" or k.direct_push and "direct" or k.vector_push and "vector" or "scalar",
        exchange = k.mbarrier_exchange and "mbarrier" or "barrier" }
      assert.are.equal(k.row_group, v.row_group, "batch " .. batch)
      assert.are.equal(k.gate_block, v.gate_block, "batch " .. batch)
      assert.are.equal(k.gates_ahead, v.gates_ahead, "batch " .. batch)
      assert.is_true(k.tile_rows == nil or (k.tile_rows >= 1 and k.tile_rows <= 32), "batch " .. batch)
    end
    local blocks, warp, ahead, tiles, phases = {}, {}, {}, {}, {}
    for _, batch in ipairs { 1, 8, 32, 64, 128, 129, 256, 257 } do
      local k = spk.lstm.cluster_default(batch)
      blocks[#blocks + 1], warp[#warp + 1], ahead[#ahead + 1] = k.gate_block, k.warp_push, k.gates_ahead
      tiles[#tiles + 1], phases[#phases + 1] = k.tile_rows, k.row_phases
    end
    assert.are.same({ 4, 4, 4, 4, 4, 4, 4, 4 }, blocks)
    assert.are.same({ true, true, true, true, false, false, false, true }, warp)
    assert.are.same({ 2, 3, 3, 3, 3, 3, 3, 1 }, ahead)
    assert.are.same({ 1, 1, 1, 2, 4, 8, 8, 16 }, tiles)
    assert.are.same({ 1, 1, 1, 1, 1, 2, 2, 1 }, phases) -- 8-row tiles in two halves of 4
    assert.has_error(function() spk.lstm.cluster_default(0) end)
    -- a hidden size no row fits: the generic fit
    local k = spk.lstm.cluster_default(32, 16)
    assert.is_false(k.vector_push)
  end)

  it("picks the smallest tile height whose clusters all run at once", function()
    local heights = { 1, 2, 4, 8, 16, 32 }
    local s = core.cluster_schedule_pick(32, heights, { 16, 16, 16, 16, 16, 16 })
    assert.are.same({ 4, 8, 16, 1, 1 }, { s.tile_rows, s.tiles, s.clusters, s.waves, s.launches })
    s = core.cluster_schedule_pick(1000, heights, { 16, 16, 16, 16, 16, 16 })
    assert.are.same({ 32, 64, 4 }, { s.tile_rows, s.clusters, s.waves })
    s = core.cluster_schedule_pick(33, heights, { 16, 16, 16, 16, 16, 16 }, 8)
    assert.are.same({ 8, 5 }, { s.tile_rows, s.tiles })
  end)

  nogpu_it("says there is no device where there is none", function()
    local ok, err = pcall(cluster, { layers = layers, batch = 1, steps = 2 })
    assert.is_false(ok)
    assert.matches("no CUDA device", tostring(err))
  end)
end)

-- ---- GPU ---------------------------------------------------------------------

local fixtures = "tests/fixtures"

local function describe_plan(plan)
  return ("%s; kernel: %d registers, %d bytes local, %d bytes smem, max active clusters %d"):format(plan.variant,
    plan.kernel.registers, plan.kernel.spills, plan.kernel.smem, plan.kernel.max_active_clusters)
end

describe("cluster backend (GPU)", function()
  for _, case in ipairs(fixture_cases(fixtures)) do
    gpu_it("matches fixture " .. case .. " within cuDNN FP32's error", function()
      local dir = fixtures .. "/" .. case
      local layers = spk.lstm.load(dir)
      local x = spk.load(dir .. "/x.npy")
      local s = x:shape()
      local plan = cluster { layers = layers, batch = s[1], steps = s[2] }
      local y = plan:forward(x)
      check_against_cudnn(y, spk.load(dir .. "/y_f64.npy"), spk.load(dir .. "/y_cudnn_f32.npy"),
        case .. " (" .. describe_plan(plan) .. ")")
      assert.are.equal(0, plan.kernel.spills, "local memory per thread: " .. describe_plan(plan))
    end)
  end

  local cases = {}
  for _, b in ipairs { 1, 3, 8, 32, 33, 64, 256 } do
    for _, t in ipairs { 1, 2, 589 } do cases[#cases + 1] = { b, t } end
  end
  for _, case in ipairs(cases) do
    local batch, steps = case[1], case[2]
    gpu_it(("batch %d steps %d: within cuDNN's error, bitwise repeatable"):format(batch, steps), function()
      local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = batch * 7919 + steps }
      local x = lcg_uniform({ batch, steps, 60 }, batch + steps)
      local plan = cluster { layers = layers, batch = batch, steps = steps }
      local y = plan:forward(x)
      local ycudnn, y64 = cudnn_oracle(layers, x)
      y64 = y64 or spk.lstm.reference(layers, x, { precision = "f64" })
      check_against_cudnn(y, y64, ycudnn, describe_plan(plan))
      local rounds = steps >= 589 and batch >= 64 and 3 or 10
      for i = 1, rounds - 1 do
        local same, c = bit_compare(plan:forward(x), y)
        assert.is_true(same, ("run %d differs from run 1: %s"):format(i + 1, tostring(c)))
      end
      local same, c = bit_compare(plan:forward(x:cuda()):cpu(), y)
      assert.is_true(same, "device input: " .. tostring(c))
    end)
  end

  gpu_it("the same bits for every tile height and both cluster sizes", function()
    local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 21 }
    local x = lcg_uniform({ 37, 64, 60 }, 5)
    local base = cluster { layers = layers, batch = 37, steps = 64, kernel = { tile_rows = 1 } }
    local y = base:forward(x)
    for _, kernel in ipairs {
      { tile_rows = 2 }, { tile_rows = 4 }, { tile_rows = 8 }, { tile_rows = 16 }, { tile_rows = 32 },
      { cluster = 16, tile_rows = 8 }, { cluster = 16 }, { weights = "shared", tile_rows = 16 },
      { row_group = 1, tile_rows = 32 }, { row_group = 4, min_blocks = 1 },
    } do
      local plan = cluster { layers = layers, batch = 37, steps = 64, kernel = kernel }
      local same, c = bit_compare(plan:forward(x), y)
      assert.is_true(same, ("%s differs from tile_rows 1: %s"):format(describe_plan(plan), tostring(c)))
      plan:close()
    end
  end)

  -- Every step-latency option keeps the sums and the cells: the same bits.
  local option_sets = {
    { store = "late" }, { cell = "lanes" }, { cell = "lanes", store = "late" },
    { cell = "lanes", store = "late", push = "vector" }, { push = "vector" }, { store = "late", push = "vector" },
    { exchange = "mbarrier" }, { cell = "lanes", exchange = "mbarrier" },
    { cell = "lanes", store = "late", exchange = "mbarrier" },
    { cluster = 16, cell = "lanes", store = "late", exchange = "mbarrier" },
    { cluster = 16, push = "vector" },
    { cell = "lanes", exchange = "mbarrier", push = "direct" },
    { cluster = 16, cell = "lanes", store = "late", exchange = "mbarrier", push = "direct" },
    -- gate blocks over 8 chunks add the same products in the same order as one gate row over 8
    { threads = 128, gate_block = 4, cell = "lanes", store = "late", exchange = "mbarrier", push = "direct" },
    { cluster = 16, threads = 64, gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "direct" },
    { threads = 128, gate_block = 4, cell = "lanes", store = "late", exchange = "mbarrier", push = "warp" },
    { cluster = 16, threads = 64, gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "warp" },
    -- the gates fetched further ahead: the same inputs, the same bits
    { threads = 128, gate_block = 4, cell = "lanes", store = "late", exchange = "mbarrier", push = "warp",
      gates_ahead = 2 },
    { threads = 128, gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "direct", gates_ahead = 4 },
    { cell = "lanes", store = "late", exchange = "mbarrier", push = "direct", gates_ahead = 3 },
    -- both directions of a tile in one block
    { threads = 128, gate_block = 4, cell = "lanes", store = "late", exchange = "mbarrier", push = "warp",
      gates_ahead = 3, directions = 2 },
    { cluster = 16, cell = "lanes", exchange = "mbarrier", push = "direct", directions = 2 },
    -- the tile's halves taking turns (tiles of two row groups and up; batch 37
    -- leaves a last tile whose second half is short, or empty at tile 32)
    { threads = 128, gate_block = 4, cell = "lanes", store = "late", exchange = "mbarrier", push = "warp",
      gates_ahead = 3, row_phases = 2 },
    { cell = "lanes", exchange = "mbarrier", push = "direct", row_phases = 2 },
    { cluster = 16, threads = 64, gate_block = 4, cell = "lanes", exchange = "mbarrier", push = "direct",
      row_phases = 2 },
    { threads = 128, gate_block = 4, cell = "lanes", store = "late", exchange = "mbarrier", push = "warp",
      gates_ahead = 3, directions = 2, row_phases = 2 },
  }
  for _, tile in ipairs { 1, 3, 8, 32 } do
    gpu_it(("every step-latency option gives the same bits (tile %d)"):format(tile), function()
      local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 22 }
      local x = lcg_uniform({ 37, 64, 60 }, 6)
      local y = cluster { layers = layers, batch = 37, steps = 64, kernel = { tile_rows = tile } }:forward(x)
      for _, options in ipairs(option_sets) do
        local kernel = { tile_rows = tile }
        for k, v in pairs(options) do kernel[k] = v end
        -- (two row phases need two row groups: not at tile 1)
        if not (options.row_phases and tile == 1) then
          local plan = cluster { layers = layers, batch = 37, steps = 64, kernel = kernel }
          -- an odd forced height in the lanes form sizes the kernel to exactly 3
          -- rows, which may spill a few bytes at 64 registers; the bits must agree
          if tile ~= 3 then assert.are.equal(0, plan.kernel.spills, describe_plan(plan)) end
          local same, c = bit_compare(plan:forward(x), y)
          assert.is_true(same, ("%s differs from the plain kernel: %s"):format(describe_plan(plan), tostring(c)))
          plan:close()
        end
      end
    end)
  end

  -- (3 steps ahead: more stages than 1 and 2 steps use)
  local forms = { { push = "vector" }, { push = "direct" }, { push = "direct", gate_block = 4 },
                  { push = "warp", gate_block = 4 }, { push = "warp", gate_block = 4, gates_ahead = 3 },
                  { push = "warp", gate_block = 4, gates_ahead = 3, directions = 2 },
                  -- tiles of 4 rows in two row groups: batch 5 leaves a tile of one row (an empty second half)
                  { push = "warp", gate_block = 4, gates_ahead = 3, row_phases = 2, tile_rows = 4 } }
  for _, form in ipairs(forms) do
    local push, gate_block, gates_ahead, directions = form.push, form.gate_block, form.gates_ahead, form.directions
    local row_phases, tile_rows = form.row_phases, form.tile_rows
    local name = push .. (gate_block and ", gate blocks" or "") ..
      (gates_ahead and (", gates %d steps ahead"):format(gates_ahead) or "") ..
      (directions and ", both directions in a block" or "") .. (row_phases and ", two row phases" or "")
    gpu_it(("the mbarrier exchange (%s pushes): 1 and 2 steps, waves, NaN, repeatability"):format(name), function()
      local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 23 }
      -- gate blocks at 128 threads: 8 chunks, the plain kernel's sums
      local kernel = { cell = "lanes", store = "late", exchange = "mbarrier", push = push, gate_block = gate_block,
                       threads = gate_block and 128 or nil, gates_ahead = gates_ahead, directions = directions,
                       row_phases = row_phases, tile_rows = tile_rows }
      for _, steps in ipairs { 1, 2, 3 } do
        local x = lcg_uniform({ 5, steps, 60 }, steps)
        local ours = cluster { layers = layers, batch = 5, steps = steps, kernel = kernel }
        local plain = cluster { layers = layers, batch = 5, steps = steps, kernel = {} }
        local same, c = bit_compare(ours:forward(x), plain:forward(x))
        assert.is_true(same, ("steps %d: %s"):format(steps, tostring(c)))
      end
      local xb = lcg_uniform({ 1024, 16, 60 }, 10)
      local waves = cluster { layers = layers, batch = 1024, steps = 16,
                              kernel = { tile_rows = row_phases and 2 or 1, exchange = "mbarrier", cell = "lanes",
                                         push = push, gate_block = gate_block, threads = kernel.threads,
                                         gates_ahead = gates_ahead, directions = directions,
                                         row_phases = row_phases } }
      assert.is_true(waves.schedule.waves > 1, describe_plan(waves))
      local one = cluster { layers = layers, batch = 1024, steps = 16, kernel = { tile_rows = 32 } }
      local same, c = bit_compare(waves:forward(xb), one:forward(xb))
      assert.is_true(same, tostring(c))
      local x = lcg_uniform({ 2, 40, 60 }, 11)
      x:set(1, 2, 1, 0 / 0)
      local nan = cluster { layers = layers, batch = 2, steps = 40, kernel = kernel }
      local y = nan:forward(x)
      local v = y:get(1, 40, 1)
      assert.is_true(v ~= v, "row 1 after the NaN step must be NaN")
      local clean = y:get(2, 40, 1)
      assert.is_true(clean == clean, "row 2 never saw a NaN")
      for i = 1, 5 do
        local again = nan:forward(x)
        local same2, c2 = bit_compare(again, y)
        assert.is_true(same2, ("run %d: %s"):format(i + 1, tostring(c2)))
      end
    end)
  end

  gpu_it("the same bits as the persistent kernel with the same chunk split", function()
    local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 8 }
    for _, batch in ipairs { 1, 8, 20, 33, 64 } do -- every cluster size of the batch table's rows
      local x = lcg_uniform({ batch, 589, 60 }, 3 + batch)
      local ours = cluster { layers = layers, batch = batch, steps = 589, kernel = { cluster = 8 } } -- 8 chunks
      local theirs = spk.lstm.stack { layers = layers, batch = batch, steps = 589, backend = "persistent",
                                      kernel = { units = 4, threads = 128, gate_block = 1 } } -- 8 chunks per gate row
      local a, b = ours:forward(x), theirs:forward(x)
      local same, c = bit_compare(a, b)
      assert.is_true(same, ("batch %d: cluster (%s) vs persistent: %s"):format(batch, ours.variant, tostring(c)))
      local mbar = cluster { layers = layers, batch = batch, steps = 589,
                             kernel = { cell = "lanes", store = "late", exchange = "mbarrier",
                                        tile_rows = batch == 1 and 1 or 8 } }
      same, c = bit_compare(mbar:forward(x), b)
      assert.is_true(same, ("batch %d: cluster (%s) vs persistent: %s"):format(batch, mbar.variant, tostring(c)))
      -- 4 chunks per gate row on both sides (a different summation order than above)
      local direct = cluster { layers = layers, batch = batch, steps = 589,
                               kernel = { cluster = 16, threads = 128, cell = "lanes", store = "late",
                                          exchange = "mbarrier", push = "direct", tile_rows = batch == 1 and 1 or 4 } }
      local four = spk.lstm.stack { layers = layers, batch = batch, steps = 589, backend = "persistent",
                                    kernel = { units = 4, threads = 64, gate_block = 1 } }
      same, c = bit_compare(direct:forward(x), four:forward(x))
      assert.is_true(same, ("batch %d: cluster (%s) vs persistent (%s): %s"):format(batch, direct.variant,
        four.variant, tostring(c)))
      -- gate blocks with 4 chunks (cluster 4: 32 units a block) against the same 4-chunk persistent kernel
      local blocks = cluster { layers = layers, batch = batch, steps = 589,
                               kernel = { cluster = 4, threads = 128, gate_block = 4, cell = "lanes", store = "late",
                                          exchange = "mbarrier", push = "direct", tile_rows = batch == 1 and 1 or 4 } }
      same, c = bit_compare(blocks:forward(x), four:forward(x))
      assert.is_true(same, ("batch %d: cluster (%s) vs persistent (%s): %s"):format(batch, blocks.variant,
        four.variant, tostring(c)))
      -- the batch table's default (2, 4 or 8 chunks, with or without gate blocks) against the persistent
      -- kernel with one gate row a thread and the same chunks: the same products in the same order
      local default = cluster { layers = layers, batch = batch, steps = 589 }
      local chunks = default.kernel.chunks
      local same_split = spk.lstm.stack { layers = layers, batch = batch, steps = 589, backend = "persistent",
                                          kernel = { units = 4, threads = 16 * chunks, gate_block = 1 } }
      same, c = bit_compare(default:forward(x), same_split:forward(x))
      assert.is_true(same, ("batch %d: cluster (%s) vs persistent (%s): %s"):format(batch, default.variant,
        same_split.variant, tostring(c)))
    end
  end)

  gpu_it("refuses wrong x shapes and dtypes; NaN in x gives NaN, not a hang", function()
    local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 2 }
    local plan = cluster { layers = layers, batch = 2, steps = 4 }
    assert.has_error(function() plan:forward(spk.zeros({ 2, 5, 60 }, "f32")) end)
    assert.has_error(function() plan:forward(spk.zeros({ 2, 4, 60 }, "f64")) end)
    local x = spk.zeros({ 2, 4, 60 }, "f32")
    x:set(1, 2, 1, 0 / 0)
    local y = plan:forward(x)
    local v = y:get(1, 4, 1)
    assert.is_true(v ~= v, "row 1 after the NaN step must be NaN")
    local clean = y:get(2, 4, 1)
    assert.is_true(clean == clean, "row 2 never saw a NaN")
  end)

  gpu_it("reports the kernel and schedule, runs waves past what fits, times with CUDA graphs", function()
    local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 5 }
    local plan = cluster { layers = layers, batch = 8, steps = 589 }
    assert.is_true(plan.kernel.registers > 0 and plan.kernel.max_active_clusters >= 2, describe_plan(plan))
    assert.are.equal(0, plan.kernel.spills)
    assert.are.equal(spk.lstm.cluster_default(8, 128).cluster, plan.kernel.cluster) -- the batch table's row
    assert.are.equal(1, plan.schedule.launches)
    assert.are.equal(2 * plan.schedule.tiles, plan.schedule.clusters)
    local t = plan:time { rounds = 3, warmup = 1 }
    assert.are.equal(3, #t.samples)
    assert.is_true(t.median_ms > 0 and t.min_ms <= t.median_ms and t.max_ms >= t.median_ms)
    -- more clusters than fit at once: one launch, in waves, the same bits as one wave
    local big = spk.lstm.random { layers = 1, input = 60, hidden = 128, seed = 6 }
    local xb = lcg_uniform({ 1024, 16, 60 }, 9)
    local waves = cluster { layers = big, batch = 1024, steps = 16, kernel = { tile_rows = 1 } }
    assert.is_true(waves.schedule.waves > 1, describe_plan(waves))
    local one = cluster { layers = big, batch = 1024, steps = 16, kernel = { tile_rows = 32 } }
    local same, c = bit_compare(waves:forward(xb), one:forward(xb))
    assert.is_true(same, tostring(c))
  end)
end)
