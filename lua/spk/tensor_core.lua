-- spk.tensor_core: the tensor-core recurrence (kernels/lstm_tc.cu, the built-in
-- backend "tensor_core": src/lstm/tensor_core.c has its options, per-batch
-- defaults and launch rule) as a kernel of one's own too, for the tools that
-- compile and time its variants directly, and the lists of variants they run.
-- docs/kernels.md has the design.
--
--   local tc = require "spk.tensor_core"
--   local spec = tc.spec{split = "f16"}             -- a kernel spec (spk.lstm.kernel_stack, kernel_backend)
--   local v = tc.variant({batch = 256, hidden = 128}, {tile_rows = 8})  -- the batch's default, overridden
--   tc.defines(v), tc.launch(v), tc.label(v), tc.stages(v), tc.sizes(v)
--
-- The options (spk.lstm.kernel_options("tensor_core") lists them with their
-- values and rules; a value left out is the batch's default): split ("f16":
-- FP16x3 with scaled small parts, or "tf32": 3xTF32), products, cluster,
-- tile_rows, warp_mt, row_phases, gates_ahead, slice_steps, exclusive_sm, mma
-- ("sync" or "wgmma"), fetch_early, cell ("reference", "trimmed": the same bits, or
-- "fused": within the FP32 bound).
local M = {}

local BACKEND = "tensor_core"
local function lstm() return require("spk").lstm end

local function family_options()
  for _, f in ipairs(require("spk.core").kernel_families()) do
    if f.backend == BACKEND then return f.options.options end
  end
  error("spk.tensor_core: this build has no tensor_core family")
end

-- The options' names, and each word option's words as a set: M.words.mma.wgmma == true.
M.options, M.words = {}, {}
for _, o in ipairs(family_options()) do
  if o.default ~= "layers" then M.options[#M.options + 1] = o.name end
  if o.words then
    M.words[o.name] = {}
    for _, w in ipairs(o.words) do M.words[o.name][w] = true end
  end
end

-- The variant at a shape {batch =, hidden =}: the batch's row, then the given options over it
-- (spk.lstm.kernel_variant; its message where the kernel cannot be built so).
function M.variant(shape, opts)
  local where = "spk.tensor_core"
  if type(shape) ~= "table" or math.type(shape.batch) ~= "integer" or math.type(shape.hidden) ~= "integer" then
    error(where .. ": shape must be a table {batch =, hidden =, ...} of integers", 2)
  end
  opts = require("spk.options").check_keys(opts, M.options, where, 2)
  local ok, v = pcall(lstm().kernel_variant, { backend = BACKEND, kernel = opts, batch = shape.batch,
                                               hidden = shape.hidden })
  if not ok then error(("%s: %s"):format(where, tostring(v):gsub("^.-kernel_variant %(" .. BACKEND .. "%): ", "")), 2) end
  return v
end

-- Every define the variant compiles with (the plan's SPK_* ones included), for a direct compile.
function M.defines(v) return v.defines end

-- Sizes a variant implies (src/lstm/tensor_core.h, spk_tc_sizes): units, warps, threads, n_tiles,
-- cells, row_words, buffer_bytes, k_steps, r_registers, smem (the kernel's) and launch_smem.
function M.sizes(v)
  return { units = v.units, warps = v.warps, threads = v.threads, n_tiles = v.n_tiles, cells = v.cells,
           row_words = v.row_words, buffer_bytes = v.buffer_bytes, k_steps = v.k_steps,
           r_registers = v.r_registers, smem = v.smem_bytes, launch_smem = v.launch_smem }
end

-- The launch of a variant (resolved at its batch by M.variant): grid (cluster, tiles, 2), as the
-- family's plan launches it.
function M.launch(v)
  return { grid = { v.cluster, v.tiles, 2 }, cluster = { v.cluster, 1, 1 }, block = v.threads, smem = v.launch_smem }
end

-- A short name of a variant: "f16 c4 t16 mt1 p2 a2 s1" (x1: one product; shared-sm:
-- exclusive_sm 0; wgmma: mma "wgmma"; late: fetch_early 0; trimmed, fused: the cell's form).
function M.label(v)
  return ("%s%s c%d t%d mt%d p%d a%d s%d%s%s%s%s"):format(v.split, v.products == 1 and " x1" or "", v.cluster,
    v.tile_rows, v.warp_mt, v.row_phases, v.gates_ahead, v.slice_steps, v.exclusive_sm == 0 and " shared-sm" or "",
    v.mma == "wgmma" and " wgmma" or "", v.fetch_early == 0 and " late" or "",
    v.cell ~= "reference" and " " .. v.cell or "")
end

-- The stage names of a variant's timeline build (kernels/lstm_tc_timeline_stages.cuh, through the family).
function M.stages(v) return v.timeline.stages end

function M.kernel_dir()
  local spk = require "spk"
  local dir = spk.find_dir("kernels")
  if not dir then error("spk.tensor_core: spk's kernel folder is not found (spk info lists where spk looks)", 3) end
  return dir
end

M.args = { "gates", "r", "bias", "output", "status", "batch", "steps", "trace", "trace_slot", "trace_slots",
           "trace_direction" }
M.statuses = {
  [2] = "the launch does not match the kernel's macros (cluster, threads, tile rows or shared memory)",
  [3] = "the kernel needs compute capability 9.0 (thread-block clusters)",
  [4] = "a wait for h from the cluster's blocks timed out (about a second)",
}

-- A kernel spec for spk.lstm.kernel_stack / kernel_backend / kernel_check: the
-- batch's defaults with `opts` over them at every shape; opts.name names it
-- (default "tensor_core", or "tensor_core_<split>" for a split given),
-- opts.options are NVRTC options ({"--ptxas-options=-v"}: ptxas's report in
-- kernel_check's log). Its defines are the family's but the plan's own (SPK_*),
-- which a kernel stack gives every kernel.
function M.spec(opts)
  opts = opts or {}
  local fixed = {}
  for k, x in pairs(opts) do
    if k ~= "name" and k ~= "options" then fixed[k] = x end
  end
  require("spk.options").check_keys(fixed, M.options, "spk.tensor_core.spec", 2)
  local name = opts.name or (opts.split and opts.split ~= "f16" and "tensor_core_" .. opts.split) or
    (opts.mma == "wgmma" and "tensor_core_wgmma") or "tensor_core"
  return {
    name = name,
    file = M.kernel_dir() .. "/lstm_tc.cu",
    entry = "spk_lstm_tc",
    args = M.args,
    packing = { order = require("spk.core").lstm.gate_orders.packed, layout = "units" },
    statuses = M.statuses,
    options = opts.options,
    arch_specific = true, -- sm_90a: the wgmma form needs it; the mma.sync form compiles the same
    defines = function(shape)
      local d = {}
      for k, x in pairs(M.variant(shape, fixed).defines) do
        if not k:match("^SPK_") then d[k] = x end
      end
      return d
    end,
    launch = function(shape) return M.launch(M.variant(shape, fixed)) end,
  }
end

-- ---- the variants tools/tc_sweep.lua runs ----------------------------------------------

local TF32 -- the 3xTF32 split's word
for w in pairs(M.words.split) do if w ~= "f16" then TF32 = w end end

-- Its correctness part's small and odd shapes (splits: the splits a case runs, both when left out).
M.correctness_cases = {
  { batch = 1, steps = 7, hidden = 128, layers = 1 },
  { batch = 3, steps = 11, hidden = 128, layers = 1 },
  { batch = 37, steps = 50, hidden = 128, layers = 2 },
  { batch = 5, steps = 9, hidden = 64, layers = 1 },
  { batch = 17, steps = 23, hidden = 64, layers = 2 },
  { batch = 3, steps = 13, hidden = 32, layers = 1 },
  { batch = 3, steps = 13, hidden = 256, layers = 1, splits = { "f16" } },
}

-- The options run at the third case (3xTF32 runs the first four; wgmma variants only where FP16x3 runs).
M.correctness_variants = { {}, { cluster = 4, tile_rows = 16, row_phases = 2 }, { tile_rows = 13 },
  { tile_rows = 32, row_phases = 2, cluster = 4 }, { warp_mt = 2 }, { slice_steps = 2 }, { gates_ahead = 1, fetch_early = 0 },
  { gates_ahead = 4 }, { cluster = 2, tile_rows = 8, warp_mt = 2, slice_steps = 2 }, { cluster = 16 },
  { cluster = 4, tile_rows = 24, row_phases = 2 }, { exclusive_sm = 0 }, { fetch_early = 0 }, { cluster = 2, tile_rows = 8 },
  { mma = "wgmma" }, { mma = "wgmma", cluster = 4 }, { mma = "wgmma", cluster = 2, tile_rows = 8 },
  { mma = "wgmma", tile_rows = 13 }, { mma = "wgmma", cluster = 4, tile_rows = 16 },
  { mma = "wgmma", cluster = 2, tile_rows = 16, row_phases = 2 }, { mma = "wgmma", cluster = 4, tile_rows = 32, row_phases = 2 },
  { mma = "wgmma", slice_steps = 2 }, { mma = "wgmma", slice_steps = 8 }, { mma = "wgmma", fetch_early = 0 },
  { mma = "wgmma", gates_ahead = 3 }, { cell = "trimmed" }, { cell = "fused" }, { mma = "wgmma", cell = "trimmed" },
  { mma = "wgmma", cell = "fused" } }

-- Each at every batch where the variant exists (a label once a batch): the batch's
-- defaults (one wave, the fetch before the wait) and each product form, then one change
-- at a time, then the earlier defaults and bests (mma.sync) for comparison.
M.sweep_variants = {
  {}, { mma = "sync" }, { mma = "wgmma" }, { mma = "sync", fetch_early = 0 }, { mma = "wgmma", fetch_early = 0 },
  { mma = "sync", cluster = 8, tile_rows = 8 }, { mma = "wgmma", cluster = 8, tile_rows = 8 },
  { mma = "sync", cluster = 4, tile_rows = 8 }, { mma = "wgmma", cluster = 4, tile_rows = 8 },
  { mma = "sync", cluster = 2, tile_rows = 4 }, { mma = "wgmma", cluster = 2, tile_rows = 4 },
  { mma = "sync", cluster = 2, tile_rows = 8 }, { mma = "wgmma", cluster = 2, tile_rows = 8 },
  { mma = "wgmma", cluster = 4, tile_rows = 16 }, { mma = "wgmma", cluster = 4, tile_rows = 16, row_phases = 2 },
  { mma = "wgmma", cluster = 2, tile_rows = 16, row_phases = 2 },
  -- two n-tiles in one phase (m64n16 wgmmas): half the clusters of tile 8, half the SMs
  { mma = "wgmma", cluster = 2, tile_rows = 16 },
  { mma = "wgmma", slice_steps = 2 }, { mma = "wgmma", slice_steps = 4 }, { mma = "wgmma", slice_steps = 8 },
  { mma = "wgmma", gates_ahead = 3 }, { split = TF32, cluster = 4, tile_rows = 8 },
  { cell = "trimmed" }, { cell = "fused" }, { mma = "sync", cell = "trimmed" }, { mma = "sync", cell = "fused" },
  { mma = "wgmma", cell = "trimmed" }, { mma = "wgmma", cell = "fused" },
  -- the earlier defaults and bests (two waves where their clusters exceed the device's)
  { mma = "sync", cluster = 8, tile_rows = 8, fetch_early = 0 }, { mma = "sync", cluster = 4, tile_rows = 8, fetch_early = 0 },
  { mma = "sync", cluster = 8, tile_rows = 16, row_phases = 2, fetch_early = 0 },
  { mma = "sync", cluster = 4, tile_rows = 16, row_phases = 2, fetch_early = 0 },
  { mma = "sync", cluster = 4, tile_rows = 16, row_phases = 2, slice_steps = 2, fetch_early = 0 },
}
M.sweep_batches = { 32, 64, 128, 256 }

-- The variants whose stage stamps tools/tc_sweep.lua's stamps part reads at each batch: the
-- batch's default, by mma.sync and by wgmma, with the other cells, the m64n16 form on half
-- the SMs, and the earlier defaults.
M.stamp_variants = { {}, { mma = "sync" }, { mma = "wgmma" }, { cell = "trimmed" }, { cell = "fused" },
                     { mma = "wgmma", cluster = 2, tile_rows = 16 },
                     { mma = "sync", cluster = 8, tile_rows = 8, fetch_early = 0 },
                     { mma = "sync", cluster = 4, tile_rows = 16, row_phases = 2, fetch_early = 0 } }

-- Every shape and options (over the batch's defaults) that tools/tc_sweep.lua's
-- correctness and sweep parts run, the sweep's at `batches` (M.sweep_batches) and
-- `steps`: {shape = {batch, steps, hidden, layers}, options = {...}}, in order, a
-- set a shape refuses included (M.variant says why). tc_sweep's check compiles
-- them; tools/kernel_cubins.lua --list tc writes their cubins.
function M.sweep_jobs(batches, steps)
  local jobs = {}
  local function add(shape, options) jobs[#jobs + 1] = { shape = shape, options = options } end
  local cases, variants = M.correctness_cases, M.correctness_variants
  for _, case in ipairs(cases) do
    local shape = { batch = case.batch, steps = case.steps, hidden = case.hidden, layers = case.layers }
    for _, split in ipairs(case.splits or { "f16", TF32 }) do
      for k = 1, (case == cases[3]) and (split == "f16" and #variants or 4) or 1 do
        local v = { split = split }
        for key, value in pairs(variants[k]) do v[key] = value end
        add(shape, v)
      end
    end
    add(shape, { mma = "wgmma" })
  end
  for _, batch in ipairs(batches or M.sweep_batches) do
    for _, v in ipairs(M.sweep_variants) do
      add({ batch = batch, steps = steps or 589, hidden = 128, layers = 4 }, v)
    end
  end
  return jobs
end

return M
