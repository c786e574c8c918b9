-- Compiles kernel variants with NVRTC for sm_90 (no GPU needed) and writes
-- each cubin, so two trees' kernels can be compared (tools/sass_compare.sh):
--
--   build/spk run tools/kernel_cubins.lua OUT_DIR [--list defaults|options|tc|all] [--only NAME,NAME]
--                                             [--define NAME=VALUE ...] [--defines-from DIR]
--
-- For each variant: OUT_DIR/<name>.cubin and OUT_DIR/<name>.defines (the
-- kernel file and its defines, one per line, sorted). The variants are named
-- by what they are, not by how a tree spells them, so the same list runs on
-- an older tree: "defaults" are the per-batch defaults of both backends (the
-- plans' choice with no kernel options) at hidden 128 for batch 1 to 1024,
-- odd batches included, and at hidden 16, 32, 64 and 256 for a few batches;
-- "options" are option sets that are no default (each as both trees spell
-- it, what it leaves out at the plain values of the options an older tree
-- lacks; a set a tree does not know is skipped there and reported so), the
-- cluster kernel's batch-table rows at those plain values among them; "tc"
-- is the tensor-core kernel (kernels/lstm_tc.cu), every variant that
-- tools/tc_sweep.lua runs (spk.tensor_core.sweep_jobs, at each hidden size;
-- named tc_<label>_h<hidden>), each plain and as its timeline build
-- (SPK_TIMELINE=1, _timeline), with the defines spk.lstm.kernel_check gives
-- it (the plan's and the spec's; a variant the check refuses is skipped and
-- reported), compiled for sm_90a as its spec asks. "all" is all four.
--
-- --define adds a define to every variant (--define SPK_TIMELINE=1: the
-- timeline builds, whose registers tools/cubin_compare.lua then lists beside
-- the plain builds' of another folder).
--
-- --defines-from DIR: the variants whose .defines DIR holds and no list of
-- this tree names are compiled too, from those defines and this tree's
-- kernel file (a tree whose spk.tensor_core has no sweep_jobs compiles the
-- tc list so: tools/sass_compare.sh gives the reference this tree's).
--
-- The tree is known by its API: spk.lstm.kernel_variant (this tree) or the
-- earlier spk.core.cluster_variant_for_batch / stack_variant_for_batch.
local spk = require "spk"
require("spk.options").script {
  usage = "spk run tools/kernel_cubins.lua OUT_DIR [--list defaults|options|tc|all] [--only NAME,NAME] "
    .. "[--define N=V ...] [--defines-from DIR]" }
local core = spk.core

local out = arg[1]
local list, only, extra, defines_from = "defaults", nil, {}, nil
for i = 2, #arg do
  if arg[i] == "--list" then list = arg[i + 1] end
  if arg[i] == "--defines-from" then defines_from = arg[i + 1] end
  if arg[i] == "--define" then
    local name, value = tostring(arg[i + 1]):match("^([%w_]+)=(.*)$")
    if not name then
      io.stderr:write("kernel_cubins: --define takes NAME=VALUE, got " .. tostring(arg[i + 1]) .. "\n")
      os.exit(2)
    end
    extra[name] = value
  end
  if arg[i] == "--only" then
    only = {}
    for name in arg[i + 1]:gmatch("[^,]+") do only[name] = true end
  end
end
if not out or out:match("^%-") then
  io.stderr:write("usage: spk run tools/kernel_cubins.lua OUT_DIR [--list defaults|options|tc|all]\n")
  os.exit(2)
end
local ok, err = pcall(spk.files.make_folder, out)
if not ok then
  io.stderr:write(("kernel_cubins: %s\n"):format(err))
  os.exit(1)
end

local new_api = spk.lstm.kernel_variant ~= nil

-- The per-batch defaults: every batch-table row is reached by one of these.
local batches = { 1, 2, 3, 5, 8, 9, 13, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 100, 127, 128, 129, 200, 255,
                  256, 257, 384, 512, 1024 }
local other_hidden = { 16, 32, 64, 256 }
local other_batches = { 1, 8, 32, 64, 256 }

local variants = {}
local function default(backend, hidden, batch, trace)
  variants[#variants + 1] = { name = ("%s_h%d_b%d%s"):format(backend, hidden, batch, trace and "_trace" or ""),
                              backend = backend, hidden = hidden, batch = batch, trace = trace }
end

-- Option sets that are no default: {name, backend, old = {fields of the earlier C variant}, new = {kernel
-- options of this tree}, batch = the batch whose default fills in the rest (1)}; old or new nil where that
-- tree has no such variant. Options a set leaves out that `plain` names run at their plain values (the
-- values the kernels had before the option existed), not at the batch's default, so a set names the same
-- kernel in a tree with the option and in one without it.
local plain = { cluster = { early_gates = 0, cell = "reference" } }
local options = {
  -- the plain cluster kernel (scalar pushes, a cluster barrier a step), which this tree keeps as the baseline
  { "cluster_plain_c8_t32", "cluster", old = { cluster = 8, tile_rows = 32 },
    new = { push = "scalar", cluster = 8, tile_rows = 32 } },
  { "cluster_plain_c8_t1", "cluster", old = { cluster = 8, tile_rows = 1 },
    new = { push = "scalar", cluster = 8, tile_rows = 1 } },
  { "cluster_plain_c16_t16", "cluster", old = { cluster = 16, tile_rows = 16 },
    new = { push = "scalar", cluster = 16, tile_rows = 16 } },
  { "cluster_plain_c8_256thr_t32", "cluster", old = { cluster = 8, threads = 256, tile_rows = 32 },
    new = { push = "scalar", cluster = 8, threads = 256, tile_rows = 32 } },
  { "cluster_plain_c4_t8_rg4", "cluster", old = { cluster = 4, tile_rows = 8, row_group = 4 },
    new = { push = "scalar", cluster = 4, tile_rows = 8, row_group = 4 } },
  -- direct pushes, one gate row a thread
  { "cluster_direct_c8_t1", "cluster",
    old = { cluster = 8, tile_rows = 1, cell_in_lanes = true, late_store = true, mbarrier_exchange = true,
            direct_push = true },
    new = { push = "direct", gate_block = 1, gates_ahead = 1, cluster = 8, tile_rows = 1 } },
  { "cluster_direct_c16_64thr_t2", "cluster",
    old = { cluster = 16, threads = 64, tile_rows = 2, cell_in_lanes = true, late_store = true,
            mbarrier_exchange = true, direct_push = true },
    new = { push = "direct", gate_block = 1, gates_ahead = 1, cluster = 16, threads = 64, tile_rows = 2 } },
  { "cluster_direct_c4_t8_ga3", "cluster",
    old = { cluster = 4, tile_rows = 8, cell_in_lanes = true, late_store = true, mbarrier_exchange = true,
            direct_push = true, gates_ahead = 3 },
    new = { push = "direct", gate_block = 1, gates_ahead = 3, cluster = 4, tile_rows = 8 } },
  -- gate blocks
  { "cluster_gb4_c8_t8", "cluster",
    old = { cluster = 8, threads = 128, gate_block = 4, tile_rows = 8, cell_in_lanes = true, late_store = true,
            mbarrier_exchange = true, direct_push = true },
    new = { push = "direct", gate_block = 4, gates_ahead = 1, cluster = 8, threads = 128, tile_rows = 8 } },
  { "cluster_warp_c16_t2", "cluster",
    old = { cluster = 16, gate_block = 4, threads = 64, tile_rows = 2, cell_in_lanes = true, late_store = true,
            mbarrier_exchange = true, direct_push = true, warp_push = true },
    new = { push = "warp", gate_block = 4, gates_ahead = 1, cluster = 16, threads = 64, tile_rows = 2 } },
  { "cluster_warp_c4_t4_ga4", "cluster",
    old = { cluster = 4, gate_block = 4, threads = 128, tile_rows = 4, cell_in_lanes = true, late_store = true,
            mbarrier_exchange = true, direct_push = true, warp_push = true, gates_ahead = 4 },
    new = { push = "warp", gate_block = 4, gates_ahead = 4, cluster = 4, threads = 128, tile_rows = 4 } },
  { "cluster_warp_c2_t2_ph2", "cluster",
    old = { cluster = 2, gate_block = 4, threads = 256, tile_rows = 2, cell_in_lanes = true, late_store = true,
            mbarrier_exchange = true, direct_push = true, warp_push = true, gates_ahead = 3, row_phases = 2 },
    new = { push = "warp", gate_block = 4, gates_ahead = 3, cluster = 2, threads = 256, tile_rows = 2,
            row_phases = 2 } },
  { "cluster_gb4_c2_512thr_t8_rg4", "cluster",
    old = { cluster = 2, gate_block = 4, threads = 512, tile_rows = 8, row_group = 4, cell_in_lanes = true,
            late_store = true, mbarrier_exchange = true, direct_push = true, gates_ahead = 3 },
    new = { push = "direct", gate_block = 4, gates_ahead = 3, cluster = 2, threads = 512, tile_rows = 8,
            row_group = 4 } },
  { "cluster_gb4_c4_t4_ga3_mb3", "cluster",
    old = { cluster = 4, gate_block = 4, threads = 128, tile_rows = 4, min_blocks = 3, cell_in_lanes = true,
            late_store = true, mbarrier_exchange = true, direct_push = true, gates_ahead = 3 },
    new = { push = "direct", gate_block = 4, gates_ahead = 3, cluster = 4, threads = 128, tile_rows = 4,
            min_blocks = 3 } },
  -- the cluster kernel's batch-table rows at their plain values (the gates taken after the wait, the
  -- reference cell: the defaults before they took the gates early and the trimmed cell)
  { "cluster_h128_b1_plain", "cluster", new = {}, batch = 1 },
  { "cluster_h128_b8_plain", "cluster", new = {}, batch = 8 },
  { "cluster_h128_b16_plain", "cluster", new = {}, batch = 16 },
  { "cluster_h128_b32_plain", "cluster", new = {}, batch = 32 },
  { "cluster_h128_b48_plain", "cluster", new = {}, batch = 48 },
  { "cluster_h128_b64_plain", "cluster", new = {}, batch = 64 },
  { "cluster_h128_b128_plain", "cluster", new = {}, batch = 128 },
  { "cluster_h128_b256_plain", "cluster", new = {}, batch = 256 },
  { "cluster_h128_b1024_plain", "cluster", new = {}, batch = 1024 },
  -- the persistent kernel
  { "persistent_u8_256thr", "persistent", old = { units = 8, threads = 256, gate_block = 1, row_group = 1 },
    new = { units = 8, threads = 256, gate_block = 1, row_group = 1 } },
  { "persistent_u16_t16", "persistent", old = { units = 16, threads = 256, tile_rows = 16, gate_block = 1,
                                                 row_group = 1 },
    new = { units = 16, threads = 256, tile_rows = 16, gate_block = 1, row_group = 1 } },
  { "persistent_u16_rg4", "persistent", old = { units = 16, gate_block = 1, row_group = 4 },
    new = { units = 16, gate_block = 1, row_group = 4 } },
  { "persistent_u32_gb4", "persistent", old = { units = 32, gate_block = 4 }, new = { units = 32, gate_block = 4 } },
  { "persistent_u4_gb4_t16", "persistent", old = { units = 4, gate_block = 4, tile_rows = 16 },
    new = { units = 4, gate_block = 4, tile_rows = 16 } },
}

if list == "defaults" or list == "all" then
  for _, b in ipairs(batches) do
    default("cluster", 128, b)
    default("persistent", 128, b)
  end
  for _, h in ipairs(other_hidden) do
    for _, b in ipairs(other_batches) do
      default("cluster", h, b)
      default("persistent", h, b)
    end
  end
  for _, b in ipairs { 1, 8, 64, 256 } do default("persistent", 128, b, true) end
end
if list == "options" or list == "all" then
  for _, o in ipairs(options) do
    variants[#variants + 1] = { name = o[1], backend = o[2], old = o.old, new = o.new, batch = o.batch }
  end
end

-- The tensor-core kernel's variants: plain and timeline builds, a label and hidden size once.
if list == "tc" or list == "all" then
  local ok, tc = pcall(require, "spk.tensor_core")
  if not ok or not tc.sweep_jobs then
    io.stderr:write("kernel_cubins: the tc list: this tree's spk.tensor_core has no sweep_jobs\n")
  else
    local seen = {}
    for _, job in ipairs(tc.sweep_jobs()) do
      local known, v = pcall(tc.variant, job.shape, job.options)
      local name = known and ("tc_%s_h%d"):format(tc.label(v):gsub(" ", "_"), job.shape.hidden)
      if known and not seen[name] and (not only or only[name] or only[name .. "_timeline"]) then
        seen[name] = true
        -- the defines a plan compiles it with (the plan's and the spec's), as tc_sweep's check has them
        local checked, report = pcall(spk.lstm.kernel_check, tc.spec(job.options), job.shape)
        local defines = checked and report.defines or nil
        local why = not checked and tostring(report):gsub("\n.*", ""):gsub("^[^\n]-%.lua:%d+: ", "") or nil
        variants[#variants + 1] = { name = name, file = "lstm_tc.cu", defines = defines, why = why }
        local timeline = checked and { SPK_TIMELINE = 1 } or nil
        for key, value in pairs(defines or {}) do timeline[key] = value end
        variants[#variants + 1] = { name = name .. "_timeline", file = "lstm_tc.cu", defines = timeline, why = why }
      end
    end
  end
end

-- The variants of another folder's .defines that no list here names (--defines-from).
if defines_from then
  local named = {}
  for _, v in ipairs(variants) do named[v.name] = true end
  for _, listed in ipairs(spk.files.list(defines_from)) do
    local name = listed:match("^(.+)%.defines$")
    if name and not named[name] then
      local lines = {}
      for line in spk.files.read(defines_from .. "/" .. listed):gmatch("[^\n]+") do lines[#lines + 1] = line end
      local defines = {}
      for k = 2, #lines do
        local key, value = lines[k]:match("^([%w_]+)=(.*)$")
        defines[key] = value
      end
      variants[#variants + 1] = { name = name, file = lines[1], defines = defines }
    end
  end
end

-- The target a kernel file is compiled for: the tensor-core kernel's spec asks for the arch-specific one
-- (spk.tensor_core.spec, arch_specific: its wgmma form needs it).
local function arch_of(file) return file == "lstm_tc.cu" and "sm_90a" or "sm_90" end

-- The kernel file and the defines of a variant in this tree, or nil and why not.
local function resolve(v)
  if v.why then return nil, v.why end
  if v.file then
    local defines = {}
    for name, value in pairs(v.defines) do defines[name] = value end
    return v.file, defines
  end
  if new_api then
    if v.old and not v.new then return nil, "not in this tree" end
    local kernel
    if v.new then
      local known = {}
      for _, o in ipairs(spk.lstm.kernel_options(v.backend).options) do known[o.name] = true end
      kernel = {}
      for key, value in pairs(plain[v.backend] or {}) do
        if known[key] then kernel[key] = value end
      end
      for key, value in pairs(v.new) do
        if known[key] then
          kernel[key] = value
        elseif (plain[v.backend] or {})[key] ~= value then
          return nil, ("kernel.%s is no option of this tree"):format(key)
        end
      end
    end
    local ok, k = pcall(spk.lstm.kernel_variant, { backend = v.backend, batch = v.batch or 1,
                                                   hidden = v.hidden or 128, kernel = kernel })
    if not ok then return nil, tostring(k) end
    local defines = {}
    for name, value in pairs(k.defines) do defines[name] = value end
    if v.trace then defines.SPK_DEBUG_TRACE = "1" end
    return k.file, defines
  end
  -- the earlier tree: C-level fields, a file per backend
  if v.new and not v.old then return nil, "not in this tree" end
  local ok, k
  if v.backend == "cluster" then
    if v.old then
      local fields = { hidden = 128 }
      for key, value in pairs(v.old) do fields[key] = value end
      ok, k = pcall(core.cluster_variant_check, fields)
    else
      ok, k = pcall(core.cluster_variant_for_batch, v.hidden, v.batch)
    end
  else
    if v.old then
      local fields = { hidden = 128 }
      for key, value in pairs(v.old) do fields[key] = value end
      ok, k = pcall(core.stack_variant_check, fields, 1)
    else
      ok, k = pcall(core.stack_variant_for_batch, v.batch, v.hidden)
    end
  end
  if not ok then return nil, tostring(k) end
  local defines = {}
  for name, value in pairs(k.defines) do defines[name] = value end
  if v.trace then defines.SPK_DEBUG_TRACE = "1" end
  return v.backend == "cluster" and "lstm_cluster.cu" or "lstm_recurrence.cu", defines
end

local dir = spk.cuda.kernel_dir()
local written, skipped = 0, 0
for _, v in ipairs(variants) do
  if only and not only[v.name] then goto next_variant end
  local file, defines = resolve(v)
  if file then
    for name, value in pairs(extra) do defines[name] = value end
  end
  if not file then
    io.stderr:write(("kernel_cubins: %s skipped: %s\n"):format(v.name, defines))
    skipped = skipped + 1
  else
    local ok, m = pcall(spk.cuda.compile, { file = dir .. "/" .. file, defines = defines, arch = arch_of(file),
                                           cache = false })
    if not ok then
      io.stderr:write(("kernel_cubins: %s does not compile: %s\n"):format(v.name, tostring(m)))
      skipped = skipped + 1
    else
      spk.files.write(("%s/%s.cubin"):format(out, v.name), (m:code()))
      local names = {}
      for name in pairs(defines) do names[#names + 1] = name end
      table.sort(names)
      local lines = { file }
      for _, name in ipairs(names) do lines[#lines + 1] = name .. "=" .. tostring(defines[name]) end
      spk.files.write(("%s/%s.defines"):format(out, v.name), table.concat(lines, "\n") .. "\n")
      written = written + 1
    end
  end
  ::next_variant::
end
io.stderr:write(("kernel_cubins: %d cubins in %s, %d skipped\n"):format(written, out, skipped))
