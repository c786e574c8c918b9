-- spk.busted, the test helpers of researchers' suites (spk test loads them;
-- this repository's helper.lua uses them too): each assertion passes where it
-- should and fails where it should, with the documented message;
-- bits_equal's first difference against a plain scan; no_slower's statistics
-- on scripted plans (ratios, the interleaved order, a drifting machine,
-- tolerance against spread), on cpu plans made slower, and its stored
-- baselines (first run, update, refusals); on a GPU, the same with the
-- kernels. `spk test` itself is driven from outside in spk_test_spec.lua.
local spk = require "spk"
local helpers = require "spk.busted"
local report = require "spk.report"

-- The message of a call that must fail (an assertion or an error).
local function failure_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected a failure")
  return tostring(err)
end

-- The pending (skip) object a spec ends with, and its message.
local function skip_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected the spec to end as skipped")
  local mt = getmetatable(err)
  assert.are.equal("pending", mt and mt.__type, "not busted's pending: " .. tostring(err))
  return tostring(err)
end

-- Whether the first GPU runs the cluster kernel (compute capability 9.0).
local function has_clusters()
  return (tonumber(spk.cuda.info().devices[1].cc) or 0) >= 9.0
end

local function files_in(dir)
  local p = io.popen("ls -A " .. shell_quote(dir) .. " 2>/dev/null")
  local names = {}
  for line in p:lines() do names[#names + 1] = line end
  p:close()
  table.sort(names)
  return names
end

describe("spk.busted", function()
  it("provides this suite's gpu_it and nogpu_it", function()
    assert.are.equal(helpers.gpu_it, gpu_it)
    assert.are.equal(helpers.nogpu_it, nogpu_it)
    assert.are.equal(spk.cuda.available(), helpers.has_gpu())
  end)

  it("says the summary line as scripts/test.sh does", function()
    assert.are.equal("3 passed, 0 failed", helpers.summary_line { passed = 3, failed = 0, skipped = 0 })
    assert.are.equal("3 passed, 1 failed, 2 skipped", helpers.summary_line { passed = 3, failed = 1, skipped = 2 })
    local script = read_file("scripts/test.sh")
    assert.matches('echo "$passed passed, $failed failed, $skipped skipped"', script, 1, true)
    assert.matches('echo "$passed passed, $failed failed"', script, 1, true)
  end)
end)

describe("assert.tensor_near", function()
  it("fails with spk.check_near's report as its message", function()
    local truth = spk.tensor({ 1, 2, 3 }, "f64")
    local result = spk.tensor { 1, 2.5, 3 }
    local ok, check = spk.check_near(result, truth, { rel_l2 = 1e-3 })
    assert.is_false(ok)
    assert.are.equal("Expected tensors to be near:\n" .. check,
      failure_of(assert.tensor_near, result, truth, { rel_l2 = 1e-3 }))
    local _, near = spk.check_near(truth, truth, { rel_l2 = 1e-3 })
    assert.are.equal("Expected tensors not to be near:\n" .. near,
      failure_of(assert.is_not.tensor_near, truth, truth, { rel_l2 = 1e-3 }))
  end)
end)

describe("assert.bits_equal", function()
  local a = spk.arange(24):view { 2, 3, 4 }:to("f32")

  it("passes for the same bits, whatever the layout", function()
    assert.bits_equal(a, a:clone())
    local t = a:transpose(1, 3):contiguous():transpose(1, 3) -- the same values, other strides
    assert.is_false(t:is_contiguous())
    assert.bits_equal(a, t)
    assert.bits_equal(spk.tensor { 0 / 0, 1, math.huge }, spk.tensor { 0 / 0, 1, math.huge })
  end)

  it("names the first differing element and both values with their bits", function()
    local b = a:clone()
    b:set(2, 1, 3, 99)
    b:set(2, 3, 4, 5)
    assert.are.equal("Expected tensors to be equal bit for bit:\n"
      .. "first difference at index [2, 1, 3] (element 15 of 24): a = 14 (bits 0x41600000), "
      .. "b = 99 (bits 0x42c60000); max_ulp 23461888", failure_of(assert.bits_equal, a, b))
    assert.matches("^Expected tensors to be equal bit for bit:\ntile 4: first difference at index %[2, 1, 3%]",
      failure_of(assert.bits_equal, a, b, "tile 4"))
  end)

  it("finds the first difference a plain scan finds, in row-major order, on any layout", function()
    local state = 7
    local function integer(lo, hi) -- a fixed LCG: the same positions on every machine
      state = (state * 1103515245 + 12345) % 2147483648
      return lo + state % (hi - lo + 1)
    end
    for trial = 1, 25 do
      local base = spk.randn({ 3, 17, 11 }, { seed = trial })
      local x = trial % 2 == 0 and base:transpose(1, 2) or base -- a non-contiguous view every other trial
      local y = x:clone()
      local shape = x:shape()
      for _ = 1, trial % 4 + 1 do
        local i, j, k = integer(1, shape[1]), integer(1, shape[2]), integer(1, shape[3])
        y:set(i, j, k, y:get(i, j, k) + 1e-3)
      end
      local first
      for i = 1, shape[1] do
        for j = 1, shape[2] do
          for k = 1, shape[3] do
            if not first and x:get(i, j, k) ~= y:get(i, j, k) then first = ("[%d, %d, %d]"):format(i, j, k) end
          end
        end
      end
      local ok, message = helpers.check_bits(x, y)
      assert.is_false(ok)
      assert.are.equal(first, message:match("first difference at index (%[[%d, ]+%])"), message)
    end
  end)

  it("fails on a NaN where the other has a number, on shape, dtype and non-tensors", function()
    assert.matches("1 NaN and 0 Inf mismatches",
      failure_of(assert.bits_equal, spk.tensor { 1, 0 / 0 }, spk.tensor { 1, 2 }))
    assert.matches("differ in shape or dtype: %[2, 3, 4%] f32 and %[24%] f32",
      failure_of(assert.bits_equal, a, a:contiguous():view { 24 }))
    assert.matches("differ in shape or dtype: %[2, 3, 4%] f32 and %[2, 3, 4%] f64",
      failure_of(assert.bits_equal, a, a:to("f64")))
    assert.matches("expected two tensors, got tensor and nil", failure_of(assert.bits_equal, a, nil))
  end)

  it("shows f64 bits in 16 hex digits", function()
    local x = spk.tensor({ 1, 2 }, "f64")
    local y = spk.tensor({ 1, 0.1 }, "f64")
    assert.matches("a = 2 %(bits 0x4000000000000000%), b = 0.10000000000000001 %(bits 0x3fb999999999999a%)",
      failure_of(assert.bits_equal, x, y))
  end)

  it("negated, passes for different bits and fails for equal ones", function()
    local b = a:clone()
    b:set(1, 1, 1, 1e-30)
    assert.is_not.bits_equal(a, b)
    assert.are.equal("Expected tensors to differ in bits:\nequal bit for bit: 24 elements of [2, 3, 4] f32",
      failure_of(assert.is_not.bits_equal, a, a:clone()))
  end)

  gpu_it("compares device tensors", function()
    local d = a:cuda()
    assert.bits_equal(a, d)
    local b = a:clone()
    b:set(1, 2, 1, -1)
    assert.matches("first difference at index %[1, 2, 1%]", failure_of(assert.bits_equal, d, b:cuda()))
  end)
end)

describe("assert.within_reference", function()
  local layers = spk.lstm.random { layers = 2, input = 6, hidden = 8, seed = 3 }
  local x = spk.randn({ 2, 9, 6 }, { seed = 3 })

  local function cpu_plan(stack)
    return spk.lstm.stack { backend = "cpu", layers = stack or layers, batch = 2, steps = 9 }
  end

  it("passes for a plan or its output within the bound of the f64 reference", function()
    assert.within_reference(cpu_plan(), layers, x, { rel_l2 = 1e-5 })
    assert.within_reference(cpu_plan():forward(x), layers, x, { rel_l2 = 1e-5, max_abs = 1e-5 })
    assert.is_not.within_reference(cpu_plan(), layers, x, { max_abs = 1e-12 }) -- f32 is not f64
  end)

  it("fails for a stack with one weight changed, with check_near's report", function()
    local broken = spk.lstm.random { layers = 2, input = 6, hidden = 8, seed = 3 }
    broken[2].R:set(1, 5, 3, broken[2].R:get(1, 5, 3) + 0.5)
    local plan = cpu_plan(broken)
    local y = plan:forward(x)
    local _, check = spk.check_near(y, spk.lstm.reference(layers, x, { precision = "f64" }), { rel_l2 = 1e-5 })
    assert.are.equal("Expected the output within its bounds of the f64 reference:\n"
      .. "cpu f32 reference against the f64 reference: " .. check,
      failure_of(assert.within_reference, plan, layers, x, { rel_l2 = 1e-5 }))
  end)

  it("computes the reference once per layers and input", function()
    local l2 = spk.lstm.random { layers = 1, input = 6, hidden = 8, seed = 4 }
    local x2 = spk.randn({ 2, 9, 6 }, { seed = 4 })
    local real, calls = spk.lstm.reference, 0
    spk.lstm.reference = function(l, input, o)
      if o and o.precision == "f64" then calls = calls + 1 end
      return real(l, input, o)
    end
    local ok, err = pcall(function()
      local y = cpu_plan(l2):forward(x2)
      for _ = 1, 3 do assert.within_reference(y, l2, x2, { rel_l2 = 1e-5 }) end
    end)
    spk.lstm.reference = real
    assert(ok, err)
    assert.are.equal(1, calls)
  end)

  it("keys the reference on content: a tensor changed in place gets a new one, an equal copy the same", function()
    local l3 = spk.lstm.random { layers = 1, input = 6, hidden = 8, seed = 5 }
    local x3 = spk.randn({ 2, 9, 6 }, { seed = 5 })
    local before = cpu_plan(l3):forward(x3)
    assert.within_reference(before, l3, x3, { rel_l2 = 1e-5 })
    x3:fill(0.5) -- the same object, new values
    local after = cpu_plan(l3):forward(x3)
    assert.within_reference(after, l3, x3, { rel_l2 = 1e-5 })
    assert.is_not.within_reference(before, l3, x3, { rel_l2 = 1e-5 })
    l3[1].R:set(1, 1, 1, l3[1].R:get(1, 1, 1) + 0.25) -- a weight changed in place
    local changed = cpu_plan(l3):forward(x3)
    assert.within_reference(changed, l3, x3, { rel_l2 = 1e-5 })
    assert.is_not.within_reference(after, l3, x3, { rel_l2 = 1e-5 })
    -- equal content in other objects (a copy of x, a transposed view's copy) finds the same reference
    local real, calls = spk.lstm.reference, 0
    spk.lstm.reference = function(l, input, o)
      if o and o.precision == "f64" then calls = calls + 1 end
      return real(l, input, o)
    end
    local ok, err = pcall(function()
      assert.within_reference(changed, l3, x3:clone(), { rel_l2 = 1e-5 })
      assert.within_reference(changed, l3, x3:transpose(1, 2):contiguous():transpose(1, 2), { rel_l2 = 1e-5 })
    end)
    spk.lstm.reference = real
    assert(ok, err)
    assert.are.equal(0, calls)
    assert.are.equal(spk.digest(x3), spk.digest(x3:clone()))
    assert.are_not.equal(spk.digest(x3), spk.digest(x3:to("f64")))
    assert.are_not.equal(spk.digest(x3), spk.digest(x3:view { 9, 2, 6 }))
  end)

  it("takes spk.lstm.bound's bound when given none, and refuses empty bounds or missing inputs at the spec's line",
    function()
    assert.within_reference(cpu_plan(), layers, x) -- the cpu backend's: rel_l2 <= 1e-4
    local broken = spk.lstm.random { layers = 2, input = 6, hidden = 8, seed = 3 }
    broken[1].R:set(1, 2, 3, broken[1].R:get(1, 2, 3) + 1)
    assert.matches("bound 0.0001.*spk.lstm.bound: the f32 C reference",
      failure_of(assert.within_reference, cpu_plan(broken), layers, x))
    if not spk.cuda.available() then -- a bare output's bound is a kernel's: cuDNN standard's error, measured
      assert.matches("needs a GPU", failure_of(assert.within_reference, cpu_plan():forward(x), layers, x))
    end
    assert.matches("busted_spec%.lua:%d+: within_reference: give the bounds",
      failure_of(assert.within_reference, cpu_plan(), layers, x, {}))
    assert.matches("within_reference: x must be the input tensor, got nil",
      failure_of(assert.within_reference, cpu_plan(), layers, nil, { rel_l2 = 1 }))
    assert.matches("expected a plan %(with :forward%) or an output tensor, got string",
      failure_of(assert.within_reference, "y", layers, x, { rel_l2 = 1 }))
  end)

  gpu_it("checks a GPU plan", function()
    for _, backend in ipairs { "persistent", "cluster", "cudnn" } do
      if backend ~= "cluster" or has_clusters() then
        local plan = spk.lstm.stack { backend = backend, layers = layers, batch = 2, steps = 9 }
        assert.within_reference(plan, layers, x, { rel_l2 = 1e-5 })
        plan:close()
      end
    end
  end)
end)

-- Scripted plans: :time answers from ms(name, call) and logs the calls, so the
-- statistics are checked exactly. clock.factor scales every time (a machine
-- that speeds up or slows down), clock.calls counts all calls.
local function scripted(name, ms, clock, shape)
  local plan = { backend = "cpu", variant = name, batch = 1, steps = 4, input = 2, hidden = 3, layers = 1 }
  for k, v in pairs(shape or {}) do plan[k] = v end
  plan.calls = {}
  function plan:time(o)
    clock.calls = clock.calls + 1
    clock.log[#clock.log + 1] = name
    self.calls[#self.calls + 1] = o
    return { median_ms = ms(clock.calls) * (clock.factor and clock.factor(clock.calls) or 1) }
  end
  return plan
end

local function new_clock(factor) return { calls = 0, log = {}, factor = factor } end

local function constant(v) return function() return v end end

describe("assert.no_slower against a plan", function()
  it("passes for the same times and fails 10% slower, in the documented message", function()
    local clock = new_clock()
    local base = scripted("base", constant(2.0), clock)
    assert.no_slower(scripted("same", constant(2.0), clock), { against = base })
    local message = failure_of(assert.no_slower, scripted("slow", constant(2.2), clock), { against = base })
    assert.are.equal("Expected the plan not to be slower than its baseline:\n"
      .. "cpu slow against cpu base: median ratio 1.1000, spread 0.0% (ratios 1.1000 .. 1.1000 over 7 rounds); "
      .. "a slowdown of 10.0% exceeds the tolerance 3.0% + spread 0.0%\n"
      .. "  (plan median 2.2 ms, baseline median 2 ms; ratios plan / baseline, timed in turn)", message)
    assert.is_not.no_slower(scripted("slow", constant(2.2), clock), { against = base })
  end)

  it("times the two in turn, A B then B A, after one untimed call each, with the given options", function()
    local clock = new_clock()
    local a = scripted("A", constant(1), clock)
    local b = scripted("B", constant(1), clock)
    local x = spk.zeros { 1, 4, 2 }
    helpers.compare_speed(a, { against = b, rounds = 4, replays = 3, warmup = 2, x = x })
    assert.are.same({ "A", "B", "A", "B", "B", "A", "A", "B", "B", "A" }, clock.log)
    assert.are.equal(5, #a.calls)
    for _, o in ipairs(a.calls) do assert.are.same({ rounds = 3, warmup = 2, x = x }, o) end
  end)

  it("judges ratios, never absolute times: a machine slowing down 3x during the run", function()
    -- every call 10% slower than the one before: over the 16 calls the times grow 4.6x
    local clock = new_clock(function(call) return 1.1 ^ call end)
    local a = scripted("A", constant(5), clock)
    local result = helpers.compare_speed(a, { against = scripted("B", constant(5), clock) })
    assert.is_false(result.slower, result.message)
    assert.is_true(result.ratio.a_ms.max / result.ratio.a_ms.min > 3, "the absolute times vary more than 3x")
    assert.are.near(1.0, result.ratio.median, 0.11)
    -- turn by turn, A first then B first: ratios 1/1.1 and 1.1 alternate
    assert.are.near(1 / 1.1, result.ratio.samples[1], 1e-12)
    assert.are.near(1.1, result.ratio.samples[2], 1e-12)
  end)

  it("passes a slowdown within the tolerance and one the measured spread explains", function()
    local clock = new_clock()
    local base = scripted("base", constant(1), clock)
    local r = helpers.compare_speed(scripted("2%", constant(1.02), clock), { against = base })
    assert.is_false(r.slower)
    assert.are.near(0.02, r.slowdown, 1e-12)
    assert.are.near(0.03, r.allowed, 1e-12)
    -- 10% slower, but one round of the seven 30% off (call 10: the plan's time in round 4): spread 0.3
    local noisy_clock = new_clock()
    local noisy = scripted("noisy", function(call) return call == 10 and 1.1 * 1.3 or 1.1 end, noisy_clock)
    r = helpers.compare_speed(noisy, { against = scripted("base", constant(1), noisy_clock), tolerance = 0.03 })
    assert.is_false(r.slower, r.message)
    assert.are.near(0.1, r.slowdown, 1e-9)
    assert.are.near(0.3, r.ratio.spread, 1e-9)
    assert.are.near(0.33, r.allowed, 1e-9)
    assert.matches("a slowdown of 10.0%% is within the tolerance 3.0%% %+ spread 30.0%%", r.message)
    -- the same 10% without the noisy round, tolerance 0.05: slower
    r = helpers.compare_speed(scripted("10%", constant(1.1), clock), { against = base, tolerance = 0.05 })
    assert.is_true(r.slower)
  end)

  it("narrows the spread to the median's 95% interval with more rounds, as the binomial law says", function()
    local function choose(n, k)
      local c = 1
      for i = 1, k do c = c * (n - i + 1) / i end
      return c
    end
    for n = 1, 60 do
      -- the largest k whose interval [x(k), x(n+1-k)] misses the median with probability <= 5%
      local want = 1
      for k = 1, n // 2 do
        local below = 0
        for i = 0, k - 1 do below = below + choose(n, i) end
        if 2 * below / 2 ^ n <= 0.05 then want = k end
      end
      assert.are.equal(want, helpers.median_interval_rank(n), "n = " .. n)
    end
    assert.are.equal(1, helpers.median_interval_rank(7))
    assert.are.equal(4, helpers.median_interval_rank(15))
    -- 15 rounds 10% slower, three of them far off: outside the interval, so the spread stays 0 and it fails
    local clock = new_clock()
    local far = { [4] = true, [13] = true, [22] = true }
    local p = scripted("p", function(call) return far[call] and 3 or 1.1 end, clock)
    local r = helpers.compare_speed(p, { against = scripted("b", constant(1), clock), rounds = 15 })
    assert.are.equal(0, r.ratio.spread)
    assert.is_true(r.slower, r.message)
    assert.matches("the median's 95%% interval, ratios 4 to 12 of 1%.1000 %.%. 1%.1000 over 15 rounds", r.message)
  end)

  it("refuses bad options at the spec's line", function()
    local clock = new_clock()
    local p = scripted("p", constant(1), clock)
    local cases = {
      { { against = p, tolerance = -0.1 }, "tolerance must be a finite number >= 0" },
      { { against = p, rounds = 0 }, "rounds must be an integer >= 1, got 0" },
      { { against = p, replays = 1.5 }, "replays must be an integer >= 1, got 1.5" },
      { { against = p, round = 3 }, "unknown option 'round'" },
      { {}, "give against = a baseline plan, a stored baseline's name or a baseline record" },
      { { against = 3 }, "against must be a plan, a stored baseline's name or a baseline record, got number" },
      { { against = "../x" }, "a baseline name is a file name" },
      { { against = p, yardstick = {} }, "yardstick must be a plan" },
    }
    for _, case in ipairs(cases) do
      local message = failure_of(assert.no_slower, p, case[1])
      assert.matches("busted_spec%.lua:%d+: no_slower: " .. case[2]:gsub("[%(%)%.%+%-%*%?%[%]%^%$]", "%%%0"), message)
    end
    assert.matches("no_slower: the plan must have :time", failure_of(assert.no_slower, {}, { against = p }))
    local zero = scripted("zero", constant(0), clock)
    assert.matches("no_slower: cpu zero:time gave no usable median %(0%)", failure_of(assert.no_slower, zero,
      { against = p }))
  end)
end)

describe("assert.no_slower on cpu plans", function()
  local layers = spk.lstm.random { layers = 1, input = 8, hidden = 64, seed = 1 }
  local function plan(steps)
    return spk.lstm.stack { backend = "cpu", layers = layers, batch = 8, steps = steps, threads = 1 }
  end

  -- 8x the steps, so that a shared machine's noise (spreads of 100% seen with
  -- both cores busy elsewhere) cannot hide it; the shorter plan takes a few
  -- ms (below a millisecond, a time slice lost to another process is a
  -- spread of 480%)
  it("passes for the same plan and fails for the plan with 8x the steps", function()
    assert.no_slower(plan(128), { against = plan(128), replays = 3 })
    local r = helpers.compare_speed(plan(1024), { against = plan(128), replays = 3 })
    assert.is_true(r.slower, r.message)
    assert.is_true(r.ratio.median > 2, r.message)
    assert.is_not.no_slower(plan(1024), { against = plan(128), replays = 3 })
  end)
end)

describe("assert.no_slower against a stored baseline", function()
  local dir
  before_each(function()
    dir = spec_tmpdir()
  end)
  after_each(function()
    helpers.config.update_baseline = nil
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  local function load_file(name)
    return report.json_decode(read_file(("%s/%s.json"):format(dir, name)))
  end

  local clock = new_clock()
  local yard = scripted("yardstick", constant(4), clock)

  it("records on the first run (the spec is skipped), then compares with the recorded ratio", function()
    local message = skip_of(assert.no_slower, scripted("v", constant(2), clock),
      { against = "b8", yardstick = yard, dir = dir })
    assert.matches("^baseline 'b8' %(" .. dir:gsub("%p", "%%%0") .. "/b8%.json%) recorded: no baseline for this "
      .. "device yet: cpu v against the yardstick cpu yardstick, median ratio 0%.5000", message)
    local data = load_file("b8")
    assert.are.equal(helpers.BASELINE_FORMAT, data.format)
    assert.are.equal("b8", data.name)
    assert.are.equal(1, #data.baselines)
    local e = data.baselines[1]
    local facts = helpers.device_facts(yard)
    assert.are.equal(helpers.device_key(facts), e.device_key)
    assert.are.equal(facts.device, e.device.device)
    assert.are.equal(0.5, e.ratio.median)
    assert.are.equal(7, #e.ratio.samples)
    assert.are.equal(helpers.kernel_hash(scripted("v", constant(2), clock)), e.kernel_hash)
    assert.are.same({ batch = 1, steps = 4, input = 2, hidden = 3, layers = 1 }, e.plan.shape)

    assert.no_slower(scripted("v", constant(2), clock), { against = "b8", yardstick = yard, dir = dir })
    message = failure_of(assert.no_slower, scripted("v", constant(2.2), clock),
      { against = "b8", yardstick = yard, dir = dir })
    assert.matches("ratio to the yardstick cpu yardstick 0%.5500 now, 0%.5000 then %(x1%.1000%); spread 0%.0%% now, "
      .. "0%.0%% then; a slowdown of 10%.0%% exceeds the tolerance 3%.0%% %+ spread 0%.0%%", message)
    assert.matches("kernel unchanged since the baseline", message)
    local changed = scripted("v", constant(2.2), clock)
    changed.kernel_hash = string.rep("f", 64)
    assert.matches("kernel changed since the baseline %(was %x+, now ffffffffffff%)", failure_of(assert.no_slower,
      changed, { against = "b8", yardstick = yard, dir = dir }))
  end)

  it("records anew under --update-baseline, one entry per device", function()
    skip_of(assert.no_slower, scripted("v", constant(2), clock), { against = "u", yardstick = yard, dir = dir })
    helpers.config.update_baseline = true
    assert.matches("updated %(%-%-update%-baseline%)", skip_of(assert.no_slower, scripted("v", constant(3), clock),
      { against = "u", yardstick = yard, dir = dir }))
    local data = load_file("u")
    assert.are.equal(1, #data.baselines)
    assert.are.equal(0.75, data.baselines[1].ratio.median)
    helpers.config.update_baseline = nil
    assert.no_slower(scripted("v", constant(3), clock), { against = "u", yardstick = yard, dir = dir })
  end)

  it("keeps another device's baseline and records one for this device", function()
    skip_of(assert.no_slower, scripted("v", constant(2), clock), { against = "d", yardstick = yard, dir = dir })
    local data = load_file("d")
    local other = data.baselines[1]
    other.device = { device = "NVIDIA H200", cc = "9.0", sms = 132 }
    other.device_key = helpers.device_key(other.device)
    other.ratio.median = 0.1
    write_file(dir .. "/d.json", report.json_encode(data))
    assert.matches("the file has one for NVIDIA H200, compute capability 9.0, 132 SMs", skip_of(assert.no_slower,
      scripted("v", constant(2), clock), { against = "d", yardstick = yard, dir = dir }))
    data = load_file("d")
    assert.are.equal(2, #data.baselines)
    -- compared with this device's entry (0.5), not the other one's (0.1)
    assert.no_slower(scripted("v", constant(2), clock), { against = "d", yardstick = yard, dir = dir })
    local loaded = helpers.load_baselines(dir .. "/d.json")
    assert.no_slower(scripted("v", constant(2), clock), { against = loaded, yardstick = yard })
  end)

  it("refuses a baseline of another device, shape or yardstick, and a corrupt file", function()
    skip_of(assert.no_slower, scripted("v", constant(2), clock), { against = "r", yardstick = yard, dir = dir })
    local entry = load_file("r").baselines[1]
    assert.no_slower(scripted("v", constant(2), clock), { against = entry, yardstick = yard })

    local moved = load_file("r").baselines[1]
    moved.device = { device = "NVIDIA H100 80GB HBM3", cc = "9.0", sms = 132 }
    moved.device_key = helpers.device_key(moved.device)
    local message = failure_of(assert.no_slower, scripted("v", constant(2), clock),
      { against = moved, yardstick = yard })
    assert.matches("busted_spec%.lua:%d+: no_slower: the baseline was recorded on NVIDIA H100 80GB HBM3, compute "
      .. "capability 9%.0, 132 SMs; this is cpu: .*: refusing to compare across devices", message)

    message = failure_of(assert.no_slower, scripted("v", constant(2), clock, { batch = 8 }),
      { against = entry, yardstick = yard })
    assert.matches("recorded for batch 1, 4 steps, input 2, hidden 3, 1 layers; this plan is batch 8, 4 steps", message)

    message = failure_of(assert.no_slower, scripted("v", constant(2), clock),
      { against = entry, yardstick = scripted("other", constant(4), clock) })
    assert.matches("timed against the yardstick cpu yardstick %(batch 1, 4 steps, input 2, hidden 3, 1 layers%), "
      .. "this run against cpu other %(batch 1, 4 steps", message)
    message = failure_of(assert.no_slower, scripted("v", constant(2), clock),
      { against = entry, yardstick = scripted("yardstick", constant(4), clock, { steps = 8 }) })
    assert.matches("timed against the yardstick cpu yardstick %(batch 1, 4 steps.*this run against cpu yardstick "
      .. "%(batch 1, 8 steps", message)

    write_file(dir .. "/bad.json", "{ not json")
    assert.matches("no_slower: the baselines file " .. dir:gsub("%p", "%%%0") .. "/bad%.json is not valid JSON",
      failure_of(assert.no_slower, scripted("v", constant(2), clock), { against = "bad", yardstick = yard, dir = dir }))
    write_file(dir .. "/old.json", '{"format": 99, "baselines": []}')
    assert.matches("is not a baselines file of format 1", failure_of(assert.no_slower,
      scripted("v", constant(2), clock), { against = "old", yardstick = yard, dir = dir }))
  end)

  it("needs a yardstick for a cpu plan, and keeps baselines beside the spec by default", function()
    assert.matches("a cpu plan has no independent yardstick", failure_of(assert.no_slower,
      scripted("v", constant(2), clock), { against = "y", dir = dir }))
    assert.are.same({}, files_in(dir))
    if not os.getenv("SPK_BASELINE_DIR") then
      assert.matches("tests/spec/baselines/x%.json$", helpers.baseline_path("x"))
    end
    assert.are.equal(dir .. "/x.json", helpers.baseline_path("x", dir))
  end)

  it("identifies the device and the kernel", function()
    local cpu = helpers.device_facts(yard)
    assert.matches("^cpu: ", cpu.device)
    assert.is_true(cpu.cores >= 1)
    local k1 = helpers.kernel_hash(scripted("v", constant(1), clock))
    assert.matches("^%x+$", k1)
    assert.are.equal(64, #k1)
    assert.are.equal(k1, helpers.kernel_hash(scripted("v", constant(2), clock)))
    assert.are_not.equal(k1, helpers.kernel_hash(scripted("w", constant(1), clock)))
    local a = helpers.device_key { device = "A", cc = "9.0" }
    assert.are_not.equal(a, helpers.device_key { device = "A", cc = "8.0" })
    assert.are_not.equal(a, helpers.device_key { device = "A", cc = "9.0", driver = 13000 })
  end)
end)

describe("assert.no_slower on the GPU kernels", function()
  local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }

  local function stack(backend, steps, kernel)
    return spk.lstm.stack { backend = backend, layers = layers, batch = 8, steps = steps or 589, kernel = kernel }
  end

  local function fastest()
    return has_clusters() and "cluster" or "persistent"
  end

  gpu_it("passes for identical plans and fails for twice the steps and for a slower kernel", function()
    local a, b = stack(fastest()), stack(fastest())
    local same = helpers.compare_speed(a, { against = b })
    assert.is_false(same.slower, same.message)
    assert.are.near(1.0, same.ratio.median, 0.03)
    local doubled = stack(fastest(), 2 * 589)
    local r = helpers.compare_speed(doubled, { against = a })
    assert.is_true(r.slower, r.message)
    assert.are.near(2.0, r.ratio.median, 0.3)
    if fastest() == "cluster" then
      -- the persistent kernel is about 2.7x slower than the cluster kernel at batch 8
      assert.is_not.no_slower(stack("persistent"), { against = a })
    end
    -- the cluster (or persistent) plan with 20% more steps: detected on a quiet GPU
    assert.is_not.no_slower(stack(fastest(), 707), { against = a })
    a:close(); b:close(); doubled:close()
  end)

  gpu_it("records a baseline against cuDNN, passes the same plan and fails a slower one", function()
    local dir = spec_tmpdir()
    finally(function() os.execute("rm -rf " .. shell_quote(dir)) end)
    local plan = stack(fastest())
    local message = skip_of(assert.no_slower, plan, { against = "gpu", dir = dir })
    assert.matches("against the yardstick cudnn standard", message)
    local data = report.json_decode(read_file(dir .. "/gpu.json"))
    local facts = helpers.device_facts(plan)
    assert.are.equal(facts.device, data.baselines[1].device.device)
    assert.are.equal(helpers.kernel_hash(plan), data.baselines[1].kernel_hash)
    assert.no_slower(plan, { against = "gpu", dir = dir })
    if fastest() == "cluster" then
      -- a slower kernel at the same shape against the cluster kernel's baseline
      local persistent = stack("persistent")
      local r = helpers.compare_speed(persistent, { against = "gpu", dir = dir })
      assert.is_true(r.slower, r.message)
      assert.matches("kernel changed since the baseline", r.message)
      assert.is_not.no_slower(persistent, { against = "gpu", dir = dir })
      persistent:close()
    end
    plan:close()
  end)
end)
