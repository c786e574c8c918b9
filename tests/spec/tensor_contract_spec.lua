-- What the tensor API promises beyond its basics, one class of mistake per
-- block: reductions honour dim and keepdim, dtypes promote as NumPy's do,
-- functions refuse arguments they do not take, messages name spk's objects,
-- option values are checked, size arithmetic cannot wrap, and x[i] / x:size()
-- behave as Torch users expect. The differential suite against NumPy
-- (tensor_numpy_spec.lua) checks the same operations on thousands of cases.
local spk = require "spk"

local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local function f32(x)
  return (string.unpack("<f", string.pack("<f", x)))
end

describe("reductions honour dim and keepdim", function()
  local x -- [[0, 1, 2], [3, 4, 5]]
  before_each(function() x = spk.arange(6):view(2, 3) end)

  it("sum, mean over a dim, negative dims counting from the end", function()
    assert.are.same({ 3, 5, 7 }, x:sum(1):tolist())
    assert.are.same({ 3, 12 }, x:sum(2):tolist())
    assert.are.same({ 3, 12 }, x:sum(-1):tolist())
    assert.are.same({ 3, 5, 7 }, x:sum(-2):tolist())
    assert.are.same({ 1.5, 2.5, 3.5 }, x:mean(1):tolist())
    assert.are.same({ 1, 4 }, x:mean(2):tolist())
    assert.are.equal(15, x:sum()) -- no dim: the whole-tensor value, as before
    assert.are.equal(2.5, x:mean())
  end)

  it("keepdim keeps the reduced dim with size 1; without a dim it keeps every dim", function()
    assert.are.same({ 1, 3 }, x:sum(1, true):shape())
    assert.are.same({ { 3 }, { 12 } }, x:sum(2, true):tolist())
    assert.are.same({ 3 }, x:sum(1, false):shape())
    assert.are.same({ { 15 } }, x:sum(nil, true):tolist())
    assert.are.same({ 1, 1 }, x:max(nil, true):shape())
  end)

  it("min and max give the values and their 1-based positions; argmin/argmax the positions", function()
    local v, i = x:max(1)
    assert.are.same({ 3, 4, 5 }, v:tolist())
    assert.are.same({ 2, 2, 2 }, i:tolist())
    assert.are.equal("i32", i:dtype())
    v, i = x:min(2, true)
    assert.are.same({ { 0 }, { 3 } }, v:tolist())
    assert.are.same({ { 1 }, { 1 } }, i:tolist())
    assert.are.same({ 3, 3 }, x:argmax(2):tolist())
    assert.are.same({ 1, 1, 1 }, x:argmin(1):tolist())
    assert.are.equal(6, x:argmax()) -- flat, row-major, 1-based
    assert.are.equal(1, x:argmin())
    assert.are.equal("integer", math.type(x:argmax()))
    -- ties give the first position, a NaN wins (as NumPy)
    local t = spk.tensor { 1, 5, 5, 0 / 0, 0 / 0 }
    assert.are.equal(4, t:argmax())
    assert.are.equal(4, t:argmin())
    assert.are.equal(2, spk.tensor({ 1, 5, 5 }):argmax())
    assert.is_true(t:max() ~= t:max())
  end)

  it("norm(p) honours p: 1, 2, math.huge, -math.huge, 0 and any p > 0", function()
    local t = spk.tensor({ { 3, -4 }, { 0, 12 } }, "f64")
    assert.are.equal(13, t:norm()) -- 2 by default: sqrt(9 + 16 + 144)
    assert.are.equal(13, t:norm(2))
    assert.are.equal(19, t:norm(1))
    assert.are.equal(12, t:norm(math.huge))
    assert.are.equal(0, t:norm(-math.huge))
    assert.are.equal(3, t:norm(0)) -- non-zeros
    assert.are.near((27 + 64 + 1728) ^ (1 / 3), t:norm(3), 1e-12)
    assert.are.same({ 7, 12 }, t:norm(1, 2):tolist())
    assert.are.same({ 3, 16 }, t:norm(1, 1):tolist())
    assert.are.same({ { 4 }, { 12 } }, t:norm(math.huge, -1, true):tolist())
    assert.matches("p = %-1 is not supported", error_of(function() return t:norm(-1) end))
    assert.matches("p = %-?nan is not supported", error_of(function() return t:norm(0 / 0) end))
    assert.matches("p must be a number, got string \"fro\"", error_of(function() return t:norm("fro") end))
  end)

  it("result dtypes follow NumPy's where spk has the dtype (sum of i32 is f64)", function()
    local i = spk.tensor({ { 1, 2 }, { 3, 4 } }, "i32")
    assert.are.equal("f64", i:sum(1):dtype())
    assert.are.equal("f64", i:mean(1):dtype())
    assert.are.equal("i32", i:max(1):dtype())
    assert.are.equal("f64", i:norm(2, 1):dtype())
    assert.are.equal("f32", x:sum(1):dtype())
    assert.are.equal("u64", i:to("u64"):sum(1):dtype())
    -- whole-tensor values of integer tensors are exact Lua integers
    assert.are.equal("integer", math.type(i:sum()))
    local big = spk.tensor({ math.maxinteger, 0 }, "u64")
    assert.are.equal(math.maxinteger, big:max())
    assert.are.equal("float", math.type(i:mean()))
  end)

  it("refuses bad dims and keepdims, naming them", function()
    assert.matches("bad argument #1 to 'sum' %(dim must be an integer, got string \"hello\"%)",
      error_of(function() return x:sum("hello") end))
    assert.matches("bad argument #1 to 'sum' %(dim 3 out of range 1..2%)", error_of(function() return x:sum(3) end))
    assert.matches("dim must be an integer, got number 1.5", error_of(function() return x:mean(1.5) end))
    assert.matches("bad argument #2 to 'max' %(keepdim must be a boolean, got number 1%)",
      error_of(function() return x:max(1, 1) end))
    assert.matches("a 0%-d tensor has no dims", error_of(function() return spk.tensor(3):sum(1) end))
    assert.are.equal(3, spk.tensor(3):sum())
  end)

  it("empty dims: sum 0, mean NaN, min/max/argmax an error naming the dim", function()
    local e = spk.zeros(3, 0)
    assert.are.same({ 0, 0, 0 }, e:sum(2):tolist())
    local m = e:mean(2):tolist()
    assert.is_true(m[1] ~= m[1])
    assert.matches("max over dim 1, which is empty", error_of(function() return e:max(2) end))
    assert.matches("argmin over dim 1, which is empty", error_of(function() return e:argmin(2) end))
    assert.are.same({ 0 }, e:max(1):shape()) -- no group, no error
  end)
end)

describe("mixed dtypes promote as NumPy's", function()
  it("i32 + f32 and i32 * 0.5 give f64, not a truncated i32", function()
    local i = spk.tensor({ 1, 1 }, "i32")
    local sum = i + spk.tensor { 0.75, 0.75 }
    assert.are.equal("f64", sum:dtype())
    assert.are.same({ 1.75, 1.75 }, sum:tolist())
    assert.are.same({ 0.5, 0.5 }, (i * 0.5):tolist())
    assert.are.equal("f64", (i * 0.5):dtype())
    assert.are.equal("f64", i:scale(0.5):dtype())
  end)

  it("the whole table, for tensor op tensor", function()
    local want = {
      f32 = { f32 = "f32", f64 = "f64", i32 = "f64", u64 = "f64" },
      f64 = { f32 = "f64", f64 = "f64", i32 = "f64", u64 = "f64" },
      i32 = { f32 = "f64", f64 = "f64", i32 = "i32", u64 = "f64" },
      u64 = { f32 = "f64", f64 = "f64", i32 = "f64", u64 = "u64" },
    }
    for a, row in pairs(want) do
      for b, r in pairs(row) do
        local x, y = spk.ones(2, a), spk.ones(2, b)
        assert.are.equal(r, (x + y):dtype(), a .. " + " .. b)
        assert.are.equal(r, (x * y):dtype(), a .. " * " .. b)
        assert.are.equal(r == "f32" and "f32" or "f64", (x / y):dtype(), a .. " / " .. b)
        assert.are.equal("i32", x:lt(y):dtype(), a .. " lt " .. b)
      end
    end
  end)

  it("numbers are weak (NumPy 2): an integer takes the tensor's dtype, a float does unless the tensor is integer", function()
    local i, f = spk.tensor({ 1, 2 }, "i32"), spk.tensor { 1, 2 }
    assert.are.equal("i32", (i + 1):dtype())
    assert.are.equal("i32", (3 * i):dtype())
    assert.are.equal("f64", (i + 1.0):dtype()) -- a float is a float, whatever its value
    assert.are.equal("f32", (f + 1):dtype())
    assert.are.equal("f32", (f * 0.1):dtype())
    assert.are.equal(f32(f32(0.1) * 2), (f * 0.1):get(2)) -- 0.1 rounded to f32 first
    assert.are.equal("f64", (i / 2):dtype()) -- true division
    assert.are.same({ 0.5, 1 }, (i / 2):tolist())
    assert.are.same({ 2, 1 }, (2 / i):tolist())
    assert.matches("add: the integer 4294967296 does not fit the tensor's dtype i32",
      error_of(function() return i + (1 << 32) end))
    -- beside a u64, an integer is the u64 of its bits: -1 is 2^64 - 1, and the sum wraps
    assert.are.same({ 0, 0 }, (spk.ones(2, "u64") + (-1)):tolist())
    assert.are.same({ 0, 1 }, (spk.tensor({ 1, 2 }, "u64") - 1):tolist())
    assert.are.same({ 2 ^ -40, 2 ^ -39 }, (i / (1 << 40)):tolist()) -- division happens in f64
  end)

  it("integers wrap as NumPy's arrays do; negation keeps the dtype", function()
    local i = spk.tensor({ 2147483647, -2147483648 }, "i32")
    assert.are.same({ -2147483648, -2147483647 }, (i + 1):tolist())
    assert.are.same({ -2147483647, -2147483648 }, (-i):tolist())
    assert.are.equal(-1, (-spk.ones(1, "u64")):get(1)) -- 2^64 - 1
    assert.are.same({ -1, -2 }, (-spk.tensor({ 1, 2 }, "i32")):tolist())
  end)

  it("comparisons give i32 0/1, NaN unequal to everything, integers compared exactly", function()
    local a = spk.tensor { 1, 0 / 0, 3 }
    assert.are.same({ 1, 0, 0 }, a:eq(1):tolist())
    assert.are.same({ 0, 1, 1 }, a:ne(1):tolist())
    assert.are.same({ 0, 0, 1 }, a:gt(2):tolist())
    assert.are.same({ 1, 0, 1 }, a:le(a):tolist())
    assert.are.same({ 0, 0 }, spk.tensor({ 0, 5 }, "u64"):gt(-1):tolist()) -- -1 is 2^64 - 1 beside a u64
    assert.are.same({ 0, 0 }, spk.tensor({ 0, 5 }, "i32"):eq(1 << 40):tolist())
    assert.are.same({ 1, 1 }, spk.tensor({ 0, 5 }, "i32"):lt(1 << 40):tolist())
    assert.matches("x:lt%(y%)", error_of(function() return a < a end))
  end)

  it("u64 values past 2^63 have one mapping to Lua integers (their bits) in every path", function()
    local top = math.mininteger -- the bits of 2^63
    local u = spk.full({ 3 }, -1, "u64") -- 2^64 - 1
    u:set(2, top)
    u[3] = 7
    assert.are.same({ -1, top, 7 }, u:tolist())
    assert.are.equal(-1, u:max())
    assert.are.equal(7, u:min())
    assert.are.same({ 1, 0, 0 }, u:eq(u:max()):tolist()) -- the maximum equals itself
    assert.are.same({ 0, 1, 0 }, u:eq(u:get(2)):tolist())
    assert.are.same({ 0, 0, 1 }, u:lt(top):tolist()) -- unsigned order: 7 < 2^63 < 2^64 - 1
    assert.are.same({ 1, 1, 0 }, u:ge(top):tolist())
    assert.are.same({ 1, 0, 0 }, u:gt(top):tolist())
    assert.are.same({ -2, math.maxinteger, 6 }, (u - 1):tolist()) -- arithmetic wraps in the same bits
    assert.are.same({ 0, top + 1, 8 }, (u + 1):tolist())
    assert.are.same({ 0, top + 1, 8 }, (1 + u):tolist())
    local v = spk.zeros({ 2 }, "u64")
    v:fill(-1)
    assert.are.same({ 1, 1 }, v:eq(-1):tolist())
    assert.are.same({ 1, 1 }, v:eq(u:max()):tolist())
    assert.are.same({ 1.0, 1.0 }, (v / -1):tolist()) -- (2^64 - 1) / (2^64 - 1), in f64
    assert.are.same({ 2.0 ^ 64, 2.0 ^ 64 }, v:to("f64"):tolist()) -- a float is the number: 2^64 - 1 rounds
    assert.are.same({ 1, 1 }, v:gt(2.0 ^ 63):tolist()) -- floats compare as numbers
  end)

  it("shapes broadcast as NumPy's", function()
    local col, row = spk.tensor { { 1 }, { 2 } }, spk.tensor { 10, 20, 30 }
    assert.are.same({ { 11, 21, 31 }, { 12, 22, 32 } }, (col + row):tolist())
    assert.are.same({ 2, 3 }, (row * col):shape())
    assert.are.same({ 0, 3 }, (spk.zeros(0, 1) + row):shape())
    assert.matches("shapes %[2, 3%] and %[2%] do not broadcast %(sizes 3 and 2",
      error_of(function() return spk.zeros(2, 3) - spk.zeros(2) end))
  end)
end)

describe("arguments a function does not take are errors naming them", function()
  it("an extra argument, a dim that is no integer, an unknown bound", function()
    local b = spk.tensor { 1, 2 }
    assert.matches(":%d+: bad argument #2 to 'add' %(unexpected argument %(number 2%): tensor:add takes %(other%)%)$",
      error_of(function() return b:add(b, 2) end))
    assert.matches("bad argument #1 to 'sum' %(dim must be an integer, got string \"hello\"%)",
      error_of(function() return b:sum("hello") end))
    assert.matches("bad argument #3 to 'zeros' %(unexpected argument %(string \"f64\"%): spk.zeros takes %(shape..., dtype%)%)",
      error_of(function() return spk.zeros(2, "f32", "f64") end))
    assert.matches("bad argument #4 to 'check_near' %(unexpected argument %(number 1%)",
      error_of(function() return spk.check_near(b, b, { max_abs = 1 }, 1) end))
    assert.matches("unknown bound 'maxabs'", error_of(function() return spk.check_near(b, b, { maxabs = 1 }) end))
  end)

  it("trailing nils are absent arguments, as in Lua's own library", function()
    local b = spk.tensor { 1, 2 }
    assert.are.equal(3, b:sum(nil, nil, nil))
    assert.are.same({ 2 }, spk.zeros(2, nil):shape())
  end)

  -- Every method of a tensor and a generator, and every constructor: nine
  -- arguments past self are more than any fixed list takes. Lists the
  -- function reads itself ("...") get a valid call plus one more argument.
  -- Methods other areas add to tensors (the files' :save, the GPU's :cuda,
  -- :cpu, :to_device) are checked by those areas.
  local other_areas = { save = true, cuda = true, cpu = true, to_device = true, record_stream = true }
  local varargs = {
    view = { 6, "x" }, reshape = { { 6 }, 1 }, get = { 1, 1, 1 }, set = { 1, 1, 1, 1 },
  }

  it("every tensor and generator method", function()
    local t = spk.arange(6):view(2, 3)
    local methods = select(2, debug.getupvalue(getmetatable(t).__index, 1))
    local names = {}
    for name in pairs(methods) do names[#names + 1] = name end
    table.sort(names)
    local checked = 0
    for _, name in ipairs(names) do
      if not other_areas[name] then
        local self = spk.arange(6):view(2, 3)
        local args = varargs[name] or { 1, 1, 1, 1, 1, 1, 1, 1, 1 }
        local err = error_of(methods[name], self, table.unpack(args))
        assert(err:find("unexpected argument", 1, true) or (name == "get" or name == "set") and err:find("indices", 1, true),
          name .. ": " .. err)
        checked = checked + 1
      end
    end
    assert.is_true(checked >= 40, "methods checked: " .. checked)
    local g = spk.generator(1)
    for _, name in ipairs { "uniform", "normal", "next_u64" } do
      local args = name == "next_u64" and { 1 } or { { 2 }, {}, 1 }
      assert.matches("unexpected argument", error_of(g[name], g, table.unpack(args)), name)
    end
  end)

  it("every constructor of the tensor area", function()
    local calls = {
      tensor = { { 1 }, "f32", 1 }, zeros = { 2, "f32", 1 }, ones = { { 2 }, "f32", 1 },
      full = { { 2 }, 1, "f32", 1 }, arange = { 0, 4, 1, "f32", 1 }, is_tensor = { 1, 2 },
      rand = { { 2 }, {}, 1 }, randn = { 2, {}, 1 }, generator = { 1, 2 },
      check_near = { spk.zeros(1), spk.zeros(1), { max_abs = 1 }, 1 },
    }
    for name, args in pairs(calls) do
      assert.matches("unexpected argument", error_of(spk[name], table.unpack(args)), name)
      -- the same call without the extra argument works
      local ok, err = pcall(spk[name], table.unpack(args, 1, #args - 1))
      assert(ok, name .. ": " .. tostring(err))
    end
  end)
end)

describe("messages name spk's objects, never userdata", function()
  local t, g, closed
  before_each(function()
    t, g, closed = spk.arange(6):view(2, 3), spk.generator(1), spk.zeros(2)
    closed:close()
  end)

  it("every Lua operator on a tensor, with each kind of operand", function()
    local others = { 1, "s", {}, true, function() end, io.stdout, g, closed }
    local ops = {
      function(a, b) return a + b end, function(a, b) return a - b end, function(a, b) return a * b end,
      function(a, b) return a / b end, function(a, b) return a // b end, function(a, b) return a % b end,
      function(a, b) return a ^ b end, function(a, b) return a .. b end, function(a, b) return a < b end,
      function(a, b) return a <= b end, function(a, b) return a & b end, function(a, b) return a | b end,
      function(a, b) return a ~ b end, function(a, b) return a << b end, function(a, b) return a >> b end,
    }
    local count = 0
    for _, op in ipairs(ops) do
      for _, other in ipairs(others) do
        for _, pair in ipairs { { t, other }, { other, t } } do
          local ok, err = pcall(op, pair[1], pair[2])
          if not ok then
            count = count + 1
            assert.is_nil(tostring(err):find("userdata", 1, true), tostring(err))
          end
        end
      end
    end
    for _, unary in ipairs { function(a) return -a end, function(a) return ~a end, function(a) return a() end,
                             function(a) return #a end, function(a) a.x = 1 end, function(a) return a[1.5] end,
                             function(a) return a[true] end, function(a) a[1] = "x" end } do
      for _, v in ipairs { t, closed, spk.tensor(1) } do
        local ok, err = pcall(unary, v)
        if not ok then
          count = count + 1
          assert.is_nil(tostring(err):find("userdata", 1, true), tostring(err))
        end
      end
    end
    assert.is_true(count > 200)
  end)

  it("every function and method given a tensor, a generator or a closed tensor in each place", function()
    local methods = select(2, debug.getupvalue(getmetatable(t).__index, 1))
    local fns = {}
    for name, fn in pairs(methods) do fns["tensor:" .. name] = fn end
    for _, name in ipairs { "tensor", "zeros", "ones", "full", "arange", "rand", "randn", "generator", "check_near" } do
      fns["spk." .. name] = spk[name]
    end
    for _, name in ipairs { "uniform", "normal", "next_u64" } do fns["generator:" .. name] = g[name] end
    local count = 0
    for name, fn in pairs(fns) do
      for position = 1, 3 do
        for _, v in ipairs { t, g, closed, io.stdout } do
          local args = { spk.arange(6):view(2, 3), 1, 1 }
          args[position] = v
          local ok, err = pcall(fn, table.unpack(args, 1, 3))
          if not ok then
            count = count + 1
            assert.is_nil(tostring(err):find("userdata", 1, true), name .. ": " .. tostring(err))
          end
        end
      end
    end
    assert.is_true(count > 300, "errors seen: " .. count)
    assert.matches("tensor or number expected, got generator", error_of(function() return t:add(g) end))
    assert.matches("tensor expected, got generator", error_of(function() return spk.compare(t, g) end))
    assert.matches("generator expected, got tensor", error_of(function() return g.uniform(t, 2) end))
    assert.matches("tensor or number expected, got string", error_of(function() return t:add("2") end))
  end)
end)

describe("option values and shapes are checked, naming the value", function()
  it("random numbers", function()
    assert.matches("bad argument #2 to 'randn' %(randn: std must be finite and >= 0, got %-1%)",
      error_of(function() return spk.randn({ 2 }, { std = -1 }) end))
    assert.matches("randn: std must be finite and >= 0, got inf", error_of(function() return spk.randn(2, { std = math.huge }) end))
    assert.matches("randn: mean must be finite, got %-?nan", error_of(function() return spk.randn(2, { mean = 0 / 0 }) end))
    assert.matches("rand: low = 1 is above high = 0", error_of(function() return spk.rand({ 2 }, { low = 1, high = 0 }) end))
    assert.matches("rand: low and high must be finite", error_of(function() return spk.rand(2, { high = math.huge }) end))
    assert.matches("low = 3 is above high = 2", error_of(function() return spk.generator(1):uniform(2, { low = 3, high = 2 }) end))
    assert.matches("option 'seed' must be an integer, got number 1.5", error_of(function() return spk.rand(2, { seed = 1.5 }) end))
    assert.matches("option 'seed' must be an integer, got string \"7\"", error_of(function() return spk.rand(2, { seed = "7" }) end))
    assert.matches("seed must be an integer, got string \"7\"", error_of(function() return spk.generator("7") end))
    -- the edges stay allowed: a constant draw
    assert.are.same({ 2, 2 }, spk.rand(2, { low = 2, high = 2 }):tolist())
    assert.are.same({ 5, 5 }, spk.randn(2, { mean = 5, std = 0 }):tolist())
  end)

  it("shapes: non-integer, NaN, negative and text sizes", function()
    assert.matches("shape entry 1 must be an integer, got number 1.5", error_of(function() return spk.zeros(1.5) end))
    assert.matches("shape entry 2 must be an integer, got number nan", error_of(function() return spk.zeros { 2, 0 / 0 } end))
    assert.matches("shape entry 1 must be an integer, got string \"2\"", error_of(function() return spk.zeros { "2" } end))
    assert.matches("shape entry 1 is negative %(%-2%)", error_of(function() return spk.ones(-2) end))
    assert.matches("shape entry 2 must be an integer, got number inf", error_of(function() return spk.rand({ 1, math.huge }) end))
    assert.matches("shape entry 2 must be an integer, got string \"x\"", error_of(function() return spk.full(2, "x", 3) end))
  end)

  it("values an integer dtype cannot hold", function()
    assert.matches("full: i32 needs an integer, got 1.5", error_of(function() return spk.full({ 2 }, 1.5, "i32") end))
    assert.matches("full: 2147483648 does not fit in i32", error_of(function() return spk.full({ 2 }, 1 << 31, "i32") end))
    assert.matches("fill: i32 needs an integer, got %-?nan", error_of(function() return spk.zeros(2, "i32"):fill(0 / 0) end))
    assert.matches("fill: %-1 does not fit in u64", error_of(function() return spk.zeros(2, "u64"):fill(-1.0) end))
    assert.matches("arange: i32 needs an integer start and step, got 0 and 0.5",
      error_of(function() return spk.arange(0, 2, 0.5, "i32") end))
    assert.matches("arange: 3000000000 does not fit in i32", error_of(function() return spk.arange(0, 4e9, 1e9, "i32") end))
    assert.matches("arange: start, stop and step must be finite", error_of(function() return spk.arange(0, math.huge) end))
    assert.matches("number expected, got string", error_of(function() return spk.zeros(2):fill("1") end))
    -- exact where it can be: a u64 full of 2^63 - 1, and of 2^64 - 1 written as -1
    assert.are.equal(math.maxinteger, spk.full({ 1 }, math.maxinteger, "u64"):get(1))
    assert.are.equal(-1, spk.full({ 1 }, -1, "u64"):get(1))
  end)
end)

describe("size arithmetic is checked, never wrapped", function()
  it("a slice whose step times the stride overflows int64 keeps its one element", function()
    local s = spk.arange(24):view { 2, 3, 4 }:slice(1, 1, 2, math.maxinteger)
    assert.are.same({ 1, 3, 4 }, s:shape())
    assert.are.equal(11, s:sum(1):get(3, 4))
    assert.are.same({ { 0 }, { 4 }, { 8 } },
      spk.arange(24):view { 2, 3, 4 }:slice(3, 1, -1, math.maxinteger):select(1, 1):tolist())
    assert.are.same({ 23 }, spk.arange(24):slice(1, -1, 1, math.mininteger + 1):tolist())
  end)

  it("an LSTM whose 4 * hidden overflows names the hidden size", function()
    local err = error_of(function() return spk.lstm.random { layers = 1, input = 2, hidden = math.maxinteger } end)
    assert.matches("hidden size 9223372036854775807 is too large", err)
    assert.is_nil(err:find("negative", 1, true))
    assert.matches("layer 1 W %[2, 4 %* 2, 9223372036854775807%]: tensor shape is too large",
      error_of(function() return spk.lstm.random { layers = 1, input = math.maxinteger, hidden = 2 } end))
  end)
end)

describe("x[i] and x:size() as Torch users expect", function()
  it("x[i] selects along dim 1, 1-based, negative from the end; a 1-d tensor gives numbers", function()
    local x = spk.arange(6):view(2, 3)
    assert.are.same({ 3, 4, 5 }, x[2]:tolist())
    assert.are.same({ 3, 4, 5 }, x[-1]:tolist())
    assert.are.equal(5, x[2][3])
    assert.are.equal(x:data_ptr() + 3 * 4, x[2]:data_ptr()) -- a view
    assert.are.equal("integer", math.type(spk.tensor({ 7 }, "i32")[1]))
    assert.matches("x%[3%]: index out of range 1..2 %(or %-2..%-1%) for dim 1 of size 2", error_of(function() return x[3] end))
    assert.matches("x%[0%]: index out of range", error_of(function() return x[0] end))
    assert.matches("x%[%-3%]: index out of range", error_of(function() return x[-3] end))
    assert.matches("tensor index must be an integer, got number 1.5", error_of(function() return x[1.5] end))
    assert.matches("a 0%-d tensor has no dims to index", error_of(function() return spk.tensor(1)[1] end))
    assert.is_nil(x.no_such_method)
    assert.are.equal(x[1.0]:numel(), 3)
  end)

  it("x[i] = number fills, x[i] = tensor copies (broadcast, converted)", function()
    local x = spk.zeros(2, 3)
    x[1] = 7
    assert.are.same({ { 7, 7, 7 }, { 0, 0, 0 } }, x:tolist())
    x[-1] = spk.tensor({ 1, 2, 3 }, "i32")
    assert.are.same({ { 7, 7, 7 }, { 1, 2, 3 } }, x:tolist())
    x[1] = spk.tensor { 5 }
    assert.are.same({ 5, 5, 5 }, x[1]:tolist())
    x[2] = spk.tensor { { 4, 5, 6 } } -- leading dims of size 1 are dropped, as NumPy does
    assert.are.same({ 4, 5, 6 }, x[2]:tolist())
    local v = spk.zeros(3, "i32")
    v[2] = 4
    assert.are.same({ 0, 4, 0 }, v:tolist())
    assert.matches("fill: i32 needs an integer, got 0.5", error_of(function() v[1] = 0.5 end))
    assert.matches("does not broadcast to %[3%]", error_of(function() x[1] = spk.zeros(2) end))
    assert.matches("x%[string \"foo\"%] = ...: only x%[i%] = value", error_of(function() x.foo = 1 end))
    assert.matches("x%[3%]: index out of range", error_of(function() x[3] = 1 end))
    assert.matches("expected a number or a tensor, got string", error_of(function() x[1] = "1" end))
  end)

  it("size() is the whole shape, size(d) one dim; what used size(d) still works", function()
    local x = spk.zeros(2, 3, 4)
    assert.are.same({ 2, 3, 4 }, x:size())
    assert.are.same({}, spk.tensor(1):size())
    assert.are.equal(3, x:size(2))
    assert.are.equal(4, x:size(-1))
  end)
end)
