-- spk.benchmark: every LSTM stack backend side by side, timed and checked in
-- one run. `spk bench` (lua/spk/cli/bench.lua) is a thin front end over it, so
-- a script gets the same rows:
--
--   local benchmark = require "spk.benchmark"
--   local rows, info = benchmark.run{batches = {1, 8, 32}, backends = {"persistent", "cudnn"}}
--
-- Method
-- ------
-- * Model and inputs. One stack of weights for the whole run (default
--   spk.lstm.random{layers = 4, input = 60, hidden = 128, seed = 1}: PyTorch's
--   default initialisation) and, at each batch size B, one input
--   x = spk.randn({B, steps, input}, {seed = seed}) (f32, standard normal).
--   Every backend and variant at that batch runs on these same weights and
--   this same x.
-- * Timing. Each backend builds a plan for the shape (weights placed, buffers
--   and workspace allocated once), and the plan's :time{rounds =, warmup =,
--   x = x} captures one forward pass (x already on the device) into a CUDA
--   graph and replays it: `warmup` replays are discarded (module loading,
--   allocator growth, clock ramp-up), then each of `rounds` replays is timed
--   with a pair of CUDA events recorded around it on the plan's stream, so the
--   figure is device time per forward pass with launch overhead hidden by the
--   graph. Reported: the median over the rounds (median_ms), min_ms, max_ms
--   and spread = (max - min) / median. The speed-up of a row is the median of
--   the fastest cuDNN algorithm at that batch in the row's math (FP32 rows:
--   the fastest cuDNN FP32 algorithm; TF32 rows: the fastest cuDNN TF32 one)
--   divided by the row's median (> 1: faster). The cpu backend (the f32 C
--   reference, for machines without a GPU) is timed on the monotonic wall
--   clock instead.
-- * Correctness. At each batch the f64 CPU reference (spk.lstm.reference,
--   precision f64, multithreaded, bitwise independent of the thread count) is
--   computed once from the same weights and x; each backend's output y
--   [B, steps, 2H] (an untimed forward of the same plan) is compared with it:
--   rel_l2 = ||y - ref||_2 / ||ref||_2 over all elements, max_abs =
--   max |y - ref|. Bounds: cuDNN (every FP32 algorithm) rel_l2 <= 1e-4; the
--   built-in kernels (every family) rel_l2 <= 1.1 x and max_abs <= 2 x those of cuDNN's
--   standard FP32 algorithm at the same batch (when that row exists); the cpu
--   f32 reference rel_l2 <= 1e-4. TF32 rows (maths = {..., "tf32"}): cuDNN's
--   TF32 algorithms rel_l2 <= tf32_bound (1e-2); the built-in
--   kernels with TF32 input projections 1.1 x / 2 x cuDNN standard TF32's
--   errors at the same batch, or rel_l2 <= tf32_bound where that row is
--   missing. 3xtf32 rows (split-TF32 projections, which claim FP32's
--   accuracy) are held to the FP32 rows' bounds and their speed-up is
--   against cuDNN's fastest FP32 algorithm (cuDNN has no such math). A row
--   beyond its bound has bound_ok = false and is flagged in the table.
-- * Failures. A backend or algorithm that fails (cuDNN refusing an algorithm
--   for a shape, too little device capacity, ...) becomes a row carrying the
--   error message; the run goes on.
--
-- API
-- ---
-- benchmark.run(opts) -> rows, info
--   opts (all optional):
--     batches  = {1, 8, 32, 64, 256}, steps = 589,
--     backends = {"persistent", "cudnn"}     names in spk.lstm.backends
--     algos    = the four cuDNN algorithms   (cudnn variants, in this order)
--     maths    = {"fp32"}                    the maths to run ("fp32", "tf32", "3xtf32"): cudnn
--                                            one row per algo and math it has, every GPU
--                                            backend one row per math (math = "tf32"),
--                                            cpu its f32 row alone
--     variants = {backend = {opts, ...}}     per-backend option tables, one row
--                                            each (default: cudnn one per algo
--                                            and math, every other backend {{}}
--                                            per math, its defaults);
--                                            an entry may carry `label` for the row
--     rounds = 7, warmup = 2, seed = 1, check = true,
--     layers = a stack (default above),
--     bounds = {backend = number | function(row, batch_rows) -> rel_l2 bound, max_abs bound | nil}
--              (merged over benchmark.bounds),
--     progress = function(message, {done =, total =}) end   called before each step
--                                           (done of total steps of the run so far)
--   rows: one per batch x backend x variant, in run order:
--     {batch, steps, backend, variant, median_ms, min_ms, max_ms, spread,
--      samples, rel_l2, max_abs, bound, bound_max_abs, bound_ok, speedup, error,
--      math (nil: fp32)}
--     timing fields nil on error; check fields nil with check = false;
--     bound/bound_ok nil where no bound applies.
--   info: {steps, layers, input, hidden, seed, rounds, warmup, batches, backends, maths}
-- benchmark.plan{backends =, algos =, maths =, variants =} -> {{backend =, variant =}, ...}
--   What run times at each batch, in run order (opts as run's; no device needed).
-- benchmark.speedups(rows) -> speedups, fastest, fastest_by_math
--   Pure: speedups[i] = fastest cuDNN median at rows[i].batch in rows[i]'s math
--   / rows[i].median_ms (nil where either is missing); fastest[batch] =
--   {median_ms =, variant =} of the FP32 algorithms, fastest_by_math[math][batch]
--   the same for each math.
-- benchmark.judge(rows[, bounds]) -> verdicts
--   Pure: verdicts[i] = {bound =, bound_max_abs =, bound_ok =} per row (see Bounds).
-- benchmark.environment() -> {device, driver, runtime, cudnn, date}: what the
--   table header shows (strings; "none" where there is no GPU).
-- benchmark.text(rows, info[, {environment =, seconds =}]) -> the table spk bench
--   prints of run's rows and info (scripts print the same).
-- benchmark.defaults: the defaults above; benchmark.bounds: the default bounds;
-- benchmark.tf32_bound: the fixed rel_l2 bound of the reduced maths (1e-2); benchmark.maths: the
-- stacks' maths (src/cuda/math_modes.h: fp32, tf32, 3xtf32); benchmark.held_to: the cuDNN math
-- each math's rows are bounded by and timed against (3xtf32: fp32), from the same list.
local M = {}

local bound = require "spk.bound"

M.cudnn_algorithms = { "standard", "persist_static", "persist_static_small_h", "persist_dynamic" }
-- The stacks' maths and the math whose rows a row of each is held to and
-- timed against (the one list, src/cuda/math_modes.h, through spk.bound): a
-- math that claims FP32's accuracy (3xtf32) gets FP32's bounds and FP32's
-- fastest cuDNN algorithm; cuDNN runs only the maths that are held to
-- themselves. The first is the default. The bounds' rule lives in
-- lua/spk/bound.lua (spk.lstm.bound).
M.maths, M.held_to, M.help = {}, bound.held_to, {}
for _, m in ipairs(require("spk.core").blas.math_modes) do
  if m.stacks then
    M.maths[#M.maths + 1] = m.name
    M.help[m.name] = m.help
  end
end
local DEFAULT = M.maths[1]
-- A reduced math (TF32 inputs: held to itself, not the default's accuracy)
-- rounds each product's inputs to 10 mantissa bits (about 5e-4 relative):
-- cuDNN's algorithms in it are held to this, and so are the spk kernels'
-- rows at a batch without cuDNN standard in it to compare with.
M.tf32_bound = bound.fixed.tf32
local function reduced(m) return m ~= DEFAULT and M.held_to[m] == m end

local function math_of(row) return row.math or DEFAULT end

M.defaults = {
  batches = { 1, 8, 32, 64, 256 },
  steps = 589,
  backends = { "persistent", "cudnn" },
  maths = { DEFAULT },
  rounds = 7,
  warmup = 2,
  seed = 1,
  check = true,
  model = { layers = 4, input = 60, hidden = 128, seed = 1 },
}

-- The cuDNN standard row a row of math_mode is held to at the same batch, if it ran and was checked.
local function standard_row(batch_rows, math_mode)
  local cudnn_math = M.held_to[math_mode] or math_mode
  for _, r in ipairs(batch_rows) do
    if r.backend == "cudnn" and r.algo == "standard" and math_of(r) == cudnn_math and not r.error
        and r.rel_l2 ~= nil then
      return r
    end
  end
  return nil
end

-- Bounds: backend -> a rel_l2 bound, or function(row, batch_rows) -> rel_l2 bound, max_abs bound (or nil).
-- Each is spk.lstm.bound's rule (lua/spk/bound.lua) for the row.
M.bounds = {
  -- every cuDNN FP32 algorithm within 1e-4 relative L2 of the f64 reference
  cudnn = function(row) return bound.bound { backend = "cudnn", math = math_of(row) }.rel_l2 end,
  cpu = bound.bound { backend = "cpu" }.rel_l2,
}
-- Every built-in kernel family (and a kernel of one's own, spk.lstm.kernel_backend):
-- no worse than 1.1x / 2x cuDNN standard's error in the same math.
local function kernel_bound(row, batch_rows)
  local std = standard_row(batch_rows, math_of(row))
  if not std and not reduced(math_of(row)) then return nil end
  local b = bound.bound { math = math_of(row), against = std and { rel_l2 = std.rel_l2, max_abs = std.max_abs } }
  return b.rel_l2, b.max_abs
end
for _, f in ipairs(require("spk.core").kernel_families()) do M.bounds[f.backend] = kernel_bound end

local function list_of(value, what)
  if type(value) ~= "table" or #value == 0 then
    error(("benchmark: %s must be a non-empty list"):format(what), 3)
  end
  return value
end

local function integer_at_least(value, least, what)
  if math.type(value) ~= "integer" or value < least then
    error(("benchmark: %s must be an integer >= %d, got %s"):format(what, least, tostring(value)), 3)
  end
  return value
end

local known = { batches = true, steps = true, backends = true, algos = true, maths = true, variants = true, rounds = true,
                warmup = true, seed = true, check = true, layers = true, bounds = true, progress = true }

function M.speedups(rows)
  local by_math = {}
  for _, r in ipairs(rows) do
    if r.backend == "cudnn" and not r.error and type(r.median_ms) == "number" and r.median_ms > 0 then
      local fastest = by_math[math_of(r)] or {}
      by_math[math_of(r)] = fastest
      local f = fastest[r.batch]
      if not f or r.median_ms < f.median_ms then
        fastest[r.batch] = { median_ms = r.median_ms, variant = r.variant }
      end
    end
  end
  local out = {}
  for i, r in ipairs(rows) do
    local against = M.held_to[math_of(r)] or math_of(r)
    local f = by_math[against] and by_math[against][r.batch]
    if f and not r.error and type(r.median_ms) == "number" and r.median_ms > 0 then
      out[i] = f.median_ms / r.median_ms
    end
  end
  by_math[DEFAULT] = by_math[DEFAULT] or {}
  return out, by_math[DEFAULT], by_math
end

function M.judge(rows, bounds)
  bounds = bounds or M.bounds
  local by_batch = {}
  for _, r in ipairs(rows) do
    by_batch[r.batch] = by_batch[r.batch] or {}
    table.insert(by_batch[r.batch], r)
  end
  local out = {}
  for i, r in ipairs(rows) do
    local verdict = {}
    local rule = bounds[r.backend]
    if rule == nil then rule = M.bounds[r.backend] end
    if not r.error and r.rel_l2 ~= nil and rule ~= nil then
      local rel, abs
      if type(rule) == "function" then
        rel, abs = rule(r, by_batch[r.batch])
      else
        rel = rule
      end
      if rel ~= nil then
        verdict.bound, verdict.bound_max_abs = rel, abs
        -- NaN compares false: a NaN output fails its bound
        verdict.bound_ok = r.rel_l2 <= rel and (abs == nil or (r.max_abs ~= nil and r.max_abs <= abs))
      end
    end
    out[i] = verdict
  end
  return out
end

-- The strings of the table's header line, from the provenance record's facts.
function M.environment()
  return require("spk.provenance").environment()
end

local function close(value)
  if value ~= nil and (type(value) == "table" or type(value) == "userdata") then
    pcall(function() value:close() end)
  end
end

-- The variants of one backend: a list of option tables merged into spk.lstm.stack's
-- (math left out for FP32, so those rows are what they were before TF32 existed).
local function variants_of(backend, opts)
  if opts.variants and opts.variants[backend] then return list_of(opts.variants[backend], "variants." .. backend) end
  if backend == "cpu" then return { {} } end
  local out = {}
  for _, m in ipairs(opts.maths) do
    local math_mode = m ~= DEFAULT and m or nil
    if backend == "cudnn" then
      if M.held_to[m] == m then -- a math cuDNN has
        for _, a in ipairs(opts.algos) do out[#out + 1] = { algo = a, math = math_mode } end
      end
    else
      out[#out + 1] = { math = math_mode }
    end
  end
  return out
end

-- What run times at each batch (spk bench --dry-run lists it).
function M.plan(opts)
  local o = { algos = list_of(opts.algos or M.cudnn_algorithms, "algos"),
              maths = list_of(opts.maths or M.defaults.maths, "maths"), variants = opts.variants }
  local plan_list = {}
  for _, backend in ipairs(list_of(opts.backends or M.defaults.backends, "backends")) do
    for _, v in ipairs(variants_of(backend, o)) do plan_list[#plan_list + 1] = { backend = backend, variant = v } end
  end
  return plan_list
end

-- The message's first line, without the "file.lua:12: " a Lua error adds.
local function first_line(message)
  local text = tostring(message):gsub("\n.*", "")
  return (text:gsub("^[^:]*%.lua:%d+: ", ""))
end

-- One backend variant at one batch: the row (never raises).
local function measure(spk, o, backend, variant, batch, x, reference)
  local row = { batch = batch, steps = o.steps, backend = backend, algo = variant.algo, math = variant.math,
                variant = variant.label or variant.algo or backend }
  if not variant.label and variant.math and variant.math ~= DEFAULT then
    row.variant = row.variant .. " " .. variant.math
  end
  local stack_opts = { layers = o.layers, batch = batch, steps = o.steps, backend = backend }
  for k, v in pairs(variant) do
    if k ~= "label" then stack_opts[k] = v end
  end
  local plan
  local ok, err = pcall(function()
    plan = spk.lstm.stack(stack_opts)
    if not variant.label and plan.variant and backend ~= "cudnn" then row.variant = plan.variant end
    if reference then
      local y = plan:forward(x)
      local host = y:cpu() -- y itself when already on the host
      local c = spk.compare(host, reference)
      row.rel_l2, row.max_abs = c.rel_l2, c.max_abs
      if c.nan_mismatch and c.nan_mismatch > 0 then row.rel_l2, row.max_abs = 0 / 0, 0 / 0 end
      if host ~= y then close(host) end
      close(y)
    end
    local t = plan:time { rounds = o.rounds, warmup = o.warmup, x = x }
    row.median_ms, row.min_ms, row.max_ms, row.spread, row.samples = t.median_ms, t.min_ms, t.max_ms, t.spread,
      t.samples
  end)
  if plan then close(plan) end
  if not ok then
    row.error = first_line(err)
    row.median_ms, row.min_ms, row.max_ms, row.spread, row.samples = nil, nil, nil, nil, nil
    row.rel_l2, row.max_abs = nil, nil
  end
  return row
end

function M.run(opts)
  opts = require("spk.options").check_keys(opts, known, "benchmark")
  local spk = require "spk"
  local d = M.defaults
  local o = {
    batches = list_of(opts.batches or d.batches, "batches"),
    steps = integer_at_least(opts.steps or d.steps, 1, "steps"),
    backends = list_of(opts.backends or d.backends, "backends"),
    algos = list_of(opts.algos or M.cudnn_algorithms, "algos"),
    maths = list_of(opts.maths or d.maths, "maths"),
    variants = opts.variants,
    rounds = integer_at_least(opts.rounds or d.rounds, 1, "rounds"),
    warmup = integer_at_least(opts.warmup or d.warmup, 0, "warmup"),
    seed = integer_at_least(opts.seed or d.seed, 0, "seed"),
    check = opts.check ~= false,
    progress = opts.progress or function() end,
  }
  for _, b in ipairs(o.batches) do integer_at_least(b, 1, "every batch") end
  for _, m in ipairs(o.maths) do
    if M.held_to[m] == nil then
      error(("benchmark: maths: unknown math %s (known: %s)"):format(
        type(m) == "string" and ("'" .. m .. "'") or tostring(m), table.concat(M.maths, ", ")), 2)
    end
  end
  for _, name in ipairs(o.backends) do
    if type(spk.lstm.backends[name]) ~= "function" then
      local names = {}
      for n in pairs(spk.lstm.backends) do names[#names + 1] = n end
      table.sort(names)
      error(("benchmark: unknown backend '%s' (registered: %s)"):format(tostring(name), table.concat(names, ", ")), 2)
    end
  end
  o.layers = opts.layers or spk.lstm.random(d.model)
  local dims = spk.lstm.validate(o.layers)
  local bounds = {}
  for k, v in pairs(M.bounds) do bounds[k] = v end
  for k, v in pairs(opts.bounds or {}) do bounds[k] = v end

  local plan_list = M.plan(o)

  local rows = {}
  -- the steps of the whole run, counted for progress(message, {done =, total =})
  local step = { done = 0, total = #o.batches * (#plan_list + (o.check and 1 or 0)) }
  for _, batch in ipairs(o.batches) do
    local x = spk.randn({ batch, o.steps, dims.input }, { seed = o.seed })
    local reference
    if o.check then
      o.progress(("batch %d: f64 reference ..."):format(batch), step)
      reference = spk.lstm.reference(o.layers, x, { precision = "f64" })
      step.done = step.done + 1
    end
    for i, p in ipairs(plan_list) do
      local label = p.variant.label or p.variant.algo
      if not p.variant.label and p.variant.math then label = (label and label .. " " or "") .. p.variant.math end
      o.progress(("batch %d: %s%s (%d/%d) ..."):format(batch, p.backend, label and " " .. label or "", i,
        #plan_list), step)
      rows[#rows + 1] = measure(spk, o, p.backend, p.variant, batch, x, reference)
      step.done = step.done + 1
    end
    close(reference)
    close(x)
    collectgarbage()
  end

  local verdicts = M.judge(rows, bounds)
  local speedups = M.speedups(rows)
  for i, r in ipairs(rows) do
    r.bound, r.bound_max_abs, r.bound_ok = verdicts[i].bound, verdicts[i].bound_max_abs, verdicts[i].bound_ok
    r.speedup = speedups[i]
  end
  local info = { steps = o.steps, layers = #o.layers, input = dims.input, hidden = dims.hidden, seed = o.seed,
                 rounds = o.rounds, warmup = o.warmup, batches = o.batches, backends = o.backends,
                 maths = o.maths, check = o.check }
  return rows, info
end

-- ---- the table spk bench prints ----------------------------------------------

local function table_columns(report)
  local function verdict(_, row)
    if row.error then return "error" end
    if row.bound_ok == true then return "ok" end
    if row.bound_ok == false then return "FAIL" end
    return nil
  end
  return {
    "batch",
    "backend",
    "variant",
    { key = "median_ms", title = "median ms", format = report.fmt_ms },
    { key = "min_ms", title = "min ms", format = report.fmt_ms },
    { key = "spread", title = "spread", format = report.fmt_pct, align = "right" },
    { key = "speedup", title = "vs cuDNN best", format = report.fmt_ratio, align = "right" },
    { key = "rel_l2", title = "rel L2", format = report.fmt_sci, align = "right" },
    { key = "max_abs", title = "max abs", format = report.fmt_sci, align = "right" },
    { key = "bound", title = "bound", format = report.fmt_sci, align = "right" },
    { key = "bound_ok", title = "check", format = verdict },
    { key = "error", title = "note", empty = "" },
  }
end

-- The table of M.run's rows as spk bench prints it: a header (the shape,
-- the device, the method), the rows, a footer (the speed-up and bounds,
-- counts of rows beyond their bound or failed, the run's seconds).
-- opts: environment (M.environment()), seconds.
function M.text(rows, info, opts)
  local report = require "spk.report"
  opts = require("spk.options").check_keys(opts, { "environment", "seconds" }, "benchmark.text")
  local env = opts.environment or M.environment()
  local failed, errors = 0, 0
  for _, r in ipairs(rows) do
    if r.bound_ok == false then failed = failed + 1 end
    if r.error then errors = errors + 1 end
  end
  local header = {
    ("spk bench: %d-layer bidirectional LSTM, hidden %d, input %d, %d steps, f32; %s"):format(info.layers,
      info.hidden, info.input, info.steps, env.date),
    ("device: %s; driver %s; CUDA runtime %s; cuDNN %s"):format(env.device, env.driver, env.runtime, env.cudnn),
    ("ms per forward: median of %d CUDA graph replays after %d warm-up (cpu: wall clock); "
      .. "checked against the f64 reference%s"):format(info.rounds, info.warmup, info.check ~= false and ""
      or " (skipped)"),
  }
  local own = false -- rows of a kernel of one's own (spk.lstm.kernel_backend)
  local builtin, held = { cudnn = true, cpu = true, auto = true }, {}
  for _, f in ipairs(require("spk.core").kernel_families()) do
    builtin[f.backend] = true
    held[#held + 1] = f.backend
  end
  for _, r in ipairs(rows) do own = own or not builtin[r.backend] end
  if own then held[#held + 1] = "the kernels of one's own" end
  local kernels = #held > 1 and table.concat(held, ", ", 1, #held - 1) .. " and " .. held[#held] or held[1]
  local footer = {
    "vs cuDNN best: the fastest cuDNN algorithm's median at that batch / the row's (> 1: faster).",
    ("bound (rel L2): cuDNN and cpu 1e-4; %s 1.1x (and max abs 2x) cuDNN standard FP32's at that "
      .. "batch."):format(kernels),
  }
  for _, m in ipairs(info.maths or {}) do
    if reduced(m) then
      footer[1] = ("vs cuDNN best: the fastest cuDNN algorithm's median at that batch in the row's math "
        .. "(%s rows: the fastest cuDNN %s one) / the row's (> 1: faster)."):format(m, m)
      footer[#footer + 1] = ("%s rows: cuDNN %g; %s (%s input projections, FP32 recurrence) "
        .. "1.1x (and max abs 2x) cuDNN standard %s's at that batch, else %g."):format(m, M.tf32_bound, kernels,
        m:upper(), m, M.tf32_bound)
    elseif m ~= DEFAULT and M.held_to[m] then
      footer[#footer + 1] = ("%s rows (%s input projections, FP32 recurrence): the %s rows' bounds; vs cuDNN best: "
        .. "the fastest cuDNN %s algorithm."):format(m, M.help[m], M.held_to[m]:upper(), M.held_to[m]:upper())
    end
  end
  if failed > 0 then footer[#footer + 1] = ("%d row%s beyond the bound (FAIL)."):format(failed, failed > 1 and "s" or "") end
  if errors > 0 then footer[#footer + 1] = ("%d row%s failed to run (see note)."):format(errors, errors > 1 and "s" or "") end
  if opts.seconds then footer[#footer + 1] = ("%.1f s in all."):format(opts.seconds) end
  return report.table(rows, table_columns(report), { title = table.concat(header, "\n"), footer = footer })
end

-- An argument a function does not take is an error that names it.
do
  local options = require "spk.options"
  M.run = options.takes(1, "benchmark.run", M.run)
  M.text = options.takes(3, "benchmark.text", M.text)
end

return M
