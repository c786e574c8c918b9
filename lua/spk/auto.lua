-- Backend "auto" of the LSTM stack: the fastest correct variant for this
-- device and shape, from the tuning record `spk tune` wrote (lua/spk/tuning.lua),
-- else a documented default (docs/tuning.md).
--
--   local plan = spk.lstm.stack{backend = "auto", layers = layers, batch = 8, steps = 589,
--                               tune_dir = dir,   -- optional: the record folder (default tuning.dir())
--                               math = nil}       -- nil: FP32's accuracy, in the math the record measured
--                                                 -- faster at this batch ("fp32" or "3xtf32": split-TF32
--                                                 -- projections, held to FP32's bounds); "fp32", "tf32" or
--                                                 -- "3xtf32": handed to the chosen backend as it is; auto
--                                                 -- never picks tf32 on its own
--   plan.auto = {backend = "cluster", options = {kernel = {...}}, math = nil | "3xtf32",
--                source = "record" | "default",
--                record = path | nil, tuned_batch = 8 | nil, reason = "..."}
--   -- the rest of plan is the chosen backend's plan (forward, time, close, variant, ...)
--
--   spk.lstm.auto_choice{layers =, batch =, steps =[, tune_dir =]} -> the same table as
--     plan.auto, building nothing (what "auto" would build)
--
-- Record lookup: same hidden, input, layers and steps class (the smallest power
-- of two >= steps), then the nearest tuned batch >= the requested one, else the
-- largest tuned batch. Where the chosen plan cannot be built (a shape the
-- kernel does not fit, ...), the next backend of tuning.fallbacks is tried and
-- reason says why.
return function(spk, core)
  local tuning = require "spk.tuning"
  local known = { layers = true, batch = true, steps = true, backend = true, tune_dir = true, math = true }

  local function fail(message) error("spk.lstm.stack (auto): " .. message) end

  local function shape_of(opts)
    if type(opts) ~= "table" then fail("expects a table {layers =, batch =, steps =}") end
    for key in pairs(opts) do
      if not known[key] then
        -- without `backend` the stack is "auto", which picks each backend's options itself
        fail(("unknown option '%s'%s"):format(tostring(key), opts.backend == nil
          and " (backend options need their backend: give backend = \"persistent\", \"cluster\", ...)" or ""))
      end
    end
    if opts.backend ~= nil and opts.backend ~= "auto" then
      fail(("backend must be \"auto\", got %s"):format(tostring(opts.backend)))
    end
    if opts.tune_dir ~= nil and type(opts.tune_dir) ~= "string" then
      fail("tune_dir must be a string")
    end
    local math_ok, why = spk.lstm.check_math(opts.math, "auto")
    if not math_ok then fail(why) end
    if type(opts.layers) ~= "table" or #opts.layers == 0 then
      fail("layers must be a non-empty list of {W =, R =, B =}")
    end
    for _, key in ipairs { "batch", "steps" } do
      if math.type(opts[key]) ~= "integer" or opts[key] < 1 then
        fail(("%s must be a positive integer, got %s"):format(key, tostring(opts[key])))
      end
    end
    local dims = spk.lstm.validate(opts.layers)
    return { hidden = dims.hidden, input = dims.input, layers = #opts.layers, batch = opts.batch,
             steps = opts.steps }
  end

  -- false (not nil) tells tuning.choose there is no device; why says what the runtime reported.
  local function facts()
    local f, why = tuning.facts()
    return f or false, why
  end

  function spk.lstm.auto_choice(opts)
    local shape = shape_of(opts)
    local f, why = facts()
    return tuning.choose(shape, { facts = f, why = why, dir = opts.tune_dir })
  end

  -- A cuDNN plan is userdata: a table in front of it carries `auto`.
  local function with_auto(plan, auto)
    if type(plan) == "table" then
      plan.auto = auto
      return plan
    end
    local proxy = { auto = auto }
    return setmetatable(proxy, {
      __index = function(_, key)
        local v = plan[key]
        if type(v) ~= "function" then return v end
        return function(self, ...)
          if self == proxy then return v(plan, ...) end
          return v(self, ...)
        end
      end,
      __tostring = function() return tostring(plan) end,
      __close = function() plan:close() end,
    })
  end

  -- What the script gave wins over a record's options (which tuning.choose
  -- has checked against spk.lstm.tunables, so they hold no such key anyway):
  -- layers, batch, steps and the math. Where the script gave no math, the
  -- record's FP32-accuracy math (nil: each backend's FP32 default).
  local function build(name, options, opts, record_math)
    local o = {}
    for k, v in pairs(options or {}) do o[k] = v end
    o.layers, o.batch, o.steps, o.backend = opts.layers, opts.batch, opts.steps, name
    if opts.math ~= nil then o.math = opts.math else o.math = record_math end
    return spk.lstm.backends[name](o)
  end

  local function auto(opts)
    local shape = shape_of(opts)
    local f, why = facts()
    local choice = tuning.choose(shape, { facts = f, why = why, dir = opts.tune_dir })
    local ok, plan = pcall(build, choice.backend, choice.options, opts, choice.math)
    if ok then return with_auto(plan, choice) end
    -- The choice cannot be built for this shape: the defaults in order, each with the backend's own options.
    local failures = { ("%s: %s"):format(choice.backend, tostring(plan)) }
    for _, name in ipairs(tuning.fallbacks(f)) do
      if name ~= choice.backend or next(choice.options or {}) ~= nil then
        local options = {}
        local built, p = pcall(build, name, options, opts)
        if built then
          return with_auto(p, { backend = name, options = options, source = "default",
                                reason = ("fallback %s (its defaults): %s could not be built (%s)"):format(name,
                                  choice.backend, failures[1]) })
        end
        failures[#failures + 1] = ("%s: %s"):format(name, tostring(p))
      end
    end
    fail("no backend could be built: " .. table.concat(failures, "; "), 2)
  end

  -- An argument a function does not take is an error that names it.
  local options = require "spk.options"
  spk.lstm.backends.auto = options.takes(1, "spk.lstm.backends.auto", auto)
  spk.lstm.auto_choice = options.takes(1, "spk.lstm.auto_choice", spk.lstm.auto_choice)
  local doc = require "spk.doc"
  doc(spk.lstm.auto_choice, [[
spk.lstm.auto_choice{layers =, batch =, steps =[, tune_dir =]} -> {backend, options, math, source, record, tuned_batch,
                                                                  reason}
What backend "auto" would build for this shape on this machine (from the tuning record, else the
documented default), building nothing.]])
  doc(spk.lstm.backends.auto, [[
spk.lstm.backends.auto{layers =, batch =, steps =, tune_dir =, math =} -> plan
Backend "auto" (spk.lstm.stack's default): the tuning record's or the default choice for this device
and shape, the next fallback where it cannot be built; plan.auto says what was chosen and why. With no
math given, the record's FP32-accuracy math for the batch ("fp32" or "3xtf32", the faster measured).]])
  doc.area { name = "auto", source = "spk.auto",
             summary = "backend \"auto\" (the default): the fastest correct backend for this machine and shape",
             contents = { spk.lstm.auto_choice, spk.lstm.backends.auto } }
end
