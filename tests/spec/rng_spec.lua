-- The seeded generator against an independent Lua 5.4 implementation of the
-- algorithm documented in src/core/rng.h (SplitMix64 seeding, xoshiro256**,
-- 53-/24-bit uniforms, Box-Muller cosine normals). Lua integers are 64-bit
-- and wrap, and >> is a logical shift, so the arithmetic is exact.
local spk = require "spk"

local function splitmix64(x)
  x = x + 0x9E3779B97F4A7C15
  local z = x
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return x, z ~ (z >> 31)
end

local function rotl(x, k)
  return (x << k) | (x >> (64 - k))
end

local function reference(seed)
  local s, x = {}, seed
  for i = 1, 4 do
    x, s[i] = splitmix64(x)
  end
  local g = {}
  function g.next()
    local result = rotl(s[2] * 5, 7) * 9
    local t = s[2] << 17
    s[3] = s[3] ~ s[1]
    s[4] = s[4] ~ s[2]
    s[2] = s[2] ~ s[3]
    s[1] = s[1] ~ s[4]
    s[3] = s[3] ~ t
    s[4] = rotl(s[4], 45)
    return result
  end
  function g.uniform() return (g.next() >> 11) * 2.0 ^ -53 end
  function g.uniform_f32() return (g.next() >> 40) * 2.0 ^ -24 end
  function g.normal()
    local u1, u2 = g.uniform(), g.uniform()
    return math.sqrt(-2 * math.log(1 - u1)) * math.cos(2 * math.pi * u2)
  end
  return g
end

local function f32(x)
  return (string.unpack("<f", string.pack("<f", x)))
end

local function error_of(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("the reference implementation in this spec", function()
  it("reproduces SplitMix64's published first outputs for seed 0", function()
    local x, a, b, c = 0, nil, nil, nil
    x, a = splitmix64(x)
    x, b = splitmix64(x)
    x, c = splitmix64(x)
    assert.are.equal(0xE220A8397B1DCDAF, a)
    assert.are.equal(0x6E789E6AA1B965F4, b)
    assert.are.equal(0x06C45D188009454F, c)
  end)
end)

describe("spk.generator", function()
  for _, seed in ipairs { 0, 1, 42, 123456789, -1 } do
    it("next_u64 follows xoshiro256** seeded by SplitMix64 (seed " .. seed .. ")", function()
      local g, ref = spk.generator(seed), reference(seed)
      for _ = 1, 20 do
        assert.are.equal(ref.next(), g:next_u64())
      end
    end)
  end

  it("continues across calls, one draw per uniform and two per normal", function()
    local g, ref = spk.generator(5), reference(5)
    local a = g:uniform(3):tolist()
    local b = g:uniform({ 2 }, { dtype = "f64" }):tolist()
    local n = g:normal(1, { dtype = "f64" }):get(1)
    for i = 1, 3 do assert.are.equal(ref.uniform_f32(), a[i]) end
    for i = 1, 2 do assert.are.equal(ref.uniform(), b[i]) end
    assert.are.near(ref.normal(), n, 1e-14)
    assert.are.equal(ref.next(), g:next_u64())
  end)

  it("seeds with 0 by default", function()
    assert.are.equal(reference(0).next(), spk.generator():next_u64())
  end)
end)

describe("spk.rand", function()
  it("f32 values are (next >> 40) * 2^-24, in row-major order", function()
    local t, ref = spk.rand({ 3, 4 }, { seed = 7 }), reference(7)
    assert.are.equal("f32", t:dtype())
    for i = 1, 3 do
      for j = 1, 4 do
        assert.are.equal(ref.uniform_f32(), t:get(i, j))
      end
    end
  end)

  it("f64 values are (next >> 11) * 2^-53", function()
    local t, ref = spk.rand(10, { seed = 99, dtype = "f64" }), reference(99)
    for i = 1, 10 do
      assert.are.equal(ref.uniform(), t:get(i))
    end
  end)

  it("maps to [low, high)", function()
    local ref = reference(3)
    local t = spk.rand(50, { seed = 3, low = -2, high = 6, dtype = "f64" })
    local f = spk.rand(50, { seed = 3, low = -2, high = 6 })
    local ref32 = reference(3)
    for i = 1, 50 do
      assert.are.equal(-2 + 8 * ref.uniform(), t:get(i))
      assert.are.equal(f32(-2 + 8 * ref32.uniform_f32()), f:get(i))
    end
    assert.is_true(t:min() >= -2 and t:max() < 6)
  end)

  it("the same seed gives the same numbers; the process-wide generator starts from seed 0", function()
    assert.are.same(spk.rand(20, { seed = 11 }):tolist(), spk.rand(20, { seed = 11 }):tolist())
    assert.are_not.same(spk.rand(20, { seed = 11 }):tolist(), spk.rand(20, { seed = 12 }):tolist())
    local before = spk.initial_seed()
    spk.seed(0)
    assert.are.same(spk.rand(20, { seed = 0 }):tolist(), spk.rand(20):tolist())
    spk.seed(before)
    assert.are.same(spk.rand(2, 3, { seed = 4 }):tolist(), spk.rand({ 2, 3 }, { seed = 4 }):tolist())
  end)

  it("checks its options", function()
    assert.matches("bad argument #2 to 'rand' %(unknown option 'sed'", error_of(function()
      return spk.rand({ 2 }, { sed = 1 })
    end))
    assert.matches("makes f32 or f64 tensors, not i32", error_of(function()
      return spk.rand({ 2 }, { dtype = "i32" })
    end))
    assert.matches("option 'seed' must be an integer", error_of(function()
      return spk.rand({ 2 }, { seed = 1.5 })
    end))
    assert.matches("option 'low' must be a number", error_of(function()
      return spk.rand({ 2 }, { low = "x" })
    end))
  end)
end)

describe("spk.randn", function()
  it("is mean + std * Box-Muller cosine of two uniform draws", function()
    local t, ref = spk.randn(20, { seed = 8, dtype = "f64", mean = 1, std = 3 }), reference(8)
    for i = 1, 20 do
      assert.are.near(1 + 3 * ref.normal(), t:get(i), 1e-13)
    end
  end)

  it("f32 values are the f64 normals rounded once", function()
    local t, ref = spk.randn({ 4, 5 }, { seed = 21 }), reference(21)
    assert.are.equal("f32", t:dtype())
    for i = 1, 4 do
      for j = 1, 5 do
        local want = f32(ref.normal())
        assert.are.near(want, t:get(i, j), math.abs(want) * 2 ^ -23 + 1e-30)
      end
    end
  end)

  it("looks normal over many draws", function()
    local t = spk.randn(100000, { seed = 2, dtype = "f64" })
    assert.are.near(0, t:mean(), 0.02)
    assert.are.near(1, t:norm() / math.sqrt(100000), 0.02)
  end)

  it("refuses rand's options", function()
    assert.matches("unknown option 'low'", error_of(function() return spk.randn({ 2 }, { low = 1 }) end))
  end)
end)

describe("the process-wide generator (spk.rand and spk.randn without a seed)", function()
  local saved
  before_each(function() saved = spk.initial_seed() end)
  after_each(function() spk.seed(saved) end)

  it("starts from seed 0 in every process, and each call continues it", function()
    local script = "print(table.concat(spk.randn({3}):tolist(), ' ')) print(table.concat(spk.randn({3}):tolist(), ' '))"
      .. " print(spk.initial_seed())"
    local out, err, code = run_spk({ "-e", script })
    assert.are.equal(0, code, err)
    local first, second, seed = out:match("^([^\n]+)\n([^\n]+)\n(%d+)\n$")
    assert.are.equal("0", seed)
    local want = {}
    for i, v in ipairs(spk.randn({ 3 }, { seed = 0 }):tolist()) do want[i] = tostring(v) end
    assert.are.equal(table.concat(want, " "), first)
    assert.are_not.equal(first, second)
    assert.are.equal(out, (run_spk({ "-e", script })), "another process draws the same numbers")
  end)

  it("spk.seed(n) starts it again: the next draws are those of seed n, rand and randn in turn", function()
    spk.seed(5)
    local a, b, c = spk.rand(4):tolist(), spk.randn({ 2, 3 }):tolist(), spk.rand(3, { dtype = "f64" }):tolist()
    assert.are.equal(5, spk.initial_seed())
    local g = spk.generator(5)
    assert.are.same(g:uniform(4):tolist(), a)
    assert.are.same(g:normal({ 2, 3 }):tolist(), b)
    assert.are.same(g:uniform(3, { dtype = "f64" }):tolist(), c)
    assert.are.same(spk.rand(4, { seed = 5 }):tolist(), a)
  end)

  it("is left alone by draws with a seed", function()
    spk.seed(9)
    spk.rand(100, { seed = 1 })
    spk.randn(100, { seed = 2 })
    assert.are.same(spk.rand(5, { seed = 9 }):tolist(), spk.rand(5):tolist())
  end)

  it("seeds spk.lstm.random without a seed: new weights each call, the same after spk.seed(n)", function()
    local dims = { layers = 2, input = 3, hidden = 4 }
    local function weights(opts)
      local layers, out = spk.lstm.random(opts), {}
      for k, layer in ipairs(layers) do
        for _, name in ipairs { "W", "R", "B" } do out[#out + 1] = { k, name, layer[name]:tolist() } end
      end
      return out
    end
    spk.seed(7)
    local first, second = weights(dims), weights(dims)
    assert.are_not.same(first, second)
    spk.seed(7)
    local g = spk.generator(7)
    local want = { layers = 2, input = 3, hidden = 4, seed = g:next_u64() }
    assert.are.same(weights(want), first, "the seed is the process-wide generator's next output")
    want.seed = g:next_u64()
    assert.are.same(weights(want), second)
    spk.seed(7)
    assert.are.equal(spk.generator(7):next_u64(), spk.next_seed())
    assert.are.same(weights { layers = 2, input = 3, hidden = 4, seed = 0 },
      weights { layers = 2, input = 3, hidden = 4, seed = 0 }, "an explicit seed gives the same weights")
  end)

  it("takes any 64-bit seed, and refuses what is not an integer", function()
    spk.seed(-1)
    assert.are.equal(-1, spk.initial_seed())
    assert.are.same(spk.randn(3, { seed = -1 }):tolist(), spk.randn(3):tolist())
    assert.matches("seed must be an integer, got number 1.5", error_of(function() spk.seed(1.5) end))
    assert.matches("seed must be an integer", error_of(function() spk.seed() end))
    assert.matches("spk.seed takes %(n%)", error_of(function() spk.seed(1, 2) end))
  end)
end)
