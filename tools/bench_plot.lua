-- README's plot from a `spk bench --json FILE` result: ms per forward against
-- batch (log-log), one line per backend and math the file holds (spk's
-- kernels, the cpu backend, kernels of one's own; cuDNN as its fastest
-- algorithm at each batch, dashed), each point the fastest row of that
-- backend at that batch, its median with the min-max of its timed rounds as
-- a whisker. Works for any result spk bench writes, CPU-only ones included
-- (no GPU needed). The SVG carries the result's provenance (where the bench
-- ran) beside its own:
--
--   build/spk run tools/bench_plot.lua bench.json out.svg ["title"]
local spk = require "spk" -- sets the module path for spk.*
local report = require "spk.report"
local plot = require "spk.plot"
local provenance = require "spk.provenance"
local script = require("spk.options").script { usage = "spk run tools/bench_plot.lua BENCH.json OUT.svg [\"title\"]" }

local input, output, title = arg[1], arg[2], arg[3]
if not input or not output then script:usage_error("needs the bench JSON and the SVG to write") end
local ok, text = pcall(spk.files.read, input)
if not ok then
  io.stderr:write(("bench_plot: cannot read %s\n"):format(text))
  os.exit(1)
end
local decoded, data = pcall(report.json_decode, text)
if not decoded or type(data) ~= "table" or type(data.rows) ~= "table" then
  io.stderr:write(("bench_plot: %s is not a spk bench --json result (no rows)\n"):format(input))
  os.exit(1)
end

-- per series (backend and math), batch -> the fastest row at that batch
local order, series_of = {}, {}
local function series_key(r)
  local m = r.math or "fp32"
  if r.backend == "cudnn" then return "cudnn " .. m end
  return r.backend .. " " .. m
end
for _, r in ipairs(data.rows) do
  if type(r) == "table" and type(r.backend) == "string" and type(r.batch) == "number"
      and type(r.median_ms) == "number" and r.median_ms > 0 then
    local key = series_key(r)
    if not series_of[key] then
      series_of[key] = { backend = r.backend, math = r.math or "fp32", best = {} }
      order[#order + 1] = key
    end
    local best = series_of[key].best
    if not best[r.batch] or r.median_ms < best[r.batch].median_ms then best[r.batch] = r end
  end
end
if #order == 0 then
  io.stderr:write(("bench_plot: %s has no timed rows\n"):format(input))
  os.exit(1)
end

-- spk's kernels first, cuDNN last, the others as they come
local rank = { cluster = 1, persistent = 2, cudnn = 4 }
table.sort(order, function(a, b)
  local sa, sb = series_of[a], series_of[b]
  local ra, rb = rank[sa.backend] or 3, rank[sb.backend] or 3
  if ra ~= rb then return ra < rb end
  return a < b
end)

local maths = {}
for _, key in ipairs(order) do maths[series_of[key].math] = true end
local several_maths = next(maths, next(maths)) ~= nil
local series = {}
for _, key in ipairs(order) do
  local s = series_of[key]
  local points = {}
  for batch, r in pairs(s.best) do
    local lo, hi = r.min_ms, r.max_ms
    if type(lo) == "number" and type(hi) == "number" and lo > 0 and lo <= r.median_ms and hi >= r.median_ms then
      points[#points + 1] = { batch, r.median_ms, lo, hi }
    else
      points[#points + 1] = { batch, r.median_ms }
    end
  end
  table.sort(points, function(a, b) return a[1] < b[1] end)
  local name = s.backend == "cudnn" and "cuDNN best algorithm" or ("spk " .. s.backend)
  if several_maths or s.math ~= "fp32" then name = name .. " " .. s.math end
  series[#series + 1] = { name = name, points = points, dashed = s.backend == "cudnn" }
end

local settings, env = data.settings or {}, data.environment or {}
if not title then
  local shape = ("%s-layer BiLSTM (H %s, %s steps)"):format(tostring(settings.layers or "?"),
    tostring(settings.hidden or "?"), tostring(settings.steps or "?"))
  local device = type(env.device) == "string" and env.device ~= "none" and (", " .. env.device:gsub(" %(.*", "")) or ""
  title = ("%s%s: ms per forward"):format(shape, device)
end
local rounds = type(settings.rounds) == "number" and ("%d rounds"):format(settings.rounds) or "the rounds"

-- where the plot came from, and where its data came from
local source = provenance.read(text)
local run = provenance.from_rows(data.rows, source and source.run or {})
run.source = { file = input, provenance = source }
plot.save(output, plot.line {
  title = title, x_label = "batch", y_label = "ms per forward", x_log = true, y_log = true, series = series,
  markers = true, spread = ("median, min-max of %s"):format(rounds),
}, { provenance = run })
print(("bench_plot: %s (%d series)"):format(output, #series))
