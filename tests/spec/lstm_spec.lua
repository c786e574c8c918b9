-- spk.lstm: validation, packing, loaders, random initialisation and the CPU
-- reference (the hand-worked case is computed here in plain Lua math).
local spk = require "spk"

local function tensor_of(shape, values, dtype)
  local t = spk.zeros(shape, dtype or "f64")
  local n = 0
  -- t:set(i, j, ..., value) for every index in row-major order
  local function fill(dim, idx)
    if dim > #shape then
      n = n + 1
      local args = { table.unpack(idx, 1, #shape) }
      args[#shape + 1] = values[n]
      t:set(table.unpack(args, 1, #shape + 1))
      return
    end
    for i = 1, shape[dim] do
      idx[dim] = i
      fill(dim + 1, idx)
    end
  end
  fill(1, {})
  return t
end

-- Every element of two tensors, bit for bit (as f64).
local function same_bits(a, b)
  local sa, sb = a:shape(), b:shape()
  if #sa ~= #sb then return false end
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  local function walk(dim, idx)
    if dim > #sa then
      return string.pack("<d", a:get(table.unpack(idx, 1, #sa))) == string.pack("<d", b:get(table.unpack(idx, 1, #sa)))
    end
    for i = 1, sa[dim] do
      idx[dim] = i
      if not walk(dim + 1, idx) then return false end
    end
    return true
  end
  return walk(1, {})
end

local function sigmoid(v) return 1 / (1 + math.exp(-v)) end
local function tanh(v) local e = math.exp(2 * v); return (e - 1) / (e + 1) end

describe("spk.lstm", function()
  describe("reference", function()
    it("matches a hand-worked case (H = 2, in = 1, T = 2) computed in plain Lua", function()
      local H = 2
      -- W [2, 8, 1], R [2, 8, 2], B [2, 16]: rows g*H + u, gates i, o, f, c
      local w, r, b = {}, {}, {}
      for d = 1, 2 do
        for row = 1, 4 * H do
          w[#w + 1] = 0.1 * row * (d == 1 and 1 or -1) + 0.05
          for k = 1, H do r[#r + 1] = 0.07 * ((row + 2 * k + d) % 5) - 0.15 end
        end
        for j = 1, 8 * H do b[#b + 1] = 0.01 * j - 0.04 * d end
      end
      local layer = {
        W = tensor_of({ 2, 4 * H, 1 }, w),
        R = tensor_of({ 2, 4 * H, H }, r),
        B = tensor_of({ 2, 8 * H }, b),
      }
      local xs = { 0.8, -1.3 }
      local x = tensor_of({ 1, 2, 1 }, xs)
      local y = spk.lstm.reference({ layer }, x, { precision = "f64" })
      assert.same({ 1, 2, 2 * H }, y:shape())
      assert.equal("f64", y:dtype())
      for d = 1, 2 do
        local h, c = { 0, 0 }, { 0, 0 }
        local order = d == 1 and { 1, 2 } or { 2, 1 }
        for _, t in ipairs(order) do
          local pre = {}
          for row = 1, 4 * H do
            local base = (d - 1) * 4 * H + row
            local v = xs[t] * w[base]
            for k = 1, H do v = v + h[k] * r[((d - 1) * 4 * H + row - 1) * H + k] end
            pre[row] = v + b[(d - 1) * 8 * H + row] + b[(d - 1) * 8 * H + 4 * H + row]
          end
          local nh, nc = {}, {}
          for u = 1, H do
            local i, o, f, g = sigmoid(pre[u]), sigmoid(pre[H + u]), sigmoid(pre[2 * H + u]), tanh(pre[3 * H + u])
            nc[u] = f * c[u] + i * g
            nh[u] = o * tanh(nc[u])
          end
          h, c = nh, nc
          for u = 1, H do
            assert.near(h[u], y:get(1, t, (d - 1) * H + u), 1e-14)
          end
        end
      end
    end)

    it("gives bitwise the same result with 1 and 4 threads", function()
      local layers = spk.lstm.random { layers = 2, input = 5, hidden = 12, seed = 3, scale = 2 }
      local x = spk.randn({ 5, 7, 5 }, { seed = 4 })
      for _, precision in ipairs { "f64", "f32" } do
        local one = spk.lstm.reference(layers, x, { precision = precision, threads = 1 })
        local four = spk.lstm.reference(layers, x, { precision = precision, threads = 4 })
        assert.equal(precision, one:dtype())
        assert.is_true(same_bits(one, four))
      end
    end)

    it("returns layer outputs and a trace consistent with y", function()
      local layers = spk.lstm.random { layers = 3, input = 4, hidden = 6, seed = 8 }
      local x = spk.randn({ 2, 5, 4 }, { seed = 9 })
      local y, info = spk.lstm.reference(layers, x, {
        layers_out = true, trace = { layer = 3, direction = "reverse", steps = { 1, 5, 3 } } })
      assert.equal(3, #info.layers)
      assert.is_true(same_bits(info.layers[3], y))
      assert.is_false(same_bits(info.layers[2], y))
      -- the second layer alone, fed the first layer's output, gives the second output
      local second = spk.lstm.reference({ layers[2] }, info.layers[1])
      assert.is_true(same_bits(second, info.layers[2]))
      local tr = info.trace
      assert.same({ 3, 2, 6 }, tr.h:shape())
      assert.same({ 3, 2, 6 }, tr.c:shape())
      assert.same({ 1, 5, 3 }, tr.steps)
      assert.equal("reverse", tr.direction)
      for e, t in ipairs(tr.steps) do
        for b = 1, 2 do
          for u = 1, 6 do
            assert.equal(y:get(b, t, 6 + u), tr.h:get(e, b, u))
            assert.is_true(math.abs(tr.h:get(e, b, u)) <= math.abs(tanh(tr.c:get(e, b, u))) + 1e-15)
          end
        end
      end
      -- the last step of the forward trace is y's slice at the last t
      local _, fwd = spk.lstm.reference(layers, x, { trace = { layer = 3, direction = "forward", steps = { 5 } } })
      for b = 1, 2 do
        for u = 1, 6 do assert.equal(y:get(b, 5, u), fwd.trace.h:get(1, b, u)) end
      end
      assert.is_nil(fwd.layers)
    end)

    it("f32 is close to f64 and promoted input changes nothing for f64", function()
      local layers = spk.lstm.random { layers = 2, input = 6, hidden = 16, seed = 5 }
      local x = spk.randn({ 2, 9, 6 }, { seed = 6 })
      local y64 = spk.lstm.reference(layers, x)
      local y64b = spk.lstm.reference(layers, x:to("f64"), { precision = "f64" })
      assert.is_true(same_bits(y64, y64b))
      local y32 = spk.lstm.reference(layers, x, { precision = "f32" })
      assert.equal("f32", y32:dtype())
      local worst = 0
      for b = 1, 2 do for t = 1, 9 do for j = 1, 32 do
        worst = math.max(worst, math.abs(y32:get(b, t, j) - y64:get(b, t, j)))
      end end end
      assert.is_true(worst > 0 and worst < 1e-5, "f32 vs f64 max abs " .. worst)
    end)

    it("rejects bad options and inputs with clear errors", function()
      local layers = spk.lstm.random { layers = 2, input = 4, hidden = 3, seed = 1 }
      local x = spk.zeros({ 1, 3, 4 })
      assert.has_error(function() spk.lstm.reference(layers, spk.zeros({ 1, 3, 5 })) end)
      local ok, err = pcall(spk.lstm.reference, layers, spk.zeros({ 1, 3, 5 }))
      assert.is_false(ok)
      assert.matches("input has shape %[1, 3, 5%], expected %[batch, steps, 4%]", err)
      ok, err = pcall(spk.lstm.reference, layers, x, { precision = "f16" })
      assert.matches("precision", err)
      ok, err = pcall(spk.lstm.reference, layers, x, { thread = 2 })
      assert.matches("unknown option 'thread'", err)
      ok, err = pcall(spk.lstm.reference, layers, x, { trace = { layer = 3, steps = { 1 } } })
      assert.matches("trace layer 3 is outside 1..2", err)
      ok, err = pcall(spk.lstm.reference, layers, x, { trace = { layer = 1, steps = { 4 } } })
      assert.matches("trace step 4 is outside 1..3", err)
      ok, err = pcall(spk.lstm.reference, layers, x, { trace = { layer = 1, direction = "back", steps = { 1 } } })
      assert.matches("forward", err)
    end)
  end)

  describe("validate", function()
    it("derives the sizes", function()
      local layers = spk.lstm.random { layers = 3, input = 60, hidden = 16, seed = 1 }
      assert.same({ layers = 3, hidden = 16, input = 60 }, spk.lstm.validate(layers))
    end)

    it("names the layer, the tensor, the expected and the actual shape", function()
      local layers = spk.lstm.random { layers = 3, input = 60, hidden = 16, seed = 1 }
      local good = layers[2].W
      layers[2].W = layers[1].W
      local ok, err = pcall(spk.lstm.validate, layers)
      assert.is_false(ok)
      assert.matches("layer 2: W has shape %[2, 64, 60%], expected %[2, 64, 32%]", err)
      layers[2].W = good
      layers[3].B = spk.zeros({ 2, 64 })
      ok, err = pcall(spk.lstm.validate, layers)
      assert.matches("layer 3: B has shape %[2, 64%], expected %[2, 128%]", err)
      layers[3].B = nil
      ok, err = pcall(spk.lstm.validate, layers)
      assert.matches("layer 3: B is missing", err)
      layers[3].B = "weights"
      ok, err = pcall(spk.lstm.validate, layers)
      assert.matches("layer 3: B is not a tensor", err)
      ok, err = pcall(spk.lstm.validate, {})
      assert.matches("at least one layer", err)
    end)
  end)

  describe("packing", function()
    it("follows the packing's reference check: unit 77 in both directions, bias unit 5 reversed", function()
      local H = 128
      local W = spk.rand({ 2, 4 * H, 60 }, { seed = 77, low = -1, high = 1 })
      local P = spk.lstm.pack_directions(W, { from = "iofc", to = "ifco" })
      local onnx_rows = { 0 * H + 77, 2 * H + 77, 3 * H + 77, 1 * H + 77 } -- i f c o, 0-based
      for d = 1, 2 do
        for p = 0, 3 do
          for k = 1, 60, 7 do
            assert.equal(W:get(d, onnx_rows[p + 1] + 1, k), P:get(d, 77 * 4 + p + 1, k))
          end
        end
      end
      local B = spk.rand({ 2, 8 * H }, { seed = 5, low = -1, high = 1 })
      local PB = spk.lstm.pack_bias(B, { from = "iofc", to = "ifco" })
      assert.same({ 2, 4 * H }, PB:shape())
      local gate = { 0, 2, 3, 1 }
      for p = 0, 3 do
        local row = gate[p + 1] * H + 5 -- 0-based
        local wb, rb = B:get(2, row + 1), B:get(2, 4 * H + row + 1)
        -- summed in f32, exactly as the packing does
        local sum = string.unpack("<f", string.pack("<f", wb + rb))
        assert.equal(sum, PB:get(2, 5 * 4 + p + 1))
      end
    end)

    it("round-trips every gate order", function()
      local W = spk.rand({ 2, 8, 3 }, { seed = 2 })
      local orders = {}
      local function permute(prefix, rest)
        if #rest == 0 then orders[#orders + 1] = prefix return end
        for i = 1, #rest do permute(prefix .. rest:sub(i, i), rest:sub(1, i - 1) .. rest:sub(i + 1)) end
      end
      permute("", "iofc")
      assert.equal(24, #orders)
      for _, to in ipairs(orders) do
        local P = spk.lstm.pack_directions(W, { from = "iofc", to = to })
        assert.is_true(same_bits(W, spk.lstm.unpack_directions(P, { from = "iofc", to = to })))
      end
      local ok, err = pcall(spk.lstm.pack_directions, W, { from = "iofc", to = "ifcq" })
      assert.matches('"ifcq" is not a permutation of "iofc"', err)
    end)
  end)

  describe("random", function()
    it("is reproducible, bounded by scale/sqrt(H), and follows its draw order", function()
      local a = spk.lstm.random { layers = 2, input = 5, hidden = 4, seed = 11, scale = 2 }
      local b = spk.lstm.random { layers = 2, input = 5, hidden = 4, seed = 11, scale = 2 }
      local c = spk.lstm.random { layers = 2, input = 5, hidden = 4, seed = 12, scale = 2 }
      assert.is_true(same_bits(a[2].R, b[2].R))
      assert.is_false(same_bits(a[2].R, c[2].R))
      assert.same({ 2, 16, 5 }, a[1].W:shape())
      assert.same({ 2, 16, 8 }, a[2].W:shape())
      local g = spk.generator(11)
      local bound = 2 / math.sqrt(4)
      for _, layer in ipairs(a) do
        for _, part in ipairs { "W", "R", "B" } do
          local expected = g:uniform(layer[part]:shape(), { low = -bound, high = bound })
          assert.is_true(same_bits(expected, layer[part]))
          assert.is_true(layer[part]:max() < bound and layer[part]:min() >= -bound)
        end
      end
    end)
  end)

  describe("load and save", function()
    local dir
    before_each(function() dir = spec_tmpdir() end)
    after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

    local function same_layers(a, b)
      assert.equal(#a, #b)
      for k = 1, #a do
        for _, part in ipairs { "W", "R", "B" } do
          assert.is_true(same_bits(a[k][part], b[k][part]), ("layer %d %s differs"):format(k, part))
        end
      end
    end

    it("round-trips a folder of .npy files, a .safetensors file and PyTorch names", function()
      local layers = spk.lstm.random { layers = 2, input = 3, hidden = 4, seed = 21 }
      spk.lstm.save(dir .. "/npy", layers)
      same_layers(layers, spk.lstm.load(dir .. "/npy"))
      spk.lstm.save(dir .. "/w.safetensors", layers)
      same_layers(layers, spk.lstm.load(dir .. "/w.safetensors"))
      spk.lstm.save(dir .. "/torch.safetensors", layers, { format = "torch" })
      local named = spk.load_safetensors(dir .. "/torch.safetensors")
      assert.is_not_nil(named.weight_ih_l1_reverse)
      assert.is_nil(named.l0_W)
      same_layers(layers, spk.lstm.load(dir .. "/torch.safetensors"))
    end)

    it("converts PyTorch's gate order i, f, g, o to ONNX's i, o, f, c", function()
      local H, input = 2, 3
      -- every value says where it came from: direction*1000 + torch block*100 + unit*10 + column
      local function torch_tensor(shape, d, base)
        local values = {}
        for row = 0, shape[1] - 1 do
          for col = 0, (shape[2] or 1) - 1 do
            values[#values + 1] = base + d * 1000 + (row // H) * 100 + (row % H) * 10 + col
          end
        end
        return tensor_of(shape, values, "f32")
      end
      local named = {}
      for d = 0, 1 do
        local suffix = d == 1 and "_reverse" or ""
        named["weight_ih_l0" .. suffix] = torch_tensor({ 4 * H, input }, d, 0)
        named["weight_hh_l0" .. suffix] = torch_tensor({ 4 * H, H }, d, 5000)
        named["bias_ih_l0" .. suffix] = torch_tensor({ 4 * H }, d, 0)
        named["bias_hh_l0" .. suffix] = torch_tensor({ 4 * H }, d, 5000)
      end
      spk.save_safetensors(dir .. "/t.safetensors", named)
      local layers = spk.lstm.load(dir .. "/t.safetensors")
      local torch_block = { 0, 3, 1, 2 } -- ONNX i, o, f, c come from torch i, o, f, g
      for d = 0, 1 do
        for g = 0, 3 do
          for u = 0, H - 1 do
            local src = d * 1000 + torch_block[g + 1] * 100 + u * 10
            assert.equal(src + 2, layers[1].W:get(d + 1, g * H + u + 1, 3))
            assert.equal(5000 + src + 1, layers[1].R:get(d + 1, g * H + u + 1, 2))
            assert.equal(src, layers[1].B:get(d + 1, g * H + u + 1))
            assert.equal(5000 + src, layers[1].B:get(d + 1, 4 * H + g * H + u + 1))
          end
        end
      end
    end)

    it("reports what is missing", function()
      local ok, err = pcall(spk.lstm.load, dir)
      assert.matches("no l0_W.npy", err)
      local layers = spk.lstm.random { layers = 1, input = 3, hidden = 4, seed = 1 }
      spk.lstm.save(dir .. "/one", layers)
      os.remove(dir .. "/one/l0_R.npy")
      ok, err = pcall(spk.lstm.load, dir .. "/one")
      assert.matches("one: l0_R%.npy is missing", err)
      ok, err = pcall(spk.lstm.load, dir .. "/nothing")
      assert.matches("not a folder", err)
      ok, err = pcall(spk.lstm.save, dir .. "/x", layers, { format = "hdf5" })
      assert.matches('format must be "npy", "safetensors", "torch" or "onnx", got hdf5', err, 1, true)
    end)
  end)
end)
