-- The persistent backend of the LSTM stack (src/lstm/persistent.h,
-- kernels/lstm_recurrence.cu): per layer and direction a cooperative launch
-- that runs the whole sequence, h exchanged through flagged words in global
-- memory.
--
--   local plan = spk.lstm.stack{layers = layers, batch = 4, steps = 589, backend = "persistent",
--                               kernel = {units = 4, gate_block = 1, threads = 128, row_group = 1, tile_rows = 32},
--                                                    -- any subset; left out: the batch's default (spk help)
--                               schedule = s,        -- optional, spk.schedule.new or by hand
--                               capacity = n,        -- optional: pretend the device holds n blocks
--                               timeout_ms = 10000,  -- a poll waiting longer fails the forward
--                               math = "fp32"}       -- | "tf32": the input projections on tensor cores
--   plan:forward(x[, {trace = {layer = k, direction = "forward" | "reverse", steps = {t, ...}}}])
--                        -- -> y[, info]: info.trace = {h, c = [#steps, B, H], layer, direction, steps},
--                        -- through the kernel's trace build (as spk.lstm.reference's trace)
--   plan:forward(x, {timeline = {layer =, direction =, step_range =, blocks =, warp =}}) -> y, info
--                        -- the kernel's timeline build (docs/timeline.md): info.timeline; blocks
--                        -- are numbered group + groups * tile; plan.timeline: what a recording covers
--   plan.schedule        -- the tile schedule in use, with :launches()
--   plan.kernel          -- the variant (every option), occupancy, capacity, registers, spills, defines
-- The rest as every plan (lua/spk/stack.lua).
return function(spk, core)
  local allowed = { kernel = true, schedule = true, capacity = true, timeout_ms = true }

  -- The variant a kernel table asks for at a batch (every option left out
  -- at that batch's default); no device needed.
  function spk.lstm.persistent_variant(kernel, batch, hidden)
    return spk.lstm.kernel_variant { backend = "persistent", kernel = kernel, batch = batch, hidden = hidden }
  end

  local function persistent(opts)
    local self = spk.lstm.plan_options(opts, "persistent", allowed, 2)
    if opts.schedule ~= nil then spk.schedule.check(opts.schedule, opts.batch) end
    local ok, handle = pcall(core.persistent_stack_new, { layers = opts.layers, batch = opts.batch,
      steps = opts.steps, kernel = opts.kernel, schedule = opts.schedule, capacity = opts.capacity,
      timeout_ms = opts.timeout_ms, math = self.math })
    if not ok then error("spk.lstm.stack (persistent): " .. tostring(handle), 2) end
    self.handle = handle
    local info = handle:info()
    self.kernel = info.kernel
    self.schedule = info.schedule
    self.timeline = info.timeline
    local launches = info.schedule.launches
    function self.schedule.launches()
      local out = {}
      for i, l in ipairs(launches) do out[i] = { first = l[1], count = l[2] } end
      return out
    end
    local k = self.kernel
    local layout = ""
    if k.gate_block ~= 1 or k.row_group ~= 1 then
      layout = (", gate block %d, row group %d"):format(k.gate_block, k.row_group)
    end
    self.variant = ("units %d, %d threads%s, tile %d %s%s"):format(k.units, k.threads, layout,
      self.schedule.tile_rows, self.schedule.concurrent and "concurrent" or "sequential",
      spk.lstm.math_suffix(self.math))
    return spk.lstm.new_plan(self, { forward_options = { trace = true } })
  end

  -- What a tuning record may choose for this backend: a kernel table, checked
  -- as a plan checks it (no device).
  spk.lstm.tunables.persistent = require("spk.tuning").kernel_tunable(spk.lstm, "persistent")

  -- An argument a function does not take is an error that names it.
  local options = require "spk.options"
  spk.lstm.persistent_variant = options.takes(3, "spk.lstm.persistent_variant", spk.lstm.persistent_variant)
  spk.lstm.backends.persistent = options.takes(1, "spk.lstm.backends.persistent", persistent)
  spk.lstm.tunables.persistent = options.takes(2, "spk.lstm.tunables.persistent", spk.lstm.tunables.persistent)

  local doc = require "spk.doc"
  doc(spk.lstm.persistent_variant, [=[
spk.lstm.persistent_variant([kernel[, batch = 1[, hidden = 128]]]) -> variant
The persistent kernel variant a plan of that batch compiles for the kernel table (every option left
out at the batch's default): its options, geometry and defines; no device needed.]=])
  doc(spk.lstm.backends.persistent, [[
spk.lstm.backends.persistent{layers =, batch =, steps =, kernel =, schedule =, capacity =, timeout_ms =, math =} -> plan
The persistent cooperative kernel (spk.lstm.stack{backend = "persistent"}); its kernel options are
spk.lstm.kernel_options("persistent") (spk help lists them).]])
  doc.area { name = "persistent", source = "spk.persistent",
             summary = "the persistent backend: a cooperative launch per layer and direction, h through global memory",
             contents = { spk.lstm.backends.persistent, spk.lstm.persistent_variant } }
end
