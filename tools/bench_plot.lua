-- README's plot from a `spk bench --json FILE` result: ms per forward against
-- batch (log-log) for spk's cluster and persistent kernels and the fastest
-- cuDNN algorithm at each batch, FP32 rows only (no GPU needed):
--
--   build/spk run tools/bench_plot.lua bench.json out.svg ["title"]
local spk = require "spk" -- sets the module path for spk.*
local report = require "spk.report"
local plot = require "spk.plot"

local input, output, title = arg[1], arg[2], arg[3]
if not input or not output then
  io.stderr:write("usage: spk run tools/bench_plot.lua BENCH.json OUT.svg [\"title\"]\n")
  os.exit(2)
end
local ok, text = pcall(spk.files.read, input)
if not ok then
  io.stderr:write(("bench_plot: cannot read %s\n"):format(text))
  os.exit(1)
end
local data = report.json_decode(text)

-- per series, batch -> the fastest FP32 median at that batch
local best = { cluster = {}, persistent = {}, cudnn = {} }
for _, r in ipairs(data.rows or {}) do
  local series = best[r.backend]
  if series and r.math ~= "tf32" and type(r.median_ms) == "number" then
    if not series[r.batch] or r.median_ms < series[r.batch] then series[r.batch] = r.median_ms end
  end
end

local function points(by_batch)
  local list = {}
  for batch, ms in pairs(by_batch) do list[#list + 1] = { batch, ms } end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  return list
end

local series = {}
for _, s in ipairs { { "cluster", "spk cluster" }, { "persistent", "spk persistent" },
                     { "cudnn", "cuDNN best algorithm", true } } do
  local p = points(best[s[1]])
  if #p > 0 then series[#series + 1] = { name = s[2], points = p, dashed = s[3] } end
end
if #series == 0 then
  io.stderr:write(("bench_plot: %s has no FP32 rows of cluster, persistent or cudnn\n"):format(input))
  os.exit(1)
end
plot.save(output, plot.line {
  title = title or "4-layer BiLSTM (H 128, 589 steps), H200, FP32: ms per forward",
  x_label = "batch", y_label = "ms per forward", x_log = true, y_log = true, series = series, markers = true,
})
print(("bench_plot: %s (%d series)"):format(output, #series))
