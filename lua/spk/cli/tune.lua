-- time the LSTM kernel variants on this GPU, record the fastest for backend "auto"
--
-- spk tune: times every candidate variant (the persistent kernel at 4, 8 and
-- 16 units; the cluster kernels with their per-batch default and each tile
-- height up to the batch, the batch's default, the baseline and the direct
-- pushes at that height) and every cuDNN algorithm with spk.benchmark at
-- each batch, each kernel variant in every FP32-accuracy math of --math (FP32
-- projections, split-TF32 projections), checks each against the f64
-- reference, and keeps as the winner the fastest candidate of FP32's
-- accuracy within its correctness bound. The winners go into the
-- tuning record of this device, drivers and kernel sources (lua/spk/tuning.lua),
-- which spk.lstm.stack{backend = "auto"} reads. Progress on stderr, the table
-- and the record's path on stdout.
--
-- Exit status: 0 after a run, 1 when the record cannot be written, 2 for bad
-- arguments, 3 without a CUDA device (spk.options.EXIT; --dry-run needs none).

local USAGE = [[
usage: spk tune [--batches 1,8,32,64,256] [--steps 589] [--rounds 5] [--warmup 2]
                [--candidates persistent,cluster,tensor_core] [--math fp32,3xtf32] [--hidden 128]
                [--input 60] [--layers 4] [--dir DIR] [--dry-run] [--help]

Measures the candidate kernel variants of the bidirectional LSTM stack at each
batch (random PyTorch-style weights, seed 1; one input per batch; CUDA graph
replays timed with CUDA events, median over the rounds), checks each output
against the f64 CPU reference, and records, per batch, the fastest candidate of
FP32's accuracy within its bound (the persistent kernel's: rel L2 <= 1.1x and
max abs <= 2x cuDNN standard FP32's), with its math: backend "auto" then runs
the faster of FP32 and split-TF32 projections where a script gives no math. cuDNN's four algorithms are always timed, as the
baseline of the speed-up. spk.lstm.stack{backend = "auto"} then builds the
recorded winner for this device, driver, CUDA, cuDNN and kernel sources.

  --batches LIST     batch sizes (default 1,8,32,64,256)
  --steps N          sequence length (default 589); the record is kept per
                     steps class, the smallest power of two >= N
  --rounds N         timed rounds (default 5); --warmup N untimed (default 2)
  --candidates LIST  backends that may win (default persistent,cluster,
                     tensor_core; cudnn may be added): persistent runs its per-batch default
                     and units 4, 8, 16; cluster its per-batch default, and
                     tile heights 1, 2, 4, ... up to the batch, each with
                     the rest of the batch's default and with the baseline
                     (push=scalar), and (up to tile 8) with the direct pushes
                     (2 chunks a gate row where hidden <= 128) and with gate
                     blocks (cluster 4 or 2, 4 chunks, where hidden is a
                     multiple of 32 up to 128; the gates fetched 3 steps
                     ahead; from tile 4 at cluster 2 also in two row phases);
                     tensor_core its per-batch default and with each split,
                     mma form and cell form the default does not take
                     (compute capability 9.0 only)
  --math LIST        the maths of FP32's accuracy each kernel candidate runs in
                     (default fp32,3xtf32: FP32 projections, and split-TF32
                     projections on the tensor cores); cuDNN runs FP32 only
  --layers N, --hidden N, --input N   the stack's shape (default 4, 128, 60)
  --dir DIR          the record folder (default $SPK_TUNE_DIR, else
                     $XDG_CACHE_HOME/spk/tune, else ~/.cache/spk/tune)
  --dry-run          list the candidates and the record's path; measure and
                     write nothing (works without a GPU)

Progress goes to stderr (on a terminal also a status line: what runs now,
steps done of all, time spent and left). The record and the printed table
carry where they came from (spk's version and commit, the command, the
device and its versions). Without a CUDA device it says so and exits 3.]]

local CANDIDATES = { persistent = true, cluster = true, tensor_core = true, cudnn = true }
local MATHS = {}
for _, m in ipairs(require("spk.tuning").fp32_maths()) do MATHS[m] = true end
-- The default math (FP32) and the maths of its accuracy in the one list's order: what spk tune times.
local benchmark_maths = require("spk.benchmark").maths
local DEFAULT_MATH, TUNED_MATHS = benchmark_maths[1], {}
for _, m in ipairs(benchmark_maths) do
  if MATHS[m] then TUNED_MATHS[#TUNED_MATHS + 1] = m end
end

local options = require "spk.options"
local fail, positive, list = options.fail, options.positive, options.list

local function parse(args)
  local o = { batches = { 1, 8, 32, 64, 256 }, steps = 589, rounds = 5, warmup = 2,
              candidates = { "persistent", "cluster", "tensor_core" }, maths = TUNED_MATHS, layers = 4, hidden = 128,
              input = 60 }
  local numbers = { steps = 1, rounds = 1, warmup = 0, layers = 1, hidden = 1, input = 1 }
  local i = 1
  local function value(name)
    i = i + 1
    if args[i] == nil then fail(("--%s needs a value"):format(name)) end
    return args[i]
  end
  while i <= #args do
    local a = args[i]
    local name = a:match("^%-%-([%w-]+)$")
    if a == "--help" or a == "-h" then o.help = true
    elseif a == "--dry-run" then o.dry_run = true
    elseif name and numbers[name] then o[name] = positive(value(name), name, numbers[name])
    elseif a == "--batches" then
      o.batches = options.positives(value("batches"), "batches")
    elseif a == "--candidates" then
      o.candidates = options.choices(value("candidates"), "candidates", "candidate", CANDIDATES)
    elseif a == "--math" then
      o.maths = options.choices(value("math"), "math", "math", MATHS)
    elseif a == "--dir" then o.dir = value("dir")
    else fail(("unknown argument '%s' (see spk tune --help)"):format(a)) end
    i = i + 1
  end
  return o
end

-- The candidate variants of one backend at one batch: option tables merged
-- into spk.lstm.stack's (what the record stores as the winner's options).
local function variants(backend, batch, algos, hidden)
  if backend == "persistent" then
    -- its per-batch default first (gate blocks and row groups, which the
    -- units-only variants leave off), then units 4, 8 and 16
    return { {}, { kernel = { units = 4 } }, { kernel = { units = 8 } }, { kernel = { units = 16 } } }
  elseif backend == "cluster" then
    -- its per-batch default, then each tile height with the rest of the
    -- default (options left out take the batch's default), the baseline
    -- (scalar pushes), and up to tile 8 the direct pushes with one gate row a
    -- thread (cluster 8, 2 chunks: threads = hidden) and with four (cluster 4
    -- or 2, 4 chunks: threads = hidden * 4 / cluster; the gates 3 steps ahead),
    -- from tiles of 4 rows at cluster 2 also in two row phases
    local out = { {} }
    local h = 1
    while h <= 32 and h <= batch do
      out[#out + 1] = { kernel = { tile_rows = h } }
      out[#out + 1] = { kernel = { tile_rows = h, push = "scalar" } }
      if h <= 8 then
        local direct = { tile_rows = h, cluster = 8, push = "direct", gate_block = 1, gates_ahead = 1,
                         row_phases = 1 }
        if hidden % 32 == 0 and hidden <= 128 then direct.threads = hidden end
        out[#out + 1] = { kernel = direct }
        if hidden % 32 == 0 and hidden <= 128 then
          for _, cluster in ipairs { 4, 2 } do -- 4 chunks: threads = hidden * 4 / cluster
            out[#out + 1] = { kernel = { tile_rows = h, cluster = cluster, threads = hidden * 4 // cluster,
                                         gate_block = 4, gates_ahead = 3, push = "direct", row_phases = 1 } }
          end
          if h >= 4 then
            out[#out + 1] = { kernel = { tile_rows = h, cluster = 2, threads = hidden * 2, gate_block = 4,
                                         gates_ahead = 3, push = "direct", row_phases = 2 } }
          end
        end
      end
      h = h * 2
    end
    return out
  elseif backend == "tensor_core" then
    -- its per-batch default, then each split, product form and cell form the default does not
    -- take (the default's own would time the same kernel twice)
    local lstm = require("spk").lstm
    local known, default = pcall(lstm.kernel_variant, { backend = backend, batch = batch, hidden = hidden })
    local out = { {} }
    for _, o in ipairs(lstm.kernel_options(backend).options) do
      if o.name == "split" or o.name == "mma" or o.name == "cell" then
        for _, w in ipairs(o.words) do
          if not known or w ~= default[o.name] then out[#out + 1] = { kernel = { [o.name] = w } } end
        end
      end
    end
    return out
  end
  local out = {}
  for i, a in ipairs(algos) do out[i] = { algo = a } end
  return out
end

-- Each kernel variant once per math (math left out for FP32, as the record stores it).
local function in_maths(list, maths)
  local out = {}
  for _, m in ipairs(maths) do
    for _, v in ipairs(list) do
      local w = {}
      for k, x in pairs(v) do w[k] = x end
      w.math = m ~= DEFAULT_MATH and m or nil
      out[#out + 1] = w
    end
  end
  return out
end

local describe
function describe(options)
  if options.math then
    local rest = {}
    for k, v in pairs(options) do if k ~= "math" then rest[k] = v end end
    return describe(rest) .. ", " .. options.math .. " projections"
  end
  if options.algo then return "algo " .. options.algo end
  local k = options.kernel
  if not k or next(k) == nil then return "defaults" end
  -- these first, in this order, then any other option by name: every option given is named
  local order = { "units", "tile_rows", "push", "cluster", "threads", "gate_block", "gates_ahead", "row_phases",
                  "split", "mma" }
  local listed, others = {}, {}
  for _, key in ipairs(order) do listed[key] = true end
  for key in pairs(k) do if not listed[key] then others[#others + 1] = key end end
  table.sort(others)
  local parts = {}
  for _, list in ipairs { order, others } do
    for _, key in ipairs(list) do
      if k[key] ~= nil then parts[#parts + 1] = ("%s %s"):format(key, tostring(k[key])) end
    end
  end
  return table.concat(parts, ", ")
end

local function copy(t)
  if type(t) ~= "table" then return t end
  local out = {}
  for k, v in pairs(t) do out[k] = copy(v) end
  return out
end

-- The winner of one batch's rows: the fastest candidate that ran, is FP32
-- strict and passed its bound.
local function entry_of(o, batch, rows, options_of, tuning)
  local candidate = {}
  for _, c in ipairs(o.candidates) do candidate[c] = true end
  local entry = { hidden = o.hidden, input = o.input, layers = o.layers, batch = batch, steps = o.steps,
                  steps_class = tuning.steps_class(o.steps), rounds = o.rounds,
                  date = os.date("!%Y-%m-%dT%H:%M:%SZ"), candidates = {} }
  local best
  local benchmark = require "spk.benchmark"
  for i, r in ipairs(rows) do
    local default_math = require("spk").lstm.math_default
    local fp32 = benchmark.held_to[r.math or default_math] == default_math -- FP32's accuracy: fp32 or 3xtf32
    local eligible = candidate[r.backend] == true and not r.error and fp32 and r.bound_ok == true
      and type(r.median_ms) == "number"
    local c = { backend = r.backend, options = options_of[i], math = r.math, variant = r.variant, median_ms = r.median_ms,
                min_ms = r.min_ms, spread = r.spread, rel_l2 = r.rel_l2, max_abs = r.max_abs, bound = r.bound,
                bound_ok = r.bound_ok, speedup = r.speedup, eligible = eligible, error = r.error }
    entry.candidates[#entry.candidates + 1] = c
    if eligible and (not best or r.median_ms < best.median_ms) then best = c end
    if r.backend == "cudnn" and not r.error and type(r.median_ms) == "number"
        and (not entry.cudnn_best or r.median_ms < entry.cudnn_best.median_ms) then
      entry.cudnn_best = { variant = r.variant, median_ms = r.median_ms }
    end
  end
  if best then
    entry.winner = { backend = best.backend, options = best.options, math = best.math, variant = best.variant,
                     median_ms = best.median_ms, rel_l2 = best.rel_l2, speedup = best.speedup }
  end
  return entry
end

-- --dry-run: the candidates per batch and the record's path; nothing measured.
local function dry_run(o, out, backends, benchmark, tuning, facts, why, dir)
  out.write(("spk tune (dry run): %d-layer bidirectional LSTM, hidden %d, input %d, %d steps (class <= %d), "
    .. "%d timed rounds\n"):format(o.layers, o.hidden, o.input, o.steps, tuning.steps_class(o.steps), o.rounds))
  out.write(("candidates: %s (cuDNN's algorithms timed as the baseline); kernel maths: %s\n"):format(
    table.concat(o.candidates, ", "), table.concat(o.maths, ", ")))
  for _, batch in ipairs(o.batches) do
    local words = {}
    for _, b in ipairs(backends) do
      local list = variants(b, batch, benchmark.cudnn_algorithms, o.hidden)
      if b ~= "cudnn" then list = in_maths(list, o.maths) end
      for _, v in ipairs(list) do
        words[#words + 1] = b .. " (" .. describe(v) .. ")"
      end
    end
    out.write(("batch %d: %d variants: %s\n"):format(batch, #words, table.concat(words, "; ")))
  end
  if facts then
    out.write(("record: %s\n"):format(tuning.path(tuning.key(facts), dir)))
  else
    out.write(("record: none (%s)\n"):format(why or "no CUDA device"))
  end
  return 0
end

-- Every candidate at every batch, the status line counting them: the entries.
local function measure(o, out, backends, benchmark, tuning, layers)
  local entries = {}
  local per_batch, total = {}, 0
  for i, batch in ipairs(o.batches) do
    local per_backend, options_of = {}, {}
    for _, b in ipairs(backends) do
      per_backend[b] = variants(b, batch, benchmark.cudnn_algorithms, o.hidden)
      if b ~= "cudnn" then per_backend[b] = in_maths(per_backend[b], o.maths) end
      for _, v in ipairs(per_backend[b]) do
        local opts = copy(v)
        opts.math = nil -- the row's math, which the record keeps beside the options
        options_of[#options_of + 1] = opts
      end
    end
    per_batch[i] = { per_backend = per_backend, options_of = options_of }
    total = total + #options_of + 1 -- and the f64 reference
  end
  local status = require("spk.progress").new { label = "spk tune", total = total, enabled = out.terminal }
  local done_before = 0
  for i, batch in ipairs(o.batches) do
    local per_backend, options_of = per_batch[i].per_backend, per_batch[i].options_of
    local rows = benchmark.run {
      batches = { batch }, steps = o.steps, backends = backends, variants = per_backend, rounds = o.rounds,
      warmup = o.warmup, layers = layers, bounds = { cluster = benchmark.bounds.persistent },
      progress = function(message, step)
        status:clear()
        out.progress(message .. "\n")
        status:update((message:gsub(" %.%.%.$", "")), done_before + (step and step.done or 0))
      end,
    }
    done_before = done_before + #options_of + 1
    assert(#rows == #options_of, "one row per variant")
    entries[#entries + 1] = entry_of(o, batch, rows, options_of, tuning)
  end
  status:finish()
  return entries
end

return function(args, io_override)
  local o, out = options.start("tune", parse, args, io_override, USAGE)
  if not o then return out end
  local spk = require "spk"
  local benchmark = require "spk.benchmark"
  local report = require "spk.report"
  local tuning = require "spk.tuning"
  local provenance = require "spk.provenance"

  -- cuDNN first: the persistent and cluster bounds need its standard row at the batch.
  local backends = { "cudnn" }
  for _, c in ipairs(o.candidates) do
    if c ~= "cudnn" then backends[#backends + 1] = c end
  end
  local facts, why = tuning.facts()
  local dir = o.dir or tuning.dir()
  if o.dry_run then return dry_run(o, out, backends, benchmark, tuning, facts, why, dir) end
  if not facts then
    local code = options.no_gpu("spk tune", "tuning measures the GPU kernels, so it needs a CUDA GPU")
    io.stderr:write("(backend \"auto\" uses its documented default meanwhile)\n")
    return code
  end

  local env = benchmark.environment()
  local layers = spk.lstm.random { layers = o.layers, input = o.input, hidden = o.hidden, seed = 1 }
  local started = spk.clock_ms()
  local entries = measure(o, out, backends, benchmark, tuning, layers)
  local seconds = (spk.clock_ms() - started) / 1000
  local all_rows = {}
  for _, e in ipairs(entries) do
    for _, c in ipairs(e.candidates) do all_rows[#all_rows + 1] = c end
  end
  local record_of_run = provenance.record(provenance.from_rows(all_rows, {
    seeds = { weights = 1, input = benchmark.defaults.seed }, dtype = "f32", math = { DEFAULT_MATH },
    shape = { layers = o.layers, input = o.input, hidden = o.hidden, steps = o.steps, batches = o.batches },
    rounds = o.rounds, warmup = o.warmup, candidates = o.candidates }))

  local lines = {}
  for _, e in ipairs(entries) do
    local w, c = e.winner or {}, e.cudnn_best or {}
    local eligible = 0
    for _, cand in ipairs(e.candidates) do
      if cand.eligible then eligible = eligible + 1 end
    end
    local shown = {}
    for k, v in pairs(w.options or {}) do shown[k] = v end
    shown.math = w.math
    lines[#lines + 1] = { batch = e.batch, backend = w.backend or "none", variant = w.variant,
                          options = e.winner and describe(shown) or nil, median_ms = w.median_ms,
                          cudnn_ms = c.median_ms, cudnn = c.variant, speedup = w.speedup, rel_l2 = w.rel_l2,
                          eligible = ("%d of %d"):format(eligible, #e.candidates) }
  end
  local columns = {
    "batch",
    { key = "backend", title = "winner" },
    { key = "options", title = "options", empty = "" },
    { key = "median_ms", title = "median ms", format = report.fmt_ms },
    { key = "cudnn_ms", title = "cuDNN best ms", format = report.fmt_ms },
    { key = "cudnn", title = "cuDNN best", empty = "" },
    { key = "speedup", title = "vs cuDNN best", format = report.fmt_ratio, align = "right" },
    { key = "rel_l2", title = "rel L2", format = report.fmt_sci, align = "right" },
    { key = "eligible", title = "eligible" },
    { key = "variant", title = "variant", empty = "" },
  }
  local header = {
    ("spk tune: %d-layer bidirectional LSTM, hidden %d, input %d, %d steps, f32; %s"):format(o.layers, o.hidden,
      o.input, o.steps, env.date),
    ("device: %s; driver %s; CUDA runtime %s; cuDNN %s"):format(env.device, env.driver, env.runtime, env.cudnn),
    ("ms per forward: median of %d CUDA graph replays after %d warm-up; candidates %s"):format(o.rounds, o.warmup,
      table.concat(o.candidates, ", ")),
  }
  local footer = {
    "winner: the fastest candidate of FP32's accuracy (FP32 or split-TF32 projections) within its bound (eligible:",
    "rows that ran and passed, of all timed).",
    "vs cuDNN best: the fastest cuDNN algorithm's median at that batch / the winner's (> 1: faster).",
    ("%.1f s in all."):format(seconds),
  }
  out.write(table.concat(provenance.lines(record_of_run, { device = false }), "\n") .. "\n")
  out.write(report.table(lines, columns, { title = table.concat(header, "\n"), footer = footer }))

  local command = "spk tune"
  if #(args or {}) > 0 then command = command .. " " .. table.concat(args, " ") end
  local saved, path = pcall(function()
    local record = tuning.find(facts, dir)
    record = record or tuning.new_record(facts, command)
    record.command, record.date = command, os.date("!%Y-%m-%dT%H:%M:%SZ")
    record.environment = env
    record.provenance = record_of_run
    tuning.merge(record, entries)
    return tuning.save(record, dir)
  end)
  if not saved then
    io.stderr:write("spk tune: ", tostring(path), "\n")
    return 1
  end
  out.write(("record: %s\n"):format(path))
  return 0
end
