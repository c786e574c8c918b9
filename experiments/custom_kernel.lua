-- custom_kernel: a recurrence kernel of one's own in the stack, checked and
-- timed beside the built-in kernels and cuDNN, in spk bench's table.
--
-- The kernel is a .cu file and a kernel file (a Lua file returning its spec:
-- entry, argument list, packing, launch rule; docs/kernels.md has the
-- contract), by default experiments/kernels/row_block.lua: one block per
-- batch row and direction, R read through L2. Copy both, change the kernel,
-- run this with --kernel your.lua. For each batch:
--   * the contract: NVRTC compiles the kernel (PTX and a cubin), its
--     parameters are checked against the argument list and its launches for
--     co-residency before anything runs, and every forward checks that the
--     kernel wrote every output (and no NaN from finite inputs);
--   * the f64 reference: relative L2 and max abs of the output, held to the
--     built-in kernels' bound (1.1x and 2x cuDNN standard FP32's);
--   * determinism: two forwards bitwise equal;
--   * a trace (when the kernel takes the trace arguments): h and c of layer 1
--     at its first and last steps against the reference's trace;
--   * timing: CUDA-graph replays beside --backends (default persistent,
--     cluster and every cuDNN algorithm), spk bench's table.
--
-- GPU: needed to run the kernel. Without one it compiles the kernel for
-- sm_90, checks the contract, writes check.json, says so and exits 3.
-- Run: build/spk run experiments/custom_kernel.lua [--quick] [--kernel FILE] [--batches 1,8,32]
--      [--backends persistent,cluster,cudnn] [--rounds 7] [--steps 589] [--out DIR]
-- Writes: custom_kernel.csv (spk bench's rows), checks.csv (determinism and trace per batch),
-- custom_kernel.json, custom_kernel.svg (ms per forward against batch, min-max of the
-- rounds as whiskers).
local spk = require "spk"
local experiment = require "spk.experiment"
local benchmark = require "spk.benchmark"
local plot = require "spk.plot"

local default_kernel = (spk.find_dir("experiments") or "experiments") .. "/kernels/row_block.lua"
local ex = experiment.start {
  name = "custom_kernel", gpu = "optional",
  no_gpu = "Without a GPU it compiles the kernel for sm_90, checks the contract, writes check.json, says so and exits 3.",
  about = "A recurrence kernel of one's own: contract, f64 check, determinism and time beside the built-ins and cuDNN.",
  batches = { 1, 8, 32, 64, 256 }, quick_batches = { 1, 8 },
  options = { { "kernel", default_kernel, help = "the kernel file (a Lua spec beside its .cu)" },
              { "backends", { "persistent", "cluster", "cudnn" }, help = "built-in backends timed beside it" },
              { "rounds", 7, quick = 3, help = "timed rounds per row" },
              { "steps", 589, help = "time steps" } },
}

local spec = spk.lstm.kernel_file(ex.opts.kernel)
local name = spec.name
local backends = { name }
for _, b in ipairs(ex.opts.backends) do backends[#backends + 1] = b end
ex:describe { seeds = { weights = 1, input = 1 }, dtype = "f32", math = { "fp32" }, kernel = ex.opts.kernel,
              shape = { layers = 4, input = 60, hidden = 128, steps = ex.opts.steps, batches = ex.batches },
              backends = backends, variants = { name } }
local work = { ("%s: compile for sm_90 and check the contract"):format(name) }
for _, batch in ipairs(ex.batches) do work[#work + 1] = ("batch %d: determinism and trace"):format(batch) end
for _, batch in ipairs(ex.batches) do
  work[#work + 1] = ("batch %d: spk bench rows of %s, %d rounds"):format(batch, table.concat(backends, ", "),
    ex.opts.rounds)
end
ex:plan(work)

ex:progress("%s: compiling %s and checking the contract ...", name, spec.file or "its source")
ex:step("compile and check the contract")
local check = spk.lstm.kernel_check(spec, { steps = ex.opts.steps })
local params = {}
for i, p in ipairs(check.params) do params[i] = ("%s %s"):format(check.args[i], p.type) end
print(("%s: %s compiled for %s (%d bytes); its %d parameters match the contract: %s"):format(name, check.entry,
  check.arch, check.cubin_bytes, #check.params, table.concat(params, ", ")))
print(("%s: %d launch%s a layer at batch 1, packing %s %s"):format(name, #check.launches,
  #check.launches == 1 and "" or "es", check.packing.order, check.packing.layout))
ex:json("check.json", check)
if not ex.gpu then
  ex:finish()
  io.stdout:flush()
  local code = require("spk.options").no_gpu("custom_kernel", ("running %s needs a CUDA GPU"):format(name))
  io.stderr:write(("(the kernel compiled for %s and keeps the contract: check.json)\n"):format(check.arch))
  os.exit(code)
end

spk.lstm.kernel_backend(name, spec)
local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local steps = ex.opts.steps

-- Determinism and the trace, per batch, on the same weights and input as the bench rows.
local checks = {}
for _, batch in ipairs(ex.batches) do
  ex:progress("batch %d: determinism and trace ...", batch)
  ex:step(("batch %d: determinism and trace"):format(batch))
  local row = { batch = batch }
  local ok, err = pcall(function()
    local x = spk.randn({ batch, steps, 60 }, { seed = 1 })
    local plan <close> = spk.lstm.stack { layers = layers, batch = batch, steps = steps, backend = name }
    local y1, y2 = plan:forward(x), plan:forward(x)
    local same = spk.compare(y1, y2)
    row.deterministic = same.max_ulp == 0 and same.nan_mismatch == 0
    if plan.kernel.traceable then
      local trace = { layer = 1, direction = "forward", steps = { 1, steps } }
      local _, info = plan:forward(x, { trace = trace })
      local _, ref = spk.lstm.reference(layers, x, { precision = "f64", trace = trace })
      row.trace_max_abs = spk.compare(info.trace.h:to("f64"), ref.trace.h).max_abs
      local d = spk.debug.first_divergence(info.trace, ref.trace, { tol = 1e-5 })
      row.trace = d and ("diverges: " .. tostring(d)) or "within 1e-5"
    else
      row.trace = "the kernel takes no trace arguments"
    end
  end)
  if not ok then row.error = experiment.reason(err) end
  checks[#checks + 1] = row
  collectgarbage()
end

local before = 1 + #ex.batches -- the work items done before the bench rows (one item a batch)
local rows, info = benchmark.run {
  batches = ex.batches, steps = steps, backends = backends, rounds = ex.opts.rounds, layers = layers,
  progress = function(m, step)
    ex:progress("%s", m)
    if step then ex:update(m, before + step.done * #ex.batches // math.max(step.total, 1)) end
  end,
}
io.write(benchmark.text(rows, info))
ex:table(checks, { "batch", { key = "deterministic", title = "bitwise across forwards" },
                   { key = "trace", title = "trace of layer 1 against f64" },
                   { key = "trace_max_abs", title = "trace max abs", format = require("spk.report").fmt_sci },
                   { key = "error", title = "error", empty = "" } },
  { title = ("%s: determinism and trace"):format(name) })

ex:csv("custom_kernel.csv", rows, { "batch", "steps", "backend", "variant", "median_ms", "min_ms", "max_ms", "spread",
                                    "speedup", "rel_l2", "max_abs", "bound", "bound_ok", "error" })
ex:csv("checks.csv", checks, { "batch", "deterministic", "trace", "trace_max_abs", "error" })
ex:json("custom_kernel.json", { kernel = check, rows = rows, checks = checks, settings = info,
                                environment = benchmark.environment() })
local series, by = {}, {}
for _, r in ipairs(rows) do
  if r.median_ms then
    local key = r.backend == "cudnn" and "cuDNN " .. tostring(r.variant) or r.backend
    if not by[key] then
      by[key] = { name = key, points = {}, dashed = r.backend == "cudnn" }
      series[#series + 1] = by[key]
    end
    table.insert(by[key].points, { r.batch, r.median_ms, r.min_ms, r.max_ms })
  end
end
if #series > 0 then
  ex:svg("custom_kernel.svg", plot.line { title = ("%s beside the built-in kernels and cuDNN"):format(name),
    x_label = "batch", y_label = "ms per forward", x_log = true, y_log = true, series = series,
    spread = ("min-max of %d rounds"):format(info.rounds) })
end
ex:finish()
local failed = 0
for _, r in ipairs(rows) do
  if r.backend == name and (r.error or r.bound_ok == false) then failed = failed + 1 end
end
for _, c in ipairs(checks) do
  if c.error or c.deterministic == false then failed = failed + 1 end
end
if failed > 0 then
  io.stderr:write(("custom_kernel: %s: %d check%s failed (see the tables)\n"):format(name, failed,
    failed == 1 and "" or "s"))
  os.exit(1)
end
