-- batch_sweep: spk's GPU backends against every cuDNN algorithm from batch 1
-- to 512, all on the same weights and the same input per batch, each output
-- checked against the f64 reference (spk.benchmark: method in
-- lua/spk/benchmark.lua's header).
--
-- GPU: required. Without one it says so and exits 3; nothing is written.
-- Run: build/spk run experiments/batch_sweep.lua [--quick] [--batches 1,8,64]
--      [--backends persistent,cudnn] [--rounds 7] [--out DIR]
-- Writes: batch_sweep.csv, batch_sweep.json, batch_sweep.svg (ms against
-- batch, log-log, one line per backend variant, min-max of the rounds as
-- whiskers), speedup.svg (speed-up over the fastest cuDNN algorithm per batch).
local spk = require "spk"
local experiment = require "spk.experiment"
local benchmark = require "spk.benchmark"
local plot = require "spk.plot"
local report = require "spk.report"

local ex = experiment.start {
  name = "batch_sweep", gpu = "required",
  about = "spk's GPU backends against every cuDNN algorithm, batch 1 to 512.",
  batches = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 }, quick_batches = { 1, 8, 64 },
  options = { { "rounds", 7, quick = 3, help = "timed rounds per plan" },
              { "backends", { "persistent", "cudnn" }, help = "registered backends (spk.lstm.backends)" } },
}
-- A backend registered later (e.g. "cluster") joins when named in --backends.
local d = benchmark.defaults
ex:describe { seeds = { weights = d.model.seed, input = d.seed }, dtype = "f32", math = { "fp32" },
              shape = { layers = d.model.layers, input = d.model.input, hidden = d.model.hidden, steps = d.steps } }
local work = {}
for _, batch in ipairs(ex.batches) do
  work[#work + 1] = ("batch %d: f64 reference"):format(batch)
  for _, b in ipairs(ex.opts.backends) do
    for _, algo in ipairs(b == "cudnn" and benchmark.cudnn_algorithms or { false }) do
      work[#work + 1] = ("batch %d: %s%s, %d rounds"):format(batch, b, algo and " " .. algo or "", ex.opts.rounds)
    end
  end
end
ex:plan(work)

local rows, info = benchmark.run { batches = ex.batches, backends = ex.opts.backends, rounds = ex.opts.rounds,
                                   progress = function(m, step)
                                     ex:progress("%s", m)
                                     ex:update(m, step and step.done, step and step.total)
                                   end }

local columns = { "batch", "backend", "variant", { key = "median_ms", title = "ms", format = report.fmt_ms },
                  { key = "spread", title = "spread", format = report.fmt_pct },
                  { key = "speedup", title = "vs cuDNN best", format = report.fmt_ratio },
                  { key = "rel_l2", title = "rel_l2", format = report.fmt_sci },
                  { key = "max_abs", title = "max_abs", format = report.fmt_sci },
                  { key = "bound_ok", title = "in bound" }, { key = "error", title = "error" } }
ex:table(rows, columns, { title = ("ms per forward (%d layers, H %d, %d steps), median of %d rounds")
  :format(info.layers, info.hidden, info.steps, info.rounds), sort = { "batch", "median_ms" } })
ex:csv("batch_sweep.csv", rows, { "batch", "backend", "variant", "algo", "median_ms", "min_ms", "max_ms", "spread",
                                  "speedup", "rel_l2", "max_abs", "bound", "bound_ok", "error" })
ex:json("batch_sweep.json", { rows = rows, info = info, environment = benchmark.environment() })

local ms, speed, index = {}, {}, {}
for _, r in ipairs(rows) do
  if r.median_ms then
    -- a GPU kernel's variant text names its schedule, which changes with the batch
    local name = r.backend == "cudnn" and ("cuDNN " .. tostring(r.algo or r.variant)) or r.backend
    if not index[name] then
      index[name] = #ms + 1
      ms[#ms + 1] = { name = name, points = {}, dashed = r.backend == "cudnn" }
      speed[#speed + 1] = { name = name, points = {}, dashed = r.backend == "cudnn" }
    end
    table.insert(ms[index[name]].points, { r.batch, r.median_ms, r.min_ms, r.max_ms })
    if r.speedup then -- the same baseline over the row's slowest and fastest round
      table.insert(speed[index[name]].points, { r.batch, r.speedup, r.speedup * r.median_ms / r.max_ms,
                                                r.speedup * r.median_ms / r.min_ms })
    end
  end
end
if #ms > 0 then
  local spread = ("min-max of %d rounds"):format(info.rounds)
  ex:svg("batch_sweep.svg", plot.line { title = "ms per forward against batch", x_label = "batch",
    y_label = "ms per forward", x_log = true, y_log = true, series = ms, spread = spread })
  ex:svg("speedup.svg", plot.line { title = "speed-up over the fastest cuDNN algorithm", x_label = "batch",
    y_label = "speed-up (x)", x_log = true, y_log = true, series = speed, spread = spread })
end
ex:finish()
