-- spk.debug on hand-made tensors whose answers are known.
local spk = require "spk"

-- [B, T, 2H] zeros, f32
local function zeros(B, T, H, dtype) return spk.zeros({ B, T, 2 * H }, dtype or "f32") end

describe("spk.debug.first_divergence", function()
  it("returns nil for equal outputs and within the tolerance", function()
    local a, b = zeros(2, 5, 3), zeros(2, 5, 3)
    assert.is_nil(spk.debug.first_divergence(a, b))
    b:set(1, 2, 2, 1e-3)
    assert.is_nil(spk.debug.first_divergence(a, b, { tol = 1e-2 }))
    assert.is_not_nil(spk.debug.first_divergence(a, b, { tol = 1e-4 }))
  end)

  it("finds the first step in processing order, the reverse direction counted from T", function()
    local B, T, H = 2, 6, 3
    local a, b = zeros(B, T, H), zeros(B, T, H)
    b:set(2, 4, 2, 0.5)          -- forward, t = 4: processing step 4
    b:set(1, 5, H + 3, -0.25)    -- reverse, t = 5: processing step 2 (T + 1 - 5)
    local w = spk.debug.first_divergence(a, b)
    assert.are.equal("reverse", w.direction)
    assert.are.equal(5, w.step)
    assert.are.equal(2, w.order)
    assert.are.equal(1, w.batch)
    assert.are.equal(3, w.unit)
    assert.are.equal(0, w.a)
    assert.are.equal(-0.25, w.b)
    assert.are.equal(0.25, w.diff)
    assert.is_nil(w.layer)
    assert.matches("reverse t=5", tostring(w))
    -- after the reverse one is fixed, the forward one is first
    b:set(1, 5, H + 3, 0)
    w = spk.debug.first_divergence(a, b)
    assert.are.same({ "forward", 4, 4, 2, 2 }, { w.direction, w.step, w.order, w.batch, w.unit })
  end)

  it("at the same processing step reports forward before reverse and the first row", function()
    local a, b = zeros(3, 4, 2), zeros(3, 4, 2)
    b:set(3, 2, 1, 1)        -- forward t = 2 (step 2), batch 3
    b:set(2, 2, 2, 1)        -- forward t = 2, batch 2: first in row order
    b:set(1, 3, 3, 1)        -- reverse t = 3 = T + 1 - 2 (step 2)
    local w = spk.debug.first_divergence(a, b)
    assert.are.same({ "forward", 2, 2, 2 }, { w.direction, w.step, w.batch, w.unit })
    assert.are.equal(1, w.max_diff)
  end)

  it("counts a NaN on one side as a divergence, NaN on both as equal", function()
    local a, b = zeros(1, 3, 2, "f64"), zeros(1, 3, 2, "f64")
    a:set(1, 2, 1, 0 / 0)
    b:set(1, 2, 1, 0 / 0)
    assert.is_nil(spk.debug.first_divergence(a, b))
    a:set(1, 3, 2, 0 / 0)
    local w = spk.debug.first_divergence(a, b, { tol = 1 })
    assert.are.same({ "forward", 3, 2 }, { w.direction, w.step, w.unit })
    assert.is_true(w.a ~= w.a)
  end)

  it("says what it found when nothing diverges: the tolerance and the largest difference", function()
    local a, b = zeros(1, 3, 2, "f64"), zeros(1, 3, 2, "f64")
    local w, none = spk.debug.first_divergence(a, b)
    assert.is_nil(w)
    assert.are.equal("no divergence above 0 (max |a-b| 0: the same values)", tostring(none))
    b:set(1, 2, 3, 2.5e-8)
    a:set(1, 1, 1, 0 / 0)
    b:set(1, 1, 1, 0 / 0) -- NaN on both sides: the same
    w, none = spk.debug.first_divergence(a, b, { tol = 1e-7 })
    assert.is_nil(w)
    assert.are.same({ 1e-7, 2.5e-8 }, { none.tol, none.max_diff })
    assert.are.equal("no divergence above 1e-07 (max |a-b| 2.5e-08)", tostring(none))
    local _, layers_none = spk.debug.first_divergence({ a, a }, { b, b }, { tol = 1e-7 })
    assert.are.equal(2.5e-8, layers_none.max_diff)
  end)

  it("names a NaN, and where a NaN on one side first appears", function()
    local a, b = zeros(1, 3, 2, "f64"), zeros(1, 3, 2, "f64")
    b:set(1, 3, 1, -(0 / 0))
    local w = spk.debug.first_divergence(a, b, { tol = 1e-7 })
    assert.are.same({ "b", 1, 3 }, { w.nan, w.nans, w.step })
    assert.are.equal("first divergence: forward t=3 (step 3 of the direction), batch 1 unit 1: a=0 b=NaN |a-b|=NaN "
      .. "(b is NaN here and a is not: the first NaN one side has) (step max 0 over the finite pairs; 1 NaN on one "
      .. "side in the step)", tostring(w))
    assert.is_nil(tostring(w):find("-nan", 1, true))
    -- a finite divergence first: the NaN is named after it
    b:set(1, 1, 2, 0.5)
    w = spk.debug.first_divergence(a, b, { tol = 1e-7 })
    assert.are.same({ 1, 2 }, { w.step, w.unit })
    assert.is_nil(w.nan)
    assert.are.same({ direction = "forward", step = 3, order = 3, batch = 1, unit = 1, side = "b" }, w.first_nan)
    local text = tostring(w)
    assert.are.equal("; the first NaN on one side: forward t=3 (step 3 of the direction), batch 1 unit 1, in b",
      text:sub(text:find("; the first NaN", 1, true), -1))
  end)

  it("compares f32 with f64", function()
    local a, b = zeros(1, 2, 1, "f32"), zeros(1, 2, 1, "f64")
    b:set(1, 1, 1, 0.1)
    a:set(1, 1, 1, 0.1) -- rounded to f32: differs from the f64 0.1 by about 1.5e-9
    assert.is_nil(spk.debug.first_divergence(a, b, { tol = 1e-8 }))
    assert.is_not_nil(spk.debug.first_divergence(a, b, { tol = 1e-10 }))
  end)

  it("walks lists of layer outputs layer by layer", function()
    local a = { zeros(1, 3, 2), zeros(1, 3, 2), zeros(1, 3, 2) }
    local b = { zeros(1, 3, 2), zeros(1, 3, 2), zeros(1, 3, 2) }
    b[3]:set(1, 1, 1, 1)
    b[2]:set(1, 3, 1, 1) -- forward t = 3 of layer 2 comes before anything in layer 3
    local w = spk.debug.first_divergence(a, b)
    assert.are.same({ 2, "forward", 3 }, { w.layer, w.direction, w.step })
    assert.matches("layer 2", tostring(w))
  end)

  it("walks traces in the direction's order and reports h or c", function()
    local function trace(direction)
      return { h = spk.zeros({ 3, 1, 2 }, "f64"), c = spk.zeros({ 3, 1, 2 }, "f64"), layer = 2,
               direction = direction, steps = { 1, 4, 9 } }
    end
    local a, b = trace("reverse"), trace("reverse")
    b.h:set(1, 1, 2, 1)   -- t = 1: processed last in reverse
    b.c:set(2, 1, 1, 2)   -- t = 4: processed before t = 1
    local w = spk.debug.first_divergence(a, b)
    assert.are.same({ 2, "reverse", 4, "c", 1, 2 }, { w.layer, w.direction, w.step, w.state, w.unit, w.order })
    local f1, f2 = trace("forward"), trace("forward")
    f2.h:set(1, 1, 2, 1)
    f2.c:set(2, 1, 1, 2)
    w = spk.debug.first_divergence(f1, f2)
    assert.are.same({ "forward", 1, "h" }, { w.direction, w.step, w.state })
  end)

  it("finds a perturbed recurrent weight of layer 3 in the reference's outputs and traces", function()
    local layers = spk.lstm.random { layers = 4, input = 5, hidden = 4, seed = 3 }
    local bad = spk.lstm.random { layers = 4, input = 5, hidden = 4, seed = 3 }
    -- R of layer 3, reverse direction, gate row 3 (gate i of unit 3), column 2
    bad[3].R:set(2, 3, 2, bad[3].R:get(2, 3, 2) + 0.5)
    local x = spk.randn({ 2, 7, 5 }, { seed = 4 })
    local _, ia = spk.lstm.reference(layers, x, { precision = "f64", layers_out = true })
    local _, ib = spk.lstm.reference(bad, x, { precision = "f64", layers_out = true })
    local w = spk.debug.first_divergence(ia.layers, ib.layers)
    -- h starts at zero, so R first acts at the second reverse step, t = T - 1
    assert.are.same({ 3, "reverse", 6, 2, 3 }, { w.layer, w.direction, w.step, w.order, w.unit })
    local steps = { 1, 2, 3, 4, 5, 6, 7 }
    local _, ta = spk.lstm.reference(layers, x, { precision = "f64", trace = { layer = 3, direction = "reverse", steps = steps } })
    local _, tb = spk.lstm.reference(bad, x, { precision = "f64", trace = { layer = 3, direction = "reverse", steps = steps } })
    local t = spk.debug.first_divergence(ta.trace, tb.trace)
    assert.are.equal(6, t.step)
    assert.are.equal(3, t.unit)
  end)

  it("rejects mismatched inputs clearly", function()
    assert.has_error(function() spk.debug.first_divergence(zeros(1, 2, 2), zeros(1, 3, 2)) end)
    assert.has_error(function() spk.debug.first_divergence(zeros(1, 2, 2), zeros(1, 2, 2), { tol = -1 }) end)
    assert.has_error(function() spk.debug.first_divergence(zeros(1, 2, 2), zeros(1, 2, 2), { bogus = 1 }) end)
    assert.has_error(function() spk.debug.first_divergence(1, 2) end)
  end)
end)

describe("spk.debug.ulp_histogram", function()
  it("buckets ulp distances counted in f32", function()
    -- 1 + k * 2^-23 is k f32 ulps above 1
    local base = { 1, 1, 1, 1, 1, 1 }
    local other = { 1, 1 + 2 ^ -23, 1 + 2 * 2 ^ -23, 1 + 3 * 2 ^ -23, 1 + 4 * 2 ^ -23, 1 + 100 * 2 ^ -23 }
    local h = spk.debug.ulp_histogram(spk.tensor(base, "f32"), spk.tensor(other, "f32"))
    assert.are.equal("f32", h.dtype)
    assert.are.equal(6, h.count)
    assert.are.equal(100, h.max_ulp)
    local counts = {}
    for _, b in ipairs(h.buckets) do counts[#counts + 1] = b.count end
    -- buckets 0, 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64-127
    assert.are.same({ 1, 1, 2, 1, 0, 0, 0, 1 }, counts)
    assert.are.equal(64, h.buckets[8].lo)
    assert.are.equal(127, h.buckets[8].hi)
    local text = tostring(h)
    assert.matches("2%-3 ulp", text)
    assert.matches("max 100 ulp", text)
  end)

  it("counts across zero and in the less precise dtype, NaN mismatches apart", function()
    assert.are.equal(2, spk.debug.ulp_distance(-2 ^ -149, 2 ^ -149, "f32"))
    assert.are.equal(1, spk.debug.ulp_distance(1, 1 + 2 ^ -52, "f64"))
    local h = spk.debug.ulp_histogram(spk.tensor({ 0.1, 0 / 0, 0 / 0 }, "f32"), spk.tensor({ 0.1, 1, 0 / 0 }, "f64"))
    assert.are.equal("f32", h.dtype)
    assert.are.equal(1, h.nan)
    assert.are.equal(1, h.buckets[1].count) -- 0.1 rounds to the same f32
    assert.are.equal(0, spk.compare(spk.tensor({ 0.1 }, "f32"), spk.tensor({ 0.1 }, "f64")).max_ulp)
  end)
end)

describe("spk.debug.summary", function()
  it("gives min, max and mean of the finite values and counts NaN and Inf", function()
    local s = spk.debug.summary(spk.tensor({ { 1, 0 / 0, 1 / 0 }, { -3, 2, -1 / 0 } }, "f32"))
    assert.are.same({ -3, 2, 0, 1, 2, 6 }, { s.min, s.max, s.mean, s.nan, s.inf, s.numel })
    assert.matches("NaN 1, Inf 2", tostring(s))
    local v = spk.debug.summary(spk.arange(5):to("f64"):select(1, 3))
    assert.are.same({ 2, 2, 2, 1 }, { v.min, v.max, v.mean, v.numel })
    assert.has_error(function() spk.debug.summary({}) end)
  end)
end)
