-- The cluster recurrence's variants against cuDNN's algorithms, per batch, in
-- one run (GPU only; about 2-3 minutes on the H200, never past --budget):
--
--   build/spk run tools/cluster_sweep.lua [--quick] [--batches 1,8,32,64,256] [--rounds 5]
--                                         [--only "name,name"] [--tiles 2,4]
--                                         [--no-mbarrier] [--budget 220]
-- (--no-mbarrier: the baseline lines only)
--
-- Stack: 4 layers, input 60, hidden 128, 589 steps, random weights (seed 1),
-- x standard normal. Per batch, cuDNN's algorithms first (persist_static and
-- persist_dynamic only below batch 32: they take 100-800 ms there), then one
-- line per (variant, tile height), printed as soon as measured: median ms of
-- plan:time{rounds, warmup = 2}, speed-up over cuDNN's best, rel_l2 against
-- the batch's first line (every option keeps the sums and cells, so 0 is
-- expected: the same bits), registers, spills, shared memory, max active
-- clusters and waves. Ends with the fastest bitwise-equal variant per batch
-- as rows for batch_table in src/lstm/cluster.c.
--
-- Variants (kernel options; every line gives every option, so none takes
-- the batch's default): the lines behind the batch table. The runs and their
-- figures are in docs/results/ (docs/design.md says which measurement keeps
-- which option).
--   plain          the baseline (kernels/lstm_cluster_baseline.cu): scalar
--                  pushes, a cluster barrier a step, cluster 8, 512 threads
--   direct         the direct pushes, one gate row a thread: every copy of a
--                  cell st.asyncs its h into its share of the blocks, each
--                  block waits on its mbarrier, no block barrier in a step;
--                  "c16 direct 128" cluster 16 with 128 threads (4 chunks),
--                  "c8 direct 256", "c4 direct 512", ...: other splits
--   c8 gb4 128     gate blocks (kernel.gate_block = 4): a thread holds its
--                  unit's four gate rows, one float4 of h feeds 16 FMAs and
--                  a row's four sums end in the same lanes
--   c8 warp 128    gate blocks with warp pushes (kernel.push = "warp"): four
--                  consecutive units of a row in one 16-byte st.async
--   ... gaN        x·Wᵀ fetched N steps ahead (kernel.gates_ahead: cp.async stages)
--   ... ph2        the tile's row groups in two halves that take turns
--                  (kernel.row_phases = 2)
--   ... mbN        the register budget of N blocks an SM (kernel.min_blocks)
--   c2 ... 256     cluster 2, 64 units a block; "c2 gb4 512" 8 chunks a gate
--                  block, "rg4" row groups of 4
-- A variant with another chunk split adds the same products in another order:
-- its rel_l2 against the first line is ~1e-7, not 0. The summary takes the
-- fastest line within 1e-6 (each split is bit-checked against the persistent
-- kernel with the same split in tests/spec/cluster_spec.lua).
--   default        what a plan picks without kernel options (batch_table)
-- The direct-push lines come last in a batch; a wait that hangs is cut after a
-- second and reported as an error line, not a stuck run.
local spk = require "spk"
local options = require "spk.options"
local script = options.script {
  gpu = "required", dry_run = true,
  usage = "spk run tools/cluster_sweep.lua [--quick] [--batches LIST] [--rounds 5] [--only NAMES] [--tiles LIST] "
    .. "[--no-mbarrier] [--budget 220] [--dry-run]" }


local quick = script:option("--quick") ~= nil
local no_mbarrier = script:option("--no-mbarrier") ~= nil
local batches = script:read("--batches", { 1, 8, 32, 64, 256 }, options.positives)
local rounds = script:read("--rounds", 5, options.positive)
local only = script:option("--only") -- comma-separated variant names (the default line is always measured)
local tile_list = script:read("--tiles", nil, options.positives)
local budget = script:read("--budget", 220, options.positive) -- seconds; later lines are skipped past it
local steps = 589

local status -- the progress line (script:plan below), cleared around each printed line
local function say(fmt, ...)
  if status then status:clear() end
  io.stdout:write(fmt:format(...), "\n")
  io.stdout:flush()
  if status then status:draw() end
end

-- Tile heights per batch (both in either mode: variants past 64 registers
-- run 15 clusters at once, not 30, so the one-wave height differs).
local tiles = { [1] = { 1 }, [8] = { 1, 2 }, [32] = { 4, 8, 2 }, [64] = { 8, 4 }, [256] = { 16, 32 } }
local function tiles_of(batch)
  if tile_list then return tile_list end
  return tiles[batch] or { math.max(1, math.min(32, (batch + 7) // 8)) }
end

-- A direct-push line (push "direct" or "warp"); `extra` overrides fields.
local function fast_line(name, cluster, threads, push, extra)
  local kernel = { cluster = cluster or 8, threads = threads, push = push, gate_block = 1, gates_ahead = 1,
                   row_phases = 1 }
  for k, v in pairs(extra or {}) do kernel[k] = v end
  return { name = name, kernel = kernel, fast = true }
end

local variants = {
  { name = "plain", kernel = { push = "scalar", cluster = 8 } },
  fast_line("direct", 8, nil, "direct"),
  fast_line("c16 direct", 16, nil, "direct"),
  fast_line("c16 direct 128", 16, 128, "direct"),
  fast_line("c16 direct 64", 16, 64, "direct"),
  fast_line("c8 direct 256", 8, 256, "direct"),
  fast_line("c8 direct 128", 8, 128, "direct"),
  fast_line("c4 direct 256", 4, 256, "direct"),
  fast_line("c4 direct 512", 4, 512, "direct"),
  fast_line("c8 gb4 128", 8, 128, "direct", { gate_block = 4 }),
  fast_line("c8 gb4 64", 8, 64, "direct", { gate_block = 4 }),
  fast_line("c16 gb4 64", 16, 64, "direct", { gate_block = 4 }),
  fast_line("c4 gb4 256", 4, 256, "direct", { gate_block = 4 }),
  fast_line("c4 gb4 128", 4, 128, "direct", { gate_block = 4 }),
  fast_line("c8 warp 128", 8, 128, "warp", { gate_block = 4 }),
  fast_line("c4 warp 128", 4, 128, "warp", { gate_block = 4 }),
  fast_line("c4 warp 256", 4, 256, "warp", { gate_block = 4 }),
  fast_line("c16 warp 64", 16, 64, "warp", { gate_block = 4 }),
}
-- the gates fetched 2 .. 4 steps ahead (cp.async stages) on the gate-block lines
for _, ahead in ipairs { 2, 3, 4 } do
  for _, line in ipairs { { "c8 warp 128", 8, "warp" }, { "c8 gb4 128", 8, "direct" },
                          { "c4 gb4 128", 4, "direct" }, { "c4 warp 128", 4, "warp" } } do
    variants[#variants + 1] = fast_line(line[1] .. " ga" .. ahead, line[2], 128, line[3],
      { gate_block = 4, gates_ahead = ahead })
  end
end
-- cluster 2 (64 units a block, 256 threads: the same weights a thread as cluster 4 with 128)
for _, line in ipairs { { "c2 gb4 256 ga3", "direct", 3 }, { "c2 warp 256 ga3", "warp", 3 },
                        { "c2 warp 256", "warp", 1 } } do
  variants[#variants + 1] = fast_line(line[1], 2, 256, line[2], { gate_block = 4, gates_ahead = line[3] })
end
-- cluster 2 with 512 threads (8 chunks a gate block, 64 weight registers a thread, at most 128 registers)
for _, line in ipairs { { "c2 gb4 512 ga3", "direct", 1, nil }, { "c2 gb4 512 ga3 rg4", "direct", 1, 4 },
                        { "c2 gb4 512 ga3 ph2", "direct", 2, nil }, { "c2 warp 512 ga3", "warp", 1, nil },
                        { "c2 warp 512 ga3 ph2", "warp", 2, nil } } do
  variants[#variants + 1] = fast_line(line[1], 2, 512, line[2],
    { gate_block = 4, gates_ahead = 3, row_phases = line[3], row_group = line[4] })
end
-- two row phases (kernel.row_phases = 2): the tile's halves take turns, one
-- computing while the other's h crosses the cluster (tiles of 2 rows and up)
for _, line in ipairs { { "c2 gb4 256 ga3", 2, 256, "direct" }, { "c2 warp 256 ga3", 2, 256, "warp" },
                        { "c4 warp 128 ga3", 4, 128, "warp" }, { "c4 gb4 128 ga3", 4, 128, "direct" } } do
  variants[#variants + 1] = fast_line(line[1] .. " ph2", line[2], line[3], line[4],
    { gate_block = 4, gates_ahead = 3, row_phases = 2 })
end
-- three blocks an SM (kernel.min_blocks = 3: at most 168 registers): more clusters at once
for _, line in ipairs { { "c4 gb4 128 ga3", "direct", 3 }, { "c4 warp 128 ga3", "warp", 3 },
                        { "c4 warp 128 ga2", "warp", 2 }, { "c4 warp 128", "warp", 1 } } do
  variants[#variants + 1] = fast_line(line[1] .. " mb3", 4, 128, line[2],
    { gate_block = 4, gates_ahead = line[3], min_blocks = 3 })
end
-- register budgets of the 64-thread direct variant (more blocks per SM: more clusters at once)
for _, blocks in ipairs { 4, 6, 8 } do
  variants[#variants + 1] = fast_line("c16 direct 64 mb" .. blocks, 16, 64, "direct", { min_blocks = blocks })
end
if type(only) == "string" then
  local wanted, picked = {}, {}
  for name in only:gmatch("[^,]+") do wanted[name] = true end
  for _, v in ipairs(variants) do
    if wanted[v.name] then picked[#picked + 1] = v; wanted[v.name] = nil end
  end
  local unknown = next(wanted)
  if unknown then
    script:usage_error(("unknown variant %q (--only takes the names in this file's variant list)"):format(unknown))
  end
  variants = picked
elseif quick then -- the lines that decide the table
  local quick_names = { plain = true, ["c8 direct 128"] = true, ["c4 direct 256"] = true, ["c8 gb4 128"] = true,
                        ["c16 gb4 64"] = true, ["c4 gb4 256"] = true }
  local picked = {}
  for _, v in ipairs(variants) do
    if quick_names[v.name] then picked[#picked + 1] = v end
  end
  variants = picked
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- The lines of one batch: each variant at each tile height, the default, the direct-push lines last.
local function lines_of(batch)
  local lines, late_lines = {}, {}
  for _, tile in ipairs(tiles_of(batch)) do
    for _, v in ipairs(variants) do
      if not (v.fast and no_mbarrier) then
        local k = copy(v.kernel)
        k.tile_rows = math.min(tile, 32)
        local into = v.fast and late_lines or lines
        into[#into + 1] = { name = v.name, kernel = k }
      end
    end
  end
  lines[#lines + 1] = { name = "default", kernel = nil }
  for _, line in ipairs(late_lines) do lines[#lines + 1] = line end
  for _, line in ipairs(lines) do
    line.label = line.kernel and ("%s t%d"):format(line.name, line.kernel.tile_rows) or line.name
  end
  return lines
end

local work = {}
for _, batch in ipairs(batches) do
  work[#work + 1] = ("batch %d: cuDNN's algorithms"):format(batch)
  for _, line in ipairs(lines_of(batch)) do work[#work + 1] = ("batch %d: %s"):format(batch, line.label) end
end
status = script:plan(work, ("cluster_sweep (dry run): %d steps at %d timed rounds each, cut at %d s; nothing is "
  .. "measured"):format(#work, rounds, budget))

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local wall0 = os.time()
local function elapsed() return os.difftime(os.time(), wall0) end

local best = {}
say("cluster_sweep: 4 layers, H 128, input 60, %d steps, median of %d rounds%s", steps, rounds,
  quick and " (quick)" or "")
for _, batch in ipairs(batches) do
  local x = spk.randn({ batch, steps, 60 }, { seed = batch })
  status:step(("batch %d: cuDNN"):format(batch))
  local cudnn_best, cudnn_name = math.huge, "-"
  for _, algo in ipairs(spk.lstm.cudnn_algorithm_names) do
    if batch >= 32 and (algo == "persist_static" or algo == "persist_dynamic") then
      say("batch %4d  cudnn %-24s skipped (100-800 ms at batch >= 32)", batch, algo)
    else
      local ok, result = pcall(function()
        local plan = spk.lstm.cudnn_stack { layers = layers, batch = batch, steps = steps, algo = algo }
        local t = plan:time { rounds = rounds, warmup = 1, x = x }
        plan:close()
        return t.median_ms
      end)
      if ok then
        say("batch %4d  cudnn %-24s %9.3f ms", batch, algo, result)
        if result < cudnn_best then cudnn_best, cudnn_name = result, algo end
      else
        say("batch %4d  cudnn %-24s failed: %s", batch, algo, (tostring(result):gsub("\n", " ")))
      end
      collectgarbage()
    end
  end

  local first
  for _, line in ipairs(lines_of(batch)) do
    local label = line.label
    status:step(("batch %d: %s"):format(batch, label))
    if elapsed() > budget then
      say("batch %4d  %-22s skipped: past the %d s budget", batch, label, budget)
    else
      local ok, err = pcall(function()
        local plan = spk.lstm.stack { backend = "cluster", layers = layers, batch = batch, steps = steps,
                                      kernel = line.kernel }
        local y = plan:forward(x)
        local t = plan:time { rounds = rounds, warmup = 2, x = x }
        local ms = t.median_ms
        first = first or y
        local rel = spk.compare(y, first).rel_l2
        local k, s = plan.kernel, plan.schedule
        say("batch %4d  %-22s %9.3f ms  x%.2f vs %s  rel_l2 %.2e  regs %d spills %d smem %d active %d  "
            .. "tile %d, %d clusters, %d wave(s)  [%s]", batch, label, ms, cudnn_best / ms, cudnn_name, rel,
          k.registers, k.spills, k.smem, k.max_active_clusters, s.tile_rows, s.clusters, s.waves, plan.variant)
        if rel < 1e-6 and (not best[batch] or ms < best[batch].ms) then
          best[batch] = { ms = ms, label = label, kernel = k, tile = s.tile_rows, cudnn = cudnn_best,
                          cudnn_name = cudnn_name }
        end
        plan:close()
      end)
      if not ok then say("batch %4d  %-22s failed: %s", batch, label, (tostring(err):gsub("\n", " "))) end
      collectgarbage()
    end
  end
  first = nil
  collectgarbage()
end

status:finish()
say("\nfastest variant per batch (rel_l2 < 1e-6: the same sums, perhaps another chunk split); batch_table rows for "
  .. "src/lstm/cluster.c:")
say("  {max_batch, push, cluster, tile_rows, gate_block, chunks, gates_ahead, row_phases}, threads")
for _, batch in ipairs(batches) do
  local b = best[batch]
  if b then
    local k = b.kernel
    local push = ({ scalar = "SPK_PUSH_SCALAR", direct = "SPK_PUSH_DIRECT", warp = "SPK_PUSH_WARP" })[k.push]
    say("  batch %4d  %-22s %9.3f ms  cuDNN best %s %.3f ms  x%.2f  -> {%d, %s, %d, %d, %d, %d, %d, %d}, threads %d",
      batch, b.label, b.ms, b.cudnn_name, b.cudnn, b.cudnn / b.ms, batch, push, k.cluster, b.tile, k.gate_block,
      k.chunks, k.gates_ahead, k.row_phases, k.threads)
  end
end
say("cluster_sweep: %d s", elapsed())
