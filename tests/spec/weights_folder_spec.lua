-- spk.lstm.load never returns a shorter or mixed stack than the files hold:
-- a gap, a partial or stray layer, or layers of two dtypes is an error that
-- names the folder (or .safetensors file) and the file (or tensor); shape
-- errors name the file.
local spk = require "spk"

local dir
before_each(function() dir = spec_tmpdir() end)
after_each(function() os.execute("rm -rf " .. shell_quote(dir)) end)

local layers = spk.lstm.random { layers = 3, input = 4, hidden = 2, seed = 7 }

local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local function folder(name, edit)
  local d = dir .. "/" .. name
  spk.lstm.save(d, layers)
  if edit then edit(d) end
  return d
end

describe("spk.lstm.load of a folder", function()
  it("loads every layer", function()
    local back = spk.lstm.load(folder("whole"))
    assert.are.equal(3, #back)
    assert.is_true(same_bits(layers[3].R, back[3].R))
  end)

  it("refuses a gap, a partial layer and a stray layer, naming the folder and the file", function()
    local cases = {
      { "gap", function(d) for _, p in ipairs { "W", "R", "B" } do os.remove(d .. "/l1_" .. p .. ".npy") end end,
        "gap: l1_W%.npy is missing, but l2_.%.npy is there" },
      { "partial", function(d) os.remove(d .. "/l2_R.npy") end, "partial: l2_R%.npy is missing" },
      { "stray", function(d) spk.save(d .. "/l5_W.npy", layers[1].W) end, "stray: l3_W%.npy is missing, but l5_W%.npy is there" },
      { "zero", function(d) os.execute(("cp %s/l0_W.npy %s/l00_W.npy"):format(d, d)) end,
        "zero: l00_W%.npy: layer numbers have no leading zeros" },
    }
    for _, c in ipairs(cases) do
      assert.matches(c[3], error_of(spk.lstm.load, folder(c[1], c[2])))
    end
  end)

  it("refuses layers of two dtypes, naming both files", function()
    local d = folder("mixed", function(d) spk.save(d .. "/l2_B.npy", layers[3].B:to("f64")) end)
    assert.matches("mixed/l2_B%.npy is f64, but l0_W%.npy is f32", error_of(spk.lstm.load, d))
  end)

  it("names the file of a shape error, at the caller's line", function()
    local d = folder("shape", function(d) spk.save(d .. "/l1_R.npy", spk.zeros({ 2, 8, 3 })) end)
    local err = error_of(spk.lstm.load, d)
    assert.matches("^tests/spec/weights_folder_spec%.lua:%d+: .*shape/l1_R%.npy: layer 2's R has shape %[2, 8, 3%], "
      .. "expected %[2, 8, 2%]$", err)
  end)
end)

describe("spk.lstm.load of a .safetensors file", function()
  it("refuses a gap in l<k>_ names and in nn.LSTM names, naming the tensor", function()
    local p = dir .. "/w.safetensors"
    spk.lstm.save(p, layers)
    local named = spk.load_safetensors(p)
    named.l1_W, named.l1_R, named.l1_B = nil, nil, nil
    spk.save_safetensors(dir .. "/gap.safetensors", named)
    assert.matches("gap%.safetensors: tensor 'l1_W' is missing, but tensor 'l2_.' is there",
      error_of(spk.lstm.load, dir .. "/gap.safetensors"))

    spk.lstm.save(dir .. "/t.safetensors", layers, { format = "torch" })
    named = spk.load_safetensors(dir .. "/t.safetensors")
    for k in pairs(named) do if k:match("_l1") then named[k] = nil end end
    spk.save_safetensors(dir .. "/tgap.safetensors", named)
    assert.matches("tgap%.safetensors: tensor 'weight_ih_l1' is missing",
      error_of(spk.lstm.load, dir .. "/tgap.safetensors"))
  end)

  it("refuses mixed dtypes and names the tensor of a shape error", function()
    local named = { l0_W = layers[1].W, l0_R = layers[1].R, l0_B = layers[1].B:to("f64") }
    spk.save_safetensors(dir .. "/mixed.safetensors", named)
    assert.matches("mixed%.safetensors: tensor 'l0_B' is f64, but tensor 'l0_W' is f32",
      error_of(spk.lstm.load, dir .. "/mixed.safetensors"))
    named.l0_B = spk.zeros { 2, 9 }
    spk.save_safetensors(dir .. "/shape.safetensors", named)
    assert.matches("shape%.safetensors: tensor 'l0_B': layer 1's B has shape %[2, 9%], expected %[2, 16%]",
      error_of(spk.lstm.load, dir .. "/shape.safetensors"))
  end)
end)
