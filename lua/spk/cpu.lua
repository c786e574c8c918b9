-- The cpu backend of the LSTM stack: the f32 reference (src/lstm/reference.c),
-- so scripts run where there is no GPU.
--
--   spk.lstm.stack{layers = layers, batch = 4, steps = 589, backend = "cpu", threads = n, vector = "auto"}
--                        -- threads: SPK_THREADS, else the CPUs this process may use; vector: the
--                        -- widest unit of spk.lstm.cpu_info() (the bits are the same on every unit)
--   plan:forward(x[, {trace = {layer = k, direction = "forward" | "reverse", steps = {t, ...}}}])
--                        -- -> y[, info]: info.trace = {h, c = [#steps, B, H], layer, direction, steps}
--   plan:time{...}       -- the monotonic wall clock (spk.clock_ms) around whole forward calls
-- The rest as every plan (lua/spk/stack.lua).
return function(spk)
  local impl = { forward_options = { trace = true } }

  function impl.forward(self, x, opts)
    local trace = opts ~= nil and opts.trace or nil
    local s = x:shape()
    if x:dtype() ~= "f32" then error(("forward: x has dtype %s, expected f32"):format(x:dtype()), 3) end
    if #s ~= 3 or s[1] ~= self.batch or s[2] ~= self.steps or s[3] ~= self.input then
      error(("forward: x has shape [%s], expected [%d, %d, %d]"):format(table.concat(s, ", "), self.batch,
        self.steps, self.input), 3)
    end
    local ref = { precision = "f32", threads = self.threads, vector = self.vector, trace = trace }
    if trace == nil then return (spk.lstm.reference(self.layers, x, ref)) end
    return spk.lstm.reference(self.layers, x, ref)
  end

  function impl.samples(self, x, rounds, warmup)
    local samples = {}
    for round = 1, warmup + rounds do
      local start = spk.clock_ms()
      local y = impl.forward(self, x)
      local ms = spk.clock_ms() - start
      y:close()
      if round > warmup then samples[#samples + 1] = ms end
    end
    return samples
  end

  function impl.name(self)
    return ("lstm stack (cpu reference, %d layers, batch %d, steps %d)"):format(#self.layers, self.batch, self.steps)
  end

  local function cpu(opts)
    local self = spk.lstm.plan_options(opts, "cpu", { threads = true, vector = true })
    if opts.threads ~= nil and (math.type(opts.threads) ~= "integer" or opts.threads < 1) then
      error(("spk.lstm.stack (cpu): threads must be a positive integer, got %s"):format(tostring(opts.threads)), 2)
    end
    if opts.vector ~= nil then
      local units = spk.lstm.cpu_info().vectors
      local known = opts.vector == "auto"
      for _, u in ipairs(units) do known = known or opts.vector == u end
      if not known then
        error(("spk.lstm.stack (cpu): vector must be \"auto\" or a unit this CPU has (%s), got %s"):format(
          table.concat(units, ", "), type(opts.vector) == "string" and ("'" .. opts.vector .. "'")
          or tostring(opts.vector)), 2)
      end
    end
    self.threads, self.vector = opts.threads, opts.vector
    self.variant = "f32 reference" .. (opts.threads and (", %d threads"):format(opts.threads) or "")
      .. (opts.vector and opts.vector ~= "auto" and ", " .. opts.vector or "")
    return spk.lstm.new_plan(self, impl)
  end

  -- A tuning record chooses no option of this backend.
  local options = require "spk.options"
  spk.lstm.tunables.cpu = options.takes(2, "spk.lstm.tunables.cpu", function(o)
    return require("spk.tuning").check_option_keys(o, {}, "cpu")
  end)
  spk.lstm.backends.cpu = options.takes(1, "spk.lstm.backends.cpu", cpu)

  local doc = require "spk.doc"
  doc(spk.lstm.backends.cpu, [[
spk.lstm.backends.cpu{layers =, batch =, steps =, threads =, vector =} -> plan
The f32 C reference as a plan (spk.lstm.stack{backend = "cpu"}), for machines without a GPU; forward
takes a trace as spk.lstm.reference does. threads: SPK_THREADS, else the CPUs this process may use;
vector: "auto" (the widest unit spk.lstm.cpu_info() lists) or one of them, the same bits on each.]])
  doc.area { name = "cpu", source = "spk.cpu",
             summary = "the cpu backend: the f32 C reference as a plan, where there is no GPU",
             contents = { spk.lstm.backends.cpu } }
end
