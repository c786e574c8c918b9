-- The persistent recurrence kernel's variants against cuDNN's algorithms, per
-- batch, in one run (GPU only):
--
--   build/spk run tools/persistent_sweep.lua [--quick] [--batches 1,8,32,64,256] [--rounds 5]
--
-- Stack: 4 layers, input 60, hidden 128, 589 steps (pyannote's), random
-- PyTorch-initialised weights (seed 1), x standard normal (f32). For each batch
-- and variant one line, printed as soon as it is measured:
--   batch, variant, median ms per forward over CUDA graph replays (plan:time),
--   rel_l2 against the first variant's output (the plain variant: 0 means the
--   same bits), rel_l2 against the f64 CPU reference (batch <= 8 only; the
--   reference takes seconds per row there), the schedule (tile rows,
--   concurrent or sequential, launches), registers and local bytes (spills),
--   and the speed-up over cuDNN's fastest algorithm of that batch.
-- cuDNN's algorithms are timed first (spk.lstm.cudnn_stack{...}:time{}), so
-- every kernel line can print its ratio. A variant that fails to build or fit
-- is a line with the reason. At the end: the fastest variant per batch, the
-- rows of persistent.c's batch_table it suggests. The runs behind the table
-- are in docs/results/ (docs/design.md names them).
--
-- Variants (kernel options; every one gives the same bits):
--   u4, u8, u16   units 4, 8, 16 a block, one gate row a thread, no row groups
--   u8 tile16     units 8 with at most 16 rows a block (more blocks, fewer rows each)
--   rg8 u4/u8/u16 row_group 8: 8 rows reduced together over the chunk lanes
--                 (reduce-scatter) and 4 shuffles to the owners
--   rg4 u16       row_group 4: fewer registers, more shuffles
--   gb4 u4 .. u32 gate_block 4: a thread holds its unit's four gate rows, so a
--                 float4 of h feeds 16 FMAs and a row's sums end in its lanes
--   gb4 u16 t32   the same with the tile forced to 32 rows (one block an SM)
--   default       what a plan picks for the batch (persistent.c's batch_table)
local spk = require "spk"
local options = require "spk.options"
local script = options.script {
  gpu = "required", dry_run = true,
  usage = "spk run tools/persistent_sweep.lua [--quick] [--batches 1,8,32,64,256] [--rounds 5] [--dry-run]" }


local quick = script:option("--quick") ~= nil
local batches = script:read("--batches", { 1, 8, 32, 64, 256 }, options.positives)
local rounds = script:read("--rounds", quick and 3 or 5, options.positive)
local steps = 589

local status -- the progress line (script:plan below), cleared around each printed line
local function say(fmt, ...)
  if status then status:clear() end
  io.stdout:write(fmt:format(...), "\n")
  io.stdout:flush()
  if status then status:draw() end
end


local variants = {
  { name = "u4", kernel = { units = 4, gate_block = 1, row_group = 1 } },
  { name = "u8", kernel = { units = 8, gate_block = 1, row_group = 1 } },
  { name = "u16", kernel = { units = 16, gate_block = 1, row_group = 1 } },
  { name = "u8 tile16", kernel = { units = 8, gate_block = 1, row_group = 1, tile_rows = 16 } },
  { name = "rg8 u4", kernel = { units = 4, gate_block = 1, row_group = 8 } },
  { name = "rg8 u8", kernel = { units = 8, gate_block = 1, row_group = 8 } },
  { name = "rg8 u16", kernel = { units = 16, gate_block = 1, row_group = 8 } },
  { name = "rg4 u16", kernel = { units = 16, gate_block = 1, row_group = 4 } },
  { name = "gb4 u4", kernel = { units = 4, gate_block = 4 } },
  { name = "gb4 u8", kernel = { units = 8, gate_block = 4 } },
  { name = "gb4 u16", kernel = { units = 16, gate_block = 4 } },
  { name = "gb4 u16 t32", kernel = { units = 16, gate_block = 4 }, tile = 32, min_batch = 64 },
  { name = "gb4 u32", kernel = { units = 32, gate_block = 4 } },
  { name = "default", kernel = nil }, -- what a plan picks for the batch (persistent.c's batch_table)
}
if quick then
  -- the plain rows stay as the reference of rel_l2 (0 = the same bits)
  local keep = {}
  for _, v in ipairs(variants) do
    if v.name ~= "u8 tile16" then keep[#keep + 1] = v end
  end
  variants = keep
end

-- A schedule forcing a tile height (all tiles in one concurrent launch); the
-- plan refuses it before any launch when the device does not hold its blocks.
local function forced_schedule(v, batch)
  if not v.tile then return nil end
  local groups = 128 // v.kernel.units
  local tiles = (batch + v.tile - 1) // v.tile
  return { batch = batch, groups = groups, tile_rows = v.tile, tiles = tiles, tiles_per_launch = tiles,
           concurrent = true }
end

-- The work: cuDNN's algorithms and the f64 reference (batch <= 8), then the variants, per batch.
local work = {}
for _, batch in ipairs(batches) do
  work[#work + 1] = ("batch %d: every cuDNN algorithm%s"):format(batch, batch <= 8 and ", the f64 reference" or "")
  for _, v in ipairs(variants) do
    if not (v.min_batch and batch < v.min_batch) then work[#work + 1] = ("batch %d: %s"):format(batch, v.name) end
  end
end
status = script:plan(work, ("persistent_sweep (dry run): %d steps at %d timed rounds each; nothing is measured")
  :format(#work, rounds))

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }

local function median_ms(t) return t.median_ms or t.median end

local best = {}
say("persistent_sweep: 4 layers, H 128, input 60, %d steps, %d timed rounds per row%s", steps, rounds,
  quick and " (quick)" or "")
for _, batch in ipairs(batches) do
  local x = spk.randn({ batch, steps, 60 }, { seed = batch })
  status:step(("batch %d: cuDNN"):format(batch))
  -- cuDNN first, for the ratio
  local cudnn_best, cudnn_name = math.huge, "-"
  for _, algo in ipairs(spk.lstm.cudnn_algorithm_names or {}) do
    local ok, result = pcall(function()
      local plan = spk.lstm.cudnn_stack { layers = layers, batch = batch, steps = steps, algo = algo }
      local t = plan:time { rounds = rounds, warmup = 1, x = x }
      plan:close()
      return median_ms(t)
    end)
    if ok then
      say("batch %4d  cudnn %-24s %9.3f ms", batch, algo, result)
      if result < cudnn_best then cudnn_best, cudnn_name = result, algo end
    else
      say("batch %4d  cudnn %-24s failed: %s", batch, algo, tostring(result):gsub("\n", " "))
    end
  end
  local y64
  if batch <= 8 then
    y64 = spk.lstm.reference(layers, x, { precision = "f64" })
  end
  local first
  for _, v in ipairs(variants) do
    if v.min_batch and batch < v.min_batch then goto next_variant end
    status:step(("batch %d: %s"):format(batch, v.name))
    local ok, err = pcall(function()
      local plan = spk.lstm.stack { backend = "persistent", layers = layers, batch = batch, steps = steps, kernel = v.kernel,
                                    schedule = forced_schedule(v, batch) }
      local y = plan:forward(x)
      local t = plan:time { rounds = rounds, warmup = 2, x = x }
      local ms = median_ms(t)
      first = first or y
      local vs_first = spk.compare(y, first).rel_l2
      local vs_f64 = y64 and ("%.2e"):format(spk.compare(y, y64).rel_l2) or "-"
      local s = plan.schedule
      local k = plan.kernel
      say("batch %4d  %-12s %9.3f ms  x%.2f vs %s  rel_l2 %.2e vs u4, %s vs f64  u%d/%d thr "
          .. "gb %d rg %d  tile %d %s %d launch(es)  regs %d spills %d cap %d", batch, v.name, ms, cudnn_best / ms,
        cudnn_name, vs_first, vs_f64, k.units, k.threads, k.gate_block or 1, k.row_group or 1,
        s.tile_rows, s.concurrent and "conc" or "seq", #s.launches(), k.registers, k.spills, k.capacity or -1)
      if not best[batch] or ms < best[batch].ms then
        best[batch] = { ms = ms, name = v.name, kernel = k, cudnn = cudnn_best, cudnn_name = cudnn_name,
                        forced_tile = v.tile }
      end
      plan:close()
    end)
    if not ok then say("batch %4d  %-12s failed: %s", batch, v.name, tostring(err):gsub("\n", " ")) end
    collectgarbage()
    ::next_variant::
  end
end

status:finish()
say("\nfastest per batch (batch_table rows in src/lstm/persistent.c: {max_batch, units, gate_block, row_group}):")
for _, batch in ipairs(batches) do
  local b = best[batch]
  if b then
    say("  batch %4d  %-12s %9.3f ms  cuDNN best %s %.3f ms  speed-up x%.2f  -> {%d, %d, %d, %d}%s", batch,
      b.name, b.ms, b.cudnn_name, b.cudnn, b.cudnn / b.ms, batch, b.kernel.units,
      b.kernel.gate_block or 1, b.kernel.row_group or 1,
      b.forced_tile and ("  (tile forced to %d: the table's plan takes the schedule's tile)"):format(b.forced_tile)
        or "")
  end
end
