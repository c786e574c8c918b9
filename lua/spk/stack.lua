-- spk.lstm.stack: the LSTM stack as a plan, on the persistent GPU kernel
-- (backend "persistent", src/lstm/persistent.c) or on the CPU reference
-- (backend "cpu", so scripts run where there is no GPU).
--
--   local plan = spk.lstm.stack{layers = layers, batch = 4, steps = 589,
--                               backend = "persistent",
--                               kernel = {units = 4, threads = 128, tile_rows = 32, hidden = 128,
--                                         acq_rel = false},
--                               schedule = s,        -- optional, spk.schedule.new or by hand
--                               capacity = n,        -- optional: pretend the device holds n blocks
--                               timeout_ms = 10000}  -- a poll waiting longer fails the forward
--   plan:forward(x)      -- x host or device f32 [batch, steps, in]; result on x's device
--   plan.schedule        -- the tile schedule in use (persistent), with :launches()
--   plan.kernel          -- compiled variant: registers, spills, occupancy, capacity, defines, ...
--   plan:time{rounds = 7, warmup = 2, x = tensor} -- ms per forward over CUDA graph replays:
--                        -- {median =, min =, max =, spread =, samples = {...}}
--   plan:close()
return function(spk, core)
  local Stack = {}
  Stack.__index = Stack

  local known = { layers = true, batch = true, steps = true, backend = true, kernel = true,
                  schedule = true, capacity = true, timeout_ms = true }

  local function positive_integer(value, name)
    if math.type(value) ~= "integer" or value < 1 then
      error(("spk.lstm.stack: %s must be a positive integer, got %s"):format(name, tostring(value)), 3)
    end
  end

  local function stats(samples)
    local sorted = {}
    for i, v in ipairs(samples) do sorted[i] = v end
    table.sort(sorted)
    local n = #sorted
    local median = n % 2 == 1 and sorted[(n + 1) // 2] or (sorted[n // 2] + sorted[n // 2 + 1]) / 2
    return { median = median, min = sorted[1], max = sorted[n], spread = sorted[n] - sorted[1],
             samples = samples }
  end

  function spk.lstm.stack(opts)
    if type(opts) ~= "table" then
      error("spk.lstm.stack: expects a table {layers =, batch =, steps =, ...}", 2)
    end
    for key in pairs(opts) do
      if not known[key] then error(("spk.lstm.stack: unknown option '%s'"):format(tostring(key)), 2) end
    end
    local backend = opts.backend or "persistent"
    if backend ~= "persistent" and backend ~= "cpu" then
      error(("spk.lstm.stack: backend must be \"persistent\" or \"cpu\", got %s"):format(tostring(backend)), 2)
    end
    if type(opts.layers) ~= "table" or #opts.layers == 0 then
      error("spk.lstm.stack: layers must be a non-empty list of {W =, R =, B =}", 2)
    end
    positive_integer(opts.batch, "batch")
    positive_integer(opts.steps, "steps")
    local dims = spk.lstm.validate(opts.layers)
    local self = setmetatable({ backend = backend, layers = opts.layers, batch = opts.batch,
                                steps = opts.steps, input = dims.input, hidden = dims.hidden }, Stack)
    if backend == "cpu" then
      return self
    end
    if opts.schedule ~= nil then
      spk.schedule.check(opts.schedule, opts.batch)
    end
    local kernel = opts.kernel or {}
    if type(kernel) ~= "table" then error("spk.lstm.stack: kernel must be a table", 2) end
    -- hidden defaults to the layers' own; the C side refuses a mismatch
    kernel = { hidden = kernel.hidden or dims.hidden, units = kernel.units, threads = kernel.threads,
               tile_rows = kernel.tile_rows, acq_rel = kernel.acq_rel }
    self.plan = core.stack_new { layers = opts.layers, batch = opts.batch, steps = opts.steps,
                                 kernel = kernel, schedule = opts.schedule, capacity = opts.capacity,
                                 timeout_ms = opts.timeout_ms }
    local info = self.plan:info()
    self.kernel = info.kernel
    self.schedule = info.schedule
    local launches = info.schedule.launches
    function self.schedule.launches()
      local out = {}
      for i, l in ipairs(launches) do out[i] = { first = l[1], count = l[2] } end
      return out
    end
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

  function Stack:forward(x)
    if self.backend == "cpu" then
      check_x(self, x)
      return (spk.lstm.reference(self.layers, x, { precision = "f32" }))
    end
    return self.plan:forward(x)
  end

  function Stack:time(opts)
    opts = opts or {}
    if self.backend == "cpu" then error("time: the cpu backend is not timed", 2) end
    local x = opts.x or spk.zeros({ self.batch, self.steps, self.input }, "f32")
    return stats(self.plan:time(x, opts.rounds or 7, opts.warmup or 2))
  end

  function Stack:close()
    if self.plan then self.plan:close() end
  end

  function Stack:__tostring()
    if self.plan then return tostring(self.plan) end
    return ("lstm stack (cpu reference, %d layers, batch %d, steps %d)"):format(#self.layers, self.batch,
      self.steps)
  end

  spk.lstm.stack_stats = stats
end
