-- error_growth: how the error against the f64 reference grows over the
-- 2356 dependent steps of the default stack (4 layers x 589 steps), per
-- backend.
--
-- For each backend the stack's output of every layer is compared with the f64
-- reference's (spk.lstm.reference with layers_out). Global step k =
-- (layer - 1) * T + s walks the recurrence in processing order: at step s of a
-- layer the forward direction computes t = s and the reverse direction
-- t = T + 1 - s; the error at k is max |y - y64| over batch rows, units and
-- both directions there. Backends:
--   cpu         the f32 CPU reference: every layer (layers_out);
--   persistent, cudnn (GPU): a GPU plan returns only the last layer's output,
--               so their curves cover steps 1768..2356 (layer 4), unless the
--               plan's forward accepts {trace = ...} (then every layer and
--               direction is traced step by step);
--   --kernel FILE: a kernel of one's own (a kernel file, docs/kernels.md) as
--               one more backend, traced when it takes the trace arguments.
-- A step whose error is exactly 0 cannot sit on the log axis; it is left out
-- of the plot (the CSV keeps it) and counted in the output.
--
-- GPU: optional. Without one it runs the cpu backend only (exit 0).
-- Run: build/spk run experiments/error_growth.lua [--quick] [--batches 1] [--backends cpu,persistent,cudnn]
--      [--kernel experiments/kernels/row_block.lua]
-- Writes: error_growth.csv (backend, layer, step, t_forward, t_reverse, max_abs),
-- error_growth.json (per backend per layer maxima), error_growth.svg (log y).
local spk = require "spk"
local experiment = require "spk.experiment"
local plot = require "spk.plot"
local report = require "spk.report"

local ex = experiment.start {
  name = "error_growth", gpu = "optional",
  about = "Per-step error against the f64 reference over all layers x steps, per backend.",
  batches = { 4 }, quick_batches = { 1 },
  options = { { "backends", { "cpu", "persistent", "cudnn" }, help = "backends to compare" },
              { "kernel", "", help = "a kernel file (spk.lstm.kernel_file): its kernel as one more backend" },
              { "steps", 589, help = "time steps (589: a 10 s window)" } },
}
local batch, steps = ex.batches[1], ex.opts.steps
if ex.opts.kernel ~= "" then
  local spec = spk.lstm.kernel_file(ex.opts.kernel)
  spk.lstm.kernel_backend(spec.name, spec)
  table.insert(ex.opts.backends, spec.name)
end
local backends = {}
for _, name in ipairs(ex.opts.backends) do
  if name == "cpu" or ex.gpu then
    backends[#backends + 1] = name
  else
    ex:progress("no GPU: backend %s left out", name)
  end
end

ex:describe { seeds = { weights = 1, input = 1 }, dtype = "f32", math = { "fp32" }, backends = backends,
              shape = { layers = 4, input = 60, hidden = 128, steps = steps, batches = { batch } },
              variants = { "each backend's default" } }
local work = { ("f64 reference, every layer (batch %d, %d steps)"):format(batch, steps) }
for _, name in ipairs(backends) do work[#work + 1] = ("%s: forward, every layer it shows, error per step"):format(name) end
ex:plan(work)

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local x = spk.randn({ batch, steps, 60 }, { seed = 1 })
ex:progress("f64 reference, every layer (batch %d, %d steps) ...", batch, steps)
ex:step("f64 reference")
local _, ref = spk.lstm.reference(layers, x, { precision = "f64", layers_out = true })
local L, H = #layers, 128

-- Per-layer outputs of a backend: a list with nil where a layer is not seen.
local function outputs_of(name)
  if name == "cpu" then
    local _, info = spk.lstm.reference(layers, x, { precision = "f32", layers_out = true })
    return info.layers, "every layer (layers_out)"
  end
  local plan = spk.lstm.stack { layers = layers, batch = batch, steps = steps, backend = name }
  local out = {}
  -- With a tracing forward, rebuild every layer's output from its two traces.
  local all = {}
  for t = 1, steps do all[t] = t end
  local traced = pcall(function()
    for k = 1, L do
      local y = spk.zeros({ batch, steps, 2 * H }, "f32")
      for d, dir in ipairs { "forward", "reverse" } do
        local _, info = plan:forward(x, { trace = { layer = k, direction = dir, steps = all } })
        local h = info.trace.h:cpu() -- [T, B, H]
        for t = 1, steps do
          for b = 1, batch do
            local row = h:select(1, t):select(1, b)
            for u = 1, H do y:set(b, t, (d - 1) * H + u, row:get(u)) end
          end
        end
      end
      out[k] = y
    end
  end)
  if traced then
    plan:close()
    return out, "every layer (trace)"
  end
  out = {}
  local y = plan:forward(x)
  out[L] = y.device ~= "cpu" and y:cpu() or y
  plan:close()
  return out, "last layer only (no per-layer output from this backend)"
end

local rows, series, summary = {}, {}, {}
for _, name in ipairs(backends) do
  ex:progress("%s: forward ...", name)
  ex:step(name .. ": forward")
  local ok, outs, how = pcall(outputs_of, name)
  if not ok then
    ex:progress("%s failed: %s", name, experiment.reason(outs))
    summary[#summary + 1] = { backend = name, error = experiment.reason(outs) }
  else
    local points, zeros = {}, 0
    local per_layer = {}
    for k = 1, L do
      if outs[k] then
        local diff = (outs[k]:to("f64") - ref.layers[k]):abs()
        local worst = 0
        for s = 1, steps do
          local tf, tr = s, steps + 1 - s
          local ef = diff:select(2, tf):narrow(2, 1, H):max()
          local er = diff:select(2, tr):narrow(2, H + 1, H):max()
          local e = math.max(ef, er)
          if e ~= e or ef ~= ef or er ~= er then e = 0 / 0 end
          local step = (k - 1) * steps + s
          rows[#rows + 1] = { backend = name, layer = k, step = step, t_forward = tf, t_reverse = tr,
                              forward_max_abs = ef, reverse_max_abs = er, max_abs = e }
          if e > 0 then points[#points + 1] = { step, e } else zeros = zeros + 1 end
          if e > worst or e ~= e then worst = e end
        end
        per_layer[k] = worst
      end
    end
    ex:progress("%s: %s; %d steps with zero error left out of the plot", name, how, zeros)
    series[#series + 1] = { name = name, points = points }
    summary[#summary + 1] = { backend = name, seen = how, zero_steps = zeros, layer1 = per_layer[1],
                              layer2 = per_layer[2], layer3 = per_layer[3], layer4 = per_layer[4] }
  end
  collectgarbage()
end

ex:table(summary, { "backend", { key = "layer1", title = "max |err| layer 1", format = report.fmt_sci },
                    { key = "layer2", title = "layer 2", format = report.fmt_sci },
                    { key = "layer3", title = "layer 3", format = report.fmt_sci },
                    { key = "layer4", title = "layer 4", format = report.fmt_sci },
                    { key = "zero_steps", title = "zero steps" }, { key = "seen", title = "layers seen" },
                    { key = "error", title = "error" } },
  { title = ("Error against the f64 reference, batch %d, %d layers x %d steps"):format(batch, L, steps) })
ex:csv("error_growth.csv", rows, { "backend", "layer", "step", "t_forward", "t_reverse", "forward_max_abs",
                                  "reverse_max_abs", "max_abs" })
ex:json("error_growth.json", { batch = batch, steps = steps, layers = L, backends = summary })
local plotted = {}
for _, s in ipairs(series) do if #s.points > 0 then plotted[#plotted + 1] = s end end
if #plotted > 0 then
  ex:svg("error_growth.svg", plot.line {
    title = ("max |y - y64| per step (batch %d)"):format(batch),
    x_label = ("step of the recurrence (layer k: steps (k-1)*%d+1 .. k*%d)"):format(steps, steps),
    y_label = "max abs error",
    y_log = true, x_range = { 0, L * steps }, series = plotted, markers = false, width = 900 })
end
ex:finish()
