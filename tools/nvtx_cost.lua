-- What the NVTX ranges cost without a profiler attached, ranges on against
-- off in one process, timed in alternation (spk.nvtx.enable):
--
--   build/spk run tools/nvtx_cost.lua [--batches 1,64,256] [--backends cluster,persistent,cudnn]
--                                     [--passes 5] [--forwards 40] [--ranges 200000]
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

local function option(name)
  for i = 1, #arg do
    if arg[i] == name then return arg[i + 1] or true end
  end
  return nil
end
local function numbers(text, default)
  if type(text) ~= "string" then return default end
  local out = {}
  for v in text:gmatch("%d+") do out[#out + 1] = tonumber(v) end
  return out
end
local function words(text, default)
  if type(text) ~= "string" then return default end
  local out = {}
  for v in text:gmatch("[^,]+") do out[#out + 1] = v end
  return out
end

if option("--help") or option("-h") then
  io.write([[
usage: spk run tools/nvtx_cost.lua [--batches 1,64,256] [--backends cluster,persistent,cudnn]
                                   [--passes 5] [--forwards 40] [--ranges 200000]
What the forward passes' NVTX ranges cost without a profiler: ns a range on the host, then eager
forward passes (ranges on against off, in alternation, one process) at each batch and backend.
Without a CUDA device, the host part only (exit status 3). The comment at the top of
tools/nvtx_cost.lua says how each figure is taken.
]])
  os.exit(0)
end

local function count_option(name, default)
  local v = option(name)
  if v == nil then return default end
  local n = math.tointeger(tonumber(v))
  if not n or n < 1 then
    io.stderr:write(("nvtx_cost: %s takes a whole number >= 1, got %s\n"):format(name, tostring(v)))
    os.exit(2)
  end
  return n
end
local batches = numbers(option("--batches"), { 1, 64, 256 })
local backends = words(option("--backends"), { "cluster", "persistent", "cudnn" })
local passes = count_option("--passes", 5)
local forwards = count_option("--forwards", 40)
local ranges = count_option("--ranges", 200000)
local steps = 589

local function say(fmt, ...)
  io.stdout:write(fmt:format(...), "\n")
  io.stdout:flush()
end
local function median(values)
  local s = {}
  for i, v in ipairs(values) do s[i] = v end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

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
local host_on, host_off = alternate(function()
  local t0 = spk.clock_ms()
  for _ = 1, ranges do spk.nvtx.range("nvtx_cost", noop) end
  return (spk.clock_ms() - t0) * 1e6 / ranges
end)
say("host: %.0f ns a range with ranges on, %.0f ns off; NVTX's part %.0f ns a range (%d ranges, %d passes)",
  host_on, host_off, host_on - host_off, ranges, passes)

local ok_gpu, available = pcall(function() return spk.cuda.available() end)
if not ok_gpu or not available then
  say("nvtx_cost: the forward rows need a CUDA device (%s)", spk.cuda.no_device_reason())
  os.exit(3)
end

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local rows, worst = 0, 0
for _, batch in ipairs(batches) do
  local x = spk.randn({ batch, steps, 60 }, { seed = batch }):cuda()
  for _, backend in ipairs(backends) do
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
