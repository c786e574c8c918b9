-- spk.lstm.stack: the LSTM stack as a plan, on one of the registered
-- backends (spk.lstm.backends): "persistent" and "cluster" (the built-in
-- kernel families, lua/spk/families.lua), "cudnn" (lua/spk/cudnn.lua), "cpu"
-- (lua/spk/cpu.lua), "auto" (lua/spk/auto.lua).
--
--   local plan = spk.lstm.stack{layers = layers, batch = 4, steps = 589, backend = "cluster",
--                               kernel = {push = "warp", tile_rows = 2},  -- left out: the batch's default
--                               math = "fp32"}       -- | "tf32": the input projections x·Wᵀ on tensor
--                                                    -- cores (TF32 inputs, FP32 sums) | "3xtf32": split
--                                                    -- TF32 on tensor cores, FP32's accuracy; R·h and
--                                                    -- the cell stay FP32 strict
--   plan:forward(x)      -- x host or device f32 [batch, steps, in]; y [batch, steps, 2H] on x's side
--   plan.variant         -- what runs, in words
--   plan.kernel          -- the compiled variant: its options (every one, the defaults included),
--                        -- sizes, registers, spills, defines, ...
--   plan.math            -- "fp32", "tf32" or "3xtf32" (the input projections' math)
--   plan:time{rounds = 7, warmup = 2, x = tensor}
--                        -- ms per forward, warm-up rounds discarded, with spk.bench's keys
--                        -- {median_ms, min_ms, max_ms, spread = (max - min) / median, samples}
--   plan:forward(x, {timeline = {layer =, direction =, step_range =, blocks =, warp =}}) -> y, info
--                        -- the persistent and cluster plans, and a kernel stack whose spec names
--                        -- timeline stages (spk.lstm.kernel_stack): the kernel's timeline build records
--                        -- the stage boundaries of the selection (docs/timeline.md), the same bits
--                        -- in y; info.timeline as spk.timeline reads it. plan:time{timeline = ...}
--                        -- times that build recording it. plan.timeline = {stages =, waits_for =,
--                        -- blocks =, warps =, group =}: what a recording covers (nil: no such build)
--   plan:close(), plan:is_closed(), <close> -- forward and time on a closed plan are errors
--
-- Kernel options. The `kernel` table of the persistent and cluster backends
-- is read through each kernel family's option table in C
-- (src/lstm/cluster.c, src/lstm/persistent.c; spk help lists them): an
-- option left out takes the batch's default in both, by the option's
-- default rule. spk.lstm.kernel_options(backend) returns that table as data,
-- spk.lstm.kernel_variant{backend =, batch =, hidden =, kernel =} the variant
-- a plan would compile (no device needed).
--
-- Backend registry. spk.lstm.backends maps a name to a constructor
-- function(opts) -> plan; spk.lstm.stack(opts) checks opts.backend (default
-- "auto": a GPU kernel where there is a GPU, the C reference elsewhere, so
-- one script runs on both) against it and returns backends[name](opts), opts
-- unchanged. A new backend registers from its area file (lua/spk/<area>.lua,
-- loaded after "stack" in lua/spk/init.lua) and builds its plan with
-- spk.lstm.new_plan (below), which gives it the shared checks, :time,
-- :close, __close and __tostring; spk bench then times and checks it. It
-- also registers spk.lstm.tunables[name] (below), or tuning records never
-- choose it.
return function(spk, core)
  spk.lstm = spk.lstm or {}
  local options = require "spk.options"
  local analysis = require "spk.timeline_analysis"

  -- The input projections' maths of the GPU stacks: those of the one list
  -- (src/cuda/math_modes.h, spk.core.blas.math_modes) that the stacks take,
  -- the first the default. check_math(value, backend) -> the math, or nil and
  -- the message (the caller adds its prefix). cuDNN has the maths the list
  -- marks as its own; the cpu reference computes in f32 or f64 only.
  local modes, quoted = {}, {}
  spk.lstm.math_modes = {}
  for _, m in ipairs(core.blas.math_modes) do
    if m.stacks then
      modes[m.name] = m
      spk.lstm.math_modes[#spk.lstm.math_modes + 1] = m.name
      quoted[#quoted + 1] = ('"%s"'):format(m.name)
    end
  end
  spk.lstm.math_default = spk.lstm.math_modes[1]
  -- "a, b or c" (word "or"), "a, b and c" (word "and")
  local function joined(list, word)
    return #list < 2 and (list[1] or "") or table.concat(list, ", ", 1, #list - 1) .. " " .. word .. " " .. list[#list]
  end
  local function choices(list) return joined(list, "or") end
  local math_choices = choices(quoted)
  -- The backends that take a trace and a timeline, and the families, as messages and help name them
  -- (the families' records say which: src/lstm/family.h).
  local family_names, traced, timelined = {}, {}, {}
  for _, f in ipairs(core.kernel_families()) do
    family_names[#family_names + 1] = f.backend
    if f.trace then traced[#traced + 1] = f.backend end
    if f.timeline then timelined[#timelined + 1] = f.backend end
  end
  traced[#traced + 1] = "cpu"
  local function and_list(list) return joined(list, "and") end
  local function quoted_list(list)
    local q = {}
    for i, name in ipairs(list) do q[i] = ('"%s"'):format(name) end
    return q
  end
  local function quoted_or(list) return choices(quoted_list(list)) end
  -- the backends a math needs: the GPU kernels' (the families and auto), and cudnn where it has the math
  local function backends_of(m)
    local names = {}
    for _, f in ipairs(core.kernel_families()) do names[#names + 1] = f.backend end
    names[#names + 1] = "auto"
    if m.cudnn then names[#names + 1] = "cudnn" end
    return choices(names)
  end
  function spk.lstm.check_math(value, backend)
    if value == nil or value == spk.lstm.math_default then return spk.lstm.math_default end
    local m = modes[value]
    if m then
      if backend == "cpu" or (backend == "cudnn" and not m.cudnn) then
        return nil, ("backend %s has no math \"%s\"%s (math = \"%s\" needs backend %s)"):format(backend, value,
          backend == "cpu" and ": the reference computes in f32 or f64 only" or "", value, backends_of(m))
      end
      return value
    end
    return nil, ("math must be %s, got %s"):format(math_choices,
      type(value) == "string" and ("\"" .. value .. "\"") or tostring(value))
  end

  -- What a plan's variant text adds for its math (the C side's words:
  -- src/lstm/device_layers.c, spk_lstm_math_suffix).
  function spk.lstm.math_suffix(math_mode)
    return core.lstm.math_suffixes[math_mode or spk.lstm.math_default] or ""
  end

  local backends = {}
  spk.lstm.backends = backends

  -- What a tuning record may choose for each backend (lua/spk/tuning.lua
  -- checks records with it): tunables[name](options, shape) -> true, or nil
  -- and why, for the options a record's winner carries for that backend, at
  -- shape {hidden, input, layers, batch, steps}, checked without a device by
  -- the backend's own option checks. Each backend registers its entry from
  -- its own file; a backend without one is never a record's choice. The keys
  -- a record may give are the tunable ones only, so it never sets layers,
  -- batch, steps or math.
  spk.lstm.tunables = {}

  local function registered()
    local names = {}
    for name in pairs(backends) do names[#names + 1] = name end
    table.sort(names)
    return table.concat(names, ", ")
  end

  function spk.lstm.stack(opts)
    if type(opts) ~= "table" then
      error("spk.lstm.stack: expects a table {layers =, batch =, steps =, backend =, ...}")
    end
    local name = opts.backend or "auto"
    local make = type(name) == "string" and backends[name] or nil
    if type(make) ~= "function" then
      error(("spk.lstm.stack: unknown backend %s (registered: %s)"):format(
        type(name) == "string" and ("'" .. name .. "'") or tostring(name), registered()))
    end
    return make(opts)
  end

  -- ---- kernel options ------------------------------------------------------

  -- The built-in kernel families' option tables (src/lstm/family.h), by backend.
  local families, names = {}, {}
  for _, f in ipairs(core.kernel_families()) do
    families[f.backend] = f.options
    names[#names + 1] = f.backend
  end

  local function family_of(backend)
    if families[backend] == nil then
      error(("spk.lstm: backend %s has no kernel options (%s)"):format(tostring(backend), table.concat(names, ", ")))
    end
    return backend
  end

  -- The option table of a backend's kernels, as data (from C: a new table each call).
  function spk.lstm.kernel_options(backend)
    family_of(backend)
    for _, f in ipairs(core.kernel_families()) do
      if f.backend == backend then return f.options end
    end
  end

  -- The variant a plan of that batch compiles for `kernel` (nil: every option at the batch's default).
  function spk.lstm.kernel_variant(opts)
    if type(opts) ~= "table" then
      error("spk.lstm.kernel_variant: expects a table {backend =, batch =, hidden =, kernel =}")
    end
    options.check_keys(opts, { "backend", "batch", "hidden", "kernel" }, "spk.lstm.kernel_variant")
    local backend = family_of(opts.backend)
    local ok, v = pcall(core.kernel_variant, backend, opts.kernel, opts.batch or 1, opts.hidden or 128)
    if not ok then error(("spk.lstm.kernel_variant (%s): %s"):format(backend, tostring(v))) end
    return v
  end

  -- ---- the plans' shared wrapper -------------------------------------------

  local Plan = {}
  Plan.__index = Plan

  local function positive_integer(value, name, prefix)
    if math.type(value) ~= "integer" or value < 1 then
      error(("%s: %s must be a positive integer, got %s"):format(prefix, name, tostring(value)))
    end
  end

  -- The checks every backend makes first: opts a table whose keys are all
  -- in `allowed` (a set; layers, batch, steps, backend and math are always
  -- allowed), backend (if given) the backend's name, layers, batch, steps and
  -- math. Returns the plan's fields {backend, layers, batch, steps, input,
  -- hidden, math}; errors name the option (and point at the script's line,
  -- as every spk error does: spk.errors).
  function spk.lstm.plan_options(opts, backend, allowed)
    if type(backend) ~= "string" then error("spk.lstm.plan_options: backend must be a string") end
    if type(allowed) ~= "table" then error("spk.lstm.plan_options: allowed must be a set {option = true}") end
    local prefix = ("spk.lstm.stack (%s)"):format(backend)
    if type(opts) ~= "table" then error(prefix .. ": expects a table {layers =, batch =, steps =, ...}") end
    local known = { layers = true, batch = true, steps = true, backend = true, math = true }
    for key in pairs(allowed) do known[key] = true end
    options.check_keys(opts, known, prefix)
    if opts.backend ~= nil and opts.backend ~= backend then
      error(("%s: backend must be \"%s\", got %s"):format(prefix, backend, tostring(opts.backend)))
    end
    if type(opts.layers) ~= "table" or #opts.layers == 0 then
      error(prefix .. ": layers must be a non-empty list of {W =, R =, B =}")
    end
    positive_integer(opts.batch, "batch", prefix)
    positive_integer(opts.steps, "steps", prefix)
    local math_mode, why = spk.lstm.check_math(opts.math, backend)
    if not math_mode then error(prefix .. ": " .. why) end
    local dims = spk.lstm.validate(opts.layers)
    return { backend = backend, layers = opts.layers, batch = opts.batch, steps = opts.steps, input = dims.input,
             hidden = dims.hidden, math = math_mode }
  end

  -- A timeline selection of a plan with a timeline build (fields.timeline =
  -- {stages =, waits_for =, blocks =, warps =, group =}, from its C plan):
  -- the C form and the selection as recorded; left out, the first 64 steps
  -- and the blocks of the first group (a cluster, a tile).
  local function no_timeline(self)
    return ("the %s plan has no timeline build (backends %s have one, and a kernel stack whose "
      .. "spec names its timeline stages)"):format(self.backend, and_list(timelined))
  end
  local function timeline_selection(self, t)
    local about = self.timeline
    return analysis.selection(t, { step_range = { 1, math.min(self.steps, 64) },
                                   blocks = { 0, math.min(about.group, about.blocks) - 1 } })
  end

  -- The part of a GPU plan held by a C userdata (fields.handle, from
  -- core.*_stack_new): its forward (with a timeline: through the timeline
  -- build, info.timeline from what it recorded), time, close and __tostring.
  local userdata_plan = {
    forward = function(self, x, opts)
      if opts == nil then return self.handle:forward(x) end
      if rawget(opts, "timeline") == nil then
        local y, trace = self.handle:forward(x, opts)
        if trace == nil then return y end
        return y, { trace = trace } -- the handle's trace table is info.trace, as the cpu backend's
      end
      if rawget(opts, "trace") ~= nil then
        error("forward: trace and timeline are separate builds of the kernel; ask for one at a time")
      end
      local selection, given = timeline_selection(self, rawget(opts, "timeline"))
      if self.impl.prepare_timeline then self.impl.prepare_timeline(self) end
      local y, stamps, columns, clock, build = self.handle:forward(x, { timeline = selection })
      local about = self.timeline
      local tl = analysis.make(stamps, columns, clock, { stages = about.stages, waits_for = about.waits_for,
                                                         kernel = ("%s: %s"):format(self.backend, self.variant) },
                               given)
      tl.build = build
      return y, { timeline = tl }
    end,
    samples = function(self, x, rounds, warmup, selection)
      if selection and self.impl.prepare_timeline then self.impl.prepare_timeline(self) end
      return self.handle:time(x, rounds, warmup, selection)
    end,
    close = function(self) self.handle:close() end,
    name = function(self) return tostring(self.handle) end,
  }

  -- A plan from its fields (spk.lstm.plan_options' and the backend's own:
  -- variant, kernel, schedule, ...) and `impl`, the backend's part:
  --   impl.forward(plan, x, opts) -> y [, info]
  --   impl.samples(plan, x, rounds, warmup[, selection]) -> {ms, ...}
  --                               (selection: a timeline's C form, plans with fields.timeline)
  --   impl.close(plan)            (optional)
  --   impl.name(plan) -> string   (__tostring of the open plan)
  --   impl.forward_options        (optional) the set of keys forward's
  --                               options table may hold; without it
  --                               forward takes no options
  --   impl.prepare_timeline(plan) (optional, with fields.handle) run before
  --                               the handle's timeline forward or timing
  --                               (a kernel of one's own compiles its
  --                               timeline build there)
  -- With fields.handle, a C plan userdata (core.*_stack_new), the functions
  -- impl leaves out (impl itself may be left out) are the handle's forward,
  -- time, close and __tostring. The wrapper checks the plan is open, x is a
  -- tensor, and forward's and time's options; with fields.timeline both take
  -- a timeline too (forward's through impl.forward, time's as samples'
  -- selection).
  function spk.lstm.new_plan(fields, impl)
    if type(fields) ~= "table" then error("spk.lstm.new_plan: fields must be a table") end
    if impl ~= nil and type(impl) ~= "table" then error("spk.lstm.new_plan: impl must be a table") end
    if fields.handle ~= nil then
      local merged = {}
      for key, value in pairs(userdata_plan) do merged[key] = value end
      for key, value in pairs(impl or {}) do merged[key] = value end
      impl = merged
    end
    for _, key in ipairs { "forward", "samples", "name" } do
      if type(impl) ~= "table" or type(impl[key]) ~= "function" then
        error(("spk.lstm.new_plan: impl.%s must be a function (or fields.handle a C plan)"):format(key))
      end
    end
    fields.impl = impl
    return setmetatable(fields, Plan)
  end

  local function check_open(self, what)
    if self.closed then error(("%s: the lstm stack plan (%s) is closed"):format(what, self.backend)) end
  end

  function Plan:forward(x, opts)
    check_open(self, "forward")
    if not spk.is_tensor(x) then error("forward: x must be a tensor") end
    if opts ~= nil then
      if type(opts) ~= "table" then error("forward: options must be a table") end
      if rawget(opts, "timeline") ~= nil and not self.timeline then error("forward: " .. no_timeline(self)) end
      local known = {}
      for key in pairs(self.impl.forward_options or {}) do known[key] = true end
      if self.timeline then known.timeline = true end
      if next(known) == nil then
        error(("forward: the %s plan takes no options (a trace needs backend %s, a timeline %s)"):format(
          self.backend, quoted_or(traced), quoted_or(timelined)))
      end
      options.check_keys(opts, known, "forward")
    end
    return self.impl.forward(self, x, opts)
  end

  local time_options = { rounds = true, warmup = true, x = true, timeline = true }

  local function count(opts, key, default, least)
    local v = opts[key]
    if v == nil then return default end
    if math.type(v) ~= "integer" or v < least then
      error(("time: %s must be an integer >= %d, got %s"):format(key, least, tostring(v)))
    end
    return v
  end

  function Plan:time(opts)
    check_open(self, "time")
    opts = opts or {}
    if type(opts) ~= "table" then error("time: expects an options table {rounds =, warmup =, x =, timeline =}") end
    options.check_keys(opts, time_options, "time")
    local rounds, warmup = count(opts, "rounds", 7, 1), count(opts, "warmup", 2, 0)
    local selection
    if opts.timeline ~= nil then
      if not self.timeline then error("time: " .. no_timeline(self)) end
      selection = timeline_selection(self, opts.timeline)
    end
    local x = opts.x or spk.zeros({ self.batch, self.steps, self.input }, "f32")
    if not spk.is_tensor(x) then error("time: x must be a tensor") end
    return require("spk.bench").summarize(self.impl.samples(self, x, rounds, warmup, selection))
  end

  local function close(self)
    -- also __close, which spk.errors leaves unguarded: the level is the caller's
    if getmetatable(self) ~= Plan then error("close: expects an lstm stack plan, got a " .. type(self), 2) end
    if not self.closed and self.impl.close then self.impl.close(self) end
    self.closed = true
  end
  Plan.close = close
  Plan.__close = close -- Lua passes __close the error too

  function Plan:is_closed()
    return self.closed == true
  end

  function Plan:__tostring()
    if self.closed then return ("lstm stack %s (closed)"):format(self.backend) end
    return self.impl.name(self)
  end

  -- An argument a function does not take is an error that names it.
  spk.lstm.check_math = options.takes(2, "spk.lstm.check_math", spk.lstm.check_math)
  spk.lstm.math_suffix = options.takes(1, "spk.lstm.math_suffix", spk.lstm.math_suffix)
  spk.lstm.stack = options.takes(1, "spk.lstm.stack", spk.lstm.stack)
  spk.lstm.kernel_options = options.takes(1, "spk.lstm.kernel_options", spk.lstm.kernel_options)
  spk.lstm.kernel_variant = options.takes(1, "spk.lstm.kernel_variant", spk.lstm.kernel_variant)
  spk.lstm.plan_options = options.takes(3, "spk.lstm.plan_options", spk.lstm.plan_options)
  spk.lstm.new_plan = options.takes(2, "spk.lstm.new_plan", spk.lstm.new_plan)
  for name, max in pairs { forward = 3, time = 2, close = 1, is_closed = 1 } do
    Plan[name] = options.takes(max, name, Plan[name])
  end

  local doc = require "spk.doc"
  local helps = {}
  for _, name in ipairs(family_names) do helps[#helps + 1] = ('help "%s"'):format(name) end
  for _, name in ipairs { "cudnn", "cpu", "auto" } do helps[#helps + 1] = ('help "%s"'):format(name) end
  local help_list = table.concat(helps, ", ")
  doc(spk.lstm.stack, [[
spk.lstm.stack{layers =, batch =, steps =, backend = "auto" | ]] .. table.concat(quoted_list(family_names), " | ")
  .. [[ | "cudnn" | "cpu", ...} -> plan
The stack as a plan on a registered backend (spk.lstm.backends); without backend, "auto": a GPU
kernel where there is a GPU, the C reference elsewhere, so one script runs on both. plan:forward(x),
plan:time{rounds =, warmup =, x =}, plan:close(); plan.variant says what runs. Each backend's
options: ]] .. help_list .. [[.]])
  local suffixes = {}
  for _, name in ipairs(spk.lstm.math_modes) do suffixes[#suffixes + 1] = ('"%s"'):format(spk.lstm.math_suffix(name)) end
  doc(spk.lstm.math_suffix, "spk.lstm.math_suffix(math) -> " .. table.concat(suffixes, " | ") .. [[

What a GPU plan's variant text adds for its input projections' math.]])
  doc(spk.lstm.check_math, [[
spk.lstm.check_math(value, backend) -> ]] .. table.concat(quoted, " | ") .. [[ | nil, message
The input projections' math a backend accepts (nil, the default: "]] .. spk.lstm.math_default .. [[").]])
  doc(spk.lstm.kernel_options, [[
spk.lstm.kernel_options(backend) -> {backend =, options = {{name =, takes =, default =, help =, ...}, ...}, rules =, text =}
The kernel options of backend ]] .. quoted_or(family_names) .. [[ as data, from the backend's option table in C
(the list spk help prints).]])
  doc(spk.lstm.kernel_variant, [[
spk.lstm.kernel_variant{backend =, batch = 1, hidden = 128, kernel = {...}} -> variant
The variant a plan of that batch compiles for the kernel table (every option left out at the batch's
default): its options, sizes and defines; no device needed.]])
  doc(spk.lstm.plan_options, [[
spk.lstm.plan_options(opts, backend, allowed) -> fields
The checks every backend's constructor makes first (option keys: layers, batch, steps, backend, math
and the set `allowed`; the layers' shapes); returns {backend, layers, batch, steps, input, hidden, math}.]])
  doc(spk.lstm.new_plan, [[
spk.lstm.new_plan(fields[, impl]) -> plan
A backend's plan from its fields and impl {forward =, samples =, name =, close =, forward_options =}
(what impl leaves out: fields.handle's, a C plan), with the shared checks, time, close and __tostring;
with fields.timeline, forward and time take a timeline.]])
  doc.type("lstm stack plan", Plan, [[
lstm stack plan: spk.lstm.stack's plan on every backend but cudnn; fields backend, variant, math, batch,
steps, input, hidden, and kernel, schedule and timeline (what its timeline build records) on the GPU kernels.]])
  doc(Plan.forward, [[
plan:forward(x[, {trace = {layer =, direction =, steps = {t, ...}}} | {timeline = {layer =, direction =,
  step_range = {first, last}, blocks =, warp =}}]) -> y[, info]
x f32 [batch, steps, in] on the host or the device; y [batch, steps, 2H] on x's side. With a trace
(backends ]] .. and_list(traced) .. [[), info.trace = {h, c = [#steps, B, H], ...} as spk.lstm.reference's.
With a timeline (backends ]] .. and_list(timelined) .. [[, a kernel stack with spec.timeline), the kernel's timeline build
stamps the stage boundaries of the selection (default: steps 1..64 of layer 1 forward, the first cluster
or tile, or plan.timeline.group's blocks) and info.timeline is
what it recorded (docs/timeline.md; spk.timeline, report.timeline, plot.timeline read it), the same
bits in y.]])
  doc(Plan.time, [[
plan:time{rounds = 7, warmup = 2, x = tensor, timeline = {...}} -> {median_ms, min_ms, max_ms, spread, samples}
ms per forward: CUDA-graph replays timed by events on the GPU, the wall clock on the cpu backend; with
a timeline (backends ]] .. and_list(timelined) .. [[, a kernel stack with spec.timeline), through the timeline build
recording that selection.]])
  doc(Plan.close, "plan:close()\nFrees the plan now; forward and time are errors afterwards (also <close>).")
  doc(Plan.is_closed, "plan:is_closed() -> boolean")
  doc.area { name = "stack", source = "spk.stack",
             summary = "spk.lstm.stack: the stack as a plan on a backend (auto, " .. table.concat(family_names, ", ")
               .. ", cudnn, cpu)",
             contents = { spk.lstm.stack, spk.lstm.backends, spk.lstm.kernel_options, spk.lstm.kernel_variant,
                          spk.lstm.check_math, spk.lstm.plan_options, spk.lstm.new_plan, "lstm stack plan" } }
end
