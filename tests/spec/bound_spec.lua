-- The bound a stack's output is held to against the f64 reference: one rule
-- (lua/spk/bound.lua) that spk.lstm.bound, spk bench's verdicts and the test
-- helpers share.
local spk = require "spk"
local benchmark = require "spk.benchmark"

local function err(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

describe("spk.lstm.bound", function()
  it("holds a kernel to 1.1x the rel_l2 and 2x the max_abs of cuDNN standard's error on the same input", function()
    local b = spk.lstm.bound { against = { rel_l2 = 2e-7, max_abs = 5e-8 } }
    assert.are.same({ rel_l2 = 1.1 * 2e-7, max_abs = 2 * 5e-8 }, { rel_l2 = b.rel_l2, max_abs = b.max_abs })
    assert.are.same({ rel_l2 = 2e-7, max_abs = 5e-8 }, b.against)
    assert.matches("1.1x the rel_l2 and 2x the max_abs of cuDNN standard FP32", b.rule, 1, true)
    assert.are.equal("rel_l2 <= 2.2e-07, max_abs <= 1e-07 (1.1x the rel_l2 and 2x the max_abs of cuDNN standard "
      .. "FP32 on the same input (2e-07, 5e-08))", tostring(b))
    -- its only keys are the bounds: it is a bounds table for check_near as it is
    local keys = {}
    for k in pairs(b) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ "max_abs", "rel_l2" }, keys)
    assert.is_true((spk.check_near(spk.tensor { 1 }, spk.tensor({ 1 }, "f64"), b)))
  end)

  it("has the fixed bounds of cuDNN, the cpu backend and TF32 without a cuDNN row", function()
    assert.are.equal(1e-4, spk.lstm.bound { backend = "cudnn" }.rel_l2)
    assert.are.equal(1e-2, spk.lstm.bound { backend = "cudnn", math = "tf32" }.rel_l2)
    assert.are.equal(1e-4, spk.lstm.bound { backend = "cpu" }.rel_l2)
    assert.are.equal(1e-2, spk.lstm.bound { math = "tf32" }.rel_l2)
    assert.is_nil(spk.lstm.bound { backend = "cudnn" }.max_abs)
    -- 3xtf32 claims FP32's accuracy: held to FP32's rule, so it needs cuDNN's FP32 error
    assert.matches("relative to cuDNN standard's error", err(spk.lstm.bound, { math = "3xtf32" }))
    assert.matches("FP32", spk.lstm.bound { math = "3xtf32", against = { rel_l2 = 1e-7 } }.rule, 1, true)
  end)

  it("names what is wrong with its arguments", function()
    assert.matches("unknown option 'tol'", err(spk.lstm.bound, { tol = 1 }))
    assert.matches("math must be fp32, tf32 or 3xtf32, got fp16", err(spk.lstm.bound, { math = "fp16" }))
    assert.matches("against.rel_l2 must be a number >= 0", err(spk.lstm.bound, { against = { rel_l2 = -1 } }))
    assert.matches("layers = needs x =", err(spk.lstm.bound, { layers = spk.lstm.random { seed = 1 } }))
    if not spk.cuda.available() then
      assert.matches("needs a GPU", err(spk.lstm.bound, { layers = spk.lstm.random { seed = 1 },
                                                          x = spk.zeros(1, 2, 60) }))
    end
  end)

  it("is the rule spk bench's verdicts apply", function()
    local rows = {
      { batch = 1, backend = "cudnn", algo = "standard", rel_l2 = 4e-6, max_abs = 1e-6 },
      { batch = 1, backend = "persistent", rel_l2 = 4.3e-6, max_abs = 1.9e-6 },
      { batch = 1, backend = "cudnn", algo = "standard", math = "tf32", rel_l2 = 2e-3, max_abs = 1e-3 },
      { batch = 1, backend = "cluster", math = "tf32", rel_l2 = 2.1e-3 },
      { batch = 1, backend = "cluster", math = "3xtf32", rel_l2 = 4e-6 },
      { batch = 1, backend = "cpu", rel_l2 = 5e-5 },
    }
    local v = benchmark.judge(rows)
    local fp32 = spk.lstm.bound { against = { rel_l2 = 4e-6, max_abs = 1e-6 } }
    local tf32 = spk.lstm.bound { math = "tf32", against = { rel_l2 = 2e-3, max_abs = 1e-3 } }
    assert.are.same({ fp32.rel_l2, fp32.max_abs }, { v[2].bound, v[2].bound_max_abs })
    assert.are.same({ tf32.rel_l2, tf32.max_abs }, { v[4].bound, v[4].bound_max_abs })
    assert.are.same({ fp32.rel_l2, fp32.max_abs }, { v[5].bound, v[5].bound_max_abs }) -- 3xtf32: FP32's
    assert.are.equal(spk.lstm.bound { backend = "cudnn" }.rel_l2, v[1].bound)
    assert.are.equal(spk.lstm.bound { backend = "cpu" }.rel_l2, v[6].bound)
    assert.are.same(benchmark.held_to, require("spk.bound").held_to)
  end)

  gpu_it("measures cuDNN standard's error itself from layers and x", function()
    local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 1 }
    local x = spk.randn({ 2, 30, 60 }, { seed = 1 })
    local b = spk.lstm.bound { layers = layers, x = x }
    local cudnn <close> = spk.lstm.stack { backend = "cudnn", layers = layers, batch = 2, steps = 30, algo = "standard" }
    local c = spk.compare(cudnn:forward(x), (spk.lstm.reference(layers, x, { precision = "f64" })))
    assert.are.equal(1.1 * c.rel_l2, b.rel_l2)
    assert.are.equal(2 * c.max_abs, b.max_abs)
  end)
end)
