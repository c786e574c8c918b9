-- spk bench: ms per forward of the LSTM stack (4 layers, hidden 128, input 60)
-- per batch and backend, median and spread over CUDA graph replays, beside
-- cuDNN's figures. Progress goes to stderr, the table to stdout.
--
-- The cuDNN column holds the H200 figures of DESIGN.md §4 (CUDA 13.0, FP32,
-- best cuDNN algorithm per batch) until measured cuDNN rows exist; rows are
-- plain tables {label, batch, median, spread, source}, so more backends (a
-- measured cuDNN row, say) add rows without touching the table code.

local USAGE = [[
usage: spk bench [--batches 1,8,32,64,256] [--steps 589] [--backends persistent]
                 [--rounds 7] [--warmup 2] [--quick] [--help]

Times one forward pass of the 4-layer bidirectional LSTM stack (hidden 128,
input 60, random PyTorch-style weights) per batch with CUDA graphs and prints
the median ms and the spread (max - min) beside cuDNN's best algorithm.
--quick: batches 1,8, 3 rounds, 1 warm-up.]]

-- DESIGN.md §4: H200, CUDA 13.0, FP32, 589 steps, best cuDNN algorithm.
local CUDNN_BEST = {
  source = "DESIGN.md §4 (H200, CUDA 13.0, FP32, 589 steps, best cuDNN algorithm)",
  [1] = { 3.69, "PERSIST_STATIC" }, [8] = { 9.3, "PERSIST_STATIC_SMALL_H" },
  [32] = { 10.2, "PERSIST_STATIC_SMALL_H" }, [64] = { 10.7, "PERSIST_STATIC_SMALL_H" },
  [256] = { 22.1, "PERSIST_STATIC_SMALL_H" },
}

local function parse_list(text, what)
  local out = {}
  for item in tostring(text):gmatch("[^,]+") do
    local n = math.tointeger(tonumber(item))
    if not n or n < 1 then error(("--%s: '%s' is not a positive integer"):format(what, item), 0) end
    out[#out + 1] = n
  end
  if #out == 0 then error(("--%s needs a value"):format(what), 0) end
  return out
end

local function parse(args)
  local o = { batches = { 1, 8, 32, 64, 256 }, steps = 589, backends = { "persistent" }, rounds = 7, warmup = 2 }
  local i = 1
  local function value(name)
    i = i + 1
    if args[i] == nil then error(("--%s needs a value"):format(name), 0) end
    return args[i]
  end
  while i <= #args do
    local a = args[i]
    if a == "--help" or a == "-h" then o.help = true
    elseif a == "--quick" then o.batches, o.rounds, o.warmup = { 1, 8 }, 3, 1
    elseif a == "--batches" then o.batches = parse_list(value("batches"), "batches")
    elseif a == "--steps" then o.steps = parse_list(value("steps"), "steps")[1]
    elseif a == "--rounds" then o.rounds = parse_list(value("rounds"), "rounds")[1]
    elseif a == "--warmup" then o.warmup = math.tointeger(tonumber(value("warmup"))) or error("--warmup: not an integer", 0)
    elseif a == "--backends" then
      o.backends = {}
      for b in value("backends"):gmatch("[^,]+") do
        if b ~= "persistent" then error(("--backends: unknown backend '%s' (known: persistent)"):format(b), 0) end
        o.backends[#o.backends + 1] = b
      end
    else error(("unknown argument '%s' (see spk bench --help)"):format(a), 0) end
    i = i + 1
  end
  return o
end

-- rows: {label=, batch=, median=, spread=} ; columns fixed, one line per row.
local function format_table(rows, write)
  write(("%-34s %6s %10s %9s %12s %8s\n"):format("backend", "batch", "median ms", "spread", "cuDNN best", "ratio"))
  for _, r in ipairs(rows) do
    local ref = CUDNN_BEST[r.batch]
    local cudnn = ref and ("%.2f"):format(ref[1]) or "-"
    local ratio = (ref and r.median) and ("%.2fx"):format(ref[1] / r.median) or "-"
    write(("%-34s %6d %10s %9s %12s %8s\n"):format(r.label, r.batch,
      r.median and ("%.3f"):format(r.median) or "-", r.spread and ("%.3f"):format(r.spread) or "-", cudnn, ratio))
  end
  write(("cuDNN best: %s; ratio = cuDNN ms / ours (> 1: faster than cuDNN)\n"):format(CUDNN_BEST.source))
end

return function(args, io_override)
  local out = io_override or { write = function(s) io.stdout:write(s) end,
                               progress = function(s) io.stderr:write(s) end }
  local ok, o = pcall(parse, args or {})
  if not ok then
    io.stderr:write("spk bench: ", tostring(o), "\n")
    return 2
  end
  if o.help then
    out.write(USAGE .. "\n")
    return 0
  end
  local spk = require "spk"
  if not (spk.cuda and spk.cuda.available and spk.cuda.available()) then
    io.stderr:write("spk bench: no CUDA device; the benchmark needs a GPU\n")
    return 1
  end
  local rows = {}
  for _, backend in ipairs(o.backends) do
    for _, batch in ipairs(o.batches) do
      out.progress(("bench: %s batch %d steps %d ...\n"):format(backend, batch, o.steps))
      local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
      local plan = spk.lstm.stack { layers = layers, batch = batch, steps = o.steps, backend = backend }
      local t = plan:time { rounds = o.rounds, warmup = o.warmup }
      local s = plan.schedule
      rows[#rows + 1] = { label = ("%s (tile %d, %s)"):format(backend, s.tile_rows,
                            s.concurrent and "concurrent" or "sequential"),
                          batch = batch, median = t.median, spread = t.spread }
      plan:close()
    end
  end
  format_table(rows, out.write)
  return 0
end
