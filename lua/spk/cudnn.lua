-- The cuDNN backend of the LSTM stack (src/lstm/cudnn_stack.h), as scripts see it:
--
--   local plan = spk.lstm.cudnn_stack{layers = layers, batch = 8, steps = 589,
--                                     algo = "persist_static_small_h",  -- | "standard" | "persist_static"
--                                                                       -- | "persist_dynamic"
--                                     layout = "batch_major",           -- | "seq_major"
--                                     math = "fp32",                    -- | "tf32"
--                                     stream = s}                       -- optional
--   plan:forward(x[, stream])        -- x host or device f32 [batch, steps, in]; y [batch, steps, 2H] on x's side
--   plan:forward_into(x, y[, stream])-- device x and y, enqueued only (what a CUDA graph captures)
--   plan.algo, .layout, .math, .batch, .steps, .layers, .hidden, .input, .device,
--   .weight_bytes, .workspace_bytes, .reserve_bytes
--   plan:time{rounds = 10, warmup = 3, iters = 1, graph = true, x = tensor, stream = s}
--                                    -- spk.bench over forward_into: {median_ms, min_ms, max_ms, spread, samples}
--   plan:close()                     -- also <close> and the garbage collector
--
--   spk.lstm.cudnn_algorithms{batch =, steps = 589, layers = stack | count (4), hidden = 128, input = 60,
--                             layout =, math =}
--                                    -- {{algo =, ok =, reason =}, ...}: which algorithms cuDNN accepts
--                                    -- for that shape on this device (each tried by building its plan)
--
-- When spk.lstm has a backend registry (spk.lstm.backends), the plan is also
-- registered there as "cudnn".
return function(spk, core)
  local cudnn = core.cudnn
  local methods = cudnn.methods
  spk.lstm = spk.lstm or {}

  local function bench_function()
    local b = spk.bench
    if b ~= nil then return b end
    return require("spk.bench").run
  end

  local time_options = { rounds = true, warmup = true, iters = true, graph = true, x = true, stream = true }

  -- Times forward_into on buffers made once (x: opts.x, copied to the device if on the host, else zeros).
  function methods:time(opts)
    if self:is_closed() then error("time: cudnn stack is closed", 2) end
    opts = opts or {}
    if type(opts) ~= "table" then error(("time: expects an options table, got %s"):format(type(opts)), 2) end
    for key in pairs(opts) do
      if not time_options[key] then error(("time: unknown option '%s'"):format(tostring(key)), 2) end
    end
    local x, y = self:device_buffers(opts.x, opts.stream)
    local plan = self
    return bench_function()(function(stream) plan:forward_into(x, y, stream) end,
      { rounds = opts.rounds, warmup = opts.warmup, iters = opts.iters, graph = opts.graph ~= false,
        stream = opts.stream })
  end

  -- spk.lstm.stack's option names are accepted, `backend` (which must say
  -- "cudnn") dropped, so a registry can hand its options over unchanged.
  function spk.lstm.cudnn_stack(opts)
    if type(opts) ~= "table" then
      error("spk.lstm.cudnn_stack: expects a table {layers =, batch =, steps =, algo =, layout =, math =}", 2)
    end
    local o = {}
    for key, value in pairs(opts) do
      if key == "backend" then
        if value ~= "cudnn" then
          error(("spk.lstm.cudnn_stack: backend must be \"cudnn\", got %s"):format(tostring(value)), 2)
        end
      else
        o[key] = value
      end
    end
    return cudnn.stack(o)
  end

  function spk.lstm.cudnn_algorithms(opts)
    if type(opts) ~= "table" then
      error("spk.lstm.cudnn_algorithms: expects a table {batch =, steps =, ...}", 2)
    end
    return cudnn.algorithms(opts)
  end

  spk.lstm.cudnn_algorithm_names = { "standard", "persist_static", "persist_static_small_h", "persist_dynamic" }

  -- What a tuning record may choose for this backend (spk.lstm.tunables, lua/spk/stack.lua).
  local layouts = { batch_major = true, seq_major = true }
  local algorithms = {}
  for _, name in ipairs(spk.lstm.cudnn_algorithm_names) do algorithms[name] = true end
  if type(spk.lstm.tunables) == "table" then
    spk.lstm.tunables.cudnn = require("spk.options").takes(2, "spk.lstm.tunables.cudnn", function(o)
      local ok, why = require("spk.tuning").check_option_keys(o, { algo = true, layout = true }, "cudnn")
      if not ok then return nil, why end
      if o.algo ~= nil and not algorithms[o.algo] then
        return nil, ("algo must be one of %s, got %s"):format(table.concat(spk.lstm.cudnn_algorithm_names, ", "),
          tostring(o.algo))
      end
      if o.layout ~= nil and not layouts[o.layout] then
        return nil, ("layout must be batch_major or seq_major, got %s"):format(tostring(o.layout))
      end
      return true
    end)
  end

  -- An argument a function does not take is an error that names it.
  local options = require "spk.options"
  spk.lstm.cudnn_stack = options.takes(1, "spk.lstm.cudnn_stack", spk.lstm.cudnn_stack)
  spk.lstm.cudnn_algorithms = options.takes(1, "spk.lstm.cudnn_algorithms", spk.lstm.cudnn_algorithms)
  methods.time = options.takes(2, "time", methods.time)

  if type(spk.lstm.backends) == "table" then
    spk.lstm.backends.cudnn = spk.lstm.cudnn_stack
  end

  local doc = require "spk.doc"
  doc(methods.time, [[
plan:time{rounds = 10, warmup = 3, iters = 1, graph = true, x = tensor, stream = s} -> {median_ms, ...}
spk.bench over forward_into on device buffers made once.]])
  local cudnn_maths = {} -- the maths of the one list cuDNN has (src/cuda/math_modes.h)
  for _, m in ipairs(core.blas.math_modes) do
    if m.cudnn then cudnn_maths[#cudnn_maths + 1] = ('"%s"'):format(m.name) end
  end
  doc(spk.lstm.cudnn_stack, [[
spk.lstm.cudnn_stack{layers =, batch =, steps =, algo = "persist_static_small_h" | "standard" | "persist_static"
                     | "persist_dynamic", layout = "batch_major" | "seq_major", math = ]]
    .. table.concat(cudnn_maths, " | ") .. [[, stream =} -> plan
cuDNN 9's LSTM over the stack, weights placed from the ONNX layout (spk.lstm.stack{backend = "cudnn"}).]])
  doc(spk.lstm.cudnn_algorithms, [[
spk.lstm.cudnn_algorithms{batch =, steps = 589, layers = stack | count (4), hidden = 128, input = 60, layout =, math =}
  -> {{algo =, ok =, reason =}, ...}
Which cuDNN algorithms this device accepts for the shape, each tried by building its plan.]])
  doc.area { name = "cudnn", source = "spk.cudnn", summary = "the cuDNN backend, the baseline of every comparison",
             contents = { spk.lstm.cudnn_stack, spk.lstm.cudnn_algorithms, spk.cudnn, "spk.cudnn.stack" } }
end
