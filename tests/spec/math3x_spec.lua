-- math = "3xtf32" for the GPU stacks: split-TF32 input projections held to
-- FP32's accuracy class; the benchmark bounds and times their rows against
-- cuDNN's FP32 rows, since cuDNN has no such math.
local spk = require "spk"
local benchmark = require "spk.benchmark"

describe("math 3xtf32", function()
  it("is a math of the kernel backends and auto, not of cpu or cudnn", function()
    for _, backend in ipairs { "persistent", "cluster", "auto" } do
      assert.are.equal("3xtf32", spk.lstm.check_math("3xtf32", backend))
    end
    local ok, why = spk.lstm.check_math("3xtf32", "cudnn")
    assert.is_nil(ok)
    assert.matches('backend cudnn has no math "3xtf32"', why)
    ok, why = spk.lstm.check_math("3xtf32", "cpu")
    assert.is_nil(ok)
    assert.matches("the reference computes in f32 or f64 only", why)
    assert.are.equal(", 3xtf32 projections", spk.lstm.math_suffix("3xtf32"))
    assert.are.equal("", spk.lstm.math_suffix("fp32"))
  end)

  it("rows are held to the FP32 rows' bounds and timed against cuDNN's fastest FP32 algorithm", function()
    local rows = {
      { batch = 4, backend = "cudnn", algo = "standard", variant = "standard", median_ms = 9, rel_l2 = 2e-7, max_abs = 1e-7 },
      { batch = 4, backend = "cudnn", algo = "persist_static", variant = "persist_static", median_ms = 3,
        rel_l2 = 3e-6, max_abs = 1e-6 },
      { batch = 4, backend = "cudnn", algo = "standard", variant = "standard tf32", math = "tf32", median_ms = 2,
        rel_l2 = 3e-4, max_abs = 1e-4 },
      { batch = 4, backend = "cluster", math = "3xtf32", median_ms = 1.5, rel_l2 = 2.1e-7, max_abs = 1.9e-7 },
      { batch = 4, backend = "cluster", math = "3xtf32", median_ms = 1.5, rel_l2 = 2.3e-7, max_abs = 1e-7 },
      { batch = 4, backend = "persistent", math = "3xtf32", median_ms = 2, rel_l2 = 1e-7, max_abs = 2.1e-7 },
    }
    local verdicts = benchmark.judge(rows)
    assert.are.equal(1.1 * 2e-7, verdicts[4].bound) -- cuDNN standard FP32's, not its TF32 row's
    assert.is_true(verdicts[4].bound_ok)
    assert.is_false(verdicts[5].bound_ok) -- rel_l2 past 1.1x FP32's
    assert.is_false(verdicts[6].bound_ok) -- max abs past 2x FP32's
    local speedups = benchmark.speedups(rows)
    assert.are.equal(3 / 1.5, speedups[4]) -- cuDNN's fastest FP32 (3 ms), not its TF32 row (2 ms)
  end)

  it("gives cuDNN no rows of a math it does not have", function()
    local saved = spk.lstm.backends.fake
    spk.lstm.backends.fake = function(o)
      return { batch = o.batch, steps = o.steps, input = 6, hidden = 4, variant = "fake " .. (o.math or "fp32"),
               forward = function() return spk.zeros(o.batch, o.steps, 8) end,
               time = function() return { median_ms = 1, min_ms = 1, max_ms = 1, spread = 0, samples = { 1 } } end,
               close = function() end }
    end
    local ok, rows = pcall(benchmark.run, { batches = { 1 }, steps = 2, backends = { "fake", "cudnn" }, maths = { "3xtf32" },
      algos = { "standard" }, check = false, rounds = 1, warmup = 0,
      layers = spk.lstm.random { layers = 1, input = 6, hidden = 4, seed = 1 } })
    spk.lstm.backends.fake = saved
    assert.is_true(ok, tostring(rows))
    assert.are.equal(1, #rows)
    assert.are.same({ "fake", "3xtf32" }, { rows[1].backend, rows[1].math })
  end)

  gpu_it("runs a stack to FP32's accuracy, bitwise repeatably, on both kernel backends", function()
    local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 3 }
    local x = spk.randn({ 5, 40, 60 }, { seed = 4 })
    local truth = spk.lstm.reference(layers, x, { precision = "f64" })
    for _, backend in ipairs { "cluster", "persistent" } do
      local fp32 = spk.lstm.stack { layers = layers, batch = 5, steps = 40, backend = backend }
      local split = spk.lstm.stack { layers = layers, batch = 5, steps = 40, backend = backend, math = "3xtf32" }
      assert.are.equal("3xtf32", split.math)
      assert.matches("3xtf32 projections", split.variant)
      local y32, y3 = fp32:forward(x), split:forward(x)
      local e32, e3 = spk.compare(y32, truth), spk.compare(y3, truth)
      assert.is_true(e3.rel_l2 <= 1.5 * e32.rel_l2 + 1e-9,
        ("%s: 3xtf32 rel_l2 %.3g against fp32's %.3g"):format(backend, e3.rel_l2, e32.rel_l2))
      assert.are.equal(0, spk.compare(split:forward(x), y3).max_abs)
      fp32:close()
      split:close()
    end
  end)

  gpu_it("keeps FP32's accuracy at hidden 64 and 256 (input widths 128 and 512) on every kernel backend", function()
    for _, hidden in ipairs { 64, 256 } do
      local layers = spk.lstm.random { layers = 2, input = 60, hidden = hidden, seed = 5 }
      local x = spk.randn({ 5, 24, 60 }, { seed = 6 })
      local truth = spk.lstm.reference(layers, x, { precision = "f64" })
      for _, backend in ipairs { "cluster", "persistent", "tensor_core" } do
        local fp32 = spk.lstm.stack { layers = layers, batch = 5, steps = 24, backend = backend }
        local split = spk.lstm.stack { layers = layers, batch = 5, steps = 24, backend = backend, math = "3xtf32" }
        local y3 = split:forward(x)
        local e32, e3 = spk.compare(fp32:forward(x), truth), spk.compare(y3, truth)
        local what = ("hidden %d, %s: 3xtf32 rel_l2 %.3g max_abs %.3g against fp32's %.3g, %.3g"):format(hidden,
          backend, e3.rel_l2, e3.max_abs, e32.rel_l2, e32.max_abs)
        assert.is_true(e3.rel_l2 <= 1.5 * e32.rel_l2 + 1e-9 and e3.max_abs <= 2 * e32.max_abs + 1e-9, what)
        assert.are.equal(0, spk.compare(split:forward(x), y3).max_abs, what .. ": not repeatable")
        fp32:close()
        split:close()
      end
    end
  end)

  -- The TMA form (weights split when the plan is built) is chosen per process
  -- by $SPK_GEMM_3XTF32 ("f16", "tma" or "classic", else the build's default,
  -- the TMA form with FP16 parts after the first layer on compute capability
  -- 9.0): each choice runs in a child of its own.
  local function child(env, script)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(script)
    f:close()
    local p = io.popen(("%s %s run %s 2>&1"):format(env, shell_quote(SPK), shell_quote(path)))
    local out = p:read("a")
    p:close()
    os.remove(path)
    return out
  end

  local STACK = [[
local spk = require "spk"
-- the benchmark's widths at an odd batch, and hidden 64 over three layers (K = 128 after the first)
for _, shape in ipairs { { layers = 2, input = 60, hidden = 128, batch = 37, steps = 50, tag = "a" },
                         { layers = 3, input = 12, hidden = 64, batch = 5, steps = 17, tag = "b" } } do
  local layers = spk.lstm.random { layers = shape.layers, input = shape.input, hidden = shape.hidden, seed = 3 }
  local x = spk.randn({ shape.batch, shape.steps, shape.input }, { seed = 4 })
  local truth = spk.lstm.reference(layers, x, { precision = "f64" })
  for _, backend in ipairs { "cluster", "persistent" } do
    local fp32 = spk.lstm.stack { layers = layers, batch = shape.batch, steps = shape.steps, backend = backend }
    local split = spk.lstm.stack { layers = layers, batch = shape.batch, steps = shape.steps, backend = backend,
      math = "3xtf32" }
    local y3 = split:forward(x)
    if os.getenv("SPK_SPEC_OUT") then
      spk.save(os.getenv("SPK_SPEC_OUT") .. "-" .. backend .. shape.tag .. ".npy", y3)
    end
    local e32, e3 = spk.compare(fp32:forward(x), truth), spk.compare(y3, truth)
    print(("%s %.6e %.6e %.6e %.6e %s"):format(backend, e32.rel_l2, e3.rel_l2, e32.max_abs, e3.max_abs,
      spk.compare(split:forward(x), y3).max_abs == 0 and "repeatable" or "differs"))
  end
end
]]

  gpu_it("runs the stack's projections on each form within the FP32 rows' bounds, FP16 parts by default", function()
    local dir = spec_tmpdir()
    finally(function() os.execute("rm -rf " .. shell_quote(dir)) end)
    for _, choice in ipairs { "f16", "tma", "classic", "default" } do
      local env = choice == "default" and "env -u SPK_GEMM_3XTF32" or "SPK_GEMM_3XTF32=" .. choice
      local out = child(("%s SPK_SPEC_OUT=%s"):format(env, shell_quote(dir .. "/" .. choice)), STACK)
      local n = 0
      for backend, e32, e3, a32, a3, rep in out:gmatch("(%a+) (%S+) (%S+) (%S+) (%S+) (%a+)") do
        n = n + 1
        e32, e3, a32, a3 = tonumber(e32), tonumber(e3), tonumber(a32), tonumber(a3)
        local what = ("%s, %s: 3xtf32 rel_l2 %.3g max_abs %.3g against fp32's %.3g, %.3g"):format(choice, backend, e3,
          a3, e32, a32)
        assert.is_true(e3 <= 1.1 * e32 and a3 <= 2 * a32, what)
        assert.are.equal("repeatable", rep, what)
      end
      assert.are.equal(4, n, out)
    end
    -- compute capability 9.0: no variable is the FP16 parts' form, to the bit,
    -- and it is not the TF32 parts' (its layers after the first ran on it)
    if spk.cuda.device().cc == "9.0" then
      for _, backend in ipairs { "cluster", "persistent" } do
        for _, tag in ipairs { "a", "b" } do
          local function y(choice) return spk.load(("%s/%s-%s%s.npy"):format(dir, choice, backend, tag)) end
          assert.bits_equal(y("f16"), y("default"), backend .. tag .. ": the default against SPK_GEMM_3XTF32=f16")
          assert.is_true(spk.compare(y("f16"), y("tma")).max_abs > 0, backend .. tag .. ": f16 against tma")
        end
      end
    end
  end)

  gpu_it("names a value of SPK_GEMM_3XTF32 it does not take", function()
    local out = child("SPK_GEMM_3XTF32=fast", [[
local spk = require "spk"
local layers = spk.lstm.random { layers = 1, input = 60, hidden = 128, seed = 3 }
print(pcall(spk.lstm.stack, { layers = layers, batch = 2, steps = 4, backend = "cluster", math = "3xtf32" }))
]])
    assert.matches('SPK_GEMM_3XTF32 is "fast"; it takes "tma"', out)
  end)
end)
