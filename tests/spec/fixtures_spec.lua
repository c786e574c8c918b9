-- The CPU reference against an independent oracle: torch.nn.LSTM's outputs in
-- tests/fixtures/<case>/ (made by tools/make_fixtures.py; README.md there).
-- Every folder holding x.npy is a case: the f64 reference must be within
-- 1e-12 relative L2 of y_f64.npy (torch float64 on the CPU) and the f32
-- reference within 2e-5.
local spk = require "spk"

local root = "tests/fixtures"

local function cases()
  return fixture_cases(root)
end

describe("LSTM fixtures from torch.nn.LSTM", function()
  local list = cases()

  it("exist", function()
    assert(#list > 0, "no fixtures found in " .. root .. " (folders holding x.npy)")
  end)

  for _, name in ipairs(list) do
    describe(name, function()
      local dir = root .. "/" .. name
      local layers, x, y64

      setup(function()
        layers = spk.lstm.load(dir)
        x = spk.load(dir .. "/x.npy")
        y64 = spk.load(dir .. "/y_f64.npy")
      end)

      it("the f64 reference is within 1e-12 relative L2 of torch float64", function()
        local y = spk.lstm.reference(layers, x, { precision = "f64" })
        assert.equal("f64", y:dtype())
        assert.tensor_near(y, y64, { rel_l2 = 1e-12 })
      end)

      it("the f32 reference is within 2e-5 relative L2 of torch float64", function()
        local y = spk.lstm.reference(layers, x, { precision = "f32" })
        assert.equal("f32", y:dtype())
        assert.tensor_near(y, y64, { rel_l2 = 2e-5 })
      end)
    end)
  end
end)
