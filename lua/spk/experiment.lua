-- spk.experiment: what every script in experiments/ shares, so the scripts
-- stay short: options from `arg`, the results folder, progress lines, the
-- "no GPU" policy and writing tables, CSV, JSON and SVG files.
--
--   local experiment = require "spk.experiment"
--   local ex = experiment.start{
--     name = "tile_sweep", about = "one line for --help",
--     gpu = "required",            -- | "optional": see The no-GPU policy
--     no_gpu = "...",              -- optional: what --help says happens without a GPU
--     batches = {1, 8, 32, 64, 256}, quick_batches = {1, 8},
--     options = { {"rounds", 7, quick = 3, help = "timed rounds"},      -- integer
--                 {"backends", {"persistent", "cudnn"}, help = "..."} }, -- list
--   }
--   ex.quick, ex.batches, ex.out (the results folder), ex.gpu (a device is
--   present), ex.opts.<name> (each extra option), ex.name
--   ex:progress(fmt, ...)           -- "[tile_sweep  12.3 s] ..." on stderr
--   ex:path("file.csv")             -- a path inside the results folder
--   ex:csv(name, rows, columns), ex:json(name, value), ex:svg(name, svg)
--                                   -- write a file there and remember it
--   ex:table(rows, columns, opts)   -- print spk.report.table on stdout
--   ex:finish()                     -- list the files written; returns 0
--
-- Options (every script): --quick (small batches, few variants, few rounds),
-- --batches 1,8,32 (or --batch), --out DIR (default results/<name>-<YYYYmmdd-HHMMSS>/),
-- --help; the script's own options as --name VALUE (a list: comma separated).
-- `--name=value` works too. A usage error prints the usage and exits 2.
--
-- The no-GPU policy: with gpu = "required", a machine without a usable CUDA
-- device gets the line "<name>: needs a CUDA GPU: no CUDA device (...).
-- Nothing was run." on stderr and exit status 3 (experiment.NO_GPU),
-- before any folder is made. With gpu = "optional" the script runs and reads
-- ex.gpu to decide which parts it can do.
local M = {}

M.NO_GPU = 3

local spk = require "spk"
local report = require "spk.report"
local options = require "spk.options"

local function split_list(text, numbers, name)
  local out = {}
  for item in tostring(text):gmatch("[^,%s]+") do
    if numbers then
      local n = math.tointeger(tonumber(item))
      if not n or n < 1 then return nil, ("--%s: '%s' is not a positive integer"):format(name, item) end
      out[#out + 1] = n
    else
      out[#out + 1] = item
    end
  end
  if #out == 0 then return nil, ("--%s needs a comma-separated list"):format(name) end
  return out
end

local function usage(spec)
  local lines = { ("usage: spk run experiments/%s.lua [options]"):format(spec.name) }
  if spec.about then lines[#lines + 1] = spec.about end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "  --quick              small batches, few variants, few rounds"
  lines[#lines + 1] = ("  --batches LIST       comma separated, or --batch (default %s; quick %s)"):format(
    table.concat(spec.batches or {}, ","), table.concat(spec.quick_batches or spec.batches or {}, ","))
  lines[#lines + 1] = ("  --out DIR            results folder (default results/%s-<YYYYmmdd-HHMMSS>/)"):format(spec.name)
  for _, o in ipairs(spec.options or {}) do
    local default = type(o[2]) == "table" and table.concat(o[2], ",") or tostring(o[2])
    local quick = o.quick ~= nil and ("; quick " .. (type(o.quick) == "table" and table.concat(o.quick, ",")
      or tostring(o.quick))) or ""
    lines[#lines + 1] = ("  --%-18s %s (default %s%s)"):format(o[1] .. " " .. (type(o[2]) == "table" and "LIST"
      or type(o[2]) == "number" and "N" or "VALUE"), o.help or "", default, quick)
  end
  lines[#lines + 1] = "  --help               this text"
  lines[#lines + 1] = spec.no_gpu or (spec.gpu == "required" and "Needs a CUDA GPU: without one it says so and exits 3."
    or "Without a GPU it runs its CPU part only.")
  return table.concat(lines, "\n")
end

-- Parses argv into {quick =, batches =, out =, help =, opts = {}}; returns
-- nil, message on a usage error. Exposed for tests.
function M.parse(spec, argv)
  local r = { quick = false, opts = {} }
  local extra = {}
  for _, o in ipairs(spec.options or {}) do extra[o[1]] = o end
  local raw = {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local name, value = a:match("^%-%-([%w_%-]+)=(.*)$")
    if not name then name = a:match("^%-%-([%w_%-]+)$") end
    if a == "-h" then name = "help" end
    if not name then return nil, ("unexpected argument '%s'"):format(a) end
    name = name:gsub("%-", "_")
    if name == "batch" and not extra.batch then name = "batches" end -- one batch or several: either spelling
    if name == "quick" or name == "help" then
      if value then return nil, ("--%s takes no value"):format(name) end
      r[name] = true
    elseif name == "batches" or name == "out" or extra[name] then
      if not value then
        i = i + 1
        value = argv[i]
        if value == nil then return nil, ("--%s needs a value"):format(name) end
      end
      raw[name] = value
    else
      return nil, ("unknown option --%s"):format(name)
    end
    i = i + 1
  end
  if raw.batches then
    local list, err = split_list(raw.batches, true, "batches")
    if not list then return nil, err end
    r.batches = list
  else
    r.batches = r.quick and (spec.quick_batches or spec.batches) or spec.batches
  end
  r.out = raw.out
  for _, o in ipairs(spec.options or {}) do
    local name, default = o[1], o[2]
    local value = raw[name]
    if value == nil then
      if r.quick and o.quick ~= nil then r.opts[name] = o.quick else r.opts[name] = default end
    elseif type(default) == "table" then
      local list, err = split_list(value, type(default[1]) == "number", name)
      if not list then return nil, err end
      r.opts[name] = list
    elseif type(default) == "number" then
      local n = math.tointeger(tonumber(value))
      if not n or n < 0 then return nil, ("--%s: '%s' is not a non-negative integer"):format(name, value) end
      r.opts[name] = n
    else
      r.opts[name] = value
    end
  end
  return r
end

-- Whether a CUDA device can be used, and why not.
function M.gpu_status()
  if not (spk.cuda and spk.cuda.available) then return false, "spk was built without the GPU runtime" end
  local ok, available = pcall(spk.cuda.available)
  if ok and available then return true end
  return false, spk.cuda.no_device_reason()
end

local function mkdir(path)
  local ok = os.execute("mkdir -p '" .. path:gsub("'", "'\\''") .. "'")
  if not ok then error(("experiment: cannot make the results folder %s"):format(path), 3) end
end

local function exists(path)
  return os.execute("test -e '" .. path:gsub("'", "'\\''") .. "'") == true
end

local Ex = {}
Ex.__index = Ex

function M.start(spec)
  if type(spec) ~= "table" or type(spec.name) ~= "string" then
    error("experiment.start: expects {name =, ...}", 2)
  end
  options.check_keys(spec, { "name", "about", "batches", "quick_batches", "options", "gpu", "no_gpu", "arg" },
    "experiment.start")
  local argv = {}
  for i, a in ipairs(spec.arg or _G.arg or {}) do argv[i] = a end
  local r, err = M.parse(spec, argv)
  if not r then
    io.stderr:write(("%s: %s\n%s\n"):format(spec.name, err, usage(spec)))
    os.exit(2)
  end
  if r.help then
    print(usage(spec))
    os.exit(0)
  end
  local gpu, why = M.gpu_status()
  if spec.gpu == "required" and not gpu then
    io.stderr:write(("%s: needs a CUDA GPU: %s. Nothing was run.\n"):format(spec.name,
      why))
    os.exit(M.NO_GPU)
  end
  local out = r.out
  if not out then
    local base = ("results/%s-%s"):format(spec.name, os.date("%Y%m%d-%H%M%S"))
    out = base
    local n = 2
    while exists(out) do
      out = ("%s-%d"):format(base, n)
      n = n + 1
    end
  end
  mkdir(out)
  local self = setmetatable({ name = spec.name, quick = r.quick, batches = r.batches, out = out, gpu = gpu,
                              opts = r.opts, files = {}, started = spk.clock_ms and spk.clock_ms() or os.clock() * 1000 },
    Ex)
  print(("%s%s: results in %s/%s"):format(spec.name, r.quick and " (quick)" or "", out,
    gpu and "" or "  (no GPU: CPU part only)"))
  return self
end

function Ex:elapsed_s()
  local now = spk.clock_ms and spk.clock_ms() or os.clock() * 1000
  return (now - self.started) / 1000
end

function Ex:progress(fmt, ...)
  io.stderr:write(("[%s %6.1f s] %s\n"):format(self.name, self:elapsed_s(), fmt:format(...)))
  io.stderr:flush()
end

function Ex:path(name) return self.out .. "/" .. name end

function Ex:csv(name, rows, columns)
  local p = report.csv(self:path(name), rows, columns)
  self.files[#self.files + 1] = p
  return p
end

function Ex:json(name, value)
  local p = report.json(self:path(name), value, { indent = 2 })
  self.files[#self.files + 1] = p
  return p
end

function Ex:svg(name, svg)
  local p = require("spk.plot").save(self:path(name), svg)
  self.files[#self.files + 1] = p
  return p
end

function Ex:text(name, text)
  local p = spk.files.write(self:path(name), text)
  self.files[#self.files + 1] = p
  return p
end

function Ex:table(rows, columns, opts)
  io.write(report.table(rows, columns, opts))
end

function Ex:finish()
  print(("%s: done in %.1f s; wrote:"):format(self.name, self:elapsed_s()))
  for _, p in ipairs(self.files) do print("  " .. p) end
  return 0
end

-- ------------------------------------------------------------------ helpers

-- Median of a list of numbers (the list is not modified).
function M.median(values)
  local s = {}
  for i, v in ipairs(values) do s[i] = v end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

-- Wall-clock milliseconds of fn(), median over `rounds` calls after `warmup`.
function M.time_cpu(fn, rounds, warmup)
  local clock = spk.clock_ms or function() return os.clock() * 1000 end
  for _ = 1, warmup or 1 do fn() end
  local samples = {}
  for i = 1, rounds or 5 do
    local t0 = clock()
    fn()
    samples[i] = clock() - t0
  end
  return M.median(samples), samples
end

-- The message's first line without the "file.lua:12: " position.
function M.reason(err)
  local text = tostring(err):gsub("\n.*", "")
  return (text:gsub("^[^:]*%.lua:%d+: ", ""))
end

-- Checks a plan's output against a reference and twice for determinism, then
-- times it: {rel_l2, max_abs, max_ulp, deterministic, median_ms, min_ms, spread}
-- (raises on failure; the caller turns that into a row with a reason).
function M.measure_plan(plan, x, reference, opts)
  opts = options.check_keys(opts, { "rounds", "warmup", "determinism" }, "experiment.measure_plan")
  local row = {}
  local y1 = plan:forward(x)
  local h1 = y1.device ~= nil and y1.device ~= "cpu" and y1:cpu() or y1
  if reference then
    local c = spk.compare(h1, reference)
    row.rel_l2, row.max_abs, row.max_ulp = c.rel_l2, c.max_abs, c.max_ulp
    if c.nan_mismatch > 0 then row.rel_l2, row.max_abs = 0 / 0, 0 / 0 end
  end
  if opts.determinism ~= false then
    local y2 = plan:forward(x)
    local h2 = y2.device ~= nil and y2.device ~= "cpu" and y2:cpu() or y2
    local d = spk.compare(h2, h1)
    row.deterministic = d.max_ulp == 0 and d.nan_mismatch == 0
  end
  local t = plan:time { rounds = opts.rounds or 7, warmup = opts.warmup or 2, x = x }
  row.median_ms, row.min_ms, row.max_ms, row.spread = t.median_ms or t.median, t.min_ms or t.min,
    t.max_ms or t.max, t.spread
  return row
end

-- An argument a function does not take is an error that names it.
M.start = options.takes(1, "experiment.start", M.start)
M.measure_plan = options.takes(4, "experiment.measure_plan", M.measure_plan)

return M
