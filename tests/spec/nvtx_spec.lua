-- NVTX ranges in the forward passes (src/cuda/nvtx.h): each layer, its
-- projections, its recurrence and each direction's launch, and cuDNN's
-- forward call, counted by the test hook and seen through NVTX itself by the
-- stand-in injection library (tests/c/nvtx_tool.c; build/tests/test_nvtx
-- checks the helper without a GPU). Ranges are pushed as the work is
-- enqueued, so one forward pushes each once.
local spk = require "spk"

local TOOL = (os.getenv("BUILD") or "build") .. "/tests/nvtx_tool.so"

local function counts_of(fn)
  spk.core.system_nvtx_counts(true)
  fn()
  return (spk.core.system_nvtx_counts(true))
end

local function layer_ranges(counts, layers)
  for l = 1, layers do assert.are.equal(1, counts["layer " .. l], "layer " .. l) end
  assert.is_nil(counts["layer " .. (layers + 1)])
  assert.are.equal(layers, counts.projections)
  assert.are.equal(layers, counts.recurrence)
  assert.are.equal(0, counts.open, "every range pushed is popped")
end

describe("NVTX ranges", function()
  it("are on by default, and the counts start empty after a reset", function()
    local counts, enabled = spk.core.system_nvtx_counts(true)
    assert.is_true(enabled)
    counts = spk.core.system_nvtx_counts()
    assert.are.same({ open = 0 }, counts)
  end)

  it("are off with SPK_NVTX=0", function()
    local out, err, code = run_spk({ "-e", "print(select(2, spk.core.system_nvtx_counts()))" },
      { env = { SPK_NVTX = "0" } })
    assert.are.equal(0, code, err)
    assert.are.equal("false\n", out)
  end)

  gpu_it("mark the persistent plan's layers, projections, recurrences and both directions", function()
    local layers = spk.lstm.random { layers = 3, input = 12, hidden = 32, seed = 5 }
    local plan = spk.lstm.stack { backend = "persistent", layers = layers, batch = 2, steps = 7 }
    local x = spk.randn({ 2, 7, 12 }, { seed = 6 })
    local counts = counts_of(function() plan:forward(x) end)
    layer_ranges(counts, 3)
    assert.are.equal(3, counts.forward)
    assert.are.equal(3, counts.reverse)
    local passes = 0
    for name, n in pairs(counts) do
      if name:match("^forward pass: ") then passes = passes + n end
    end
    assert.are.equal(1, passes)
    plan:close()
  end)

  gpu_it("mark the cluster plan's layers and its launch of both directions", function()
    local layers = spk.lstm.random { layers = 2, input = 12, hidden = 64, seed = 5 }
    local plan = spk.lstm.stack { backend = "cluster", layers = layers, batch = 2, steps = 7 }
    local x = spk.randn({ 2, 7, 12 }, { seed = 6 })
    local counts = counts_of(function() plan:forward(x) end)
    layer_ranges(counts, 2)
    assert.are.equal(2, (counts["both directions"] or 0) + (counts.forward or 0))
    plan:close()
  end)

  gpu_it("mark cuDNN's forward call once a pass", function()
    local layers = spk.lstm.random { layers = 2, input = 12, hidden = 32, seed = 5 }
    local plan = spk.lstm.stack { backend = "cudnn", layers = layers, batch = 2, steps = 7, algo = "standard" }
    local x = spk.randn({ 2, 7, 12 }, { seed = 6 })
    local counts = counts_of(function() plan:forward(x) end)
    assert.are.equal(1, counts["forward pass: cudnn standard"])
    assert.are.equal(0, counts.open)
    plan:close()
  end)

  gpu_it("reach a profiler's injection library, nested as the work is", function()
    local log = os.tmpname()
    local script = [[
      local layers = spk.lstm.random { layers = 2, input = 12, hidden = 32, seed = 5 }
      local plan = spk.lstm.stack { backend = "persistent", layers = layers, batch = 2, steps = 7 }
      plan:forward(spk.randn({ 2, 7, 12 }, { seed = 6 }))]]
    local _, err, code = run_spk({ "-e", script }, { env = { NVTX_INJECTION64_PATH = TOOL, SPK_NVTX_TOOL_LOG = log } })
    assert.are.equal(0, code, err)
    local f = assert(io.open(log))
    local lines = {}
    for line in f:lines() do lines[#lines + 1] = line end
    f:close()
    os.remove(log)
    assert.are.equal("domain spk", lines[1])
    -- the forward pass, then per layer: projections, recurrence with its two directions
    local depth, seen = 0, {}
    for _, line in ipairs(lines) do
      if line:match("^push spk ") then
        depth = depth + 1
        seen[#seen + 1] = ("%d %s"):format(depth, line:sub(10))
      elseif line == "pop spk" then
        depth = depth - 1
      end
    end
    assert.are.equal(0, depth)
    assert.matches("^1 forward pass: ", seen[1])
    local rest = {}
    for i = 2, #seen do rest[#rest + 1] = seen[i] end
    assert.are.same({ "2 layer 1", "3 projections", "3 recurrence", "4 forward", "4 reverse",
                      "2 layer 2", "3 projections", "3 recurrence", "4 forward", "4 reverse" }, rest)
  end)
end)
