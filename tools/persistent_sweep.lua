-- The persistent recurrence kernel's variants against cuDNN's algorithms, per
-- batch, in one run (GPU only):
--
--   build/spk run tools/persistent_sweep.lua [--quick] [--batches 1,8,32,64,256] [--rounds 5]
--
-- Stack: 4 layers, input 60, hidden 128, 589 steps (pyannote's), random
-- PyTorch-initialised weights (seed 1), x standard normal (f32). For each batch
-- and variant one line, printed as soon as it is measured:
--   batch, variant, median ms per forward over CUDA graph replays (plan:time),
--   rel_l2 against the first variant's output (the seed kernel: 0 means the
--   same bits), rel_l2 against the f64 CPU reference (batch <= 8 only; the
--   reference takes seconds per row there), the schedule (tile rows,
--   concurrent or sequential, launches), registers and local bytes (spills),
--   and the speed-up over cuDNN's fastest algorithm of that batch.
-- cuDNN's algorithms are timed first (spk.lstm.cudnn_stack{...}:time{}), so
-- every kernel line can print its ratio. A variant that fails to build or fit
-- is a line with the reason. At the end: the fastest variant per batch, the
-- rows of persistent.c's batch_table it suggests.
--
-- Variants and predictions (ms at batch 1 / 8 / 32 / 64 / 256; the seed's
-- figures are the H200's of 2026-11-30; the rest are predictions to check):
--   seed u4     units 4, gather 1 (per-word waits)  3.18 / 18.3 / 21.5 / 24.0 / 57.3 measured
--   seed u8     units 8, gather 1                   3.41 / 10.2 / 11.4 / 13.8 / 47.3 measured
--   paired u4   units 4, gather 2: one round trip per round of waits instead
--               of one per stale word, half the load instructions; batch 1
--               has one word per thread, so little changes there (~3.1), the
--               gains grow with words per thread: ~12 / 14 / 16 / 35
--   paired u8   ~3.3 / 7-8 / 8-9 / 10-11 / 30-35 (the default from batch 8)
--   paired u16  units 16, 512 threads: 8 blocks per tile, half the L2 polling
--               of u8, one block per SM at batch 256 (128 blocks): ~3.6 / 7-8 /
--               8-9 / 9-10 / 25-30; slower at batch 1 (more work per block)
--   u8 tile 16  units 8 with at most 16 rows per block: more blocks, fewer rows
--               each at batch 256 (sequential launches if they do not fit)
local spk = require "spk"

local function option(name)
  for i = 1, #arg do
    if arg[i] == name then return arg[i + 1] or true end
  end
  return nil
end

local quick = option("--quick") ~= nil
local batches = { 1, 8, 32, 64, 256 }
local batch_list = option("--batches")
if type(batch_list) == "string" then
  batches = {}
  for b in batch_list:gmatch("%d+") do batches[#batches + 1] = tonumber(b) end
end
local rounds = tonumber(option("--rounds") or (quick and 3 or 5))
local steps = 589

local function say(fmt, ...)
  io.stdout:write(fmt:format(...), "\n")
  io.stdout:flush()
end

local ok_gpu, available = pcall(function() return spk.cuda.available() end)
if not ok_gpu or not available then
  say("persistent_sweep: needs a CUDA device (%s)", ok_gpu and "none found" or tostring(available))
  os.exit(3)
end

local variants = {
  { name = "seed u4", kernel = { units = 4, gather = 1 } },
  { name = "seed u8", kernel = { units = 8, gather = 1 } },
  { name = "paired u4", kernel = { units = 4, gather = 2 } },
  { name = "paired u8", kernel = { units = 8, gather = 2 } },
  { name = "paired u16", kernel = { units = 16, gather = 2 } },
  { name = "u8 tile16", kernel = { units = 8, gather = 2, tile_rows = 16 } },
  { name = "default", kernel = nil }, -- what a plan picks for the batch (persistent.c's batch_table)
}
if quick then
  variants = { variants[1], variants[2], variants[3], variants[4], variants[5], variants[7] }
end

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }

local function median_ms(t) return t.median_ms or t.median end

local best = {}
say("persistent_sweep: 4 layers, H 128, input 60, %d steps, %d timed rounds per row%s", steps, rounds,
  quick and " (quick)" or "")
for _, batch in ipairs(batches) do
  local x = spk.randn({ batch, steps, 60 }, { seed = batch })
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
    local ok, err = pcall(function()
      local plan = spk.lstm.stack { layers = layers, batch = batch, steps = steps, kernel = v.kernel }
      local y = plan:forward(x)
      local t = plan:time { rounds = rounds, warmup = 2, x = x }
      local ms = median_ms(t)
      first = first or y
      local vs_first = spk.compare(y, first).rel_l2
      local vs_f64 = y64 and ("%.2e"):format(spk.compare(y, y64).rel_l2) or "-"
      local s = plan.schedule
      local k = plan.kernel
      say("batch %4d  %-12s %9.3f ms  x%.2f vs %s  rel_l2 %.2e vs seed u4, %s vs f64  u%d/%d thr gather %d  "
          .. "tile %d %s %d launch(es)  regs %d spills %d", batch, v.name, ms, cudnn_best / ms, cudnn_name,
        vs_first, vs_f64, k.units, k.threads, k.gather, s.tile_rows, s.concurrent and "conc" or "seq",
        #s.launches(), k.registers, k.spills)
      if not best[batch] or ms < best[batch].ms then
        best[batch] = { ms = ms, name = v.name, kernel = k, cudnn = cudnn_best, cudnn_name = cudnn_name }
      end
      plan:close()
    end)
    if not ok then say("batch %4d  %-12s failed: %s", batch, v.name, tostring(err):gsub("\n", " ")) end
    collectgarbage()
  end
end

say("\nfastest per batch (batch_table rows in src/lstm/persistent.c: {max_batch, units, gather}):")
for _, batch in ipairs(batches) do
  local b = best[batch]
  if b then
    say("  batch %4d  %-12s %9.3f ms  cuDNN best %s %.3f ms  speed-up x%.2f  -> {%d, %d, %d}", batch, b.name,
      b.ms, b.cudnn_name, b.cudnn, b.cudnn / b.ms, batch, b.kernel.units, b.kernel.gather)
  end
end
