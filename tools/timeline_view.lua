-- The critical path a step (spk.timeline.critical_view) of recorded
-- timelines, read back from the stamps CSVs experiments/step_timeline.lua
-- writes (no GPU needed):
--
--   build/spk run tools/timeline_view.lua STAMPS.csv [STAMPS.csv ...] [--floor NS]
--
-- For each file: the chain of a step (the exchange first), what ran under
-- the exchange, the stage to attack next (docs/timeline.md). --floor: what
-- a wait costs when its data is there (default 20 ns).
local spk = require "spk"
local arg = require("spk.options").script {
  usage = "spk run tools/timeline_view.lua STAMPS.csv [STAMPS.csv ...] [--floor NS]",
}.args
local files, floor = {}, nil
local i = 1
while i <= #arg do
  if arg[i] == "--floor" then
    floor = tonumber(arg[i + 1])
    if not floor then
      io.stderr:write("timeline_view: --floor takes a number of ns, got " .. tostring(arg[i + 1]) .. "\n")
      os.exit(2)
    end
    i = i + 1
  else
    files[#files + 1] = arg[i]
  end
  i = i + 1
end
if #files == 0 then
  io.stderr:write("usage: spk run tools/timeline_view.lua STAMPS.csv [STAMPS.csv ...] [--floor NS]\n")
  os.exit(2)
end
local failed = 0
for _, path in ipairs(files) do
  local ok, text = pcall(function()
    local tl = spk.timeline.load_stamps(path)
    return spk.timeline.describe_view(spk.timeline.critical_view(tl, { wait_floor_ns = floor }))
  end)
  io.write(path, "\n", ok and text or ("  failed: " .. tostring(text) .. "\n"))
  if not ok then failed = failed + 1 end
end
os.exit(failed == 0 and 0 or 1)
