-- Special values: what NaN, ±Inf and huge finite values in the input or the
-- weights produce, per backend (the contract is in docs/reliability.md).
--
--   input x    NaN        the affected batch row is NaN from that step on in
--                         the forward direction (features 1..H) and from that
--                         step back to step 1 in the reverse one (H+1..2H);
--                         a later layer takes the whole row; other rows exact.
--              ±Inf       saturates the gates like a huge value while the
--                         sums stay defined (finite outputs in [-1, 1]);
--                         Inf - Inf or 0 * Inf in a sum is NaN, as above.
--              1e30       saturates: outputs finite, in [-1, 1].
--   weights    NaN/±Inf   cpu: computed with (NaN spreads over the direction);
--                         persistent, cluster, cudnn: refused when the plan
--                         is made, before any device work.
--              1e30       saturates: outputs finite, in [-1, 1].
-- Values never steer control flow on the GPU: the exchange waits on flags,
-- so a NaN forward returns in normal time and the plan stays usable.
local spk = require "spk"

local BATCH, STEPS, INPUT, HIDDEN = 3, 5, 3, 128 -- hidden as the GPU kernels are built for

local function net(layers, seed)
  return spk.lstm.random { layers = layers or 1, input = INPUT, hidden = HIDDEN, seed = seed or 7 }
end

local function input(seed)
  return spk.randn({ BATCH, STEPS, INPUT }, { seed = seed or 11 })
end

local function is_nan(v) return v ~= v end

-- Visits every element of a [B, T, F] tensor: fn(b, t, f, value), 1-based.
local function each(y, fn)
  for b, rows in ipairs(y:tolist()) do
    for t, feats in ipairs(rows) do
      for f, v in ipairs(feats) do fn(b, t, f, v) end
    end
  end
end

local function nan_mask(y)
  local mask = {}
  each(y, function(b, t, f, v) mask[#mask + 1] = is_nan(v) and 1 or 0 end)
  return table.concat(mask)
end

local function assert_bounded(y)
  local n = 0
  each(y, function(b, t, f, v)
    assert(v == v and v >= -1 and v <= 1, ("y[%d][%d][%d] = %s is not finite in [-1, 1]"):format(b, t, f, v))
    n = n + 1
  end)
  assert.is_true(n > 0)
end

local function cpu(layers, x)
  return spk.lstm.reference(layers, x, { precision = "f32" })
end

describe("special values on the cpu backend", function()
  it("a NaN in x poisons its row from that step on, per direction, and nothing else", function()
    local layers, x = net(), input()
    local clean = cpu(layers, x):tolist()
    x:set(2, 3, 1, 0 / 0)
    local y = cpu(layers, x)
    each(y, function(b, t, f, v)
      local forward = f <= HIDDEN
      local poisoned = b == 2 and ((forward and t >= 3) or (not forward and t <= 3))
      if poisoned then
        assert(is_nan(v), ("y[%d][%d][%d] should be NaN, is %s"):format(b, t, f, v))
      else
        assert(v == clean[b][t][f], ("y[%d][%d][%d] = %s changed (was %s)"):format(b, t, f, v, clean[b][t][f]))
      end
    end)
    -- the cpu stack plan is the same computation
    local plan = spk.lstm.stack { layers = layers, batch = BATCH, steps = STEPS, backend = "cpu" }
    assert.are.equal(nan_mask(y), nan_mask(plan:forward(x)))
  end)

  it("a NaN in x reaches every step of its row in the next layer, and only its row", function()
    local layers, x = net(2), input()
    x:set(1, 4, 2, 0 / 0)
    each(cpu(layers, x), function(b, t, f, v)
      assert.are.equal(b == 1, is_nan(v))
    end)
  end)

  it("NaN everywhere in x gives NaN everywhere", function()
    local x = spk.full({ BATCH, STEPS, INPUT }, 0 / 0)
    assert.are.equal(string.rep("1", BATCH * STEPS * 2 * HIDDEN), nan_mask(cpu(net(), x)))
  end)

  it("one infinite input saturates the gates: outputs stay finite in [-1, 1]", function()
    local layers = net()
    for _, inf in ipairs { math.huge, -math.huge } do
      local x = input()
      x:set(1, 2, 3, inf)
      x:set(3, 5, 1, inf)
      assert_bounded(cpu(layers, x))
    end
  end)

  it("Inf - Inf in a gate sum is NaN, which then spreads like a NaN input", function()
    local layers = net()
    -- every gate row of W takes +1 from feature 1 and -1 from feature 2
    for _, W in ipairs { layers[1].W } do
      local s = W:shape()
      for d = 1, s[1] do
        for r = 1, s[2] do
          W:set(d, r, 1, 1)
          W:set(d, r, 2, -1)
        end
      end
    end
    local x = input()
    x:set(2, 3, 1, math.huge)
    x:set(2, 3, 2, math.huge)
    local y = cpu(layers, x)
    each(y, function(b, t, f, v)
      local forward = f <= HIDDEN
      assert.are.equal(b == 2 and ((forward and t >= 3) or (not forward and t <= 3)), is_nan(v))
    end)
  end)

  it("huge finite inputs (1e30) saturate: outputs finite in [-1, 1]", function()
    local layers = net(2)
    local x = input()
    x:set(1, 1, 1, 1e30)
    x:set(2, 3, 2, -1e30)
    x:set(3, 5, 3, 1e30)
    assert_bounded(cpu(layers, x))
    assert_bounded(cpu(layers, spk.full({ BATCH, STEPS, INPUT }, 1e30)))
    assert_bounded(cpu(layers, spk.full({ BATCH, STEPS, INPUT }, -1e30)))
  end)

  it("huge finite weights (1e30) saturate: outputs finite in [-1, 1]", function()
    local layers = net(2)
    for _, layer in ipairs(layers) do
      layer.W:set(1, 1, 1, 1e30)
      layer.R:set(2, 3, 2, -1e30)
      layer.B:set(1, 5, 1e30)
    end
    assert_bounded(cpu(layers, input()))
    local big = net(1)
    big[1].W:fill(1e30)
    big[1].R:fill(-1e30)
    big[1].B:fill(1e30)
    assert_bounded(cpu(big, input()))
  end)

  it("non-finite weights are computed with: NaN spreads over that direction", function()
    local layers = net()
    layers[1].R:set(2, 1, 1, 0 / 0) -- reverse direction, gate row 1
    local y = cpu(layers, input())
    -- The reverse direction starts at the last step with h = 0, where
    -- 0 * NaN already makes unit 1's input gate NaN; through R every unit is
    -- NaN from the next step on. The forward direction never sees it.
    each(y, function(b, t, f, v)
      local expect = f > HIDDEN and (t < STEPS or f == HIDDEN + 1)
      assert(expect == is_nan(v), ("y[%d][%d][%d] = %s"):format(b, t, f, v))
    end)
  end)
end)

describe("special values: the GPU plans refuse non-finite weights", function()
  -- The check runs before any device work, so it holds here too.
  local function backends()
    local names = { "persistent", "cudnn" }
    if spk.lstm.backends.cluster then names[#names + 1] = "cluster" end
    return names
  end

  for _, value in ipairs { { "NaN", 0 / 0 }, { "+Inf", math.huge }, { "-Inf", -math.huge } } do
    for _, part in ipairs { "W", "R", "B" } do
      it(("refuses %s in layer 2's %s on every GPU backend"):format(value[1], part), function()
        for _, backend in ipairs(backends()) do
          local layers = net(2)
          local t = layers[2][part]
          if part == "B" then t:set(2, 3, value[2]) else t:set(2, 3, 1, value[2]) end
          local ok, err = pcall(spk.lstm.stack, { layers = layers, batch = BATCH, steps = STEPS, backend = backend })
          assert.is_false(ok, backend)
          assert.matches("layer 2: " .. part .. " has a non%-finite value", tostring(err), 1, backend)
        end
      end)
    end
  end
end)

describe("special values on the GPU backends", function()
  local function gpu_plans(layers)
    local plans = {
      { "persistent", spk.lstm.stack { layers = layers, batch = BATCH, steps = STEPS, backend = "persistent",
                                       timeout_ms = 5000 } },
      { "cudnn", spk.lstm.stack { layers = layers, batch = BATCH, steps = STEPS, backend = "cudnn" } },
    }
    if spk.lstm.backends.cluster then
      local ok, plan = pcall(spk.lstm.stack, { layers = layers, batch = BATCH, steps = STEPS, backend = "cluster" })
      if ok then plans[#plans + 1] = { "cluster", plan } end
    end
    for _, p in ipairs(plans) do p[2]:forward(input(99)) end -- first-use costs out of the timing
    return plans
  end

  local function timed_forward(plan, x)
    local t0 = spk.clock_ms()
    local y = plan:forward(x)
    local ms = spk.clock_ms() - t0
    -- a NaN must not make the exchange wait: far below the 5 s poll timeout
    assert.is_true(ms < 2000, ("forward took %.0f ms"):format(ms))
    return y:cpu()
  end

  gpu_it("NaN in x: the same NaN positions as the cpu, the rest near it, no hang, plan still usable", function()
    for _, layers in ipairs { net(1), net(2) } do
      local x = input()
      local clean = input()
      x:set(2, 3, 1, 0 / 0)
      local want = cpu(layers, x)
      for _, p in ipairs(gpu_plans(layers)) do
        local y = timed_forward(p[2], x)
        assert.are.equal(nan_mask(want), nan_mask(y), p[1])
        -- finite positions match the reference (NaN rows left out)
        local w = want:tolist()
        each(y, function(b, t, f, v)
          if not is_nan(v) then
            assert(math.abs(v - w[b][t][f]) < 1e-4, ("%s y[%d][%d][%d] %s vs %s"):format(p[1], b, t, f, v, w[b][t][f]))
          end
        end)
        -- the next forward on clean input is right: no state is poisoned
        assert.tensor_near(timed_forward(p[2], clean), cpu(layers, clean), { rel_l2 = 1e-5 })
        p[2]:close()
      end
    end
  end)

  gpu_it("NaN everywhere in x: NaN everywhere, no hang", function()
    local layers = net(2)
    local x = spk.full({ BATCH, STEPS, INPUT }, 0 / 0)
    for _, p in ipairs(gpu_plans(layers)) do
      assert.are.equal(string.rep("1", BATCH * STEPS * 2 * HIDDEN), nan_mask(timed_forward(p[2], x)), p[1])
      p[2]:close()
    end
  end)

  gpu_it("±Inf and 1e30 in x saturate: finite outputs in [-1, 1], NaN where the cpu has NaN", function()
    local layers = net(2)
    local xs = {}
    for _, v in ipairs { math.huge, -math.huge, 1e30, -1e30 } do
      local x = input()
      x:set(1, 2, 3, v)
      x:set(3, 5, 1, v)
      xs[#xs + 1] = x
    end
    xs[#xs + 1] = spk.full({ BATCH, STEPS, INPUT }, 1e30)
    for _, p in ipairs(gpu_plans(layers)) do
      for _, x in ipairs(xs) do
        assert_bounded(timed_forward(p[2], x))
      end
      p[2]:close()
    end
  end)

  gpu_it("huge finite weights (1e30) saturate: finite outputs in [-1, 1]", function()
    local layers = net(2)
    for _, layer in ipairs(layers) do
      layer.W:set(1, 1, 1, 1e30)
      layer.R:set(2, 3, 2, -1e30)
      layer.B:set(1, 5, 1e30)
    end
    for _, p in ipairs(gpu_plans(layers)) do
      assert_bounded(timed_forward(p[2], input()))
      p[2]:close()
    end
  end)
end)
