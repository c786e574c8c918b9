-- A regression suite for one kernel variant, written by `spk test --init`.
-- Run it with `spk test <this folder>`; spk's docs/testing.md walks through
-- it and through reading its failures.
--
-- For the variant and the shape below it checks that
--   * the variant's options are valid at every tile height (no GPU needed);
--   * its output is within BOUND of the f64 reference;
--   * it is bitwise deterministic: the same bits on a repeat, and at every
--     tile height of TILE_HEIGHTS;
--   * it is not slower than the last accepted baseline: baselines/<BASELINE>.json
--     beside this file keeps one per device; the first run on a device
--     records it (that spec is then reported as skipped), and
--     `spk test --update-baseline` accepts the current speed as the new one.
-- Without a GPU the device specs are reported as skipped, never as passed.
local spk = require "spk"
require "spk.busted" -- gpu_it and the assertions (spk test loads it too)

-- The variant under test: a backend and its kernel options. These are the
-- cluster kernel's defaults at batch 8 spelled out (`spk help` lists each
-- backend's options, spk.lstm.kernel_options(BACKEND) returns them; an option
-- left out takes the batch's default).
local BACKEND = "cluster"
local KERNEL = { push = "direct", mapped_pushes = 2, cluster = 4, threads = 128, gate_block = 4, gates_ahead = 3 }
-- Tile heights that must give the same bits: a tile's rows change, the split
-- of each gate row's dot product (threads, gate_block) does not.
local TILE_HEIGHTS = { 1, 2, 4, 8 }
-- The shape: pyannote segmentation-3.0's LSTM stack at batch 8.
local SHAPE = { layers = 4, input = 60, hidden = 128, batch = 8, steps = 589 }
-- The bound against the f64 reference: nil is the one spk bench holds every
-- kernel to (spk.lstm.bound: 1.1x the rel_l2 and 2x the max_abs of cuDNN
-- standard's error on the same input, measured in the run), or a table of
-- one's own such as { rel_l2 = 1e-6, max_abs = 1e-6 } (spk's FP32 kernels
-- reach rel_l2 about 1.2e-7 and max_abs about 5e-8 here).
local BOUND = nil
-- The stored baseline and the slowdown tolerated beyond the measured spread.
local BASELINE, TOLERANCE, ROUNDS = "variant_b8", 0.03, 7

local layers = spk.lstm.random { layers = SHAPE.layers, input = SHAPE.input, hidden = SHAPE.hidden, seed = 1 }
local x = spk.randn({ SHAPE.batch, SHAPE.steps, SHAPE.input }, { seed = 1 })

local function kernel_with(tile_rows)
  local k = { hidden = SHAPE.hidden, tile_rows = tile_rows }
  for key, value in pairs(KERNEL) do k[key] = value end
  return k
end

local function plan_of(kernel)
  return spk.lstm.stack { backend = BACKEND, layers = layers, batch = SHAPE.batch, steps = SHAPE.steps,
                          kernel = kernel }
end

-- The fitted variant of a kernel table, checked without a device.
local function variant_of(kernel)
  return spk.lstm.kernel_variant { backend = BACKEND, kernel = kernel, batch = SHAPE.batch, hidden = SHAPE.hidden }
end

describe(("%s variant at batch %d"):format(BACKEND, SHAPE.batch), function()
  it("has valid options at every tile height", function()
    for _, rows in ipairs(TILE_HEIGHTS) do
      local v = variant_of(kernel_with(rows))
      assert.is_table(v.defines, "tile height " .. rows)
    end
  end)

  gpu_it("is within its bound of the f64 reference", function()
    local plan = plan_of(KERNEL)
    finally(function() plan:close() end)
    assert.within_reference(plan, layers, x, BOUND)
  end)

  gpu_it("gives the same bits on a repeat", function()
    local plan = plan_of(KERNEL)
    finally(function() plan:close() end)
    assert.bits_equal(plan:forward(x), plan:forward(x), "a repeat")
  end)

  gpu_it("gives the same bits at every tile height", function()
    local first
    for _, rows in ipairs(TILE_HEIGHTS) do
      local plan = plan_of(kernel_with(rows))
      local y = plan:forward(x)
      plan:close()
      if first then
        assert.bits_equal(first, y, ("tile height %d against %d"):format(rows, TILE_HEIGHTS[1]))
      else
        first = y
      end
    end
  end)

  gpu_it("is not slower than its last accepted baseline", function()
    local plan = plan_of(KERNEL)
    finally(function() plan:close() end)
    assert.no_slower(plan, { against = BASELINE, tolerance = TOLERANCE, rounds = ROUNDS })
  end)
end)
