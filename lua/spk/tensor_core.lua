-- spk.tensor_core: the tensor-core recurrence (kernels/lstm_tc.cu) as a kernel
-- of one's own for spk.lstm.kernel_stack: its variants, the per-batch defaults,
-- the defines and the launch rule, in one place. docs/kernels.md has the design.
--
--   local tc = require "spk.tensor_core"
--   local spec = tc.spec{split = "f16"}             -- a kernel spec (spk.lstm.kernel_stack, kernel_backend)
--   local v = tc.variant({batch = 256, hidden = 128}, {tile_rows = 8})  -- the batch's default, overridden
--   tc.defines(v, hidden), tc.launch(v, shape), tc.label(v), tc.stages(v), tc.sizes(v, hidden)
--
-- The options (a value left out is the batch's default):
--   split        "f16" (FP16x3, scaled small parts) or "tf32" (3xTF32)
--   products     3, or 1 (the big product alone: not FP32-accurate; measures what the split costs)
--   cluster      blocks a cluster: 2, 4, 8, 16 (16 is a non-portable cluster size)
--   tile_rows    batch rows a tile, 1 .. 32 (n-tiles of 8)
--   warp_mt      m-tiles of 16 gate rows a warp: 1 or 2
--   row_phases   1, or 2 (two halves of the tile's n-tiles take turns; needs tile_rows > 8)
--   gates_ahead  steps ahead the x·Wᵀ is fetched: 1 .. 4
--   slice_steps  mma k-steps summed in the tensor core before the FP32 add: 1 or 2 (wgmma: 1, 2, 4, 8)
--   mma          "sync" (mma.sync, each warp its own products) or "wgmma" (a warpgroup's four
--                m-tiles in one instruction, R from registers, h read by the tensor core from
--                shared memory; FP16x3, warp_mt 1, a cluster of at most 8, at most 2 n-tiles a phase)
--   fetch_early  1: the x·Wᵀ of a step ahead is fetched right after the step's gates are taken,
--                before the wait for h (off the step's chain; needs gates_ahead >= 2); 0: at its end
--   exclusive_sm 1: the launch asks for more than half an SM's shared memory, so no two blocks
--                share an SM (small blocks would otherwise pile up on some SMs and leave others
--                idle); 0: what the kernel needs
local M = {}

M.options = { "split", "products", "cluster", "tile_rows", "warp_mt", "row_phases", "gates_ahead", "slice_steps",
              "exclusive_sm", "mma", "fetch_early" }
M.splits = { tf32 = 1, f16 = 2 }
M.mmas = { sync = 1, wgmma = 2 }

-- The split forms: FP16 parts, or TF32 parts (3xTF32), named as the math of TF32's inputs is (the
-- reduced math of the one list, src/cuda/math_modes.h: held to itself, not the default's accuracy).
local TF32
for i, m in ipairs(require("spk.core").blas.math_modes) do
  if i > 1 and m.stacks and m.held_to == m.name then TF32 = m.name end
end

local allowed = {
  split = { "f16", TF32 },
  products = { 3, 1 },
  cluster = { 2, 4, 8, 16 },
  warp_mt = { 1, 2 },
  row_phases = { 1, 2 },
  gates_ahead = { 1, 2, 3, 4 },
  slice_steps = { 1, 2, 4, 8 },
  exclusive_sm = { 1, 0 },
  mma = { "sync", "wgmma" },
  fetch_early = { 1, 0 },
}

-- Per batch (the first row whose max_batch holds it): one wave of clusters on the
-- H200 with a block an SM (exclusive_sm): a cluster past the co-resident ones waits
-- for a whole second wave, which doubled every run-1 default's time
-- (docs/performance.md, "Where a tensor-core step's cycles go"). One n-tile a block
-- where the batch allows (a step's chain is then one wait, one product, one cell),
-- the smallest blocks that fit. tools/tc_sweep.lua measures the alternatives and
-- prints each launch's clusters, the device's co-resident count and the waves.
-- The clusters of each size the H200 holds at once with a block an SM: 66 of 2 and
-- 30 of 4 measured (docs/results/2026-11-30-h200/cluster_sweep_placement.txt); of 8,
-- 14 or 15 follow from 30 of 4 in GPCs that hold 3 or 4 of them (run 1's 16 did not
-- fit), so 14. The batch table keeps every row's launch within them.
M.h200_clusters = { [2] = 66, [4] = 30, [8] = 14 }
M.batch_table = {
  { max_batch = 56, cluster = 8, tile_rows = 8, warp_mt = 1, row_phases = 1 },    -- <= 14 clusters of 8
  { max_batch = 120, cluster = 4, tile_rows = 8, warp_mt = 1, row_phases = 1 },   -- <= 30 clusters of 4
  { max_batch = 128, cluster = 2, tile_rows = 4, warp_mt = 1, row_phases = 1 },   -- 64 clusters of 2
  { max_batch = 256, cluster = 2, tile_rows = 8, warp_mt = 1, row_phases = 1 },   -- <= 64 clusters of 2
  { max_batch = math.maxinteger, cluster = 2, tile_rows = 16, warp_mt = 1, row_phases = 2 },
}
M.fixed_defaults = { split = "f16", products = 3, gates_ahead = 2, slice_steps = 1, exclusive_sm = 1, mma = "sync",
                     fetch_early = 1 }
-- wgmma's slice when none is given: one k-step (the mma.sync form's accuracy) in
-- blocks of up to 256 threads; four in blocks of 512, whose 128 registers a thread
-- spill at two and make ptxas serialise the wgmmas at one (docs/kernels.md).
function M.wgmma_slice_steps(threads) return threads <= 256 and 1 or 4 end
-- Dynamic shared memory an exclusive_sm launch asks for at least: more than half of the
-- 228 KiB an SM has, so a second block never fits beside it.
M.exclusive_smem = 115 * 1024

local function shown(v)
  if type(v) == "string" then return ("%q"):format(v) end
  return tostring(v)
end

local function one_of(list, v)
  for _, x in ipairs(list) do
    if x == v then return true end
  end
  return false
end

local function listed(list)
  local out = {}
  for i, x in ipairs(list) do out[i] = shown(x) end
  return table.concat(out, ", ")
end

-- Sizes a variant implies at a hidden size: units and warps a block, threads,
-- n-tiles, cells a thread, 8-byte words of a row of h (mma.sync), bytes of one h
-- buffer, shared memory (the kernel's SMEM_BYTES), A registers of R a thread.
function M.sizes(v, hidden)
  local units = hidden // v.cluster
  local warps = units // (4 * v.warp_mt)
  local nt = (v.tile_rows + 7) // 8
  local cells = nt * (v.warp_mt == 2 and 2 or 1)
  local items = v.split == "f16" and hidden // 2 or hidden
  local row_words = items + 8
  local threads = 32 * warps
  local kstep = v.split == "f16" and 16 or 8
  local buffer = v.mma == "wgmma" and nt * 2 * 16 * hidden or 8 * nt * 8 * row_words
  return { units = units, warps = warps, threads = threads, nt = nt, cells = cells, row_words = row_words,
           buffer_bytes = buffer, smem = 128 + 2 * buffer + 16 * v.gates_ahead * cells * threads,
           ksteps = hidden // kstep, r_registers = v.warp_mt * (hidden // kstep) * 8 }
end

local function check(v, shape, where)
  for _, k in ipairs(M.options) do
    if k ~= "tile_rows" and not one_of(allowed[k], v[k]) then
      error(("%s: %s must be one of %s, got %s"):format(where, k, listed(allowed[k]), shown(v[k])), 4)
    end
  end
  if math.type(v.tile_rows) ~= "integer" or v.tile_rows < 1 or v.tile_rows > 32 then
    error(("%s: tile_rows must be an integer 1 .. 32, got %s"):format(where, shown(v.tile_rows)), 4)
  end
  local h = shape.hidden
  local s = M.sizes(v, h)
  if h % 16 ~= 0 or h % v.cluster ~= 0 or s.units % (4 * v.warp_mt) ~= 0 or s.warps < 1 then
    error(("%s: hidden %d does not split into cluster %d blocks of warps of %d units (warp_mt %d): "
      .. "hidden must be a multiple of 16 and of 4 * warp_mt * cluster"):format(where, h, v.cluster,
      4 * v.warp_mt, v.warp_mt), 4)
  end
  if s.threads > 1024 then
    error(("%s: cluster %d at hidden %d makes blocks of %d threads (at most 1024): take a larger cluster"):format(
      where, v.cluster, h, s.threads), 4)
  end
  if s.r_registers > 128 then
    error(("%s: a thread would hold %d registers of R (split %s, warp_mt %d, hidden %d): at most 128; "
      .. "take warp_mt 1 or split \"f16\""):format(where, s.r_registers, v.split, v.warp_mt, h), 4)
  end
  if v.row_phases == 2 and s.nt < 2 then
    error(("%s: row_phases 2 needs two n-tiles (tile_rows > 8), got tile_rows %d"):format(where, v.tile_rows), 4)
  end
  if s.ksteps % v.slice_steps ~= 0 or (v.slice_steps > 2 and v.mma ~= "wgmma") then
    error(("%s: slice_steps %d must divide the %d k-steps and be 1 or 2 (4 and 8: mma \"wgmma\" only)"):format(
      where, v.slice_steps, s.ksteps), 4)
  end
  if v.mma == "wgmma" and (v.split ~= "f16" or v.products ~= 3 or v.warp_mt ~= 1 or s.warps % 4 ~= 0 or
      s.nt % v.row_phases ~= 0 or s.nt // v.row_phases > 2) then
    error(("%s: mma \"wgmma\" needs split \"f16\", products 3, warp_mt 1, whole warpgroups (cluster %d at hidden "
      .. "%d gives %d warps) and one or two n-tiles a row phase (tile_rows %d, row_phases %d)"):format(where,
      v.cluster, h, s.warps, v.tile_rows, v.row_phases), 4)
  end
  if v.fetch_early == 1 and v.gates_ahead < 2 then
    error(("%s: fetch_early 1 needs gates_ahead >= 2, got %d"):format(where, v.gates_ahead), 4)
  end
  if s.smem > 227 * 1024 then
    error(("%s: %d bytes of shared memory (at most 227 KiB): fewer tile_rows or gates_ahead"):format(where, s.smem), 4)
  end
end

-- The variant at a shape: the batch's row, then the given options over it.
function M.variant(shape, opts)
  local where = "spk.tensor_core"
  if type(shape) ~= "table" or math.type(shape.batch) ~= "integer" or math.type(shape.hidden) ~= "integer" then
    error(where .. ": shape must be a table {batch =, hidden =, ...} of integers", 2)
  end
  opts = require("spk.options").check_keys(opts, M.options, where, 2)
  local row
  for _, r in ipairs(M.batch_table) do
    if shape.batch <= r.max_batch then
      row = r
      break
    end
  end
  local v = {}
  for k, x in pairs(M.fixed_defaults) do v[k] = x end
  for k, x in pairs(row) do
    if k ~= "max_batch" then v[k] = x end
  end
  -- 3xTF32 holds 128 registers of R a thread: blocks of 512 threads (cluster 2) would
  -- spill, so its large batches keep the two-phase tiles of 16 on clusters of 4.
  if opts.split == TF32 and opts.cluster == nil and v.cluster == 2 then
    v.cluster, v.tile_rows, v.row_phases = 4, 16, 2
  end
  for k, x in pairs(opts) do v[k] = x end
  if v.mma == "wgmma" and opts.slice_steps == nil then
    v.slice_steps = M.wgmma_slice_steps(M.sizes(v, shape.hidden).threads)
  end
  check(v, shape, where)
  return v
end

-- The kernel's macros for a variant at a hidden size; TC_EXPECTED_SMEM makes the
-- kernel check at compile time that it needs the shared memory M.sizes gives.
function M.defines(v, hidden)
  return { TC_SPLIT = M.splits[v.split], TC_PRODUCTS = v.products, CLUSTER = v.cluster, TILE_ROWS = v.tile_rows,
           WARP_MT = v.warp_mt, ROW_PHASES = v.row_phases, GATES_AHEAD = v.gates_ahead, SLICE_STEPS = v.slice_steps,
           TC_MMA = M.mmas[v.mma], FETCH_EARLY = v.fetch_early, TC_EXPECTED_SMEM = M.sizes(v, hidden).smem }
end

function M.launch(v, shape)
  local s = M.sizes(v, shape.hidden)
  return { grid = { v.cluster, (shape.batch + v.tile_rows - 1) // v.tile_rows, 2 }, cluster = { v.cluster, 1, 1 },
           block = s.threads, smem = v.exclusive_sm == 1 and math.max(s.smem, M.exclusive_smem) or s.smem }
end

-- A short name of a variant: "f16 c4 t16 mt1 p2 a2 s1" (x1: one product; shared-sm:
-- exclusive_sm 0; wgmma: mma "wgmma"; late: fetch_early 0).
function M.label(v)
  return ("%s%s c%d t%d mt%d p%d a%d s%d%s%s%s"):format(v.split, v.products == 1 and " x1" or "", v.cluster,
    v.tile_rows, v.warp_mt, v.row_phases, v.gates_ahead, v.slice_steps, v.exclusive_sm == 0 and " shared-sm" or "",
    v.mma == "wgmma" and " wgmma" or "", v.fetch_early == 0 and " late" or "")
end

-- The stage names of a variant's timeline build, read from the list the kernel stamps
-- (TC_STAGES / TC_PHASED_STAGES in kernels/lstm_tc_timeline_stages.cuh).
function M.stages(v)
  local spk = require "spk"
  local text = spk.files.read(M.kernel_dir() .. "/lstm_tc_timeline_stages.cuh")
  local macro = ("TC_%s%sSTAGES"):format(v.fetch_early == 1 and "EARLY_" or "", v.row_phases == 2 and "PHASED_" or "")
  local body = text:match("#define " .. macro .. "%(X%)(.-)\n#define") or ""
  local names = {}
  for name in body:gmatch('X%([%w_]+, "([%w_]+)"%)') do names[#names + 1] = name end
  return names
end

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
-- kernel_check's log).
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
    defines = function(shape) return M.defines(M.variant(shape, fixed), shape.hidden) end,
    launch = function(shape) return M.launch(M.variant(shape, fixed), shape) end,
  }
end

-- ---- the variants tools/tc_sweep.lua runs ----------------------------------------------

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
  { mma = "wgmma", gates_ahead = 3 } }

-- Each at every batch where the variant exists (a label once a batch): the batch's
-- defaults (one wave, mma.sync, the fetch before the wait) and with wgmma, then
-- one change at a time, then the earlier defaults and bests for comparison.
M.sweep_variants = {
  {}, { mma = "wgmma" }, { fetch_early = 0 }, { mma = "wgmma", fetch_early = 0 },
  { cluster = 8, tile_rows = 8 }, { mma = "wgmma", cluster = 8, tile_rows = 8 },
  { cluster = 4, tile_rows = 8 }, { mma = "wgmma", cluster = 4, tile_rows = 8 },
  { cluster = 2, tile_rows = 4 }, { mma = "wgmma", cluster = 2, tile_rows = 4 },
  { cluster = 2, tile_rows = 8 }, { mma = "wgmma", cluster = 2, tile_rows = 8 },
  { mma = "wgmma", cluster = 4, tile_rows = 16 }, { mma = "wgmma", cluster = 4, tile_rows = 16, row_phases = 2 },
  { mma = "wgmma", cluster = 2, tile_rows = 16, row_phases = 2 },
  { mma = "wgmma", slice_steps = 2 }, { mma = "wgmma", slice_steps = 4 }, { mma = "wgmma", slice_steps = 8 },
  { mma = "wgmma", gates_ahead = 3 }, { split = TF32, cluster = 4, tile_rows = 8 },
  -- the earlier defaults and bests (two waves where their clusters exceed the device's)
  { cluster = 8, tile_rows = 8, fetch_early = 0 }, { cluster = 4, tile_rows = 8, fetch_early = 0 },
  { cluster = 8, tile_rows = 16, row_phases = 2, fetch_early = 0 },
  { cluster = 4, tile_rows = 16, row_phases = 2, fetch_early = 0 },
  { cluster = 4, tile_rows = 16, row_phases = 2, slice_steps = 2, fetch_early = 0 },
}
M.sweep_batches = { 32, 64, 128, 256 }

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
