-- spk.bench(fn, {warmup =, rounds =, iters =, graph =, stream =}): GPU timing.
--
-- Method. fn(stream) enqueues GPU work on `stream` (default: the device's
-- default spk stream). First `warmup` rounds run and are discarded (they pay
-- for module loading, allocator growth and clock ramp-up). Then each of
-- `rounds` rounds records a CUDA event, makes `iters` calls of fn(stream) (or,
-- with graph = true, `iters` replays of a CUDA graph captured once from a
-- single fn(stream) call), records a second event and waits for it; the
-- round's sample is the elapsed time between the two events divided by
-- `iters`, in milliseconds. Events time the device's work in stream order, so
-- host-side Lua overhead only shows when the GPU runs dry waiting for it
-- (raise `iters`, or use graph = true, to hide launch overhead). The result is
-- {median_ms, min_ms, max_ms, spread, samples}: spread is
-- (max - min) / median over the rounds, samples the per-round values in
-- order. Defaults: warmup = 3, rounds = 10, iters = 1, graph = false.
local M = {}

local function median(sorted)
  local n = #sorted
  if n % 2 == 1 then return sorted[(n + 1) // 2] end
  return (sorted[n // 2] + sorted[n // 2 + 1]) / 2
end

-- Summary statistics of per-round samples (exposed for tests).
function M.summarize(samples)
  assert(#samples > 0, "bench: no samples")
  local sorted = {}
  for i, v in ipairs(samples) do sorted[i] = v end
  table.sort(sorted)
  local med = median(sorted)
  return {
    median_ms = med,
    min_ms = sorted[1],
    max_ms = sorted[#sorted],
    spread = med > 0 and (sorted[#sorted] - sorted[1]) / med or 0,
    samples = samples,
  }
end

local function count(opts, key, default, least)
  local v = opts[key]
  if v == nil then return default end
  if math.type(v) ~= "integer" or v < least then
    error(("bench: %s must be an integer >= %d, got %s"):format(key, least, tostring(v)), 3)
  end
  return v
end

function M.run(fn, opts)
  if type(fn) ~= "function" then error("bench: the first argument must be a function", 2) end
  opts = require("spk.options").check_keys(opts, { "warmup", "rounds", "iters", "graph", "stream" }, "bench")
  local warmup = count(opts, "warmup", 3, 0)
  local rounds = count(opts, "rounds", 10, 1)
  local iters = count(opts, "iters", 1, 1)
  local spk = require "spk"
  local cuda = spk.cuda
  cuda.require()
  local s = opts.stream or cuda.default_stream()

  local step = fn
  local graph
  if opts.graph then
    graph = cuda.graph(fn, s)
    step = function(stream) graph:replay(stream) end
  end

  local start, stop = cuda.event(), cuda.event()
  local function round()
    start:record(s)
    for _ = 1, iters do step(s) end
    stop:record(s)
    stop:synchronize()
    return start:elapsed(stop) / iters
  end
  for _ = 1, warmup do round() end
  local samples = {}
  for i = 1, rounds do samples[i] = round() end
  if graph then graph:close() end
  start:close()
  stop:close()
  return M.summarize(samples)
end

return M
