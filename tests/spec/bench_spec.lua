-- spk.bench: the statistics (everywhere) and event timing (on a GPU).
local spk = require "spk"
local bench = require "spk.bench"

describe("spk.bench", function()
  it("summarises samples: median, extremes and relative spread", function()
    local r = bench.summarize { 4, 1, 3, 2, 10 }
    assert.are.equal(3, r.median_ms)
    assert.are.equal(1, r.min_ms)
    assert.are.equal(10, r.max_ms)
    assert.are.equal(3, r.spread) -- (10 - 1) / 3
    assert.are.same({ 4, 1, 3, 2, 10 }, r.samples) -- in measurement order
    assert.are.equal(2.5, bench.summarize({ 1, 2, 3, 4 }).median_ms)
    assert.are.equal(0, bench.summarize({ 2 }).spread)
  end)

  it("checks its arguments before looking for a GPU", function()
    assert.has_error(function() spk.bench(nil) end, "bench: the first argument must be a function")
    assert.has_error(function() spk.bench(function() end, { round = 3 }) end,
      "bench: unknown option 'round' (known: graph, iters, rounds, stream, warmup)")
    assert.has_error(function() spk.bench(function() end, { rounds = 0 }) end,
      "bench: rounds must be an integer >= 1, got 0")
    assert.has_error(function() spk.bench(function() end, { iters = 1.5 }) end,
      "bench: iters must be an integer >= 1, got 1.5")
  end)

  gpu_it("times a kernel with events, directly and through a graph", function()
    local k = spk.cuda.compile { file = spk.cuda.kernel_dir() .. "/selftest.cu" }:kernel("delayed_copy")
    local n = 1024
    local x, y = spk.cuda.zeros({ n }), spk.cuda.zeros({ n })
    local calls = 0
    local function work(s)
      calls = calls + 1
      k:launch { grid = 4, block = 256, stream = s, args = { spk.u32(n), x, y, spk.u64(2000000) } }
    end
    local r = spk.bench(work, { warmup = 2, rounds = 5, iters = 3 })
    assert.are.equal(5, #r.samples)
    assert.are.equal((2 + 5) * 3, calls)
    assert.is_true(r.min_ms <= r.median_ms and r.median_ms <= r.max_ms)
    -- 2e6 cycles at no more than ~3 GHz take at least ~0.6 ms per call.
    assert.is_true(r.min_ms > 0.5, "min_ms " .. r.min_ms)
    calls = 0
    local g = spk.bench(work, { warmup = 1, rounds = 4, iters = 2, graph = true })
    assert.are.equal(1, calls) -- captured once, then replayed
    assert.are.equal(4, #g.samples)
    assert.is_true(math.abs(g.median_ms - r.median_ms) < 0.5 * r.median_ms)
  end)
end)
