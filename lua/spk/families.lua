-- The built-in kernel families as backends of spk.lstm.stack: one loop over
-- the families' records (src/lstm/family.h, spk.core.kernel_families()), so
-- a new family is a record in C and nothing here.
--
--   local plan = spk.lstm.stack{backend = "persistent" | "cluster", layers = layers, batch = 4, steps = 589,
--                               kernel = {...},    -- any subset of the family's options; left out: the
--                                                  -- batch's default (spk.lstm.kernel_options(backend))
--                               math = "fp32"}     -- or any of spk.lstm.math_modes (the input projections)
--   plan.kernel     -- the variant (every option), its sizes, registers, spills, defines, ...
--   plan.schedule   -- the family's schedule (tile_rows, tiles, ...)
--   plan.timeline   -- what a timeline records: {stages =, waits_for =, blocks =, warps =, group =}
--   plan.variant    -- what runs, in words
--   plan:forward(x, {timeline = {layer =, direction =, step_range =, blocks =, warp =}}) -> y, info
--                   -- the kernel's timeline build (docs/timeline.md): info.timeline
-- The rest as every plan (lua/spk/stack.lua). Per family: spk.lstm.<backend>_variant(kernel, batch,
-- hidden), the variant a plan of that batch compiles (no device needed), and spk.lstm.tunables.<backend>.
return function(spk, core)
  local options = require "spk.options"
  local doc = require "spk.doc"
  local tuning = require "spk.tuning"

  -- The plan options beyond the stack's that a family may take (its record says which).
  local PLAN_OPTIONS = { "schedule", "capacity", "timeout_ms" }
  -- A constructor known by a name of its own too (the same function, messages in that name).
  local OWN_NAMES = { cluster = "cluster_stack" }

  local function register(f)
    local backend = f.backend
    local allowed = { kernel = true }
    for _, key in ipairs(PLAN_OPTIONS) do allowed[key] = f[key] or nil end

    local function construct(opts)
      local self = spk.lstm.plan_options(opts, backend, allowed)
      if opts.schedule ~= nil then spk.schedule.check(opts.schedule, opts.batch) end
      local args = { backend = backend, layers = opts.layers, batch = opts.batch, steps = opts.steps,
                     kernel = opts.kernel, math = self.math }
      for key in pairs(allowed) do args[key] = opts[key] end
      local ok, handle = pcall(core.plan_new, args)
      if not ok then error(("spk.lstm.stack (%s): %s"):format(backend, tostring(handle))) end
      local info = handle:info()
      self.handle, self.kernel, self.schedule, self.timeline = handle, info.kernel, info.schedule, info.timeline
      self.variant = info.variant
      local s = self.schedule
      if math.type(s.tiles_per_launch) == "integer" then
        function s.launches() return core.schedule.launches(s.tiles, s.tiles_per_launch) end
      end
      return spk.lstm.new_plan(self, { forward_options = f.trace and { trace = true } or nil })
    end

    local own = OWN_NAMES[backend]
    local name = own and "spk.lstm." .. own or "spk.lstm.backends." .. backend
    spk.lstm.backends[backend] = options.takes(1, name, construct)
    if own then spk.lstm[own] = spk.lstm.backends[backend] end
    local variant_name = backend .. "_variant"
    spk.lstm[variant_name] = options.takes(3, "spk.lstm." .. variant_name, function(kernel, batch, hidden)
      return spk.lstm.kernel_variant { backend = backend, kernel = kernel, batch = batch, hidden = hidden }
    end)
    -- What a tuning record may choose for this backend: a kernel table, checked
    -- as a plan checks it (no device).
    spk.lstm.tunables[backend] = options.takes(2, "spk.lstm.tunables." .. backend,
      tuning.kernel_tunable(spk.lstm, backend))

    local extra = {}
    for _, key in ipairs(PLAN_OPTIONS) do
      if allowed[key] then extra[#extra + 1] = key .. " =, " end
    end
    doc(spk.lstm.backends[backend], ([[
%s{layers =, batch =, steps =, kernel =, %smath =} -> plan
The %s kernels (spk.lstm.stack{backend = "%s"}%s);
their kernel options are spk.lstm.kernel_options("%s") (spk help lists them).]]):format(name, table.concat(extra), f.title, backend,
      own and ", spk.lstm.backends." .. backend or "", backend))
    doc(spk.lstm[variant_name], ([=[
spk.lstm.%s([kernel[, batch = 1[, hidden = 128]]]) -> variant
The %s variant a plan of that batch compiles for the kernel table (every option left out at the
batch's default): its options, sizes and defines; no device needed.]=]):format(variant_name, f.title))
    doc.area { name = backend, header = f.help, summary = f.summary,
               contents = { spk.lstm.backends[backend], spk.lstm[variant_name] } }
  end

  for _, f in ipairs(core.kernel_families()) do register(f) end
end
