-- spk bench: every LSTM stack backend and cuDNN algorithm side by side, timed
-- and checked in one run (lua/spk/benchmark.lua holds the method and the
-- machinery; this file reads the arguments and prints). Progress goes to
-- stderr, the table to stdout; --json and --csv write the rows.
--
-- Exit status: 0 after a run (rows beyond their bound are flagged in the
-- table and counted below it), 1 when a file cannot be written, 2 for bad
-- arguments, 3 without a GPU for a GPU backend (spk.options.EXIT; --dry-run
-- needs none).

local USAGE = [[
usage: spk bench [--batches 1,8,32,64,256] [--steps 589]
                 [--backends persistent,cudnn] [--algos standard,persist_static,...]
                 [--math fp32,tf32,3xtf32] [--units 4,8] [--rounds 7] [--warmup 2] [--seed 1]
                 [--layers 4] [--hidden 128] [--input 60] [--threads 16,2]
                 [--kernel FILE] [--json FILE] [--csv FILE] [--quick] [--no-check]
                 [--dry-run] [--help]

Times one forward pass of the bidirectional LSTM stack (random PyTorch-style
weights, seed 1) on every backend, and every cuDNN algorithm, at each batch
size, on one set of inputs per batch: CUDA graph replays timed with CUDA
events, warm-up excluded, median and spread over the rounds. Each output is
checked against the f64 CPU reference (relative L2 and max abs); a row beyond
its bound is marked FAIL. speed-up = the fastest cuDNN algorithm's median at
that batch in the row's math (FP32 rows: cuDNN FP32; TF32 rows: cuDNN TF32)
/ the row's median (> 1: faster than cuDNN's best).

  --batches LIST   batch sizes (default 1,8,32,64,256)
  --steps N        sequence length (default 589)
  --backends LIST  backends of spk.lstm.stack (default persistent,cudnn);
                   cpu (the f32 CPU reference) runs without a GPU and adds
                   the CPU section: the cpu backend and the f64 reference
                   at each batch and thread count, beside ONNX Runtime's CPU
                   provider where SPK_PYTHON or python3 imports onnxruntime
                   (tools/onnx_ort_check.py times it), with GFLOP/s, errors
                   against the f64 reference and bits across thread counts
  --threads LIST   thread counts of the CPU section (default: the CPU path's
                   default, SPK_THREADS or the CPUs this process may use)
  --algos LIST     cuDNN algorithms (default: standard, persist_static,
                   persist_static_small_h, persist_dynamic)
  --math LIST      fp32, tf32 and/or 3xtf32 (default fp32). tf32 adds rows of the
                   persistent and cluster kernels with TF32 input projections
                   (math = "tf32": tensor cores, FP32 sums; the recurrence
                   stays FP32) and cuDNN's algorithms in TF32. Their bound:
                   1.1x rel L2 and 2x max abs of cuDNN standard TF32's at the
                   batch (rel L2 1e-2 without that row); cuDNN TF32: 1e-2.
                   3xtf32 adds rows with split-TF32 projections (tensor
                   cores, FP32's accuracy): held to the FP32 rows' bounds and
                   timed against cuDNN's fastest FP32 algorithm
  --units LIST     persistent kernel variants, one row each (4 and/or 8;
                   default: the kernel's own choice)
  --kernel FILE    a recurrence kernel of one's own: a kernel file (a Lua file
                   returning its spec, spk.lstm.kernel_file; e.g.
                   experiments/kernels/row_block.lua), run as a backend of
                   that name beside the others and held to the persistent
                   kernel's bound (repeatable, or comma separated)
  --rounds N       timed rounds (default 7); --warmup N untimed (default 2)
  --seed N         seed of the inputs (default 1)
  --layers N, --hidden N, --input N   the stack's shape (default 4, 128, 60)
  --json FILE      write {environment, settings, rows, provenance} as JSON
  --csv FILE       write the rows as CSV (its first line: # provenance {...})
  --quick          batches 1,8, 3 rounds, 1 warm-up (later options override)
  --no-check       skip the f64 reference check (faster at large batches)
  --dry-run        list what would run (each batch's rows: backend, math,
                   variant, cuDNN algorithm; the CPU section; the rounds)
                   and exit 0; nothing is timed, no device is needed

Progress goes to stderr (on a terminal also a status line: what runs now,
steps done of all, time spent and left); the table, headed by where it came
from (spk's version and commit, the command), to stdout. Without a GPU for a
GPU backend it says so and exits 3; nothing is run (--dry-run needs no GPU).]]

local options = require "spk.options"
local fail, positive, list = options.fail, options.positive, options.list

local function parse(args)
  local o = { batches = { 1, 8, 32, 64, 256 }, steps = 589, backends = { "persistent", "cudnn" }, rounds = 7,
              warmup = 2, seed = 1, layers = 4, hidden = 128, input = 60, check = true }
  local i = 1
  local function value(name)
    i = i + 1
    if args[i] == nil then fail(("--%s needs a value"):format(name)) end
    return args[i]
  end
  local numbers = { steps = 1, rounds = 1, warmup = 0, seed = 0, layers = 1, hidden = 1, input = 1 }
  while i <= #args do
    local a = args[i]
    local name = a:match("^%-%-([%w-]+)$")
    if a == "--help" or a == "-h" then o.help = true
    elseif a == "--quick" then o.batches, o.rounds, o.warmup = { 1, 8 }, 3, 1
    elseif a == "--no-check" then o.check = false
    elseif a == "--dry-run" then o.dry_run = true
    elseif name and numbers[name] then o[name] = positive(value(name), name, numbers[name])
    elseif a == "--batches" then
      o.batches = options.positives(value("batches"), "batches")
    elseif a == "--units" then
      o.units = options.positives(value("units"), "units")
    elseif a == "--threads" then
      o.threads = options.positives(value("threads"), "threads")
    elseif a == "--backends" then o.backends = list(value("backends"), "backends")
    elseif a == "--algos" then o.algos = list(value("algos"), "algos")
    elseif a == "--math" then
      o.maths = options.choices(value("math"), "math", "math", require("spk.benchmark").held_to)
    elseif a == "--kernel" then
      o.kernels = o.kernels or {}
      for _, path in ipairs(list(value("kernel"), "kernel")) do o.kernels[#o.kernels + 1] = path end
    elseif a == "--json" then o.json = value("json")
    elseif a == "--csv" then o.csv = value("csv")
    else fail(("unknown argument '%s' (see spk bench --help)"):format(a)) end
    i = i + 1
  end
  return o
end

-- Names checked against what is registered (needs the spk module).
local function check_names(o, benchmark)
  options.check_backends(o.backends, "backends")
  local known = {}
  for _, a in ipairs(benchmark.cudnn_algorithms) do known[a] = true end
  for _, a in ipairs(o.algos or {}) do
    if not known[a] then
      fail(("--algos: unknown algorithm '%s' (known: %s)"):format(a, table.concat(benchmark.cudnn_algorithms, ", ")))
    end
  end
end

-- --units: the persistent kernel's rows, one per unit count and math (nil: the defaults).
local function unit_variants(o, spk)
  if not o.units then return nil end
  local variants = { persistent = {} }
  for _, m in ipairs(o.maths or { spk.lstm.math_default }) do
    for _, u in ipairs(o.units) do
      local v = { kernel = { units = u }, math = m ~= spk.lstm.math_default and m or nil }
      variants.persistent[#variants.persistent + 1] = v
    end
  end
  return variants
end

-- One planned row in words: "cudnn (algo standard, math fp32)".
local function describe(p, default_math)
  local v, words = p.variant, {}
  if v.label then words[#words + 1] = v.label end
  if v.algo then words[#words + 1] = "algo " .. v.algo end
  if p.backend ~= "cpu" then words[#words + 1] = "math " .. (v.math or default_math) end
  if v.kernel and v.kernel.units then words[#words + 1] = "units " .. v.kernel.units end
  if p.backend == "cpu" then words[#words + 1] = "f32 reference" end
  return p.backend .. " (" .. table.concat(words, ", ") .. ")"
end

-- --dry-run: the rows each batch would time, the CPU section and the rounds; nothing run.
local function dry_run(o, out, spk, benchmark, variants, gpu_backends)
  local plan = benchmark.plan { backends = o.backends, algos = o.algos, maths = o.maths, variants = variants }
  local maths = o.maths or benchmark.defaults.maths
  out.write(("spk bench (dry run): %d-layer bidirectional LSTM, hidden %d, input %d, %d steps, seed %d; "
    .. "%d timed rounds after %d warm-up%s; f64 reference check %s\n"):format(o.layers, o.hidden, o.input, o.steps,
    o.seed, o.rounds, o.warmup, o.warmup == 1 and "" or "s", o.check and "on" or "off (--no-check)"))
  local words, algos, seen = {}, {}, {}
  for _, p in ipairs(plan) do
    words[#words + 1] = describe(p, spk.lstm.math_default)
    if p.backend == "cudnn" and not seen[p.variant.algo] then
      seen[p.variant.algo], algos[#algos + 1] = true, p.variant.algo
    end
  end
  out.write(("backends: %s; maths: %s; cuDNN algorithms: %s\n"):format(table.concat(o.backends, ", "),
    table.concat(maths, ", "), #algos > 0 and table.concat(algos, ", ") or "none"))
  for _, batch in ipairs(o.batches) do
    out.write(("batch %d: %d row%s: %s\n"):format(batch, #plan, #plan == 1 and "" or "s", table.concat(words, "; ")))
  end
  out.write(("%d rows in all\n"):format(#plan * #o.batches))
  local cpu = false
  for _, b in ipairs(o.backends) do cpu = cpu or b == "cpu" end
  if cpu then
    local info = spk.lstm.cpu_info()
    local threads = o.threads or { info.threads or info.cpus }
    local counts = {}
    for i, n in ipairs(threads) do counts[i] = tostring(n) end
    out.write(("CPU section: batches %s at %s thread%s: the cpu backend, the f64 reference and ONNX Runtime's "
      .. "CPU provider where Python imports onnxruntime\n"):format(table.concat(o.batches, ","),
      table.concat(counts, ","), #threads == 1 and "" or "s"))
  else
    out.write("CPU section: none (--backends cpu adds it)\n")
  end
  if #gpu_backends > 0 then
    out.write(("needs a CUDA GPU for: %s\n"):format(table.concat(gpu_backends, ", ")))
  end
  return 0
end

local CSV_COLUMNS = { "batch", "steps", "backend", "variant", "median_ms", "min_ms", "max_ms", "spread", "speedup",
                      "rel_l2", "max_abs", "bound", "bound_max_abs", "bound_ok", "error" }

return function(args, io_override)
  local o, out = options.start("bench", parse, args, io_override, USAGE)
  if not o then return out end
  local spk = require "spk"
  local benchmark = require "spk.benchmark"
  local report = require "spk.report"
  local provenance = require "spk.provenance"
  for _, path in ipairs(o.kernels or {}) do
    local loaded, spec = pcall(spk.lstm.kernel_file, path)
    if not loaded then
      io.stderr:write("spk bench: --kernel: ", options.message(spec):gsub("^[^\n]-%.lua:%d+: ", ""), "\n")
      return 2
    end
    spk.lstm.kernel_backend(spec.name, spec)
    local listed = false
    for _, b in ipairs(o.backends) do listed = listed or b == spec.name end
    if not listed then table.insert(o.backends, 1, spec.name) end
  end
  local named, err = pcall(check_names, o, benchmark)
  if not named then
    io.stderr:write("spk bench: ", options.message(err), "\n")
    return 2
  end

  local variants = unit_variants(o, spk)
  local gpu_backends = {}
  for _, b in ipairs(o.backends) do
    if b ~= "cpu" then gpu_backends[#gpu_backends + 1] = b end
  end
  if o.dry_run then return dry_run(o, out, spk, benchmark, variants, gpu_backends) end
  if #gpu_backends > 0 and not options.gpu_status() then
    local code = options.no_gpu("spk bench", ("backend%s %s need%s a CUDA GPU"):format(#gpu_backends > 1 and "s"
      or "", table.concat(gpu_backends, ", "), #gpu_backends > 1 and "" or "s"))
    io.stderr:write("(--backends cpu times the CPU reference alone)\n")
    return code
  end

  local env = benchmark.environment()
  local layers = spk.lstm.random { layers = o.layers, input = o.input, hidden = o.hidden, seed = 1 }
  local started = spk.clock_ms()
  local status = require("spk.progress").new { label = "spk bench", enabled = out.terminal }
  local rows, info = benchmark.run {
    batches = o.batches, steps = o.steps, backends = o.backends, algos = o.algos, maths = o.maths,
    variants = variants,
    rounds = o.rounds, warmup = o.warmup, seed = o.seed, check = o.check, layers = layers,
    progress = function(message, step)
      status:clear()
      out.progress(message .. "\n")
      if step then status:update((message:gsub(" %.%.%.$", "")), step.done, step.total) end
    end,
  }
  status:finish()
  local seconds = (spk.clock_ms() - started) / 1000

  local run = provenance.from_rows(rows, {
    seeds = { weights = 1, input = o.seed }, dtype = "f32", math = o.maths or { benchmark.maths[1] },
    shape = { layers = o.layers, input = o.input, hidden = o.hidden, steps = o.steps, batches = o.batches },
    rounds = o.rounds, warmup = o.warmup, check = o.check })
  local record = provenance.record(run)
  out.write(table.concat(provenance.lines(record, { device = false }), "\n") .. "\n")
  out.write(benchmark.text(rows, info, { environment = env, seconds = seconds }))

  local cpu_rows, cpu_info
  for _, b in ipairs(o.backends) do
    if b == "cpu" then
      local cpu_bench = require "spk.cpu_bench"
      cpu_rows, cpu_info = cpu_bench.run {
        layers = layers, batches = o.batches, steps = o.steps, threads = o.threads, rounds = o.rounds,
        warmup = o.warmup, seed = o.seed, progress = function(message) out.progress(message .. "\n") end,
      }
      out.write("\n" .. cpu_bench.text(cpu_rows, cpu_info))
    end
  end

  local written, werr = pcall(function()
    if o.json then
      report.json(o.json, { environment = env, settings = info, rows = rows, cpu = cpu_rows and
        { settings = cpu_info, rows = cpu_rows } }, { indent = 2, provenance = record })
    end
    if o.csv then report.csv(o.csv, rows, CSV_COLUMNS, { provenance = record }) end
  end)
  if not written then
    io.stderr:write("spk bench: ", tostring(werr), "\n")
    return 1
  end
  return 0
end
