-- What a new user meets first: spk.lstm.stack without a backend runs on any
-- machine ("auto"), and a machine without a GPU is told so in one phrase,
-- "no CUDA device" said once, wherever it is reported.
local spk = require "spk"
local tuning = require "spk.tuning"

local function count(text, word)
  return select(2, tostring(text):gsub(word:gsub("%p", "%%%0"), ""))
end

local function run(command)
  local p = io.popen(SPK .. " " .. command .. " 2>&1; echo \"exit=$?\"")
  local out = p:read("a")
  p:close()
  return out, tonumber(out:match("exit=(%d+)%s*$"))
end

describe("spk.lstm.stack without a backend", function()
  local layers = spk.lstm.random { layers = 2, input = 6, hidden = 16, seed = 3 }
  local x = spk.randn({ 2, 5, 6 }, { seed = 4 })

  it("is backend \"auto\": the same script runs with and without a GPU, checked against f64", function()
    local plan = spk.lstm.stack { layers = layers, batch = 2, steps = 5 }
    assert.is_table(plan.auto)
    assert.is_true(plan.auto.source == "default" or plan.auto.source == "record", plan.auto.source)
    if not spk.cuda.available() then assert.are.equal("cpu", plan.auto.backend) end
    local y = plan:forward(x)
    if y.device ~= "cpu" then y = y:cpu() end
    local truth = spk.lstm.reference(layers, x, { precision = "f64" })
    assert.tensor_near(y, truth, { rel_l2 = 1e-5 })
    plan:close()
  end)

  it("says which backend options need their backend", function()
    local ok, err = pcall(spk.lstm.stack, { layers = layers, batch = 2, steps = 5, kernel = { units = 4 } })
    assert.is_false(ok)
    assert.matches("unknown option 'kernel' %(backend options need their backend", tostring(err))
  end)

  gpu_it("picks a GPU backend where there is a GPU", function()
    local plan = spk.lstm.stack { layers = spk.lstm.random { layers = 1, input = 60, hidden = 128 }, batch = 1,
                                  steps = 4 }
    assert.are_not.equal("cpu", plan.auto.backend)
    plan:close()
  end)
end)

describe("\"no CUDA device\", said once", function()
  it("spk.cuda.no_device_reason passes the runtime's message through without wrapping it again", function()
    local r = spk.cuda.no_device_reason
    assert.are.equal("no CUDA device (cudaGetDeviceCount: x)", r("spk.cuda: no CUDA device (cudaGetDeviceCount: x)"))
    assert.are.equal("no CUDA device (cudaGetDeviceCount: x)", r("no CUDA device (cudaGetDeviceCount: x)"))
    assert.are.equal("no CUDA device (driver not found)", r("driver not found"))
    assert.are.equal("no CUDA device", r("no CUDA device"))
    assert.are.equal(1, count(r(), "no CUDA device"))
  end)

  it("tuning.choose without a device gives the reason once, whatever form the runtime's message has", function()
    local shape = { hidden = 128, input = 60, layers = 4, batch = 2, steps = 589 }
    for _, why in ipairs { "spk.cuda: no CUDA device (none here)", "no CUDA device (none here)", "none here", false } do
      local c = tuning.choose(shape, { facts = false, why = why or nil })
      assert.are.equal("cpu", c.backend)
      assert.are.equal(1, count(c.reason, "no CUDA device"), c.reason)
      assert.are.equal(0, count(c.reason, "spk.cuda:"), c.reason)
      if why then assert.matches("none here", c.reason) end
    end
  end)

  nogpu_it("in the quickstart's backend line, spk info, auto's reason and a GPU experiment's refusal", function()
    local dir = spec_tmpdir()
    local out, code = run(("run experiments/quickstart.lua --quick --steps 4 --out '%s'"):format(dir))
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal(0, code, out)
    local line = out:match("\n(backend: [^\n]*)")
    assert.is_truthy(line, out)
    assert.are.equal(1, count(line, "no CUDA device"), line)
    assert.are.equal(1, count(out, "no CUDA device"), out) -- the whole run says it once
    assert.are.equal(1, count(line, "("), line)         -- only the runtime's own parenthesis
    out = run("info")
    assert.are.equal(1, count(out, "no CUDA device"), out)
    assert.matches("\nGPU: no CUDA device %(", out)
    local plan = spk.lstm.stack { layers = spk.lstm.random { layers = 1, input = 3, hidden = 4 }, batch = 1, steps = 2 }
    assert.are.equal(1, count(plan.auto.reason, "no CUDA device"), plan.auto.reason)
    out, code = run("run experiments/tile_sweep.lua --quick")
    assert.are.equal(3, code)
    assert.are.equal(1, count(out, "no CUDA device"), out)
  end)
end)
