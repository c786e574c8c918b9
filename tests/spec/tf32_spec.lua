-- math = "tf32" on the GPU stacks (TF32 input projections, FP32 recurrence)
-- and `spk bench --math`: the option's checks on every backend, auto's
-- pass-through, the TF32 bounds and speed-ups on made-up rows, the bench's
-- rows and usage; on a GPU (gpu_it: skipped without one) the persistent and
-- cluster kernels with TF32 projections within cuDNN standard TF32's error
-- against the f64 reference, bitwise repeatable, and FP32 still the default.
local spk = require "spk"
local benchmark = require "spk.benchmark"
local report = require "spk.report"
local tuning = require "spk.tuning"

local function refuses(opts, message)
  local ok, err = pcall(spk.lstm.stack, opts)
  assert.is_false(ok, "accepted: " .. tostring(opts.backend) .. " math " .. tostring(opts.math))
  assert.is_truthy(tostring(err):find(message, 1, true), tostring(err))
end

describe("math option of spk.lstm.stack", function()
  local layers = spk.lstm.random { layers = 2, input = 6, hidden = 128, seed = 1 }

  it("accepts fp32, tf32 and 3xtf32 and names them for anything else, on every GPU backend", function()
    assert.are.same({ "fp32", "tf32", "3xtf32" }, spk.lstm.math_modes)
    for _, backend in ipairs { "persistent", "cluster", "auto" } do
      for _, bad in ipairs { "fp16", "TF32", 32, true } do
        local shown = type(bad) == "string" and ('"' .. bad .. '"') or tostring(bad)
        refuses({ backend = backend, layers = layers, batch = 2, steps = 3, math = bad },
          'math must be "fp32", "tf32" or "3xtf32", got ' .. shown)
      end
    end
    assert.are.equal("tf32", spk.lstm.check_math("tf32", "persistent"))
    assert.are.equal("fp32", spk.lstm.check_math(nil, "cluster"))
  end)

  it("backend cpu computes in f32 alone: fp32 is its math, tf32 a clear error", function()
    local plan = spk.lstm.stack { backend = "cpu", layers = layers, batch = 2, steps = 3, math = "fp32" }
    assert.are.equal("fp32", plan.math)
    assert.are.equal("fp32", spk.lstm.stack { backend = "cpu", layers = layers, batch = 2, steps = 3 }.math)
    refuses({ backend = "cpu", layers = layers, batch = 2, steps = 3, math = "tf32" },
      'backend cpu has no math "tf32": the reference computes in f32 or f64 only')
  end)

  it("the kernels take no math option: the input projections' math is the plan's", function()
    for _, backend in ipairs { "cluster", "persistent" } do
      local ok, err = pcall(spk.lstm.stack, { backend = backend, layers = layers, batch = 2, steps = 3,
                                              kernel = { math = "tf32" } })
      assert.is_false(ok)
      assert.matches("kernel: unknown option 'math'", tostring(err))
    end
  end)

  it("the C bindings refuse other names themselves", function()
    local core = require "spk.core"
    for _, backend in ipairs { "persistent", "cluster" } do
      local ok, err = pcall(core.plan_new, { backend = backend, layers = layers, batch = 2, steps = 3, math = "pedantic" })
      assert.is_false(ok)
      assert.matches('math must be "fp32", "tf32" or "3xtf32" %(the input projections%), got "pedantic"', tostring(err))
      ok, err = pcall(core.plan_new, { backend = backend, layers = layers, batch = 2, steps = 3, math = "bf16" })
      assert.is_false(ok)
      assert.matches('math must be "fp32", "tf32" or "3xtf32" %(the input projections%), got "bf16"', tostring(err))
    end
  end)
end)

describe("backend auto and math", function()
  local layers = spk.lstm.random { layers = 1, input = 3, hidden = 8, seed = 2 }

  -- Runs auto with tuning.choose answering `choice` and a backend "fake" that records its options.
  local function auto_with(choice, math_mode)
    local saved_choose, seen = tuning.choose, nil
    tuning.choose = function() return choice end
    spk.lstm.backends.fake = function(o)
      seen = o
      return { variant = "fake" }
    end
    local ok, plan = pcall(spk.lstm.stack, { backend = "auto", layers = layers, batch = 1, steps = 2,
                                             math = math_mode })
    tuning.choose, spk.lstm.backends.fake = saved_choose, nil
    assert.is_true(ok, tostring(plan))
    return seen, plan
  end

  it("hands the script's math to the chosen backend and never takes one from a record", function()
    local record = { backend = "fake", options = { kernel = { units = 4 }, math = "tf32" }, source = "record" }
    local seen = auto_with(record, nil)
    assert.is_nil(seen.math) -- the backend's FP32 default
    assert.are.same({ units = 4 }, seen.kernel)
    seen = auto_with(record, "fp32")
    assert.are.equal("fp32", seen.math)
    seen = auto_with({ backend = "fake", options = {}, source = "default" }, "tf32")
    assert.are.equal("tf32", seen.math)
  end)

  nogpu_it("without a device auto takes the cpu reference, which has no tf32", function()
    local ok, err = pcall(spk.lstm.stack, { backend = "auto", layers = layers, batch = 1, steps = 2, math = "tf32" })
    assert.is_false(ok)
    assert.matches('backend cpu has no math "tf32"', tostring(err))
    assert.are.equal("fp32", spk.lstm.stack { backend = "auto", layers = layers, batch = 1, steps = 2 }.math)
  end)
end)

describe("benchmark with tf32 rows", function()
  it("holds TF32 rows to cuDNN standard TF32's errors, else the fixed TF32 bound", function()
    local rows = {
      { batch = 1, backend = "cudnn", algo = "standard", rel_l2 = 4e-6, max_abs = 1e-6 },
      { batch = 1, backend = "cudnn", algo = "standard", math = "tf32", rel_l2 = 2e-3, max_abs = 1e-3 },
      { batch = 1, backend = "cudnn", algo = "persist_static", math = "tf32", rel_l2 = 3e-3 },
      { batch = 1, backend = "persistent", math = "tf32", rel_l2 = 2.1e-3, max_abs = 1.9e-3 },
      { batch = 1, backend = "cluster", math = "tf32", rel_l2 = 2.3e-3, max_abs = 1e-4 },
      { batch = 1, backend = "persistent", rel_l2 = 4.3e-6, max_abs = 1.9e-6 },
      { batch = 8, backend = "persistent", math = "tf32", rel_l2 = 5e-3 }, -- no cuDNN standard tf32 at 8
      { batch = 8, backend = "cluster", math = "tf32", rel_l2 = 2e-2 },
      { batch = 8, backend = "cudnn", algo = "standard", math = "tf32", rel_l2 = 2e-2 },
    }
    local v = benchmark.judge(rows)
    assert.are.same({ bound = 1e-4, bound_ok = true }, v[1])
    assert.are.same({ bound = benchmark.tf32_bound, bound_ok = true }, v[2]) -- cuDNN tf32: the fixed bound
    assert.are.equal(1e-2, benchmark.tf32_bound)
    assert.are.same({ bound = 1e-2, bound_ok = true }, v[3])
    assert.are.equal(1.1 * 2e-3, v[4].bound)
    assert.are.equal(2e-3, v[4].bound_max_abs)
    assert.is_true(v[4].bound_ok)
    assert.is_false(v[5].bound_ok) -- rel L2 beyond 1.1x cuDNN standard tf32's
    assert.are.equal(1.1 * 4e-6, v[6].bound) -- fp32 rows: still against cuDNN FP32
    assert.is_true(v[6].bound_ok)
    -- batch 8: cuDNN standard tf32 is the reference even where it misses its own bound
    assert.are.equal(1.1 * 2e-2, v[7].bound)
    assert.is_true(v[7].bound_ok)
    assert.is_true(v[8].bound_ok)
    assert.is_false(v[9].bound_ok)
    -- without that row: the fixed bound
    local alone = benchmark.judge { { batch = 4, backend = "persistent", math = "tf32", rel_l2 = 2e-2 },
                                    { batch = 4, backend = "cluster", math = "tf32", rel_l2 = 5e-3 } }
    assert.are.same({ bound = 1e-2, bound_ok = false }, alone[1])
    assert.are.same({ bound = 1e-2, bound_ok = true }, alone[2])
  end)

  it("compares a TF32 row's time with the fastest cuDNN TF32 algorithm, an FP32 row's with FP32's", function()
    local rows = {
      { batch = 1, backend = "cudnn", variant = "standard", median_ms = 10 },
      { batch = 1, backend = "cudnn", variant = "standard tf32", math = "tf32", median_ms = 5 },
      { batch = 1, backend = "cudnn", variant = "persist_static tf32", math = "tf32", median_ms = 4 },
      { batch = 1, backend = "persistent", median_ms = 2 },
      { batch = 1, backend = "persistent", math = "tf32", median_ms = 1 },
      { batch = 8, backend = "persistent", math = "tf32", median_ms = 1 }, -- no cuDNN tf32 at 8
      { batch = 8, backend = "cudnn", variant = "standard", median_ms = 3 },
    }
    local s, fastest, by_math = benchmark.speedups(rows)
    assert.are.equal(1, s[1])
    assert.are.equal(0.8, s[2])
    assert.are.equal(1, s[3])
    assert.are.equal(5, s[4])
    assert.are.equal(4, s[5])
    assert.is_nil(s[6])
    assert.are.equal(1, s[7])
    assert.are.same({ median_ms = 10, variant = "standard" }, fastest[1])
    assert.are.equal(fastest, by_math.fp32)
    assert.are.same({ median_ms = 4, variant = "persist_static tf32" }, by_math.tf32[1])
  end)

  it("adds a row per math for each GPU backend and cuDNN algorithm, the cpu row alone", function()
    local seen = {}
    spk.lstm.backends.fake = function(o)
      seen[#seen + 1] = o.math or "default"
      return spk.lstm.backends.cpu { layers = o.layers, batch = o.batch, steps = o.steps, backend = "cpu" }
    end
    local ok, rows, info = pcall(benchmark.run, {
      batches = { 2 }, steps = 2, backends = { "fake", "cudnn", "cpu" }, algos = { "standard" },
      maths = { "fp32", "tf32" }, layers = spk.lstm.random { layers = 1, input = 3, hidden = 8, seed = 4 },
      rounds = 1, warmup = 0 })
    spk.lstm.backends.fake = nil
    assert.is_true(ok, tostring(rows))
    assert.are.same({ "default", "tf32" }, seen)
    assert.are.same({ "fp32", "tf32" }, info.maths)
    local shape = {}
    for i, r in ipairs(rows) do shape[i] = { r.backend, r.math or "fp32" } end
    assert.are.same({ { "fake", "fp32" }, { "fake", "tf32" }, { "cudnn", "fp32" }, { "cudnn", "tf32" },
                      { "cpu", "fp32" } }, shape)
    assert.are.equal("standard tf32", rows[4].variant)
    assert.is_nil(rows[2].bound) -- no bound rule for "fake"
    assert.has_error(function() benchmark.run { maths = { "fp16" }, backends = { "cpu" } } end,
      "benchmark: maths: unknown math 'fp16' (known: fp32, tf32, 3xtf32)")
  end)
end)

describe("spk bench --math", function()
  it("is in the usage and refuses other names", function()
    local out, _, code = run_spk { "bench", "--help" }
    assert.are.equal(0, code)
    assert.matches("%-%-math fp32,tf32,3xtf32", out)
    assert.is_truthy(out:find("TF32 rows: cuDNN TF32", 1, true), out)
    local err
    out, err, code = run_spk { "bench", "--math", "fp32,bf16", "--backends", "cpu" }
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.is_truthy(err:find("--math: unknown math 'bf16' (known: 3xtf32, fp32, tf32)", 1, true), err)
  end)

  it("says how tf32 rows are bounded and compared", function()
    local out, err, code = run_spk { "bench", "--math", "tf32", "--backends", "cpu", "--batches", "1", "--steps", "2",
                                     "--hidden", "8", "--layers", "1", "--input", "3", "--rounds", "1",
                                     "--warmup", "0" }
    assert.are.equal(0, code, err)
    assert.matches("tf32 rows: the fastest cuDNN tf32 one", out)
    assert.matches("tf32 rows: cuDNN 0.01; persistent, cluster and tensor_core", out)
    assert.matches("cpu +f32 reference", out)
  end)
end)

-- ---- GPU ---------------------------------------------------------------------

-- Per batch, once: the stack, x, the f64 truth and cuDNN standard TF32's output.
local cases = {}
local function case_of(batch)
  if not cases[batch] then
    local steps = 589
    local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 31 * batch + 5 }
    local x = lcg_uniform({ batch, steps, 60 }, batch + 17)
    local cudnn = spk.lstm.stack { backend = "cudnn", layers = layers, batch = batch, steps = steps,
                                   algo = "standard", math = "tf32" }
    local ycudnn = cudnn:forward(x)
    cudnn:close()
    cases[batch] = { layers = layers, x = x, steps = steps, ycudnn = ycudnn,
                     y64 = spk.lstm.reference(layers, x, { precision = "f64" }) }
  end
  return cases[batch]
end

describe("math = \"tf32\" on the GPU", function()
  for _, backend in ipairs { "persistent", "cluster" } do
    for _, batch in ipairs { 1, 8, 64 } do
      gpu_it(("%s batch %d: within cuDNN standard tf32's error, bitwise repeatable, fp32 unchanged"):format(backend,
        batch), function()
        local c = case_of(batch)
        local shape = { layers = c.layers, batch = batch, steps = c.steps, backend = backend }
        local function plan_of(math_mode)
          local o = {}
          for k, v in pairs(shape) do o[k] = v end
          o.math = math_mode
          return spk.lstm.stack(o)
        end
        local tf32 = plan_of("tf32")
        assert.are.equal("tf32", tf32.math)
        assert.matches("tf32", tostring(tf32))
        assert.matches("tf32 projections", tf32.variant)
        local y = tf32:forward(c.x)
        check_against_cudnn(y, c.y64, c.ycudnn, ("%s tf32 batch %d (%s)"):format(backend, batch, tf32.variant))
        for run = 2, 3 do
          local same, cmp = bit_compare(tf32:forward(c.x), y)
          assert.is_true(same, ("run %d differs from run 1: %s"):format(run, tostring(cmp)))
        end
        tf32:close()
        -- FP32 strict stays the default, bit for bit; TF32 really changes the projections
        local default, fp32 = plan_of(nil), plan_of("fp32")
        assert.are.equal("fp32", default.math)
        assert.is_nil(tostring(default):find("tf32", 1, true))
        local y_default = default:forward(c.x)
        assert.is_true(same_bits(y_default, fp32:forward(c.x)))
        -- TF32 changes the output where cuBLAS's math "tf32" computes the
        -- first layer's projection in TF32 (it may pick an FP32 algorithm:
        -- the math allows TF32, it does not promise it), seen on the GEMM alone
        local xs = c.x:reshape { batch * c.steps, 60 }:cuda()
        local w = c.layers[1].W:to("f32"):cuda()
        local g32, g_tf32 = spk.cuda.zeros({ 2, batch * c.steps, 512 }), spk.cuda.zeros({ 2, batch * c.steps, 512 })
        spk.blas.gemm { a = xs, b = w, c = g32, transb = true, math = "fp32" }
        spk.blas.gemm { a = xs, b = w, c = g_tf32, transb = true, math = "tf32" }
        if not same_bits(g32:cpu(), g_tf32:cpu()) then assert.is_false(same_bits(y_default, y)) end
        default:close()
        fp32:close()
      end)
    end
  end

  gpu_it("auto passes math through to what it picks and stays fp32 unless asked", function()
    local c = case_of(8)
    local plan = spk.lstm.stack { backend = "auto", layers = c.layers, batch = 8, steps = c.steps }
    assert.are.equal("fp32", plan.math)
    plan:close()
    plan = spk.lstm.stack { backend = "auto", layers = c.layers, batch = 8, steps = c.steps, math = "tf32" }
    assert.are.equal("tf32", plan.math)
    check_against_cudnn(plan:forward(c.x), c.y64, c.ycudnn, "auto tf32: " .. tostring(plan.variant))
    plan:close()
  end)

  gpu_it("spk bench --math tf32 --batches 8 --rounds 1: tf32 rows of every backend, all within bounds", function()
    local dir = spec_tmpdir()
    local json = dir .. "/rows.json"
    local out, err, code = run_spk { "bench", "--math", "tf32", "--batches", "8", "--rounds", "1",
                                     "--backends", "persistent,cluster,cudnn", "--json", json }
    assert.are.equal(0, code, err)
    assert.matches("tf32 rows: the fastest cuDNN tf32 one", out)
    local doc = report.json_decode(read_file(json))
    local standard
    for _, r in ipairs(doc.rows) do
      assert.are.equal("tf32", r.math, r.backend .. " " .. tostring(r.variant))
      if r.backend == "cudnn" and r.algo == "standard" then standard = r end
    end
    assert.is_truthy(standard, "cuDNN standard tf32 row")
    assert.is_nil(standard.error)
    local seen = {}
    for _, r in ipairs(doc.rows) do
      if r.backend ~= "cudnn" or not r.error then
        assert.is_nil(r.error, r.error)
        assert.is_true(r.bound_ok, ("%s %s: rel_l2 %s, bound %s"):format(r.backend, r.variant, tostring(r.rel_l2),
          tostring(r.bound)))
        assert.is_true(r.median_ms > 0 and r.speedup > 0)
        seen[r.backend] = true
      end
      if r.backend ~= "cudnn" then
        assert.matches("tf32 projections", r.variant)
        assert.are.equal(1.1 * standard.rel_l2, r.bound)
      end
    end
    assert.are.same({ persistent = true, cluster = true, cudnn = true }, seen)
    os.execute("rm -rf " .. shell_quote(dir))
  end)
end)
