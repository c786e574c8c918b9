-- Quick start: the pyannote-shaped LSTM stack (4 bidirectional layers, hidden
-- 128, input 60, 589 steps) on the backend spk picks for this machine
-- (spk.lstm.stack's default, backend "auto": a GPU kernel where there is a
-- GPU, the C reference elsewhere), checked against the f64 reference and
-- timed; on a GPU, also timed against every cuDNN algorithm on the same input.
--
-- GPU: optional. Without one it runs on the C reference (exit 0).
-- Run: build/spk run experiments/quickstart.lua [--quick] [--batches 2] [--rounds 5] [--out DIR]
-- Writes: quickstart.csv (one row per batch and backend or cuDNN algorithm:
-- batch, backend, variant, rel_l2, max_abs, median_ms, min_ms, max_ms, spread, speedup),
-- quickstart.json (the rows with every round's time, and what "auto" chose, and why),
-- quickstart.svg (ms per forward per batch: the median, min-max of the rounds and each
-- round as a dot). Exits 1 when a result is beyond 1e-4 relative L2 of the f64 reference.
local spk = require "spk"
local experiment = require "spk.experiment"
local plot = require "spk.plot"

local ex = experiment.start {
  name = "quickstart", gpu = "optional",
  about = "The stack on the backend spk picks here, checked against f64 and timed (and against cuDNN on a GPU).",
  batches = { 2 }, quick_batches = { 1 },
  options = { { "rounds", 5, quick = 2, help = "timed rounds per backend" },
              { "steps", 589, help = "time steps (589: a 10 s window)" } },
}
local steps, rounds = ex.opts.steps, math.max(1, ex.opts.rounds)
local BOUND = 1e-4
ex:describe { seeds = { weights = 1, input = 1 }, dtype = "f32", math = { "fp32" },
              shape = { layers = 4, input = 60, hidden = 128, steps = steps, batches = ex.batches } }
local work = {}
for _, batch in ipairs(ex.batches) do
  work[#work + 1] = ("batch %d: f64 reference"):format(batch)
  work[#work + 1] = ("batch %d: backend \"auto\" (%s here): check and %d timed rounds"):format(batch,
    ex.gpu and "a GPU kernel" or "the C reference", rounds)
  if ex.gpu then work[#work + 1] = ("batch %d: every cuDNN algorithm, %d rounds"):format(batch, rounds) end
end
ex:plan(work)

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local rows, choices, failures = {}, {}, 0

for _, batch in ipairs(ex.batches) do
  local x = spk.randn({ batch, steps, 60 }, { seed = 1 })
  print(("stack: 4 bidirectional layers, hidden 128, input 60; x [%s]"):format(table.concat(x:shape(), ", ")))
  ex:progress("f64 reference at batch %d ...", batch)
  ex:step(("batch %d: f64 reference"):format(batch))
  local truth = spk.lstm.reference(layers, x, { precision = "f64" })

  local plan = spk.lstm.stack { layers = layers, batch = batch, steps = steps }
  choices[#choices + 1] = { batch = batch, backend = plan.auto.backend, source = plan.auto.source,
                            reason = plan.auto.reason }
  print(("backend: %s, %s"):format(plan.auto.backend, plan.auto.reason))

  local y = plan:forward(x)
  if y.device ~= "cpu" then y = y:cpu() end
  local check = spk.compare(y, truth)
  print(("against the f64 reference: rel_l2 %.3g, max_abs %.3g"):format(check.rel_l2, check.max_abs))
  if not (check.rel_l2 <= BOUND) then failures = failures + 1 end

  ex:progress("timing %s (%d rounds) ...", plan.auto.backend, rounds)
  ex:step(("batch %d: %s"):format(batch, plan.auto.backend))
  local t = plan:time { rounds = rounds, warmup = 1, x = x }
  print(("%.3f ms per forward (median of %d)"):format(t.median_ms, rounds))
  local mine = { batch = batch, backend = plan.auto.backend, variant = plan.variant, rel_l2 = check.rel_l2,
                 max_abs = check.max_abs, median_ms = t.median_ms, min_ms = t.min_ms, max_ms = t.max_ms,
                 spread = t.spread, samples = t.samples }
  rows[#rows + 1] = mine
  plan:close()

  if ex.gpu then
    ex:step(("batch %d: cuDNN"):format(batch))
    local best, best_algo = math.huge, nil
    for _, a in ipairs(spk.lstm.cudnn_algorithms { batch = batch, steps = steps, layers = layers }) do
      if a.ok then
        local c = spk.lstm.stack { backend = "cudnn", layers = layers, batch = batch, steps = steps, algo = a.algo }
        local yc = c:forward(x):cpu()
        local cc = spk.compare(yc, truth)
        local tc = c:time { rounds = rounds, warmup = 1, x = x }
        print(("  cuDNN %-24s %8.3f ms"):format(a.algo, tc.median_ms))
        rows[#rows + 1] = { batch = batch, backend = "cudnn", variant = a.algo, rel_l2 = cc.rel_l2,
                            max_abs = cc.max_abs, median_ms = tc.median_ms, min_ms = tc.min_ms, max_ms = tc.max_ms,
                            spread = tc.spread, samples = tc.samples }
        if tc.median_ms < best then best, best_algo = tc.median_ms, a.algo end
        c:close()
      end
    end
    if best_algo then
      mine.speedup = best / mine.median_ms
      print(("%.2fx the fastest cuDNN algorithm (%s)"):format(mine.speedup, best_algo))
    end
  else
    print("cuDNN: not timed without a GPU")
  end
end

ex:table(rows, { "batch", "backend", "variant",
                 { key = "rel_l2", format = "%.3g" }, { key = "max_abs", format = "%.3g" },
                 { key = "median_ms", format = "%.3f" }, { key = "speedup", format = "%.2fx" } },
  { title = ("ms per forward, median of %d rounds; error against the f64 reference"):format(rounds) })
local columns = { "batch", "backend", "variant", "rel_l2", "max_abs", "median_ms", "min_ms", "max_ms", "spread",
                  "speedup" }
ex:csv("quickstart.csv", rows, columns)
ex:json("quickstart.json", { rows = rows, auto = choices, steps = steps, rounds = rounds, bound = BOUND })

-- A bar per batch and backend: the median, the min-max of the rounds, and each round as a dot.
local categories, series, by_name = {}, {}, {}
for i, batch in ipairs(ex.batches) do categories[i] = tostring(batch) end
for _, r in ipairs(rows) do
  local name = r.backend == "cudnn" and ("cuDNN " .. r.variant) or ("spk " .. r.backend)
  if not by_name[name] then
    by_name[name] = { name = name, values = {}, low = {}, high = {}, samples = {} }
    series[#series + 1] = by_name[name]
  end
  for i, batch in ipairs(ex.batches) do
    if batch == r.batch then
      local s = by_name[name]
      s.values[i], s.low[i], s.high[i], s.samples[i] = r.median_ms, r.min_ms, r.max_ms, r.samples
    end
  end
end
ex:svg("quickstart.svg", plot.bar { title = "ms per forward (4 layers, hidden 128, " .. steps .. " steps)",
                                    x_label = "batch", y_label = "ms", categories = categories, series = series,
                                    spread = ("median, min-max and each of %d rounds"):format(rounds) })

ex:finish()
if failures > 0 then
  io.stderr:write(("quickstart: %d result(s) beyond %g relative L2 of the f64 reference\n"):format(failures, BOUND))
  os.exit(1)
end
print("ok")
