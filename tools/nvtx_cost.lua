-- What the NVTX ranges cost without a profiler attached, ranges on against
-- off in one process, timed in alternation (spk.nvtx.enable):
--
--   build/spk run tools/nvtx_cost.lua [--batches 1,64,256] [--backends cluster,persistent,cudnn]
--                                     [--passes 5] [--forwards 40] [--ranges 200000] [--dry-run]
--
-- Host part (any machine): `ranges` calls of spk.nvtx.range(name, noop) with
-- ranges on, then off, `passes` times; "ns a range" is the median pass's
-- time a call, and on - off is NVTX's own part (the push, the pop and the
-- counting), the Lua call's cost cancelling.
-- GPU part: for each batch and backend one plan (4 layers, input 60,
-- hidden 128, 589 steps, spk.lstm.random{seed = 1}, x on the device),
-- `forwards` eager forward passes (no CUDA graph, so every range is pushed
-- again) timed on the wall clock up to their last synchronisation, ranges
-- on and off in turn, `passes` times; a row's figure is the median pass.
-- "ranges" is what one forward pushes (spk.core.system_nvtx_counts).
-- Last line "nvtx_cost: worst on/off ratio R over N rows" (R above 1: the
-- ranges' cost), or with no device the host part and exit status 3.
local spk = require "spk"

local options = require "spk.options"
local script = options.script { dry_run = true,
  usage = "spk run tools/nvtx_cost.lua [--batches 1,64,256] [--backends cluster,persistent,cudnn] [--passes 5] "
    .. "[--forwards 40] [--ranges 200000] [--dry-run]" }

local batches = script:read("--batches", { 1, 64, 256 }, options.positives)
local backends = script:read("--backends", { "cluster", "persistent", "cudnn" }, options.backends)
local passes = script:read("--passes", 5, options.positive)
local forwards = script:read("--forwards", 40, options.positive)
local ranges = script:read("--ranges", 200000, options.positive)
local steps = 589

local work = { ("host: %d ranges, on and off, %d passes"):format(ranges, passes) }
for _, batch in ipairs(batches) do
  for _, backend in ipairs(backends) do
    work[#work + 1] = ("batch %d: %s, %d forwards on and off, %d passes"):format(batch, backend, forwards, passes)
  end
end
local status = script:plan(work)

local function say(fmt, ...)
  io.stdout:write(fmt:format(...), "\n")
  io.stdout:flush()
end
local function median(values) return require("spk.bench").summarize(values).median_ms end

-- Runs measure(on) for on = true and false in turn, `passes` times; the
-- medians of each setting's results.
local function alternate(measure)
  local was = spk.nvtx.enabled()
  local on, off = {}, {}
  for _ = 1, passes do
    spk.nvtx.enable(true)
    on[#on + 1] = measure(true)
    spk.nvtx.enable(false)
    off[#off + 1] = measure(false)
  end
  spk.nvtx.enable(was)
  return median(on), median(off)
end

for _, line in ipairs(require("spk.provenance").lines()) do say("%s", line) end
local noop = function() end
status:step(work[1])
local host_on, host_off = alternate(function()
  local t0 = spk.clock_ms()
  for _ = 1, ranges do spk.nvtx.range("nvtx_cost", noop) end
  return (spk.clock_ms() - t0) * 1e6 / ranges
end)
say("host: %.0f ns a range with ranges on, %.0f ns off; NVTX's part %.0f ns a range (%d ranges, %d passes)",
  host_on, host_off, host_on - host_off, ranges, passes)

local has_gpu, why = options.gpu_status()
if not has_gpu then
  say("nvtx_cost: the forward rows need a CUDA GPU: %s", why)
  os.exit(options.EXIT.no_gpu)
end

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local rows, worst = 0, 0
for _, batch in ipairs(batches) do
  local x = spk.randn({ batch, steps, 60 }, { seed = batch }):cuda()
  for _, backend in ipairs(backends) do
    status:step(("batch %d: %s"):format(batch, backend))
    local plan = spk.lstm.stack { backend = backend, layers = layers, batch = batch, steps = steps }
    plan:forward(x):close()
    spk.cuda.synchronize()
    spk.core.system_nvtx_counts(true)
    plan:forward(x):close()
    spk.cuda.synchronize()
    local pushed = 0
    for name, n in pairs(spk.core.system_nvtx_counts(true)) do
      if name ~= "open" then pushed = pushed + n end
    end
    local on, off = alternate(function()
      local t0 = spk.clock_ms()
      for _ = 1, forwards do plan:forward(x):close() end -- each output freed at once, not left to the collector
      spk.cuda.synchronize()
      return (spk.clock_ms() - t0) / forwards
    end)
    plan:close()
    rows = rows + 1
    if on / off > worst then worst = on / off end
    say("batch %4d  %-10s  %3d ranges  on %8.4f ms  off %8.4f ms  on/off %.4f  (%d forwards, %d passes)",
      batch, backend, pushed, on, off, on / off, forwards, passes)
  end
end
say("nvtx_cost: worst on/off ratio %.4f over %d rows", worst, rows)
