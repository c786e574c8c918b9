-- The cluster backend of the LSTM stack (src/lstm/cluster.h): Hopper
-- thread-block clusters, h exchanged through distributed shared memory, both
-- directions in one launch per layer. Needs compute capability 9.0. Two
-- sources: kernels/lstm_cluster.cu (kernel.push "direct" or "warp": st.async
-- pushes and mbarrier waits, no block barrier in a step) and
-- kernels/lstm_cluster_baseline.cu (kernel.push "scalar": the plain form, a
-- cluster barrier a step, the reference the others are checked against).
--
--   local plan = spk.lstm.stack{backend = "cluster", layers = layers, batch = 8, steps = 589,
--                               math = "fp32",     -- | "tf32": the input projections on tensor cores
--                               kernel = {push = "warp", cluster = 4, gate_block = 4, gates_ahead = 3,
--                                         row_phases = 1, tile_rows = 1, threads = 128, row_group = 1,
--                                         min_blocks = 1}}
--                                                  -- any subset; left out: the batch's default (spk help)
--   plan.kernel     -- the variant (every option), file, units, chunks, registers, spills, smem, defines, ...
--   plan.schedule   -- tile_rows, tiles, clusters, max_active_clusters, waves, launches (per layer)
--   plan:forward(x, {timeline = {layer =, direction =, step_range =, blocks =, warp =}}) -> y, info
--                   -- the kernel's timeline build (docs/timeline.md): info.timeline; blocks are
--                   -- numbered rank + cluster * tile; plan.timeline says what a recording covers
-- The rest as every plan (lua/spk/stack.lua). Also spk.lstm.cluster_variant(kernel, batch, hidden):
-- the variant a plan of that batch compiles (no device needed).
return function(spk, core)
  function spk.lstm.cluster_variant(kernel, batch, hidden)
    return spk.lstm.kernel_variant { backend = "cluster", kernel = kernel, batch = batch, hidden = hidden }
  end

  local function describe(k, schedule, math_mode)
    local options = { ({ scalar = "scalar push, cluster barrier", direct = "direct push",
                         warp = "warp push" })[k.push] }
    if k.gate_block > 1 then options[#options + 1] = ("gate block %d"):format(k.gate_block) end
    if k.gates_ahead > 1 then options[#options + 1] = ("gates %d steps ahead"):format(k.gates_ahead) end
    if k.row_phases == 2 then options[#options + 1] = "2 row phases" end
    if k.early_gates == 1 then options[#options + 1] = "early gates" end
    if k.cell ~= "reference" then options[#options + 1] = k.cell .. " cell" end
    return ("cluster %d, %d threads, tile %d, %d clusters in %d wave%s, %s%s"):format(k.cluster, k.threads,
      schedule.tile_rows, schedule.clusters, schedule.waves, schedule.waves == 1 and "" or "s",
      table.concat(options, ", "), spk.lstm.math_suffix(math_mode))
  end

  local function construct(opts, level)
    local self = spk.lstm.plan_options(opts, "cluster", { kernel = true }, level + 1)
    local ok, handle = pcall(core.cluster_stack_new, { layers = opts.layers, batch = opts.batch, steps = opts.steps,
                                                       kernel = opts.kernel, math = self.math })
    if not ok then error("spk.lstm.stack (cluster): " .. tostring(handle), level + 1) end
    local info = handle:info()
    self.handle, self.kernel, self.schedule, self.timeline = handle, info.kernel, info.schedule, info.timeline
    self.variant = describe(info.kernel, info.schedule, self.math)
    return spk.lstm.new_plan(self)
  end

  function spk.lstm.cluster_stack(opts) return construct(opts, 2) end

  -- What a tuning record may choose for this backend: a kernel table, checked
  -- as a plan checks it (no device).
  spk.lstm.tunables.cluster = require("spk.tuning").kernel_tunable(spk.lstm, "cluster")

  -- An argument a function does not take is an error that names it.
  local options = require "spk.options"
  spk.lstm.cluster_variant = options.takes(3, "spk.lstm.cluster_variant", spk.lstm.cluster_variant)
  spk.lstm.cluster_stack = options.takes(1, "spk.lstm.cluster_stack", spk.lstm.cluster_stack)
  spk.lstm.tunables.cluster = options.takes(2, "spk.lstm.tunables.cluster", spk.lstm.tunables.cluster)
  spk.lstm.backends.cluster = spk.lstm.cluster_stack

  local doc = require "spk.doc"
  doc(spk.lstm.cluster_stack, [[
spk.lstm.cluster_stack{layers =, batch =, steps =, math = "fp32" | "tf32", kernel = {...}} -> plan
The cluster backend's plan (spk.lstm.stack{backend = "cluster", ...}; compute capability 9.0): one
thread-block cluster per batch tile and direction. Its kernel options are
spk.lstm.kernel_options("cluster") (spk help lists them).]])
  doc(spk.lstm.cluster_variant, [=[
spk.lstm.cluster_variant([kernel[, batch = 1[, hidden = 128]]]) -> variant
The cluster variant a plan of that batch compiles for the kernel table (every option left out at the
batch's default): its options, file, sizes and defines; no device needed.]=])
  doc.area { name = "cluster", source = "spk.cluster",
             summary = "the cluster backend: thread-block clusters exchanging h through distributed shared memory",
             contents = { spk.lstm.cluster_stack, spk.lstm.cluster_variant } }
end
