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

  it("of a script's own: spk.nvtx.range closes its range however fn ends, and passes fn's results", function()
    spk.core.system_nvtx_counts(true)
    local a, b, c = spk.nvtx.range("mine", function() return 3, nil, "z" end)
    assert.are.same({ 3, nil, "z" }, { a, b, c })
    local ok, err = pcall(spk.nvtx.range, "mine", function() error("boom", 0) end)
    assert.is_false(ok)
    assert.matches("boom$", err)
    local counts = spk.core.system_nvtx_counts(true)
    assert.are.same({ mine = 2, open = 0 }, counts)
    assert.has_error(function() spk.nvtx.range(3, function() end) end,
      "spk.nvtx.range: name must be a string, got number")
    assert.has_error(function() spk.nvtx.range("x") end, "spk.nvtx.range: fn must be a function, got nil")
    assert.has_error(function() spk.nvtx.range("x", function() end, 1) end)
  end)

  it("turn off and on within a process, never while one is open", function()
    assert.is_true(spk.nvtx.enabled())
    assert.is_true(spk.nvtx.enable(false))
    assert.is_false(spk.nvtx.enabled())
    spk.core.system_nvtx_counts(true)
    spk.nvtx.range("unseen", function() end)
    assert.are.same({ open = 0 }, (spk.core.system_nvtx_counts(true)))
    assert.is_false(spk.nvtx.enable(true))
    local ok, err = pcall(spk.nvtx.range, "outer", function() return spk.nvtx.enable(false) end)
    assert.is_false(ok)
    assert.matches("NVTX ranges cannot be turned off while 1 is open", err)
    assert.is_true(spk.nvtx.enabled())
    assert.has_error(function() spk.nvtx.enable(1) end, "spk.nvtx.enable: on must be true or false, got number")
    assert.are.equal(0, spk.core.system_nvtx_counts(true).open)
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
