-- The cuDNN backend (spk.lstm.cudnn_stack, spk.lstm.cudnn_algorithms, core
-- cudnn.stack): argument checks that must fail before any CUDA call, and the
-- no-device error, everywhere; on a GPU (gpu_it) every algorithm cuDNN accepts
-- against the torch fixtures, PyTorch's own cuDNN output, graph capture and
-- the refusal message.
local spk = require "spk"

local function has_gpu()
  return spk.cuda ~= nil and spk.cuda.available ~= nil and spk.cuda.available()
end

local function message(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local function small_stack()
  return spk.lstm.random { layers = 2, input = 10, hidden = 16, seed = 3 }
end

describe("cudnn arguments (checked before any CUDA call)", function()
  local layers = small_stack()
  local base = { layers = layers, batch = 3, steps = 7 }
  local function with(changes)
    local o = {}
    for k, v in pairs(base) do o[k] = v end
    for k, v in pairs(changes) do o[k] = v end
    return o
  end

  -- Without a GPU a request that got past the checks would fail with the
  -- no-device message, so seeing the argument's own message shows the order.
  it("names an unknown algorithm, layout or math mode and lists the known ones", function()
    local err = message(spk.lstm.cudnn_stack, with { algo = "fastest" })
    assert.matches("unknown cuDNN algorithm 'fastest' %(expected standard, persist_static, persist_dynamic, "
      .. "persist_static_small_h%)", err)
    err = message(spk.lstm.cudnn_stack, with { layout = "packed" })
    assert.matches("unknown cuDNN layout 'packed' %(expected batch_major, seq_major%)", err)
    err = message(spk.lstm.cudnn_stack, with { math = "fp16" })
    assert.matches("unknown cuDNN math mode 'fp16' %(expected fp32, tf32%)", err)
    err = message(spk.lstm.cudnn_stack, with { algo = 3 })
    assert.matches("algo must be a string", err)
  end)

  it("refuses batch or steps below 1, a missing or fractional batch, unknown options", function()
    assert.matches("batch must be at least 1, got 0", message(spk.lstm.cudnn_stack, with { batch = 0 }))
    assert.matches("steps must be at least 1, got 0", message(spk.lstm.cudnn_stack, with { steps = 0 }))
    assert.matches("batch is required", message(spk.lstm.cudnn_stack, { layers = layers, steps = 7 }))
    assert.matches("batch must be an integer", message(spk.lstm.cudnn_stack, with { batch = 1.5 }))
    assert.matches("tile_rows", message(spk.lstm.cudnn_stack, with { tile_rows = 8 }))
    assert.matches("backend must be \"cudnn\"", message(spk.lstm.cudnn_stack, with { backend = "persistent" }))
    assert.matches("stream must be an open spk.cuda stream, got number", message(spk.lstm.cudnn_stack, with { stream = 5 }))
  end)

  it("refuses layers whose shapes do not chain, naming the layer", function()
    local other = spk.lstm.random { layers = 2, input = 10, hidden = 8, seed = 4 }
    local err = message(spk.lstm.cudnn_stack, with { layers = { layers[1], other[2] } })
    assert.matches("layer 2: W has shape %[2, 32, 16%], expected %[2, 64, 32%]", err)
    err = message(spk.lstm.cudnn_stack, with { layers = { { W = layers[1].W, R = layers[1].R } } })
    assert.matches("layer 1: B is missing", err)
    err = message(spk.lstm.cudnn_stack, with { layers = { { W = layers[1].W, R = 1, B = layers[1].B } } })
    assert.matches("layer 1: R is not a tensor", err)
    assert.matches("layers must hold 1..64 layers, got 0", message(spk.lstm.cudnn_stack, with { layers = {} }))
  end)

  it("checks cudnn_algorithms' arguments the same way", function()
    assert.matches("batch must be at least 1, got 0", message(spk.lstm.cudnn_algorithms, { batch = 0 }))
    assert.matches("unknown cuDNN layout", message(spk.lstm.cudnn_algorithms, { batch = 1, layout = "x" }))
    assert.matches("hidden and input are for a random stack",
      message(spk.lstm.cudnn_algorithms, { batch = 1, layers = layers, hidden = 16 }))
    assert.matches("layers must be a stack or a count in 1..64, got 0",
      message(spk.lstm.cudnn_algorithms, { batch = 1, layers = 0 }))
    assert.matches("unknown option", message(spk.lstm.cudnn_algorithms, { batch = 1, algo = "standard" }))
  end)

  it("builds a valid request on a GPU and says there is none elsewhere", function()
    if has_gpu() then
      local plan <close> = spk.lstm.cudnn_stack(base)
      assert.equal("standard", plan.algo)
      assert.equal(3, plan.batch)
    else
      local err = message(spk.lstm.cudnn_stack, base)
      assert.matches("spk.cuda: no CUDA device", err)
      err = message(spk.lstm.cudnn_algorithms, { batch = 1, steps = 5 })
      assert.matches("spk.cuda: no CUDA device", err)
    end
  end)

  it("is reachable from spk.lstm, registered as a backend when there is a registry", function()
    assert.is_function(spk.lstm.cudnn_stack)
    assert.is_function(spk.lstm.cudnn_algorithms)
    if type(spk.lstm.backends) == "table" then
      assert.equal(spk.lstm.cudnn_stack, spk.lstm.backends.cudnn)
    end
    local runtime, header = spk.cudnn.version()
    assert.equal(9, runtime // 10000)
    assert.equal(9, header // 10000)
  end)
end)

-- ---- on a GPU -----------------------------------------------------------------

local root = "tests/fixtures"

describe("cudnn backend on the torch fixtures", function()
  for _, name in ipairs(fixture_cases(root)) do
    local dir = root .. "/" .. name
    gpu_it(name .. ": every accepted algorithm within 1e-4 of f64; standard fp32 matches torch's cuDNN", function()
      local layers = spk.lstm.load(dir)
      local x = spk.load(dir .. "/x.npy")
      local y64 = spk.load(dir .. "/y_f64.npy")
      local ytorch = spk.load(dir .. "/y_cudnn_f32.npy")
      local shape = x:shape()
      local batch, steps = shape[1], shape[2]
      local list = spk.lstm.cudnn_algorithms { layers = layers, batch = batch, steps = steps }
      assert.equal(4, #list)
      for _, r in ipairs(list) do
        if r.ok then
          for _, layout in ipairs { "batch_major", "seq_major" } do
            local plan <close> = spk.lstm.cudnn_stack { layers = layers, batch = batch, steps = steps,
                                                        algo = r.algo, layout = layout }
            local y = plan:forward(x)
            assert.same(y64:shape(), y:shape())
            local c = spk.compare(y, y64)
            assert(c.rel_l2 < 1e-4, ("%s %s: rel_l2 %g against f64"):format(r.algo, layout, c.rel_l2))
            if r.algo == "standard" then
              local t = spk.compare(y, ytorch)
              assert(t.rel_l2 < 1e-5, ("standard %s: rel_l2 %g against torch's cuDNN"):format(layout, t.rel_l2))
            end
          end
        else
          -- A refusal names the algorithm and cuDNN's status, and building it says the same.
          assert.matches("cudnn " .. r.algo .. " %(", r.reason)
          assert.matches("CUDNN_STATUS_", r.reason)
          local err = message(spk.lstm.cudnn_stack, { layers = layers, batch = batch, steps = steps, algo = r.algo })
          assert.matches("cudnn " .. r.algo .. " %(batch " .. batch, err)
        end
      end
      assert.is_true(list[1].ok, "standard must be accepted: " .. list[1].reason)
    end)
  end
end)

describe("cudnn backend on a GPU", function()
  gpu_it("tf32 stays near the f64 reference", function()
    local dir = root .. "/b3_t7_in10_h32_l2"
    local layers, x = spk.lstm.load(dir), spk.load(dir .. "/x.npy")
    local plan <close> = spk.lstm.cudnn_stack { layers = layers, batch = 3, steps = 7, math = "tf32" }
    assert.equal("tf32", plan.math)
    local c = spk.compare(plan:forward(x), spk.load(dir .. "/y_f64.npy"))
    assert(c.rel_l2 < 1e-2, "tf32 rel_l2 " .. c.rel_l2)
  end)

  gpu_it("forward keeps x's side: device in, device out; host in, host out", function()
    local layers = small_stack()
    local plan <close> = spk.lstm.cudnn_stack { layers = layers, batch = 3, steps = 7 }
    local x = spk.randn({ 3, 7, 10 }, { seed = 9 })
    local yh = plan:forward(x)
    local yd = plan:forward(x:cuda())
    assert.same({ 3, 7, 32 }, yh:shape())
    assert.equal(0, spk.compare(yd:cpu(), yh).max_abs)
    local ref = spk.lstm.reference(layers, x, { precision = "f64" })
    assert(spk.compare(yh, ref).rel_l2 < 1e-5)
    assert.matches("x has shape %[3, 7, 11%], expected %[3, 7, 10%]",
      message(plan.forward, plan, spk.zeros({ 3, 7, 11 }, "f32")))
    assert.matches("x has dtype f64", message(plan.forward, plan, spk.zeros({ 3, 7, 10 }, "f64")))
  end)

  gpu_it("a captured forward replays to the same bits, for every accepted algorithm", function()
    local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 5 }
    local host = spk.randn({ 4, 75, 60 }, { seed = 6 })
    for _, r in ipairs(spk.lstm.cudnn_algorithms { layers = layers, batch = 4, steps = 75 }) do
      if r.ok then
        local plan <close> = spk.lstm.cudnn_stack { layers = layers, batch = 4, steps = 75, algo = r.algo }
        local s = spk.cuda.stream()
        local x, eager = plan:device_buffers(host, s)
        local _, replayed = plan:device_buffers(nil, s)
        plan:forward_into(x, eager, s)
        local graph = spk.cuda.graph(function(st) plan:forward_into(x, replayed, st) end, s)
        graph:replay(s)
        s:synchronize()
        local c = spk.compare(replayed:cpu(), eager:cpu())
        assert.equal(0, c.max_abs, r.algo .. ": replay differs from the eager run")
        assert(eager:cpu():abs():max() > 0, r.algo .. ": output is all zeros")
      end
    end
  end)

  gpu_it("lists every algorithm for the default pyannote-shaped stack and times one", function()
    local list = spk.lstm.cudnn_algorithms { batch = 1, steps = 589 }
    local names = {}
    for i, r in ipairs(list) do
      names[i] = r.algo
      assert.is_boolean(r.ok)
      assert.is_string(r.reason)
    end
    assert.same({ "standard", "persist_static", "persist_dynamic", "persist_static_small_h" }, names)
    local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
    local plan <close> = spk.lstm.cudnn_stack { layers = layers, batch = 1, steps = 589 }
    -- at least every matrix and bias: layer 1's W and R, three later layers', eight biases per layer
    assert(plan.weight_bytes >= 4 * (2 * 512 * (60 + 128) + 3 * 2 * 512 * (256 + 128) + 4 * 2 * 1024))
    local t = plan:time { rounds = 3, warmup = 1 }
    assert(t.median_ms > 0 and t.min_ms <= t.median_ms and #t.samples == 3)
  end)
end)
