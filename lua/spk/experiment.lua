-- spk.experiment: what every script in experiments/ shares, so the scripts
-- stay short: options from `arg`, --help and --dry-run, the results folder,
-- progress, the "no GPU" policy, the provenance of every file it writes, and
-- what a failure leaves behind.
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
--   present), ex.opts.<name> (each extra option), ex.name, ex.dry_run
--   ex:describe{seeds =, shape =, dtype =, math =, backends =, variants =}
--                                   -- what the run is, for the provenance record
--   ex:plan(items[, header])        -- the work, one item per run (a string or {what =}):
--                                   -- a dry run prints it and exits 0; else progress counts it
--   ex:step(what)                   -- the next item starts (the status line on a terminal)
--   ex:update(what, done, total)    -- or: where the work is, counted by the script
--   ex:progress(fmt, ...)           -- "[tile_sweep  12.3 s] ..." on stderr
--   ex:path("file.csv")             -- a path inside the results folder
--   ex:csv(name, rows, columns), ex:json(name, value), ex:svg(name, svg), ex:text(name, text)
--                                   -- write a file there (with its provenance) and remember it
--   ex:table(rows, columns, opts)   -- print spk.report.table on stdout
--   ex:finish()                     -- list the files written; returns 0
--   experiment.gpu_status() -> true | false, why (spk.options.gpu_status)
--
-- Options (every script): --quick (small batches, few variants, few rounds),
-- --batches 1,8,32 (or --batch), --out DIR (default results/<name>-<YYYYmmdd-HHMMSS>/),
-- --dry-run (list the runs, measure nothing, no device needed), --debug (a
-- failure's traceback), --help; the script's own options as --name VALUE (a
-- list: comma separated). `--name=value` works too. A usage error prints the
-- usage and exits 2.
--
-- The no-GPU policy: with gpu = "required", a machine without a usable CUDA
-- device gets the line "<name>: needs a CUDA GPU: no CUDA device (...).
-- Nothing was run." on stderr and exit status 3 (spk.options.EXIT.no_gpu,
-- the status of "no GPU" everywhere), before any folder is made. With gpu =
-- "optional" the script runs and reads ex.gpu to decide which parts it can do.
--
-- Provenance: every file written through ex carries spk.provenance.record of
-- the run: the experiment, its options and batches, what ex:describe said, and
-- the backends, variants and math of the rows written.
--
-- A failure (an error the script does not catch) removes the files the
-- experiment wrote and its results folder if it made it, and prints
-- "<name>: <message>" alone (--debug: with the traceback; the exit status is 1).
local M = {}

local spk = require "spk"
local report = require "spk.report"
local options = require "spk.options"
local provenance = require "spk.provenance"

M.NO_GPU = options.EXIT.no_gpu

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
  lines[#lines + 1] = "  --dry-run            list the runs and exit; nothing is measured (no device needed)"
  lines[#lines + 1] = "  --debug              a failure prints its traceback too"
  lines[#lines + 1] = "  --help               this text"
  lines[#lines + 1] = spec.no_gpu or (spec.gpu == "required"
    and ("Needs a CUDA GPU: without one it says so and exits %d."):format(M.NO_GPU)
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
    if name == "quick" or name == "help" or name == "dry_run" or name == "debug" then
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
  r.dry_run, r.debug = r.dry_run or false, r.debug or false
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
M.gpu_status = options.gpu_status

-- The results folder and any missing one above it; whether the folder itself was made now.
local function make_folder(path)
  local ok, err, made = pcall(spk.files.make_folder, path)
  if not ok then error("experiment: " .. tostring(err), 3) end
  return made
end

local function exists(path) return spk.files.kind(path) ~= nil end

local Ex = {}
Ex.__index = Ex

-- On a failure: remove what the experiment wrote, and say what failed.
local function on_failure(self)
  return function(message)
    for i = #self.files, 1, -1 do spk.files.remove(self.files[i]) end
    if self.made_folder then spk.files.remove_folder(self.out) end
    if self.progress_line then self.progress_line:clear() end
    if self.debug then return nil end
    local text = tostring(message):gsub("\nstack traceback:.*$", "")
    return ("%s: %s"):format(self.name, text)
  end
end

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
    os.exit(options.EXIT.usage)
  end
  if r.help then
    print(usage(spec))
    os.exit(options.EXIT.ok)
  end
  local gpu = false
  if not r.dry_run then
    gpu = M.gpu_status()
    if spec.gpu == "required" and not gpu then os.exit(options.no_gpu(spec.name)) end
  end
  local self = setmetatable({ name = spec.name, quick = r.quick, batches = r.batches, gpu = gpu, opts = r.opts,
                              files = {}, dry_run = r.dry_run, debug = r.debug,
                              run = { experiment = spec.name, quick = r.quick, batches = r.batches,
                                      options = r.opts },
                              started = spk.clock_ms and spk.clock_ms() or os.clock() * 1000 }, Ex)
  if r.dry_run then return self end
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
  self.made_folder = make_folder(out)
  self.out = out
  local ok, program = pcall(require, "spk.program")
  if ok and type(program) == "table" then program.on_failure = on_failure(self) end
  print(("%s%s: results in %s/%s"):format(spec.name, r.quick and " (quick)" or "", out,
    gpu and "" or "  (no GPU: CPU part only)"))
  return self
end

function Ex:describe(run)
  for k, v in pairs(options.check_keys(run, { "seeds", "shape", "dtype", "math", "backends", "variants", "kernel",
                                              "steps", "rounds", "notes" }, "ex:describe")) do
    self.run[k] = v
  end
  return self
end

function Ex:plan(items, header)
  self.progress_line = options.plan(self.name, self.dry_run, items, header)
  return self.progress_line
end

function Ex:step(what)
  if self.progress_line then self.progress_line:step(what) end
end

-- Where the work is, when the script counts it itself (spk.benchmark's steps).
function Ex:update(what, done, total)
  if self.progress_line then self.progress_line:update((tostring(what):gsub(" %.%.%.$", "")), done, total) end
end

function Ex:elapsed_s()
  local now = spk.clock_ms and spk.clock_ms() or os.clock() * 1000
  return (now - self.started) / 1000
end

function Ex:progress(fmt, ...)
  local line = ("[%s %6.1f s] %s"):format(self.name, self:elapsed_s(), fmt:format(...))
  if self.progress_line then
    self.progress_line:print(line)
  else
    io.stderr:write(line, "\n")
    io.stderr:flush()
  end
end

function Ex:path(name) return self.out .. "/" .. name end

-- The provenance record of a file holding `rows` (the rows written so far
-- count too, so a chart names the backends of the data it draws).
function Ex:record(rows)
  self.rows_seen = self.rows_seen or {}
  for _, r in ipairs(type(rows) == "table" and rows or {}) do
    if type(r) == "table" then self.rows_seen[#self.rows_seen + 1] = r end
  end
  return provenance.record(provenance.from_rows(self.rows_seen, self.run))
end

function Ex:csv(name, rows, columns)
  local p = report.csv(self:path(name), rows, columns, { provenance = self:record(rows) })
  self.files[#self.files + 1] = p
  return p
end

function Ex:json(name, value)
  local p = report.json(self:path(name), value, { indent = 2, provenance = self:record(type(value) == "table"
    and value.rows) })
  self.files[#self.files + 1] = p
  return p
end

function Ex:svg(name, svg)
  local p = require("spk.plot").save(self:path(name), svg, { provenance = self:record() })
  self.files[#self.files + 1] = p
  return p
end

-- A text file: the provenance as "# " lines above it.
function Ex:text(name, text)
  local lines = {}
  for _, line in ipairs(provenance.lines(self:record())) do lines[#lines + 1] = "# " .. line .. "\n" end
  local p = spk.files.write(self:path(name), table.concat(lines) .. text)
  self.files[#self.files + 1] = p
  return p
end

function Ex:table(rows, columns, opts)
  io.write(report.table(rows, columns, opts))
end

function Ex:finish()
  if self.progress_line then self.progress_line:finish() end
  local ok, program = pcall(require, "spk.program")
  if ok and type(program) == "table" then program.on_failure = nil end
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
