-- The CPU section of spk bench: the cpu backend (the f32 reference) and the
-- f64 reference at each batch and thread count, beside ONNX Runtime's CPU
-- provider on the same model and input where Python finds onnxruntime.
--
--   local cpu_bench = require "spk.cpu_bench"
--   local rows, info = cpu_bench.run{layers =, batches =, steps =, threads = {16, 2}, rounds =, warmup =,
--                                    seed =, progress = function(message) end, ort = true, python = nil}
--   print(cpu_bench.text(rows, info))
--
-- Method. At each batch B the input is spk.randn({B, steps, input}, {seed =
-- seed}), as in the main table. For each thread count: the f64 reference
-- (spk.lstm.reference, precision f64) timed on the wall clock, min(rounds, 3)
-- runs after none; the cpu backend's plan (f32) with plan:time{rounds =,
-- warmup =}; ONNX Runtime's CPU provider on the stack written as ONNX
-- (spk.lstm.save), timed by tools/onnx_ort_check.py --time with that many
-- intra-op threads, rounds and warm-ups. Errors: relative L2 of the f32 and
-- ONNX Runtime outputs against the f64 one. bits: whether the f64 and the f32
-- outputs are bitwise those of the first thread count. GFLOP/s: the forward's
-- multiply-adds (x·Wᵀ and h·Rᵀ of every layer, direction and step) × 2 / the
-- median time. Python is `python`, else SPK_PYTHON, else python3; ort = false
-- leaves ONNX Runtime out.
local M = {}

local function median(samples)
  local s = {}
  for i, v in ipairs(samples) do s[i] = v end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local function quote(path) return "'" .. tostring(path):gsub("'", "'\\''") .. "'" end

-- The Python that runs ONNX Runtime: `python`, else SPK_PYTHON, else python3.
local function python_of(python)
  local p = python or os.getenv("SPK_PYTHON")
  return p ~= nil and p ~= "" and p or "python3"
end

-- The onnxruntime version that Python reports, or nil and why not.
function M.ort_version(python)
  python = python_of(python)
  local pipe = io.popen(quote(python) .. " -c 'import onnxruntime, numpy; print(onnxruntime.__version__)' 2>&1")
  if not pipe then return nil, "cannot start " .. python end
  local text = pipe:read("a") or ""
  local ok = pipe:close()
  local version = text:match("^(%d[%w%.%-+]*)%s*$")
  if ok and version then return version end
  return nil, ("%s cannot import onnxruntime and numpy (%s)"):format(python, (text:gsub("%s+$", ""):match("[^\n]*$")))
end

-- Flops of one forward (a multiply-add counts two).
function M.flops(dims, layers, batch, steps)
  local rows = batch * steps * 2 * 4 * dims.hidden -- gate rows of both directions
  local total = 0
  for k = 1, layers do
    local input = k == 1 and dims.input or 2 * dims.hidden
    total = total + 2 * rows * (input + dims.hidden)
  end
  return total
end

-- ONNX Runtime's median ms and relative L2 on one batch, or nil and the reason.
local function ort_time(spk, o, x, y64, threads)
  local dir = o.ort_dir
  spk.save(dir .. "/x.npy", x)
  spk.save(dir .. "/y64.npy", y64)
  local tool = (spk.find_dir("tools") or "tools") .. "/onnx_ort_check.py"
  local command = ("%s %s %s %s %s --max-rel-l2 1e-4 --time %d --warmup %d --threads %d 2>&1"):format(
    quote(o.python), quote(tool), quote(dir .. "/model.onnx"), quote(dir .. "/x.npy"), quote(dir .. "/y64.npy"),
    o.rounds, o.warmup, threads)
  local pipe = io.popen(command)
  local text = pipe and pipe:read("a") or ""
  if pipe then pipe:close() end
  local ms = tonumber(text:match("ort time: median_ms ([%d%.]+)"))
  local rel = tonumber(text:match("CPUExecutionProvider: rel_l2 ([%d%.e%-+]+)"))
  if not ms then return nil, nil, (text:gsub("%s+$", ""):match("[^\n]*$")) end
  return ms, rel
end

local function bits_same(spk, a, b)
  if a == nil or b == nil then return nil end
  local c = spk.compare(a, b)
  return c.max_abs == 0 and (c.nan_mismatch or 0) == 0
end

-- One batch at one thread count: the row (never raises; a failing part leaves a note).
local function measure(spk, o, batch, threads, x, first)
  local row = { batch = batch, threads = threads }
  local ok, err = pcall(function()
    local f64_samples, y64 = {}, nil
    for r = 1, math.min(o.rounds, 3) do
      local start = spk.clock_ms()
      local y = spk.lstm.reference(o.layers, x, { precision = "f64", threads = threads })
      f64_samples[r] = spk.clock_ms() - start
      if r == 1 then y64 = y else y:close() end
    end
    row.f64_ms = median(f64_samples)
    local plan = spk.lstm.stack { layers = o.layers, batch = batch, steps = o.steps, backend = "cpu", threads = threads }
    local y32 = plan:forward(x)
    row.f32_ms = plan:time { rounds = o.rounds, warmup = o.warmup, x = x }.median_ms
    plan:close()
    row.rel_l2 = spk.compare(y32, y64).rel_l2
    if first.y64 then
      row.bits_same = bits_same(spk, y64, first.y64) and bits_same(spk, y32, first.y32)
    else
      first.y64, first.y32 = y64, y32
    end
    if o.ort_dir then
      row.ort_ms, row.ort_rel_l2, row.ort_note = ort_time(spk, o, x, y64, threads)
    end
  end)
  if not ok then row.error = tostring(err):gsub("\n.*", "") end
  local flops = M.flops(o.dims, #o.layers, batch, o.steps)
  if row.f32_ms then row.f32_gflops = flops / row.f32_ms / 1e6 end
  if row.f64_ms then row.f64_gflops = flops / row.f64_ms / 1e6 end
  if row.f32_ms and row.ort_ms then row.vs_ort = row.ort_ms / row.f32_ms end
  return row
end

local function ort_folder(spk, layers)
  local pipe = io.popen("mktemp -d 2>/dev/null")
  local dir = pipe and (pipe:read("l") or "")
  if pipe then pipe:close() end
  if not dir or dir == "" then return nil end
  spk.lstm.save(dir .. "/model.onnx", layers, { format = "onnx" })
  return dir
end

function M.run(opts)
  opts = require("spk.options").check_keys(opts, { "layers", "batches", "steps", "threads", "rounds", "warmup",
                                                   "seed", "progress", "ort", "python" }, "cpu_bench")
  local spk = require "spk"
  local o = { layers = opts.layers, steps = opts.steps or 589, rounds = opts.rounds or 7, warmup = opts.warmup or 2,
              seed = opts.seed or 1, progress = opts.progress or function() end, python = python_of(opts.python) }
  o.layers = o.layers or spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
  o.dims = spk.lstm.validate(o.layers)
  local cpu = spk.lstm.cpu_info()
  local threads = opts.threads or { cpu.threads or cpu.cpus }
  local info = { vector = cpu.vector, cpus = cpu.cpus, threads = threads, rounds = o.rounds, warmup = o.warmup,
                 steps = o.steps, batches = opts.batches or { 1, 8, 32, 64 } }
  if opts.ort ~= false then
    info.ort_version, info.ort_missing = M.ort_version(o.python)
    if info.ort_version then o.ort_dir = ort_folder(spk, o.layers) end
  end
  local rows = {}
  for _, batch in ipairs(info.batches) do
    local x = spk.randn({ batch, o.steps, o.dims.input }, { seed = o.seed })
    local first = {}
    for _, n in ipairs(threads) do
      o.progress(("cpu section: batch %d, %d thread%s ..."):format(batch, n, n == 1 and "" or "s"))
      rows[#rows + 1] = measure(spk, o, batch, n, x, first)
    end
    collectgarbage()
  end
  if o.ort_dir then os.execute("rm -rf " .. quote(o.ort_dir)) end
  return rows, info
end

function M.text(rows, info)
  local report = require "spk.report"
  local function bits(_, row)
    if row.bits_same == nil then return "" end
    return row.bits_same and "same" or "DIFFER"
  end
  local function gflops(key) return function(_, row) return row[key] and ("%.1f"):format(row[key]) or "" end end
  local columns = {
    "batch", "threads",
    { key = "f32_ms", title = "spk f32 ms", format = report.fmt_ms },
    { key = "ort_ms", title = "ORT ms", format = report.fmt_ms },
    { key = "vs_ort", title = "spk vs ORT", format = report.fmt_ratio, align = "right" },
    { key = "f32_gflops", title = "f32 GFLOP/s", format = gflops("f32_gflops"), align = "right" },
    { key = "rel_l2", title = "f32 rel L2", format = report.fmt_sci, align = "right" },
    { key = "ort_rel_l2", title = "ORT rel L2", format = report.fmt_sci, align = "right" },
    { key = "f64_ms", title = "f64 ms", format = report.fmt_ms },
    { key = "f64_gflops", title = "f64 GFLOP/s", format = gflops("f64_gflops"), align = "right" },
    { key = "bits", title = "bits", format = bits },
    { key = "error", title = "note", empty = "" },
  }
  for _, r in ipairs(rows) do
    if not r.error and r.ort_note then r.error = "ORT: " .. r.ort_note end
  end
  local title = ("CPU section: %s vectors, %d CPUs this process may use; ms: median of %d runs after %d "
    .. "(f64: of %d after none), wall clock"):format(info.vector, info.cpus, info.rounds, info.warmup,
    math.min(info.rounds, 3))
  local footer = {
    "spk vs ORT: ONNX Runtime's median / spk f32's (> 1: spk faster); ORT runs with the row's intra-op threads.",
    "rel L2 against the f64 reference; bits: the f64 and f32 outputs against the first thread count's.",
    info.ort_version and ("ONNX Runtime %s (CPU provider)."):format(info.ort_version)
      or ("ONNX Runtime: not run (%s)."):format(info.ort_missing or "left out"),
  }
  return report.table(rows, columns, { title = title, footer = footer })
end

do
  local options = require "spk.options"
  M.run = options.takes(1, "cpu_bench.run", M.run)
  M.text = options.takes(2, "cpu_bench.text", M.text)
end

return M
