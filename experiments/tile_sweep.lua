-- tile_sweep: the persistent recurrence kernel's variants against cuDNN.
--
-- Knobs of kernels/lstm_recurrence.cu (src/lstm/persistent.h): units per
-- block (UNITS 4 or 8), threads per block (THREADS = units * 4 * chunks,
-- chunks 2, 4 or 8), the tile height the schedule uses (8, 16 or 32 batch rows
-- per tile; the kernel is compiled with MAX_TILE_ROWS = that height), one gate
-- row a thread and no row groups (the other options' effect: tools/persistent_sweep.lua).
-- For each variant and batch: compile through NVRTC (cached on disk), build
-- the plan with a schedule of that tile height, check the output against the
-- f64 reference and for determinism (two forwards bitwise equal), time it
-- (CUDA graph replays, median of --rounds). cuDNN's four algorithms are timed
-- on the same input (spk.benchmark) and the fastest is the reference line.
-- Variants the kernel's static checks refuse, or whose schedule does not fit
-- the device, are listed with the reason.
--
-- GPU: required. Without one it says so and exits 3; nothing is written.
-- Run: build/spk run experiments/tile_sweep.lua [--quick] [--batches 1,8,32] [--rounds 7]
--      [--out DIR] [--dry-run]
-- Writes: tile_sweep.csv, tile_sweep.json, tile_sweep.svg (ms against batch
-- per variant, min-max of the rounds as whiskers, cuDNN's best dashed),
-- failures.csv (variants that did not run).
local spk = require "spk"
local experiment = require "spk.experiment"
local benchmark = require "spk.benchmark"
local plot = require "spk.plot"
local report = require "spk.report"

local ex = experiment.start {
  name = "tile_sweep", gpu = "required",
  about = "Sweep the persistent kernel's variants (units, threads, tile rows) over batches against cuDNN.",
  batches = { 1, 8, 32, 64, 256 }, quick_batches = { 1, 8, 32 },
  options = { { "rounds", 7, quick = 3, help = "timed rounds per variant" } },
}

-- The variants: every (units, threads, tile) the sweep tries. A few on
-- purpose do not pass the kernel's checks (a tile taller than a thread split
-- carries), so the failure listing is exercised.
local variants = {}
local function add(units, threads, tile)
  variants[#variants + 1] = { units = units, threads = threads, tile = tile,
                              label = ("u%d t%d tile%d"):format(units, threads, tile) }
end
if ex.quick then
  add(4, 128, 8); add(8, 256, 8); add(8, 256, 16); add(4, 64, 32)
else
  for _, units in ipairs { 4, 8 } do
    for _, chunks in ipairs { 2, 4, 8 } do
      for _, tile in ipairs { 8, 16, 32 } do add(units, units * 4 * chunks, tile) end
    end
  end
end

local steps, rounds = 589, ex.opts.rounds
ex:describe { seeds = { weights = 1, input = 1 }, dtype = "f32", math = { "fp32" },
              shape = { layers = 4, input = 60, hidden = 128, steps = steps }, backends = { "persistent", "cudnn" } }

-- The work, for --dry-run and the progress line.
local work = {}
for _, batch in ipairs(ex.batches) do
  work[#work + 1] = ("batch %d: f64 reference"):format(batch)
  for _, v in ipairs(variants) do work[#work + 1] = ("batch %d: %s, %d rounds"):format(batch, v.label, rounds) end
end
work[#work + 1] = ("cuDNN: every algorithm at batches %s"):format(table.concat(ex.batches, ","))
ex:plan(work)

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }

-- A plan of variant v at batch b with tile height v.tile (raises with the reason).
local function make_plan(v, batch)
  local kernel = { units = v.units, threads = v.threads, tile_rows = v.tile, gate_block = 1, row_group = 1 }
  spk.lstm.persistent_variant(kernel) -- the kernel's static checks, before any compile
  local plan = spk.lstm.stack { layers = layers, batch = batch, steps = steps, backend = "persistent", kernel = kernel }
  if plan.schedule.tile_rows == v.tile then return plan end
  -- The schedule's rule picked another height: force this one on the same capacity.
  local k = plan.kernel
  local s = spk.schedule.new { batch = batch, capacity = k.capacity, concurrent_capacity = k.concurrent_capacity,
                               groups = 128 // v.units, heights = { v.tile } }
  plan:close()
  return spk.lstm.stack { layers = layers, batch = batch, steps = steps, backend = "persistent", kernel = kernel,
                          schedule = s }
end

local rows, failures = {}, {}
for _, batch in ipairs(ex.batches) do
  local x = spk.randn({ batch, steps, 60 }, { seed = 1 })
  ex:progress("batch %d: f64 reference ...", batch)
  ex:step(("batch %d: f64 reference"):format(batch))
  local reference = spk.lstm.reference(layers, x, { precision = "f64" })
  for i, v in ipairs(variants) do
    ex:progress("batch %d: %s (%d/%d) ...", batch, v.label, i, #variants)
    ex:step(("batch %d: %s"):format(batch, v.label))
    local plan
    local ok, result = pcall(function()
      plan = make_plan(v, batch)
      local r = experiment.measure_plan(plan, x, reference, { rounds = rounds, warmup = 2 })
      r.schedule = ("%d x %d rows, %s"):format(plan.schedule.tiles, plan.schedule.tile_rows,
        plan.schedule.concurrent and "concurrent" or "sequential")
      r.registers, r.spills = plan.kernel.registers, plan.kernel.spills
      return r
    end)
    if plan then plan:close() end
    if ok then
      result.batch, result.variant = batch, v.label
      result.units, result.threads, result.tile = v.units, v.threads, v.tile
      rows[#rows + 1] = result
    else
      failures[#failures + 1] = { batch = batch, variant = v.label, reason = experiment.reason(result) }
    end
    collectgarbage()
  end
end

ex:progress("cuDNN: every algorithm at each batch ...")
ex:step("cuDNN: every algorithm at each batch")
local cudnn_rows = benchmark.run { batches = ex.batches, backends = { "cudnn" }, rounds = rounds, check = false,
                                   layers = layers, steps = steps,
                                   progress = function(m) ex:progress("cuDNN %s", m) end }
local best = select(2, benchmark.speedups(cudnn_rows))
for _, r in ipairs(rows) do
  local b = best[r.batch]
  if b then r.cudnn_best = b.variant; r.cudnn_ms = b.median_ms; r.speedup = b.median_ms / r.median_ms end
end

-- The table: sorted by batch then time; the best variant per batch marked.
local fastest = {}
for _, r in ipairs(rows) do
  if r.deterministic and (not fastest[r.batch] or r.median_ms < fastest[r.batch].median_ms) then fastest[r.batch] = r end
end
for _, r in ipairs(rows) do r.best = fastest[r.batch] == r and "*" or "" end
local columns = { "batch", "variant", { key = "best", title = "best" },
                  { key = "median_ms", title = "ms", format = report.fmt_ms },
                  { key = "spread", title = "spread", format = report.fmt_pct },
                  { key = "speedup", title = "vs cuDNN best", format = report.fmt_ratio },
                  { key = "cudnn_best", title = "cuDNN best" }, { key = "cudnn_ms", title = "cuDNN ms", format = report.fmt_ms },
                  { key = "rel_l2", title = "rel_l2", format = report.fmt_sci },
                  { key = "deterministic", title = "bitwise" }, "schedule", "registers", "spills" }
ex:table(rows, columns, { title = ("Persistent kernel variants, median of %d rounds (ms per forward, 4 layers, H 128, %d steps)")
  :format(rounds, steps), sort = { "batch", "median_ms" } })
if #failures > 0 then
  ex:table(failures, { "batch", "variant", "reason" }, { title = "Variants that did not run" })
end
ex:csv("tile_sweep.csv", rows, { "batch", "variant", "units", "threads", "tile", "median_ms", "min_ms",
                                 "max_ms", "spread", "speedup", "cudnn_best", "cudnn_ms", "rel_l2", "max_abs",
                                 "max_ulp", "deterministic", "schedule", "registers", "spills" })
ex:csv("failures.csv", failures, { "batch", "variant", "reason" })
ex:json("tile_sweep.json", { rows = rows, failures = failures, cudnn = cudnn_rows, rounds = rounds, steps = steps,
                             environment = benchmark.environment() })

local series, by_variant = {}, {}
for _, r in ipairs(rows) do
  if not by_variant[r.variant] then
    by_variant[r.variant] = { name = r.variant, points = {} }
    series[#series + 1] = by_variant[r.variant]
  end
  table.insert(by_variant[r.variant].points, { r.batch, r.median_ms, r.min_ms, r.max_ms })
end
local ref = { name = "cuDNN best", dashed = true, color = "#000000", points = {} }
for _, b in ipairs(ex.batches) do
  if best[b] then ref.points[#ref.points + 1] = { b, best[b].median_ms, best[b].min_ms, best[b].max_ms } end
end
if #ref.points > 0 then series[#series + 1] = ref end
if #series > 0 then
  ex:svg("tile_sweep.svg", plot.line { title = "Persistent kernel variants: ms per forward", x_label = "batch",
    y_label = "ms per forward", x_log = true, y_log = true, series = series,
    spread = ("min-max of %d rounds"):format(rounds) })
end
ex:finish()
