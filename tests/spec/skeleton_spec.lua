-- The recurrence kernel to copy (experiments/kernels/lstm_skeleton.cu and
-- skeleton.lua, docs/kernels.md): without a GPU, NVRTC compiles it for sm_90
-- in several gate orders and both layouts and checks it against its argument
-- list, and its timeline build takes the timeline's seven parameters after
-- its own; on a GPU it is within the bound spk bench holds every kernel to,
-- the same bits every forward and in every order, traced like the reference.
local spk = require "spk"

local SKELETON = spk.find_dir("experiments") .. "/kernels/skeleton.lua"

local function with(spec, extra)
  local out = {}
  for k, v in pairs(spec) do out[k] = v end
  for k, v in pairs(extra) do out[k] = v end
  return out
end

describe("the kernel to copy", function()
  it("compiles for sm_90 without a device in any gate order and layout, and keeps the contract", function()
    local spec = spk.lstm.kernel_file(SKELETON)
    assert.are.equal("skeleton", spec.name)
    for _, case in ipairs { { "ifco", "units" }, { "iofc", "rows" }, { "ocif", "units" } } do
      local r = spk.lstm.kernel_check(with(spec, { packing = { order = case[1], layout = case[2] } }), { batch = 3 })
      assert.are.equal(#spec.args, #r.params)
      assert.truthy(r.cubin_bytes > 0)
      assert.are.same({ "forward", "reverse" }, { r.launches[1].direction, r.launches[2].direction })
      assert.are.same({ 3, 1, 1 }, r.launches[1].grid)
      assert.are.equal(128, r.launches[1].block)
    end
  end)

  it("stamps its stages in a timeline build: the timeline's seven parameters after its own", function()
    local spec = spk.lstm.kernel_file(SKELETON)
    local defines = spk.lstm.kernel_check(spec).defines
    local function params(extra)
      local d = {}
      for k, v in pairs(defines) do d[k] = v end
      for k, v in pairs(extra) do d[k] = v end
      local m = spk.cuda.compile { file = spec.dir .. "/" .. spec.file, defines = d, arch = "compute_90" }
      local p = m:params(spec.entry)
      local ptx = m:code()
      m:close()
      return p, ptx
    end
    local plain, plain_ptx = params {}
    local built, built_ptx = params { SPK_TIMELINE = 1 }
    assert.are.equal(#spec.args, #plain)
    assert.are.equal(#spec.args + 7, #built)
    assert.are.same({ 8, 4, 4, 4, 4, 4, 4 }, (function()
      local sizes = {}
      for i = #spec.args + 1, #built do sizes[#sizes + 1] = built[i].size end
      return sizes
    end)())
    assert.is_nil(plain_ptx:find("globaltimer", 1, true)) -- the normal build has no stamp at all
    assert.truthy(built_ptx:find("globaltimer", 1, true))
    local _, zero_ptx = params { SPK_TIMELINE = 0 }
    assert.are.equal(plain_ptx, zero_ptx)
  end)

  gpu_it("is within spk bench's bound of the f64 reference, the same bits always, traced like the reference", function()
    local spec = spk.lstm.kernel_file(SKELETON)
    local layers = spk.lstm.random { layers = 2, input = 6, hidden = 128, seed = 5 }
    local x = spk.randn({ 3, 21, 6 }, { seed = 5 })
    local plan <close> = spk.lstm.kernel_stack(with(spec, { layers = layers, batch = 3, steps = 21 }))
    local y = plan:forward(x)
    assert.within_reference(y, layers, x) -- spk.lstm.bound's: cuDNN standard's error on x, measured
    assert.bits_equal(y, plan:forward(x), "a second forward")
    local rows <close> = spk.lstm.kernel_stack(with(spec, { layers = layers, batch = 3, steps = 21,
                                                            packing = { order = "ocif", layout = "rows" } }))
    assert.bits_equal(y, rows:forward(x), "gate order ocif, rows")
    local trace = { layer = 1, direction = "reverse", steps = { 1, 9, 21 } }
    local _, info = plan:forward(x, { trace = trace })
    local _, ref = spk.lstm.reference(layers, x, { precision = "f64", trace = trace })
    assert.is_nil(spk.debug.first_divergence(info.trace, ref.trace, { tol = 1e-6 }))
  end)
end)
