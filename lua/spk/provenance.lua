-- spk.provenance: where a result came from. One record, made here, that
-- every results file spk writes carries: report.json and report.csv and
-- plot.save add it (a JSON object's "provenance" key, a CSV's first line, an
-- SVG's <metadata>), spk bench and spk tune print it above their tables, and
-- each command, experiment and tool passes what it ran.
--
--   local provenance = require "spk.provenance"
--   provenance.record([run]) -> {
--     spk = {version, commit, dirty},      -- the build (dirty: tracked files differed from
--                                          -- the commit at make time; nil when unknown)
--     command = "build/spk run experiments/quickstart.lua --quick", argv = {...},
--     date = "2026-12-01T10:00:00Z", host =, os =,
--     device = {name =, cc =, sms =, memory_bytes =} or {name = "none", reason =},
--     driver =, runtime =, nvrtc =, cudnn =, cuda_toolkit =,   -- versions ("13.0", "9.14.0"; "none")
--     rng = {seed =},                      -- the seed of the process-wide generator (spk.seed)
--     run = run}                           -- what ran, as the writer says (below)
--   run: {seeds = {weights = 1, input = 1}, shape = {layers =, input =, hidden =, steps =,
--         batches = {...}}, dtype = "f32", math = {"fp32"}, backends = {...}, variants = {...}, ...}
--     any further keys are kept; a table given as provenance.record(record) is returned as is.
--   provenance.from_rows(rows[, run]) -> run: run (copied) with backends, variants, math and
--     batches filled in from the rows' fields of those names where run leaves them out
--   provenance.missing(record) -> {key, ...}: the keys of provenance.REQUIRED the record lacks
--   provenance.lines(record[, {device = false}]) -> {line, ...}: the record for people: the
--     build, date and host; the command; the device, versions and seed (bench, tune; device = false
--     leaves the last out where a table's header says it)
--   provenance.csv_comment(record) -> "# provenance {...}\n": a CSV's first line (JSON on it)
--   provenance.svg_metadata(record) -> '<metadata id="spk-provenance">{...}</metadata>'
--   provenance.read(text) -> record | nil: the record of a results file's text (JSON, CSV, SVG)
--   provenance.environment() -> {device, driver, runtime, cudnn, date}: the strings a table
--     header shows (spk.benchmark.environment is this)
--   provenance.version() -> {version, commit, dirty} (spk.version; tostring gives
--     "0.1.0 (d385bdb, dirty)")
--
-- The command line is the program's own argv (the spk program records it;
-- under lua5.4 the global `arg`), quoted for a shell where a word needs it.
local core = require "spk.core"
local report = require "spk.report"

local M = {}

-- What a results file's record must hold: the issue of reproducing a result
-- is what the build, the command, the machine and the run were.
M.REQUIRED = { "spk.version", "spk.commit", "command", "date", "host", "device.name", "driver", "runtime",
               "cudnn", "rng.seed", "run.seeds", "run.shape", "run.dtype", "run.math", "run.backends",
               "run.variants" }

-- 13000 -> "13.0" (CUDA's 1000 * major + 10 * minor); nil for none.
function M.cuda_version(number)
  if type(number) ~= "number" or number <= 0 then return nil end
  return ("%d.%d"):format(number // 1000, number % 1000 // 10)
end

-- 91400 -> "9.14.0" (cuDNN 9: major * 10000 + minor * 100 + patch; before: 1000, 100).
function M.cudnn_version(number)
  if type(number) ~= "number" or number <= 0 then return nil end
  if number >= 90000 then
    return ("%d.%d.%d"):format(number // 10000, number // 100 % 100, number % 100)
  end
  return ("%d.%d.%d"):format(number // 1000, number // 100 % 10, number % 100)
end

local version_mt = {
  __name = "spk.version",
  __tostring = function(v)
    local state = v.dirty == true and "dirty" or v.dirty == false and "clean" or "state unknown"
    return ("%s (%s, %s)"):format(v.version, v.commit == "unknown" and "commit unknown" or v.commit:sub(1, 7), state)
  end,
}

function M.version()
  local b = core.system_build()
  return setmetatable({ version = b.version, commit = b.commit, dirty = b.dirty }, version_mt)
end

local function shell_word(w)
  w = tostring(w)
  if w ~= "" and not w:find("[^%w@%%+=:,./_-]") then return w end
  return "'" .. w:gsub("'", "'\\''") .. "'"
end

-- The program's arguments: spk.program.argv, else the global arg's (negative
-- indices are the interpreter and its options).
local function argv()
  local ok, program = pcall(require, "spk.program")
  if ok and type(program) == "table" and type(program.argv) == "table" then
    local out = {}
    for i, a in ipairs(program.argv) do out[i] = a end
    return out
  end
  local a, out = rawget(_G, "arg"), {}
  if type(a) ~= "table" then return out end
  local first = 0
  while a[first - 1] ~= nil do first = first - 1 end
  for i = first, #a do out[#out + 1] = tostring(a[i]) end
  return out
end

local function device_of(env)
  local d = env.device
  if d then return { name = d.name, cc = d.cc, sms = d.sms, memory_bytes = d.memory_bytes, ordinal = d.ordinal } end
  return { name = "none", reason = env.device_error or "no CUDA device" }
end

local function initial_seed()
  local spk = package.loaded.spk
  local fn = type(spk) == "table" and spk.initial_seed or core.initial_seed
  return type(fn) == "function" and fn() or nil
end

function M.record(run)
  if type(run) == "table" and type(run.spk) == "table" and run.command then return run end
  if run ~= nil and type(run) ~= "table" then
    error(("provenance.record: run must be a table, got %s"):format(type(run)), 2)
  end
  local env = core.system_environment()
  local b = core.system_build()
  local words = argv()
  local quoted = {}
  for i, w in ipairs(words) do quoted[i] = shell_word(w) end
  return {
    spk = { version = b.version, commit = b.commit, dirty = b.dirty },
    command = table.concat(quoted, " "), argv = words,
    date = os.date("!%Y-%m-%dT%H:%M:%SZ"), host = env.host or "unknown", os = env.os,
    device = device_of(env),
    driver = M.cuda_version(env.driver_version) or "none",
    runtime = M.cuda_version(env.runtime_version) or "none",
    nvrtc = env.nvrtc_version,
    cudnn = M.cudnn_version(env.cudnn_version) or "none",
    cuda_toolkit = M.cuda_version(b.cuda_toolkit_version),
    rng = { seed = initial_seed() },
    run = run or report.object {},
  }
end

local function distinct(rows, key, into)
  local seen, out = {}, into or {}
  for _, v in ipairs(out) do seen[v] = true end
  for _, r in ipairs(rows) do
    local v = r[key]
    if v ~= nil and not seen[v] then
      seen[v] = true
      out[#out + 1] = v
    end
  end
  return out
end

function M.from_rows(rows, run)
  local out = {}
  for k, v in pairs(run or {}) do out[k] = v end
  rows = rows or {}
  if out.backends == nil then out.backends = distinct(rows, "backend") end
  if out.variants == nil then out.variants = distinct(rows, "variant") end
  if out.math == nil then
    local maths = distinct(rows, "math")
    out.math = #maths > 0 and maths or { core.blas.math_modes[1].name } -- the default math
  end
  if out.batches == nil then
    local batches = distinct(rows, "batch")
    if #batches > 0 then
      table.sort(batches)
      out.batches = batches
    end
  end
  return out
end

local function lookup(t, path)
  for part in path:gmatch("[^.]+") do
    if type(t) ~= "table" then return nil end
    t = t[part]
  end
  return t
end

function M.missing(record)
  local out = {}
  for _, key in ipairs(M.REQUIRED) do
    local v = lookup(record, key)
    if v == nil or v == report.null then out[#out + 1] = key end
  end
  return out
end

function M.lines(record, opts)
  opts = require("spk.options").check_keys(opts, { "device" }, "provenance.lines", 2)
  record = M.record(record)
  local s, d = record.spk, record.device
  local state = s.dirty == true and ", dirty" or s.dirty == false and "" or ", state unknown"
  local device = d.name == "none" and ("none (" .. tostring(d.reason) .. ")")
    or ("%s (compute capability %s, %s SMs)"):format(d.name, tostring(d.cc), tostring(d.sms))
  local lines = {
    ("spk %s, commit %s%s; %s on %s"):format(s.version, s.commit, state, record.date, record.host),
    ("command: %s"):format(record.command),
  }
  if opts.device ~= false then
    lines[3] = ("device: %s; driver %s; CUDA runtime %s; cuDNN %s; seed %s"):format(device, record.driver,
      record.runtime, record.cudnn, tostring(record.rng.seed))
  end
  return lines
end

function M.csv_comment(record)
  return "# provenance " .. report.json_encode(M.record(record)) .. "\n"
end

function M.svg_metadata(record)
  local text = report.json_encode(M.record(record))
  return '<metadata id="spk-provenance">' .. text:gsub("[&<>]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;" })
    .. "</metadata>"
end

local function decoded(text)
  local ok, value = pcall(report.json_decode, text)
  if ok and type(value) == "table" then return value end
  return nil
end

function M.read(text)
  if type(text) ~= "string" then return nil end
  local line = text:match("^# provenance ([^\n]*)")
  if line then return decoded(line) end
  local meta = text:match('<metadata id="spk%-provenance">(.-)</metadata>')
  if meta then
    return decoded((meta:gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&amp;", "&")))
  end
  local doc = decoded(text)
  if doc and type(doc.provenance) == "table" then return doc.provenance end
  return nil
end

function M.environment()
  local r = M.record()
  local d = r.device
  return {
    device = d.name == "none" and "none" or ("%s (compute capability %s, %d SMs)"):format(d.name, tostring(d.cc),
      d.sms or 0),
    driver = r.driver, runtime = r.runtime, cudnn = r.cudnn, date = os.date("!%Y-%m-%d %H:%M UTC"),
  }
end

return M
