-- The cluster backend of the LSTM stack (src/lstm/cluster.h,
-- kernels/lstm_cluster.cu): Hopper thread-block clusters, h exchanged through
-- distributed shared memory, one cluster barrier per step, both directions in
-- one launch per layer. Needs compute capability 9.0.
--
--   local plan = spk.lstm.stack{backend = "cluster", layers = layers, batch = 8, steps = 589,
--                               math = "fp32",          -- | "tf32": the input projections on tensor cores
--                                                       -- (TF32 inputs, FP32 sums); the recurrence stays FP32
--                               kernel = {cluster = 8,          -- 1, 2, 4, 8 or 16 blocks per cluster
--                                         tile_rows = 8,        -- force this tile height (default: picked)
--                                         threads = 512,        -- 4 * hidden / cluster / gate_block * chunks
--                                                               -- (chunks 2, 4, 8)
--                                         gate_block = 1,       -- | 4: a thread holds its unit's four gate
--                                                               -- rows (needs push = "direct"); another
--                                                               -- chunk split, so other bits
--                                         gates_ahead = 1,      -- 2 .. 4: x·Wᵀ fetched that many steps
--                                                               -- ahead (cp.async stages; direct pushes)
--                                         directions = 1,       -- | 2: both directions of a tile in one
--                                                               -- block of 2 * threads (one computes while
--                                                               -- the other waits; direct pushes), same bits
--                                         row_phases = 1,       -- | 2: the tile's row groups in two halves
--                                                               -- that take turns (one computes while the
--                                                               -- other's h crosses the cluster; direct
--                                                               -- pushes, two row groups a tile), same bits
--                                         weights = "registers",-- | "shared"
--                                         math = "fp32",        -- the recurrence: strict FP32 only (R·h has
--                                                               -- no MMA form here; TF32 is the plan's math)
--                                         row_group = 8, min_blocks = 2,  -- tuning, same bits
--                                         -- step-latency options, all the same bits:
--                                         cell = "shared",      -- | "lanes": the reducing lanes finish the cell
--                                         store = "step",       -- | "late": h to the output after the arrive
--                                         push = "scalar",      -- | "vector": 16-byte DSMEM pushes
--                                                               -- | "direct": each lane st.asyncs its cell's
--                                                               -- h into its share of the blocks, no block
--                                                               -- barrier in a step (needs cell = "lanes"
--                                                               -- and exchange = "mbarrier")
--                                                               -- | "warp": direct pushes packed per warp
--                                                               -- into 16-byte st.async (needs gate_block 4)
--                                         exchange = "barrier"}}-- | "mbarrier": st.async + mbarrier waits
--   Without `kernel` the plan takes the default for its batch
--   (spk.lstm.cluster_default(batch, hidden): src/lstm/cluster.c's batch_table).
--   With cell = "lanes" a given tile_rows is also the kernel's largest tile
--   (tiles are padded to whole row groups).
--   plan:forward(x)          -- x host or device f32 [batch, steps, in]; y [batch, steps, 2H] on x's side
--   plan.kernel              -- registers, spills, smem, cluster, threads, chunks, max_active_clusters, defines
--   plan.schedule            -- tile_rows, tiles, clusters, max_active_clusters, waves, launches (per layer)
--   plan.variant             -- in words
--   plan.math                -- "fp32" or "tf32": the input projections' math
--   plan:time{rounds = 7, warmup = 2, x = tensor}  -- {median_ms, min_ms, max_ms, spread, samples}
--   plan:close(), plan:is_closed()
--
-- Also spk.lstm.cluster_stack(opts) (the same constructor, `backend` optional)
-- and spk.lstm.cluster_variant(kernel) (the fitted variant, no device needed).
return function(spk, core)
  spk.lstm = spk.lstm or {}

  local Plan = {}
  Plan.__index = Plan

  local known = { layers = true, batch = true, steps = true, backend = true, kernel = true, math = true }
  -- the kernel table's options and the type of each (spk.tuning checks records with them)
  local known_kernel = { cluster = "integer", tile_rows = "integer", threads = "integer", weights = "string",
                         math = "string", row_group = "integer", min_blocks = "integer", hidden = "integer",
                         cell = "string", store = "string", push = "string", exchange = "string",
                         gate_block = "integer", gates_ahead = "integer", directions = "integer",
                         row_phases = "integer" }
  -- option = {value giving false, value giving true, the C field}
  local switches = {
    { "cell", "shared", "lanes", "cell_in_lanes" },
    { "store", "step", "late", "late_store" },
    { "exchange", "barrier", "mbarrier", "mbarrier_exchange" },
  }

  local function fail(message, level) error("spk.lstm.stack (cluster): " .. message, level + 1) end

  local function positive_integer(value, name, level)
    if math.type(value) ~= "integer" or value < 1 then
      fail(("%s must be a positive integer, got %s"):format(name, tostring(value)), level + 1)
    end
  end

  -- The kernel table as the C side reads it; errors name the option.
  local function kernel_options(kernel, hidden, level)
    if kernel == nil then kernel = {} end
    if type(kernel) ~= "table" then fail("kernel must be a table", level + 1) end
    require("spk.options").check_keys(kernel, known_kernel, "spk.lstm.stack (cluster): kernel", level + 1)
    for _, key in ipairs { "cluster", "tile_rows", "threads", "gate_block", "gates_ahead", "row_group", "min_blocks",
                           "hidden", "directions", "row_phases" } do
      if kernel[key] ~= nil then positive_integer(kernel[key], "kernel." .. key, level + 1) end
    end
    local weights = kernel.weights or "registers"
    if weights ~= "registers" and weights ~= "shared" then
      fail(("kernel.weights must be \"registers\" or \"shared\", got %s"):format(tostring(weights)), level + 1)
    end
    local math_mode = kernel.math or "fp32"
    if math_mode == "tf32" then
      fail("kernel.math \"tf32\" is refused: the recurrent product R·h has no MMA form in the cluster kernel "
        .. "(a few rows per step); for TF32 input projections use the plan option math = \"tf32\"", level + 1)
    elseif math_mode ~= "fp32" then
      fail(("kernel.math must be \"fp32\", got %s"):format(tostring(math_mode)), level + 1)
    end
    if kernel.tile_rows ~= nil and kernel.tile_rows > 32 then
      fail(("kernel.tile_rows must be 1 .. 32, got %d"):format(kernel.tile_rows), level + 1)
    end
    if kernel.gate_block ~= nil and kernel.gate_block ~= 1 and kernel.gate_block ~= 4 then
      fail(("kernel.gate_block must be 1 or 4, got %d"):format(kernel.gate_block), level + 1)
    end
    if kernel.directions ~= nil and kernel.directions > 2 then
      fail(("kernel.directions must be 1 or 2 (directions a block runs), got %d"):format(kernel.directions), level + 1)
    end
    if kernel.row_phases ~= nil and kernel.row_phases > 2 then
      fail(("kernel.row_phases must be 1 or 2 (halves of a tile that take turns), got %d"):format(kernel.row_phases),
        level + 1)
    end
    local k = { hidden = kernel.hidden or hidden, cluster = kernel.cluster, threads = kernel.threads,
                gate_block = kernel.gate_block, gates_ahead = kernel.gates_ahead, tile_rows = kernel.tile_rows,
                row_group = kernel.row_group, directions = kernel.directions, row_phases = kernel.row_phases,
                min_blocks = kernel.min_blocks, weights_shared = weights == "shared" }
    for _, sw in ipairs(switches) do
      local name, off, on, field = sw[1], sw[2], sw[3], sw[4]
      local value = kernel[name] or off
      if value ~= off and value ~= on then
        fail(("kernel.%s must be %q or %q, got %s"):format(name, off, on, tostring(value)), level + 1)
      end
      k[field] = value == on
    end
    local push = kernel.push or "scalar"
    if push ~= "scalar" and push ~= "vector" and push ~= "direct" and push ~= "warp" then
      fail(("kernel.push must be \"scalar\", \"vector\", \"direct\" or \"warp\", got %s"):format(tostring(push)),
        level + 1)
    end
    k.vector_push, k.direct_push, k.warp_push = push == "vector", push == "direct" or push == "warp", push == "warp"
    if k.direct_push and not (k.mbarrier_exchange and k.cell_in_lanes) then
      fail(("kernel.push %q needs kernel.exchange \"mbarrier\" and kernel.cell \"lanes\""):format(push), level + 1)
    end
    if k.warp_push and k.gate_block ~= 4 then
      fail("kernel.push \"warp\" needs kernel.gate_block 4", level + 1)
    end
    if (k.gates_ahead or 1) > 4 or ((k.gates_ahead or 1) > 1 and not k.direct_push) then
      fail(("kernel.gates_ahead must be 1 .. 4 (more than 1 needs kernel.push \"direct\" or \"warp\"), got %d"):format(
        k.gates_ahead), level + 1)
    end
    if k.gate_block == 4 and not k.direct_push then
      fail("kernel.gate_block 4 needs kernel.push \"direct\" or \"warp\"", level + 1)
    end
    if k.directions == 2 and not k.direct_push then
      fail("kernel.directions 2 needs kernel.push \"direct\" or \"warp\"", level + 1)
    end
    if k.row_phases == 2 and not k.direct_push then
      fail("kernel.row_phases 2 needs kernel.push \"direct\" or \"warp\"", level + 1)
    end
    if k.mbarrier_exchange and not k.direct_push then
      if kernel.push == "scalar" then
        fail("kernel.exchange \"mbarrier\" needs kernel.push \"vector\" or \"direct\"", level + 1)
      end
      k.vector_push = true
    end
    return k, math_mode
  end

  -- The fitted variant of a kernel table (hidden 128 unless given): no device needed.
  function spk.lstm.cluster_variant(kernel)
    local k = kernel_options(kernel, 128, 2)
    return core.cluster_variant_check(k)
  end

  -- The plan's default kernel table for a batch (no device needed): the row
  -- of cluster.c's batch_table, as kernel options the C side reads.
  function spk.lstm.cluster_default(batch, hidden)
    positive_integer(batch, "batch", 2)
    local v = core.cluster_variant_for_batch(hidden or 128, batch)
    return { hidden = v.hidden, cluster = v.cluster, threads = v.threads, gate_block = v.gate_block,
             gates_ahead = v.gates_ahead, directions = v.directions, row_phases = v.row_phases,
             row_group = v.row_group,
             min_blocks = v.min_blocks, weights_shared = v.weights == "shared",
             tile_rows = v.tile_rows > 0 and v.tile_rows or nil, cell_in_lanes = v.cell == "lanes",
             late_store = v.store == "late", vector_push = v.push == "vector",
             direct_push = v.push == "direct" or v.push == "warp", warp_push = v.push == "warp",
             mbarrier_exchange = v.exchange == "mbarrier" }
  end

  local function construct(opts, level)
    if type(opts) ~= "table" then fail("expects a table {layers =, batch =, steps =, kernel =}", level + 1) end
    for key in pairs(opts) do
      if not known[key] then fail(("unknown option '%s'"):format(tostring(key)), level + 1) end
    end
    if opts.backend ~= nil and opts.backend ~= "cluster" then
      fail(("backend must be \"cluster\", got %s"):format(tostring(opts.backend)), level + 1)
    end
    if type(opts.layers) ~= "table" or #opts.layers == 0 then
      fail("layers must be a non-empty list of {W =, R =, B =}", level + 1)
    end
    positive_integer(opts.batch, "batch", level + 1)
    positive_integer(opts.steps, "steps", level + 1)
    local projections, why = spk.lstm.check_math(opts.math, "cluster")
    if not projections then fail(why, level + 1) end
    local dims = spk.lstm.validate(opts.layers)
    local kernel, math_mode
    if opts.kernel == nil then
      kernel, math_mode = spk.lstm.cluster_default(opts.batch, dims.hidden), "fp32"
    else
      kernel, math_mode = kernel_options(opts.kernel, dims.hidden, level + 1)
    end
    -- the variant is checked here too, so a bad geometry fails before any device work
    local ok, err = pcall(core.cluster_variant_check, kernel)
    if not ok then fail(tostring(err), level + 1) end
    local c = {}
    for k, v in pairs(kernel) do c[k] = v end
    -- kernel.tile_rows forces the tile height; the kernel carries up to 32 rows, or
    -- exactly that many in the lanes form (tiles padded to row groups)
    c.tile_rows = c.cell_in_lanes and kernel.tile_rows or nil
    local handle = core.cluster_stack_new { layers = opts.layers, batch = opts.batch, steps = opts.steps,
                                            kernel = c, tile_rows = kernel.tile_rows, math = projections }
    local info = handle:info()
    local self = setmetatable({ backend = "cluster", layers = opts.layers, batch = opts.batch, steps = opts.steps,
                                input = dims.input, hidden = dims.hidden, plan = handle, kernel = info.kernel,
                                schedule = info.schedule, math = projections }, Plan)
    self.kernel.math = math_mode
    self.kernel.max_active_clusters = info.schedule.max_active_clusters
    local k = info.kernel
    local options = {}
    if k.gate_block > 1 then options[#options + 1] = ("gate block %d"):format(k.gate_block) end
    if k.gates_ahead > 1 then options[#options + 1] = ("gates %d steps ahead"):format(k.gates_ahead) end
    if k.directions == 2 then options[#options + 1] = "both directions in a block" end
    if k.row_phases == 2 then options[#options + 1] = "2 row phases" end
    if k.cell == "lanes" then options[#options + 1] = "cell in lanes" end
    if k.store == "late" then options[#options + 1] = "late store" end
    if k.push ~= "scalar" then options[#options + 1] = k.push .. " push" end
    if k.exchange == "mbarrier" then options[#options + 1] = "mbarrier exchange" end
    if projections == "tf32" then options[#options + 1] = "tf32 projections" end
    self.variant = ("cluster %d, %d threads, tile %d, %d clusters in %d wave%s%s"):format(k.cluster,
      k.threads, info.schedule.tile_rows, info.schedule.clusters, info.schedule.waves,
      info.schedule.waves == 1 and "" or "s", #options > 0 and (", " .. table.concat(options, ", ")) or "")
    return self
  end

  function spk.lstm.cluster_stack(opts) return construct(opts, 2) end

  local function open(self, level)
    if not self.plan then error("lstm stack (cluster): the plan is closed", level + 1) end
    return self.plan
  end

  function Plan:forward(x)
    if not spk.is_tensor(x) then error("forward: x must be a tensor", 2) end
    return open(self, 2):forward(x)
  end

  local time_options = { rounds = true, warmup = true, x = true }

  function Plan:time(opts)
    opts = opts or {}
    for key in pairs(opts) do
      if not time_options[key] then error(("time: unknown option '%s'"):format(tostring(key)), 2) end
    end
    local plan = open(self, 2)
    local x = opts.x or spk.zeros({ self.batch, self.steps, self.input }, "f32")
    return require("spk.bench").summarize(plan:time(x, opts.rounds or 7, opts.warmup or 2))
  end

  function Plan:close()
    if self.plan then
      self.plan:close()
      self.plan = nil
    end
  end

  function Plan:is_closed() return self.plan == nil end

  function Plan:__tostring()
    if self.plan then return tostring(self.plan) end
    return "lstm stack (cluster, closed)"
  end

  -- What a tuning record may choose for this backend (spk.lstm.tunables, lua/spk/stack.lua): a kernel
  -- table, checked as a plan checks it (no device).
  if type(spk.lstm.tunables) == "table" then
    spk.lstm.tunables.cluster = require("spk.options").takes(2, "spk.lstm.tunables.cluster", function(o, shape)
      local tuning = require "spk.tuning"
      local ok, why = tuning.check_option_keys(o, { kernel = true }, "cluster")
      if ok then ok, why = tuning.check_kernel(o.kernel, known_kernel, "kernel") end
      if not ok then return nil, why end
      local fits, err = pcall(function()
        core.cluster_variant_check((kernel_options(o.kernel, shape.hidden, 1)))
      end)
      if not fits then return nil, tostring(err) end
      return true
    end)
  end

  -- An argument a function does not take is an error that names it.
  local options = require "spk.options"
  spk.lstm.cluster_variant = options.takes(1, "spk.lstm.cluster_variant", spk.lstm.cluster_variant)
  spk.lstm.cluster_default = options.takes(2, "spk.lstm.cluster_default", spk.lstm.cluster_default)
  spk.lstm.cluster_stack = options.takes(1, "spk.lstm.cluster_stack", spk.lstm.cluster_stack)
  for name, max in pairs { forward = 2, time = 2, close = 1, is_closed = 1 } do
    Plan[name] = options.takes(max, name, Plan[name])
  end
  Plan.__close = Plan.close

  if type(spk.lstm.backends) == "table" then
    spk.lstm.backends.cluster = spk.lstm.cluster_stack
  end

  local doc = require "spk.doc"
  doc(spk.lstm.cluster_stack, [[
spk.lstm.cluster_stack{layers =, batch =, steps =, math = "fp32" | "tf32", kernel = {...}} -> plan
The cluster backend's plan (spk.lstm.stack{backend = "cluster", ...}; compute capability 9.0): one
thread-block cluster per batch tile and direction. The kernel options are listed in help "cluster".]])
  doc(spk.lstm.cluster_variant, [[
spk.lstm.cluster_variant(kernel) -> variant
The fitted cluster variant of a kernel table (hidden 128 unless given), with its geometry and
defines; no device needed.]])
  doc(spk.lstm.cluster_default, [[
spk.lstm.cluster_default(batch[, hidden = 128]) -> kernel
The cluster plan's default kernel table at a batch (src/lstm/cluster.c's batch table).]])
  doc.type("cluster stack plan", Plan, [[
cluster stack plan: spk.lstm.stack{backend = "cluster"}'s plan; fields kernel, schedule, variant, math,
batch, steps, input, hidden.]])
  doc(Plan.forward, [[
plan:forward(x) -> y
x f32 [batch, steps, in] on the host or the device; y [batch, steps, 2H] on x's side.]])
  doc(Plan.time, [[
plan:time{rounds = 7, warmup = 2, x = tensor} -> {median_ms, min_ms, max_ms, spread, samples}
CUDA-graph replays of one forward, each timed by CUDA events.]])
  doc(Plan.close, "plan:close()\nFrees the plan's device memory now (also <close>).")
  doc(Plan.is_closed, "plan:is_closed() -> boolean")
  doc.area { name = "cluster", source = "spk.cluster",
             summary = "the cluster backend: thread-block clusters exchanging h through distributed shared memory",
             contents = { spk.lstm.cluster_stack, spk.lstm.cluster_variant, spk.lstm.cluster_default,
                          "cluster stack plan" } }
end
