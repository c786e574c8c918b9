-- spk.compare, spk.allclose and the assert.tensor_near assertion on
-- hand-made cases whose metrics are worked out by hand.
local spk = require "spk"

local function error_of(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("spk.compare", function()
  it("measures an f32 result against an f64 truth", function()
    local a = spk.tensor({ 1, 2, 3 }, "f32")
    local b = spk.tensor({ 1, 2.5, 3 }, "f64")
    local c = spk.compare(a, b)
    assert.are.equal(0.5, c.max_abs)
    assert.are.equal(0.2, c.max_rel) -- 0.5 / 2.5
    assert.are.near(0.5 / math.sqrt(1 + 6.25 + 9), c.rel_l2, 1e-15)
    assert.are.same({ 2 }, c.worst)
    assert.are.equal(2, c.a_worst)
    assert.are.equal(2.5, c.b_worst)
    assert.are.equal(0, c.nan_mismatch)
    assert.are.equal(0, c.inf_mismatch)
    assert.are.equal(3, c.count)
  end)

  it("gives the worst index 1-based in every dim, through views", function()
    local truth = spk.zeros(3, 4, "f64")
    local result = spk.zeros(4, 3):transpose(1, 2) -- a strided view of shape {3, 4}
    result:set(3, 2, -0.75)
    result:set(1, 4, 0.5)
    local c = spk.compare(result, truth)
    assert.are.same({ 3, 2 }, c.worst)
    assert.are.equal(-0.75, c.a_worst)
    assert.are.equal(0, c.b_worst)
    assert.are.equal(0.75, c.max_abs)
    assert.are.equal(math.sqrt(0.75 ^ 2 + 0.5 ^ 2), c.rel_l2) -- ||b|| = 0: the plain norm
  end)

  it("counts ulps in the less precise dtype", function()
    local one = spk.tensor({ 1 }, "f64")
    assert.are.equal(1, spk.compare(spk.tensor({ 1 + 2 ^ -23 }, "f32"), one).max_ulp)
    assert.are.equal(2, spk.compare(spk.tensor({ 1 + 2 ^ -22 }, "f32"), one).max_ulp)
    assert.are.equal(2 ^ 29, spk.compare(spk.tensor({ 1 + 2 ^ -23 }, "f64"), one).max_ulp)
    assert.are.equal(0, spk.compare(spk.tensor({ 1 + 2 ^ -30 }, "f64"), spk.tensor({ 1 }, "f32")).max_ulp)
  end)

  it("counts NaN and Inf mismatches apart from the finite metrics", function()
    local nan, inf = 0 / 0, math.huge
    local a = spk.tensor({ nan, nan, inf, inf, 1 }, "f64")
    local b = spk.tensor({ nan, 1, inf, -inf, 1.5 }, "f64")
    local c = spk.compare(a, b)
    assert.are.equal(1, c.nan_mismatch)
    assert.are.equal(1, c.inf_mismatch)
    assert.are.equal(0.5, c.max_abs)
    assert.are.same({ 5 }, c.worst)
  end)

  it("leaves worst empty when no pair is finite", function()
    local c = spk.compare(spk.tensor { 0 / 0 }, spk.tensor { 0 / 0 })
    assert.are.same({}, c.worst)
    assert.is_nil(c.a_worst)
  end)

  it("prints readably", function()
    local s = tostring(spk.compare(spk.tensor { 1, 2 }, spk.tensor({ 1, 2.5 }, "f64")))
    assert.matches("max_abs 0%.5", s)
    assert.matches("rel_l2 ", s)
    assert.matches("max_ulp ", s)
    assert.matches("worst %[2%]: a 2 b 2%.5", s)
    assert.matches("nan_mismatch 0", s)
  end)

  it("refuses different shapes and closed tensors", function()
    assert.matches("shape", error_of(function() return spk.compare(spk.zeros(2, 3), spk.zeros(3, 2)) end))
    local closed = spk.zeros(2)
    closed:close()
    assert.matches("tensor is closed", error_of(function() return spk.compare(closed, spk.zeros(2)) end))
    assert.matches("bad argument #2 to 'compare' %(tensor expected, got number%)",
      error_of(function() return spk.compare(spk.zeros(2), 1) end))
  end)
end)

describe("spk.allclose", function()
  local b = spk.tensor({ 1, 100, -3 }, "f64")

  it("uses NumPy's defaults rtol 1e-5, atol 1e-8 against |b|", function()
    assert.is_true(spk.allclose(spk.tensor({ 1 + 5e-6, 100 + 9e-4, -3 }, "f64"), b))
    assert.is_false(spk.allclose(spk.tensor({ 1 + 2e-5, 100, -3 }, "f64"), b))
    assert.is_false(spk.allclose(spk.tensor({ 1, 100 + 2e-3, -3 }, "f64"), b))
  end)

  it("takes rtol and atol", function()
    local a = spk.tensor({ 1.1, 100, -3 }, "f64")
    assert.is_false(spk.allclose(a, b))
    assert.is_true(spk.allclose(a, b, { atol = 0.11 }))
    assert.is_true(spk.allclose(a, b, { rtol = 0.11 }))
    assert.is_false(spk.allclose(a, b, { rtol = 0.09, atol = 0 }))
  end)

  it("treats NaN as equal only to NaN", function()
    local nan = 0 / 0
    assert.is_true(spk.allclose(spk.tensor { nan, 1 }, spk.tensor { nan, 1 }))
    assert.is_false(spk.allclose(spk.tensor { nan, 1 }, spk.tensor { 1, 1 }))
  end)

  it("checks its options", function()
    assert.matches("unknown option 'tol'", error_of(function() return spk.allclose(b, b, { tol = 1 }) end))
    assert.matches("non%-negative", error_of(function() return spk.allclose(b, b, { rtol = -1 }) end))
  end)
end)

describe("one order for every comparison: actual, then the truth", function()
  local actual, expected = spk.tensor({ 2, 2 }, "f64"), spk.tensor({ 1, 1 }, "f64")

  it("takes relative errors against the second argument, in compare, check_near and tensor_near alike", function()
    assert.are.equal(1, spk.compare(actual, expected).rel_l2) -- ||a - e|| / ||e||, not / ||a||
    assert.are.equal(1, spk.compare(actual, expected).max_rel)
    local ok, report, c = spk.check_near(actual, expected, { rel_l2 = 0.9 })
    assert.is_false(ok)
    assert.are.equal(1, c.rel_l2)
    assert.matches("expected 1, actual 2", report, 1, true)
    assert.is_true((spk.check_near(actual, expected, { rel_l2 = 1 })))
    assert.is_true((spk.check_near(expected, actual, { rel_l2 = 0.5 }))) -- the other way round is another question
    assert.tensor_near(actual, expected, { rel_l2 = 1 })
    assert.is_not.tensor_near(actual, expected, { rel_l2 = 0.9 })
    assert.is_false(spk.allclose(actual, expected, { rtol = 0.99, atol = 0 })) -- |a - e| <= rtol |e|
    assert.is_true(spk.allclose(expected, actual, { rtol = 0.5, atol = 0 }))
  end)

  it("has a named form, actual = and expected =", function()
    local ok, _, c = spk.check_near { actual = actual, expected = expected, rel_l2 = 1 }
    assert.is_true(ok)
    assert.are.equal(1, c.rel_l2)
    assert.tensor_near { actual = actual, expected = expected, max_abs = 1 }
    assert.matches("unknown field 'truth'", select(2, pcall(spk.check_near, { actual = actual, truth = expected,
      rel_l2 = 1 })))
    assert.matches("give actual = and expected =", select(2, pcall(spk.check_near, { actual = actual, rel_l2 = 1 })))
  end)

  it("says the order in every help line", function()
    local doc = require "spk.doc"
    for _, fn in ipairs { spk.compare, spk.allclose, spk.check_near } do
      local first = doc.get(fn):match("^[^\n]*")
      assert.is_truthy(first:find("(actual, expected", 1, true), first)
    end
  end)
end)

describe("spk.bits_equal", function()
  it("says whether two tensors hold the same bits, and where they first differ", function()
    local a = spk.tensor({ 1, 2, 3, 0 }, "f64")
    local b = a:clone()
    b:set(4, -0.0)
    assert.is_true((spk.bits_equal(a, b))) -- +0 and -0 count as equal
    b:set(3, 3 + 2 ^ -51)
    local equal, report, where = spk.bits_equal(a, b, "a repeat")
    assert.is_false(equal)
    assert.are.same({ index = { 3 }, element = 3, a = 3, b = 3 + 2 ^ -51 }, where)
    assert.matches("^a repeat: first difference at index %[3%] %(element 3 of 4%)", report)
    assert.matches("bits 0x4008000000000000", report, 1, true)
    local _, why = spk.bits_equal(a, a:to("f32"))
    assert.matches("differ in shape or dtype", why)
  end)
end)

describe("assert.tensor_near", function()
  local truth = spk.tensor({ { 1, 2 }, { 3, 4 } }, "f64")

  it("passes within the bounds", function()
    local result = spk.tensor { { 1, 2 }, { 3, 4.0001 } }
    assert.tensor_near(result, truth, { rel_l2 = 1e-4 })
    assert.tensor_near(result, truth, { max_abs = 2e-4, rel_l2 = 1e-3 })
    assert.is_not.tensor_near(result, truth, { max_abs = 1e-5 })
  end)

  it("fails outside a bound, showing the measurements, the bound, the worst index and both values", function()
    local result = spk.tensor { { 1, 2 }, { 3.5, 4 } }
    local ok, err = pcall(assert.tensor_near, result, truth, { rel_l2 = 1e-3, max_abs = 1 })
    assert.is_false(ok)
    err = tostring(err)
    assert.matches("Expected tensors to be near", err)
    assert.matches("rel_l2 0%.0912871 %(bound 0%.001%)", err) -- 0.5 / sqrt(30)
    assert.matches("max_abs 0%.5 %(bound 1%)", err)
    assert.matches("worst index %[2, 1%]: expected 3, actual 3%.5", err)
  end)

  it("fails on a shape mismatch, a NaN or a missing bound", function()
    assert.has_error(function() assert.tensor_near(spk.zeros(4), truth, { rel_l2 = 1 }) end)
    local nan_result = spk.tensor { { 1, 2 }, { 3, 0 / 0 } }
    local ok, err = pcall(assert.tensor_near, nan_result, truth, { rel_l2 = 1 })
    assert.is_false(ok)
    assert.matches("1 NaN", tostring(err))
    assert.has_error(function() assert.tensor_near(truth, truth, {}) end, "check_near: give a bound, rel_l2 and/or max_abs")
  end)
end)
