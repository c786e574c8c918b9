-- spk.lstm.stack: the LSTM stack as a plan, on one of the registered
-- backends (spk.lstm.backends): the persistent GPU kernel ("persistent",
-- src/lstm/persistent.c), cuDNN ("cudnn", lua/spk/cudnn.lua) or the CPU
-- reference ("cpu", so scripts run where there is no GPU).
--
--   local plan = spk.lstm.stack{layers = layers, batch = 4, steps = 589,
--                               backend = "persistent",
--                               kernel = {units = 4, threads = 128, tile_rows = 32, hidden = 128,
--                                         acq_rel = false, gather = 2, gate_block = 1, row_group = 1},
--                                                                        -- left out: the batch's default
--                                                                        -- (persistent.c's per-batch table)
--                               schedule = s,        -- optional, spk.schedule.new or by hand
--                               capacity = n,        -- optional: pretend the device holds n blocks
--                               timeout_ms = 10000,  -- a poll waiting longer fails the forward
--                               math = "fp32"}       -- | "tf32": the input projections x·Wᵀ on tensor
--                                                    -- cores (TF32 inputs, FP32 sums); R·h and the cell
--                                                    -- stay FP32 strict ("persistent", "cluster", "auto")
--   spk.lstm.stack{..., backend = "cudnn", algo =, layout =, math =}  -- see lua/spk/cudnn.lua
--   spk.lstm.stack{..., backend = "cpu", threads = n}                  -- f32 reference, n CPU threads
--   plan:forward(x)      -- x host or device f32 [batch, steps, in]; y [batch, steps, 2H] on x's side
--   plan:forward(x, {trace = {layer = k, direction = "forward" | "reverse", steps = {t, ...}}})
--                        -- -> y, info: info.trace = {h, c = [#steps, B, H], layer, direction, steps}
--                        -- as spk.lstm.reference's trace (persistent: the kernel's trace build; cpu: the reference)
--   plan.variant         -- what runs, in words ("units 8, 256 threads, tile 8 concurrent", "standard")
--   plan.math            -- "fp32" or "tf32" (the input projections' math)
--   plan.schedule        -- the tile schedule in use (persistent), with :launches()
--   plan.kernel          -- compiled variant: registers, spills, occupancy, capacity, defines, ...
--   plan:time{rounds = 7, warmup = 2, x = tensor}
--                        -- ms per forward, warm-up rounds discarded, with spk.bench's keys
--                        -- {median_ms, min_ms, max_ms, spread = (max - min) / median, samples}:
--                        -- CUDA graph replays timed by events on the GPU backends, the
--                        -- monotonic wall clock (spk.clock_ms) on the cpu backend
--   plan:close(), plan:is_closed() -- forward and time on a closed plan are errors
--
-- Backend registry. spk.lstm.backends maps a name to a constructor
-- function(opts) -> plan; spk.lstm.stack(opts) checks opts.backend (default
-- "auto": a GPU kernel where there is a GPU, the C reference elsewhere, so
-- one script runs on both) against it and returns backends[name](opts) —
-- opts unchanged, `backend` included, so a constructor checks its own options. An unknown name
-- is an error listing the registered ones. To add one (a new kernel, "auto"):
--
--   spk.lstm.backends.cluster = function(opts) ... return plan end
--
-- from the area file that installs it (lua/spk/<area>.lua, loaded after
-- "stack" in lua/spk/init.lua). The plan must offer :forward(x) as above,
-- :time{rounds =, warmup =, x =} with the keys above, :close(), and the
-- fields batch, steps, input, hidden and variant; spk bench
-- (lua/spk/benchmark.lua) then times and checks it with no further change.
return function(spk, core)
  local Stack = {}
  Stack.__index = Stack

  local known = { layers = true, batch = true, steps = true, backend = true, kernel = true,
                  schedule = true, capacity = true, timeout_ms = true, math = true }
  local known_cpu = { layers = true, batch = true, steps = true, backend = true, threads = true, math = true }
  -- the kernel table's options and the type of each (spk.tuning checks records with them)
  local known_kernel = { hidden = "integer", units = "integer", threads = "integer", tile_rows = "integer",
                         acq_rel = "boolean", gather = "integer", gate_block = "integer", row_group = "integer" }
  local options = require "spk.options"

  -- The input projections' math of the GPU stacks. check_math(value, backend)
  -- -> "fp32" | "tf32", or nil and the message (the caller adds its prefix and level).
  spk.lstm.math_modes = { "fp32", "tf32" }
  function spk.lstm.check_math(value, backend)
    if value == nil or value == "fp32" then return "fp32" end
    if value == "tf32" then
      if backend == "cpu" then
        return nil, "backend cpu has no math \"tf32\": the reference computes in f32 or f64 only "
          .. "(math = \"tf32\" needs backend persistent, cluster, auto or cudnn)"
      end
      return "tf32"
    end
    return nil, ("math must be \"fp32\" or \"tf32\", got %s"):format(
      type(value) == "string" and ("\"" .. value .. "\"") or tostring(value))
  end

  local function positive_integer(value, name, level)
    if math.type(value) ~= "integer" or value < 1 then
      error(("spk.lstm.stack: %s must be a positive integer, got %s"):format(name, tostring(value)), level)
    end
  end

  local function summarize(samples)
    return require("spk.bench").summarize(samples)
  end

  local backends = {}
  spk.lstm.backends = backends

  -- The persistent kernel variant a kernel table asks for (fitted, checked,
  -- with its defines), at a batch's default where fields are left out; no
  -- device needed.
  function spk.lstm.persistent_variant(kernel, batch)
    options.check_keys(kernel, known_kernel, "spk.lstm.persistent_variant: kernel")
    return core.stack_variant_check(kernel or {}, batch)
  end

  -- What a tuning record may choose for each backend (lua/spk/tuning.lua
  -- checks records with it): tunables[name](options, shape) -> true, or nil
  -- and why, for the options a record's winner carries for that backend, at
  -- shape {hidden, input, layers, batch, steps}, checked without a device by
  -- the backend's own option checks. A backend without an entry is never a
  -- record's choice; the keys a record may give are the tunable ones only,
  -- so it never sets layers, batch, steps or math.
  local tunables = {}
  spk.lstm.tunables = tunables

  function tunables.persistent(o, shape)
    local tuning = require "spk.tuning"
    local ok, why = tuning.check_option_keys(o, { kernel = true }, "persistent")
    if ok then ok, why = tuning.check_kernel(o.kernel, known_kernel, "kernel") end
    if not ok then return nil, why end
    local kernel = {}
    for k, v in pairs(o.kernel or {}) do kernel[k] = v end
    kernel.hidden = kernel.hidden or shape.hidden
    local fits, err = pcall(core.stack_variant_check, kernel, shape.batch)
    if not fits then return nil, tostring(err) end
    return true
  end

  function tunables.cpu(o)
    return require("spk.tuning").check_option_keys(o, {}, "cpu")
  end

  local function registered()
    local names = {}
    for name in pairs(backends) do names[#names + 1] = name end
    table.sort(names)
    return table.concat(names, ", ")
  end

  function spk.lstm.stack(opts)
    if type(opts) ~= "table" then
      error("spk.lstm.stack: expects a table {layers =, batch =, steps =, backend =, ...}", 2)
    end
    local name = opts.backend or "auto"
    local make = type(name) == "string" and backends[name] or nil
    if type(make) ~= "function" then
      error(("spk.lstm.stack: unknown backend %s (registered: %s)"):format(
        type(name) == "string" and ("'" .. name .. "'") or tostring(name), registered()), 2)
    end
    return make(opts)
  end

  -- Checks shared by the cpu and persistent constructors. spk.lstm.stack
  -- tail-calls the constructor, so level 3 here is the script's call.
  local function common(opts, allowed, backend)
    for key in pairs(opts) do
      if not allowed[key] then
        error(("spk.lstm.stack: unknown option '%s' for backend %s"):format(tostring(key), backend), 3)
      end
    end
    if type(opts.layers) ~= "table" or #opts.layers == 0 then
      error("spk.lstm.stack: layers must be a non-empty list of {W =, R =, B =}", 3)
    end
    positive_integer(opts.batch, "batch", 4)
    positive_integer(opts.steps, "steps", 4)
    local math_mode, why = spk.lstm.check_math(opts.math, backend)
    if not math_mode then error("spk.lstm.stack: " .. why, 3) end
    local dims = spk.lstm.validate(opts.layers)
    return setmetatable({ backend = backend, layers = opts.layers, batch = opts.batch,
                          steps = opts.steps, input = dims.input, hidden = dims.hidden, math = math_mode }, Stack)
  end

  function backends.cpu(opts)
    local self = common(opts, known_cpu, "cpu")
    if opts.threads ~= nil then positive_integer(opts.threads, "threads", 3) end
    self.threads = opts.threads
    self.variant = "f32 reference" .. (opts.threads and (", %d threads"):format(opts.threads) or "")
    return self
  end

  function backends.persistent(opts)
    local self = common(opts, known, "persistent")
    if opts.schedule ~= nil then
      spk.schedule.check(opts.schedule, opts.batch)
    end
    local kernel = opts.kernel or {}
    if type(kernel) ~= "table" then error("spk.lstm.stack: kernel must be a table", 2) end
    options.check_keys(kernel, known_kernel, "spk.lstm.stack: kernel", 2)
    -- hidden defaults to the layers' own; the C side refuses a mismatch
    kernel = { hidden = kernel.hidden or self.hidden, units = kernel.units, threads = kernel.threads,
               tile_rows = kernel.tile_rows, acq_rel = kernel.acq_rel, gather = kernel.gather,
               gate_block = kernel.gate_block, row_group = kernel.row_group }
    self.plan = core.stack_new { layers = opts.layers, batch = opts.batch, steps = opts.steps,
                                 kernel = kernel, schedule = opts.schedule, capacity = opts.capacity,
                                 timeout_ms = opts.timeout_ms, math = self.math }
    local info = self.plan:info()
    self.kernel = info.kernel
    self.schedule = info.schedule
    local launches = info.schedule.launches
    function self.schedule.launches()
      local out = {}
      for i, l in ipairs(launches) do out[i] = { first = l[1], count = l[2] } end
      return out
    end
    local layout = ""
    if (self.kernel.gate_block or 1) ~= 1 or (self.kernel.row_group or 1) ~= 1 then
      layout = (", gate block %d, row group %d"):format(self.kernel.gate_block, self.kernel.row_group)
    end
    self.variant = ("units %d, %d threads%s, tile %d %s%s"):format(self.kernel.units, self.kernel.threads, layout,
      self.schedule.tile_rows, self.schedule.concurrent and "concurrent" or "sequential",
      self.math == "tf32" and ", tf32 projections" or "")
    return self
  end

  local function check_x(self, x)
    if not spk.is_tensor(x) then error("forward: x must be a tensor", 3) end
    if x:dtype() ~= "f32" then error(("forward: x has dtype %s, expected f32"):format(x:dtype()), 3) end
    local s = x:shape()
    if #s ~= 3 or s[1] ~= self.batch or s[2] ~= self.steps or s[3] ~= self.input then
      error(("forward: x has shape [%s], expected [%d, %d, %d]"):format(table.concat(s, ", "), self.batch,
        self.steps, self.input), 3)
    end
  end

  local function check_open(self, what)
    if self.closed then error(("%s: the lstm stack plan is closed"):format(what), 3) end
  end

  function Stack:forward(x, opts)
    check_open(self, "forward")
    options.check_keys(opts, { trace = true }, "forward")
    local trace = opts ~= nil and opts.trace or nil
    if self.backend == "cpu" then
      check_x(self, x)
      if trace == nil then
        return (spk.lstm.reference(self.layers, x, { precision = "f32", threads = self.threads }))
      end
      return spk.lstm.reference(self.layers, x, { precision = "f32", threads = self.threads, trace = trace })
    end
    if opts == nil then return self.plan:forward(x) end
    return self.plan:forward(x, opts)
  end

  local time_options = { rounds = true, warmup = true, x = true }

  local function count(opts, key, default, least)
    local v = opts[key]
    if v == nil then return default end
    if math.type(v) ~= "integer" or v < least then
      error(("time: %s must be an integer >= %d, got %s"):format(key, least, tostring(v)), 3)
    end
    return v
  end

  function Stack:time(opts)
    check_open(self, "time")
    opts = opts or {}
    for key in pairs(opts) do
      if not time_options[key] then error(("time: unknown option '%s'"):format(tostring(key)), 2) end
    end
    local rounds, warmup = count(opts, "rounds", 7, 1), count(opts, "warmup", 2, 0)
    local x = opts.x or spk.zeros({ self.batch, self.steps, self.input }, "f32")
    if self.backend ~= "cpu" then
      return summarize(self.plan:time(x, rounds, warmup))
    end
    -- The CPU reference: wall-clock time of whole forward calls.
    check_x(self, x)
    local samples = {}
    for round = 1, warmup + rounds do
      local start = spk.clock_ms()
      local y = spk.lstm.reference(self.layers, x, { precision = "f32", threads = self.threads })
      local ms = spk.clock_ms() - start
      y:close()
      if round > warmup then samples[#samples + 1] = ms end
    end
    return summarize(samples)
  end

  function Stack:close()
    if self.plan then self.plan:close() end
    self.closed = true
  end

  function Stack:is_closed()
    return self.closed == true
  end

  -- An argument a function does not take is an error that names it.
  spk.lstm.check_math = options.takes(2, "spk.lstm.check_math", spk.lstm.check_math)
  spk.lstm.persistent_variant = options.takes(2, "spk.lstm.persistent_variant", spk.lstm.persistent_variant)
  spk.lstm.stack = options.takes(1, "spk.lstm.stack", spk.lstm.stack)
  backends.cpu = options.takes(1, "spk.lstm.backends.cpu", backends.cpu)
  backends.persistent = options.takes(1, "spk.lstm.backends.persistent", backends.persistent)
  for name, max in pairs { forward = 3, time = 2, close = 1, is_closed = 1 } do
    Stack[name] = options.takes(max, name, Stack[name])
  end
  tunables.persistent = options.takes(2, "spk.lstm.tunables.persistent", tunables.persistent)
  tunables.cpu = options.takes(2, "spk.lstm.tunables.cpu", tunables.cpu)

  function Stack:__tostring()
    if self.closed then return "lstm stack (closed)" end
    if self.plan then return tostring(self.plan) end
    return ("lstm stack (cpu reference, %d layers, batch %d, steps %d)"):format(#self.layers, self.batch,
      self.steps)
  end

  local doc = require "spk.doc"
  doc(spk.lstm.stack, [[
spk.lstm.stack{layers =, batch =, steps =, backend = "auto" | "persistent" | "cluster" | "cudnn" | "cpu", ...} -> plan
The stack as a plan on a registered backend (spk.lstm.backends); without backend, "auto": a GPU
kernel where there is a GPU, the C reference elsewhere, so one script runs on both. plan:forward(x),
plan:time{rounds =, warmup =, x =}, plan:close(); plan.variant says what runs. Each backend's
options: help "stack", help "cluster", help "cudnn", help "auto".]])
  doc(spk.lstm.check_math, [[
spk.lstm.check_math(value, backend) -> "fp32" | "tf32" | nil, message
The input projections' math a backend accepts (nil, the default: "fp32").]])
  doc(spk.lstm.persistent_variant, [=[
spk.lstm.persistent_variant([kernel[, batch]]) -> variant
The persistent kernel variant a kernel table asks for (fitted, checked, with its defines), at the
batch's default where fields are left out; no device needed.]=])
  doc(backends.cpu, [[
spk.lstm.backends.cpu{layers =, batch =, steps =, threads =} -> plan
The f32 C reference as a plan (spk.lstm.stack{backend = "cpu"}), for machines without a GPU.]])
  doc(backends.persistent, [[
spk.lstm.backends.persistent{layers =, batch =, steps =, kernel =, schedule =, capacity =, timeout_ms =, math =} -> plan
The persistent cooperative kernel (spk.lstm.stack{backend = "persistent"}); options in help "stack".]])
  doc.type("lstm stack plan", Stack, [[
lstm stack plan: spk.lstm.stack{backend = "persistent" | "cpu"}'s plan; fields backend, variant, math,
batch, steps, input, hidden, kernel and schedule (persistent).]])
  doc(Stack.forward, [[
plan:forward(x[, {trace = {layer =, direction =, steps =}}]) -> y[, info]
x f32 [batch, steps, in] on the host or the device; y [batch, steps, 2H] on x's side. With a trace,
info.trace = {h, c = [#steps, B, H], ...} as spk.lstm.reference's.]])
  doc(Stack.time, [[
plan:time{rounds = 7, warmup = 2, x = tensor} -> {median_ms, min_ms, max_ms, spread, samples}
ms per forward: CUDA-graph replays timed by events on the GPU, the wall clock on the cpu backend.]])
  doc(Stack.close, "plan:close()\nFrees the plan now; forward and time are errors afterwards.")
  doc(Stack.is_closed, "plan:is_closed() -> boolean")
  doc.area { name = "stack", source = "spk.stack",
             summary = "spk.lstm.stack: the stack as a plan on a backend (auto, persistent, cluster, cudnn, cpu)",
             contents = { spk.lstm.stack, spk.lstm.backends, spk.lstm.persistent_variant, spk.lstm.check_math,
                          "lstm stack plan" } }
end
