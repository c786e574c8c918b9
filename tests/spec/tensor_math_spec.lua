-- NumPy's other everyday tensor functions as Lua sees them (src/lua/tensor_math.c):
-- the forms each takes, what a whole-tensor any/all gives, the print
-- precision, and the messages of bad arguments. Values against NumPy:
-- tensor_numpy_spec.lua's second block.
local spk = require "spk"

local function err(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

describe("NumPy-like tensor functions", function()
  local x = spk.arange(6):view { 2, 3 }

  it("^ and % are elementwise, with numbers on either side", function()
    assert.are.same({ { 0, 1, 4 }, { 9, 16, 25 } }, (x ^ 2):tolist())
    assert.are.same({ 1, 2, 4, 8 }, (2 ^ spk.arange(4)):tolist())
    assert.are.same({ { 0, 2, 1 }, { 0, 2, 1 } }, ((-x) % 3):tolist()) -- the divisor's sign, as Lua's %
    assert.are.same((x % 4):tolist(), x:mod(4):tolist())
    assert.are.same((x ^ x):tolist(), x:pow(x):tolist())
    assert.matches("negative integer powers", err(function() return spk.arange(3, "i32") ^ -1 end))
  end)

  it("any and all give a boolean for the whole tensor, a tensor over dims", function()
    local nan = spk.tensor { 1, 0 / 0, 3 }
    assert.is_true(nan:isnan():any())
    assert.is_false(nan:isfinite():all())
    assert.is_false(spk.zeros(0):any())
    assert.is_true(spk.zeros(0):all())
    local by_row = x:gt(2):any(2)
    assert.are.equal("i32", by_row:dtype())
    assert.are.same({ 0, 1 }, by_row:tolist())
    assert.are.same({ { 1 } }, x:ge(0):all({ 1, 2 }, true):tolist())
  end)

  it("reduces over a list of dims", function()
    local t = spk.ones({ 2, 3, 4 }, "f64")
    assert.are.same({ 8, 8, 8 }, t:sum({ 1, -1 }):tolist())
    assert.are.same({ 1, 3, 1 }, t:mean({ 1, 3 }, true):shape())
    assert.matches("one dim", err(function() return t:argmax({ 1, 2 }) end))
    assert.matches("dim entry 2 %(4%) is out of range 1..3", err(function() return t:sum({ 1, 4 }) end))
    assert.matches("at least one dim", err(function() return t:sum({}) end))
  end)

  it("squeeze, unsqueeze and permute are views", function()
    local t = spk.zeros(2, 1, 3)
    assert.are.same({ 2, 3 }, t:squeeze():shape())
    assert.are.same({ 2, 3 }, t:squeeze(2):shape())
    assert.are.same({ 2, 1, 3, 1 }, t:unsqueeze(-1):shape())
    assert.are.same({ 1, 2, 1, 3 }, t:unsqueeze(1):shape())
    assert.are.same({ 3, 2, 1 }, t:permute(3, 1, 2):shape())
    assert.are.same({ 3, 2, 1 }, t:permute { 3, 1, 2 }:shape())
    local base = spk.arange(6):view { 2, 3 }
    base:permute(2, 1):set(3, 2, 42)
    assert.are.equal(42, base:get(2, 3)) -- the same storage
    assert.matches("size 2, not 1", err(function() return t:squeeze(1) end))
    assert.matches("permute: 2 dims for a 3%-d tensor", err(function() return t:permute(1, 2) end))
  end)

  it("cat, stack, where, matmul and the creators", function()
    assert.are.same({ 4, 3 }, spk.cat({ x, x }):shape())
    assert.are.same({ 2, 6 }, spk.cat({ x, x }, -1):shape())
    assert.are.same({ 2, 2, 3 }, spk.stack { x, x }:shape())
    assert.are.same({ 2, 3, 2 }, spk.stack({ x, x }, 3):shape())
    assert.matches("entry 2 is a number, expected a tensor", err(spk.cat, { x, 5 }))
    assert.are.same({ { -1, -1, -1 }, { 3, 4, 5 } }, spk.where(x:gt(2), x, -1):tolist())
    assert.are.same({ { 5, 14 }, { 14, 50 } }, x:mm(x:transpose()):tolist())
    assert.are.same(x:mm(x:transpose()):tolist(), spk.matmul(x, x:transpose()):tolist())
    assert.matches("inner sizes 3 and 2 differ", err(spk.matmul, x, x))
    assert.are.same({ 0, 0.25, 0.5, 0.75, 1 }, spk.linspace(0, 1, 5):tolist())
    assert.are.equal(50, spk.linspace(0, 1):numel())
    assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 } }, spk.eye(2, 3, "i32"):tolist())
    assert.are.equal("i32", spk.eye(2, "i32"):dtype())
    assert.are.same({ 0, 0 }, spk.empty(2):tolist())
    assert.are.same({ 1, 2 }, spk.exp(spk.log(spk.tensor({ 1, 2 }, "f64"))):tolist())
    assert.are.same({ 2, 3 }, spk.sqrt(spk.tensor { 4, 9 }):tolist())
  end)

  it("keeps f32 as the default dtype and says so", function()
    assert.are.equal("f32", spk.tensor({ 1, 2, 3 }):dtype())
    assert.are.equal("f32", spk.arange(3):dtype())
    local doc = require "spk.doc"
    assert.matches("f32 unless", doc.get(spk.tensor), 1, true)
    assert.matches("f32 unless", doc.get(spk.arange), 1, true)
  end)

  it("prints floats that differ differently, and to a chosen precision", function()
    local t = spk.tensor({ 1, 1 + 1e-12 }, "f64")
    assert.are.equal("tensor(f64, [2])\n[1, 1.000000000001]", tostring(t))
    local before = spk.print_options { digits = 4 }
    finally(function() spk.print_options(before) end)
    assert.are.equal(0, before.digits)
    assert.are.equal("tensor(f64, [2])\n[1, 1]", tostring(t))
    assert.are.equal(4, spk.print_options().digits)
    assert.matches("digits must be an integer 0..17", err(spk.print_options, { digits = 18 }))
    assert.matches("unknown option 'precision'", err(spk.print_options, { precision = 3 }))
  end)
end)
