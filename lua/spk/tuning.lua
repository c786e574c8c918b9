-- spk.tuning: the tuning record that `spk tune` writes and backend "auto"
-- (lua/spk/auto.lua) reads. Plain Lua over spk.cuda.sha256 and
-- spk.cuda.kernel_files; needs no GPU except to learn the device's facts.
--
--   local tuning = require "spk.tuning"
--
-- Where records live
--   tuning.dir() -> folder: $SPK_TUNE_DIR, else $XDG_CACHE_HOME/spk/tune,
--     else $HOME/.cache/spk/tune. One file per key: <folder>/<key>.json.
--
-- The key
--   tuning.facts() -> fields | nil, why
--     What a measurement depends on, for the current device:
--     {device = "NVIDIA H200", cc = "9.0", sms = 132, driver = 13000, runtime = 13000,
--      cudnn = 91000 | "none", kernels = {["lstm_cluster.cu"] = sha256 hex, ...}}
--     (kernels: every *.cu and *.cuh of the kernel folder, by content). nil and
--     the reason where there is no CUDA device.
--   tuning.kernel_hashes([dir]) -> {name = sha256 hex of the file's content}
--   tuning.key(fields) -> 64 hex digits: SHA-256 of tuning.key_text(fields), a
--     fixed-order "name=value" line per field and one per kernel file (sorted).
--   tuning.path(key[, dir]) -> <dir>/<key>.json
--
-- Records
--   tuning.new_record(fields[, command]) -> {format = 1, key, fields, date, command, entries = {}}
--   record.entries: one per measured shape and batch:
--     {hidden, input, layers, batch, steps, steps_class, rounds, date,
--      winner = {backend =, options = {kernel = {...}} | {algo = ...}, math = nil | "fp32" | "3xtf32",
--                variant =, median_ms =, rel_l2 =, speedup =} | nil (no candidate passed its bound),
--      cudnn_best = {variant =, median_ms =} | nil,
--      candidates = {{backend =, options =, variant =, median_ms =, rel_l2 =, max_abs =,
--                     bound =, bound_ok =, eligible =, error =}, ...}}
--   tuning.save(record[, dir]) -> path: written to a temporary file in the
--     folder (made if missing), then renamed over the record, so a reader sees
--     the old record or the new one, never half of one.
--   tuning.load(path[, fields]) -> record | nil, reason: reason says why the
--     file is no record (missing, larger than MAX_RECORD_BYTES, not JSON, not
--     of the schema below) or, given fields, stale (its key fields differ from
--     them). No warning.
--   tuning.decode(text) -> record | nil, reason: the same for a file's text.
--   tuning.check_record(record) -> true | nil, reason: the schema. Every field
--     has a type and a range (sizes and batches positive integers, times
--     positive finite numbers, hashes 64 hex digits, steps_class the power of
--     two of steps); objects hold only the fields below; a winner's backend is
--     one that spk.lstm.tunables knows (not "auto"), and its options are the
--     ones that backend lets a record choose (a kernel table, cuDNN's algo and
--     layout; never layers, batch, steps or math), checked by the backend's
--     own option checks without a device; its math, if any, one of
--     tuning.fp32_maths() that the backend has. The reason names the field
--     ("entries[2].winner.median_ms must be a positive number, got \"abc\"").
--   tuning.fp32_maths() -> {"fp32", "3xtf32"}: the maths of FP32's accuracy
--     (those spk.benchmark holds to FP32's bounds), among which a record
--     chooses per batch
--   tuning.kernel_tunable(spk.lstm, backend) -> the check a kernel backend
--     registers as spk.lstm.tunables[backend]: a kernel table whose keys and
--     value types come from the backend's option table, fitted at the
--     record's shape by the backend's own checks.
--   tuning.find([fields[, dir]]) -> record, path | nil, reason, path
--     The record of these fields (default tuning.facts()). A corrupt or stale
--     file is ignored with one warning per file per process (tuning.warn).
--   tuning.merge(record, entries): replaces the entries of the same shape,
--     batch and steps class, keeps the others (sorted by shape, then batch).
--
-- Lookup
--   tuning.steps_class(steps) -> the smallest power of two >= steps (589 -> 1024)
--   tuning.lookup(record, shape) -> entry, rule | nil, reason
--     shape = {hidden, input, layers, batch, steps}. Among the entries with a
--     winner and the same hidden, input, layers and steps class: the one at
--     the smallest tuned batch >= shape.batch, else (the batch is above every
--     tuned one) the one at the largest tuned batch. rule says which, in words.
--
-- Choosing a backend (what "auto" builds)
--   tuning.default_choice(facts, batch) -> {backend, options, reason}
--     The documented default where no record applies (see docs/tuning.md):
--     no CUDA device: "cpu"; compute capability >= 9.0: "cluster" (its own
--     per-batch default, spk.lstm.kernel_variant); below 9.0: "persistent"
--     (its per-batch variant table).
--   tuning.fallbacks(facts) -> backend names to try, in order, when the
--     chosen plan cannot be built.
--   tuning.choose(shape[, {facts =, why =, dir =}]) -> {backend, options, math, source = "record" | "default",
--     record = path | nil, reason, tuned_batch}
--     math: the winner's FP32-accuracy math ("3xtf32" where the split-TF32
--     projections measured faster), nil for FP32 (and for every default);
--     backend "auto" uses it where the script gave no math.
--     A record that is not of the schema is ignored with one warning (the
--     documented default is chosen, and the reason says why).
--     facts = false means "no CUDA device" (for tests and scripts); why, the
--     runtime's message then, is added to the reason.
--   tuning.warn(message): prints "spk: warning: <message>" on stderr; replace
--     it to capture warnings. tuning.warned[path] is true once a file has
--     been warned about.
local M = {}

M.FORMAT = 1
-- A record of a few hundred entries is tens of kilobytes; a file larger
-- than this is no record.
M.MAX_RECORD_BYTES = 16 << 20

local function core_cuda()
  local ok, core = pcall(require, "spk.core")
  if ok and type(core) == "table" then return core.cuda, core end
  return nil
end

local function sha256(text)
  local cuda = core_cuda()
  return cuda.sha256(text)
end

function M.warn(message)
  io.stderr:write("spk: warning: ", message, "\n")
end

-- ------------------------------------------------------------------ folder

function M.dir()
  local dir = os.getenv("SPK_TUNE_DIR")
  if dir and dir ~= "" then return dir end
  local xdg = os.getenv("XDG_CACHE_HOME")
  if xdg and xdg ~= "" then return xdg .. "/spk/tune" end
  return (os.getenv("HOME") or ".") .. "/.cache/spk/tune"
end

function M.path(key, dir)
  if type(key) ~= "string" or not key:match("^%x+$") then
    error("tuning.path: key must be a hex string, got " .. tostring(key), 2)
  end
  return (dir or M.dir()) .. "/" .. key .. ".json"
end

-- ------------------------------------------------------------------ the key

-- Through spk's reader: a regular file (a FIFO never blocks), bounded.
local function read_all(path)
  local _, core = core_cuda()
  local ok, text = pcall(core.files.read, path)
  if not ok then return nil, text end
  return text
end

function M.kernel_hashes(dir)
  local cuda = core_cuda()
  dir = dir or cuda.kernel_dir()
  local out = {}
  for _, name in ipairs(cuda.kernel_files(dir)) do
    local text, err = read_all(dir .. "/" .. name)
    if not text then error("tuning: cannot read the kernel source " .. tostring(err), 2) end
    out[name] = sha256(text)
  end
  return out
end

local KEY_FIELDS = { "device", "cc", "sms", "driver", "runtime", "cudnn" }
M.key_fields = KEY_FIELDS

function M.key_text(fields)
  if type(fields) ~= "table" then error("tuning.key: fields must be a table", 2) end
  local lines = { "spk tuning key " .. M.FORMAT }
  for _, name in ipairs(KEY_FIELDS) do
    local v = fields[name]
    if v == nil then error(("tuning.key: field '%s' is missing"):format(name), 2) end
    lines[#lines + 1] = ("%s=%s"):format(name, tostring(v))
  end
  local names = {}
  for name in pairs(fields.kernels or {}) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    lines[#lines + 1] = ("kernel %s=%s"):format(name, tostring(fields.kernels[name]))
  end
  return table.concat(lines, "\n") .. "\n"
end

function M.key(fields)
  return sha256(M.key_text(fields))
end

function M.facts()
  local cuda, core = core_cuda()
  if not cuda or not cuda.available() then
    return nil, cuda and cuda.no_device_reason and cuda.no_device_reason() or "no CUDA device"
  end
  local info = cuda.info()
  local ordinal = 0
  pcall(function() ordinal = cuda.current_device() end)
  local d = info.devices[ordinal + 1] or info.devices[1]
  local cudnn = "none"
  if core.cudnn and core.cudnn.version then
    local ok, v = pcall(core.cudnn.version)
    if ok and math.type(v) == "integer" and v > 0 then cudnn = v end
  end
  return { device = d.name, cc = d.cc, sms = d.sms, driver = info.driver_version, runtime = info.runtime_version,
           cudnn = cudnn, kernels = M.kernel_hashes() }
end

-- ------------------------------------------------------------------ records

function M.new_record(fields, command)
  return { format = M.FORMAT, key = M.key(fields), fields = fields, date = os.date("!%Y-%m-%dT%H:%M:%SZ"),
           command = command, entries = {} }
end

function M.save(record, dir)
  if type(record) ~= "table" or type(record.fields) ~= "table" then
    error("tuning.save: expects a record (tuning.new_record)", 2)
  end
  local report = require "spk.report"
  record.key = M.key(record.fields)
  dir = dir or M.dir()
  local ok, err = pcall(require("spk.core").files.make_folder, dir)
  if not ok then error("tuning.save: " .. tostring(err), 2) end
  local path = M.path(record.key, dir)
  local text = report.json_encode(record, { indent = 1 }) .. "\n"
  local ok, err = pcall(require("spk.core").files.write, path, text)
  if not ok then error("tuning.save: " .. tostring(err), 2) end
  return path
end

-- The fields that differ between two key field sets, in words ("driver 13000 vs 12080").
local function differences(a, b)
  local out = {}
  for _, name in ipairs(KEY_FIELDS) do
    if tostring(a[name]) ~= tostring(b[name]) then
      out[#out + 1] = ("%s %s vs %s"):format(name, tostring(a[name]), tostring(b[name]))
    end
  end
  local ka, kb = type(a.kernels) == "table" and a.kernels or {}, type(b.kernels) == "table" and b.kernels or {}
  local names, seen = {}, {}
  for n in pairs(ka) do if not seen[n] then seen[n] = true; names[#names + 1] = n end end
  for n in pairs(kb) do if not seen[n] then seen[n] = true; names[#names + 1] = n end end
  table.sort(names)
  for _, n in ipairs(names) do
    if ka[n] ~= kb[n] then
      out[#out + 1] = ("kernel %s %s"):format(n, ka[n] == nil and "added" or kb[n] == nil and "removed" or "changed")
    end
  end
  return out
end

-- ------------------------------------------------------------------ the schema

local function is_array(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

-- A value as a message shows it (strings cut at 40 characters).
local function shown(v)
  if type(v) == "string" then return ("%q"):format(#v > 40 and v:sub(1, 40) .. "..." or v) end
  if type(v) == "table" then
    if v == require("spk.report").null then return "null" end
    if next(v) == nil then return "an empty object or list" end
    return is_array(v) and "a list" or "an object"
  end
  return tostring(v)
end

-- Value checks: each returns true, or nil and what the value must be.
local function positive_integer(max)
  return function(v)
    if math.type(v) == "integer" and v >= 1 and v <= max then return true end
    return nil, ("must be an integer in 1 .. %d"):format(max)
  end
end
local function natural(v)
  if math.type(v) == "integer" and v >= 0 then return true end
  return nil, "must be an integer >= 0"
end
local function positive_number(v)
  if type(v) == "number" and v > 0 and v < math.huge then return true end
  return nil, "must be a positive number"
end
local function nonnegative_number(v)
  if type(v) == "number" and v >= 0 and v < math.huge then return true end
  return nil, "must be a number >= 0"
end
local function text(v)
  if type(v) == "string" then return true end
  return nil, "must be a string"
end
local function boolean(v)
  if type(v) == "boolean" then return true end
  return nil, "must be true or false"
end
local function hex64(v)
  if type(v) == "string" and #v == 64 and v:match("^%x+$") then return true end
  return nil, "must be 64 hex digits"
end

local SIZE = positive_integer(1 << 24)

-- Structure checks (objects, lists) report their own problem, with its path,
-- into `problems`; a value check returns why, and the object holding it
-- reports "<path> <why>, got <value>".
local function check_value(check, v, where, problems)
  local ok, why = check(v, where, problems)
  if not ok and why then problems[#problems + 1] = ("%s %s, got %s"):format(where, why, shown(v)) end
  return ok
end

local function is_null(v)
  return v == require("spk.report").null
end

-- Objects: field -> check; `required` lists the fields that must be there.
local function object(fields, required)
  return function(v, where, problems)
    local problem
    if type(v) ~= "table" or is_null(v) or (next(v) ~= nil and is_array(v)) then
      problem = "must be an object, got " .. shown(v)
    else
      for k in pairs(v) do
        if type(k) ~= "string" or not fields[k] then
          problem = "has no field " .. shown(k)
          break
        end
      end
      for _, k in ipairs(required or {}) do
        if not problem and v[k] == nil then problem = "needs the field " .. k end
      end
    end
    if problem then
      problems[#problems + 1] = where .. " " .. problem
      return nil
    end
    for k, check in pairs(fields) do
      if v[k] ~= nil and not check_value(check, v[k], where .. "." .. k, problems) then return nil end
    end
    return true
  end
end

local function array(item)
  return function(v, where, problems)
    if type(v) ~= "table" or is_null(v) or not is_array(v) then
      problems[#problems + 1] = ("%s must be a list, got %s"):format(where, shown(v))
      return nil
    end
    for i, x in ipairs(v) do
      if not check_value(item, x, ("%s[%d]"):format(where, i), problems) then return nil end
    end
    return true
  end
end

-- What spk.lstm says a record may choose: {name = check(options, shape)}.
local function tunables()
  local ok, spk = pcall(require, "spk")
  return ok and type(spk) == "table" and type(spk.lstm) == "table" and type(spk.lstm.tunables) == "table"
    and spk.lstm.tunables or {}
end

local function backend_name(v)
  if type(v) == "string" and type(tunables()[v]) == "function" then return true end
  local names = {}
  for name in pairs(tunables()) do names[#names + 1] = name end
  table.sort(names)
  return nil, ("must be one of %s"):format(table.concat(names, ", "))
end

local function any_object(v)
  if type(v) == "table" and not is_null(v) and (next(v) == nil or not is_array(v)) then return true end
  return nil, "must be an object"
end
local options_shape = object({ kernel = any_object, algo = text, layout = text })

-- The maths of FP32's accuracy: those the benchmark holds to cuDNN's FP32 bounds.
function M.fp32_maths()
  local out = {}
  local benchmark = require "spk.benchmark"
  local default = benchmark.maths[1] -- the default math: FP32
  for m, held_to in pairs(benchmark.held_to) do
    if held_to == default then out[#out + 1] = m end
  end
  table.sort(out)
  return out
end
local function fp32_math(v)
  for _, m in ipairs(M.fp32_maths()) do
    if v == m then return true end
  end
  return nil, ("must be a math of FP32's accuracy (%s)"):format(table.concat(M.fp32_maths(), ", "))
end

local winner = object({ backend = backend_name, options = options_shape, math = fp32_math, variant = text,
                        median_ms = positive_number, rel_l2 = nonnegative_number, speedup = positive_number },
                      { "backend", "median_ms" })
local candidate = object({ backend = text, options = options_shape, math = text, variant = text, median_ms = positive_number,
                           min_ms = positive_number, spread = nonnegative_number, rel_l2 = nonnegative_number,
                           max_abs = nonnegative_number, bound = nonnegative_number, bound_ok = boolean,
                           speedup = positive_number, eligible = boolean, error = text })
local cudnn_best = object({ variant = text, median_ms = positive_number }, { "median_ms" })
local function winner_or_none(v, where, problems)
  if v == false then return true end
  return winner(v, where, problems)
end
local entry = object({ hidden = SIZE, input = SIZE, layers = positive_integer(64), batch = SIZE, steps = SIZE,
                       steps_class = SIZE, rounds = SIZE, date = text, winner = winner_or_none,
                       cudnn_best = cudnn_best, candidates = array(candidate) },
                     { "hidden", "input", "layers", "batch", "steps_class" })
local function kernels(v, where, problems)
  if type(v) ~= "table" or is_null(v) or (next(v) ~= nil and is_array(v)) then return nil, "must be an object" end
  for name, hash in pairs(v) do
    if type(name) ~= "string" or not name:match("^[%w_.-]+%.cuh?$") then
      problems[#problems + 1] = ("%s has a name that is no kernel source: %s"):format(where, shown(name))
      return nil
    end
    if not check_value(hex64, hash, ("%s[%q]"):format(where, name), problems) then return nil end
  end
  return true
end
local function cc(v)
  if type(v) == "string" and v:match("^%d+%.%d+$") then return true end
  return nil, "must be a compute capability \"major.minor\""
end
local function cudnn_version(v)
  if v == "none" or math.type(v) == "integer" and v > 0 then return true end
  return nil, "must be a positive integer or \"none\""
end
local key_fields = object({ device = text, cc = cc, sms = SIZE, driver = natural, runtime = natural,
                            cudnn = cudnn_version, kernels = kernels }, KEY_FIELDS)
local record_schema = object({ format = function(v)
                                 if v == M.FORMAT then return true end
                                 return nil, ("must be %d"):format(M.FORMAT)
                               end,
                               key = hex64, fields = key_fields, date = text, command = text,
                               environment = object({ device = text, driver = text, runtime = text, cudnn = text,
                                                      date = text }),
                               provenance = any_object, -- spk.provenance.record of the last spk tune
                               entries = array(entry), migrated = array(text) },
                             { "format", "key", "fields", "entries" })

-- What the schema cannot say field by field: steps_class is the class of
-- steps, and a winner's options are ones its backend takes at that shape.
local function check_entries(record)
  local choices = tunables()
  for i, e in ipairs(record.entries) do
    local where = ("entries[%d]"):format(i)
    if e.steps ~= nil and e.steps_class ~= M.steps_class(e.steps) then
      return nil, ("%s.steps_class must be %d (the class of %d steps), got %d"):format(where,
        M.steps_class(e.steps), e.steps, e.steps_class)
    end
    if e.steps_class & (e.steps_class - 1) ~= 0 then
      return nil, ("%s.steps_class must be a power of two, got %d"):format(where, e.steps_class)
    end
    local w = e.winner
    if w and w.math then -- one of fp32_maths (the schema), and one the backend has
      local has, why = require("spk").lstm.check_math(w.math, w.backend)
      if not has then return nil, ("%s.winner.math: %s"):format(where, why) end
    end
    if w then
      local ok, why = choices[w.backend](w.options or {}, { hidden = e.hidden, input = e.input, layers = e.layers,
                                                            batch = e.batch, steps = e.steps or e.steps_class })
      if not ok then
        return nil, ("%s.winner.options are not ones backend %s takes: %s"):format(where, w.backend,
          tostring(why):gsub("^[^\n]-:%d+: ", ""))
      end
    end
  end
  return true
end

function M.check_record(record)
  local problems = {}
  if not record_schema(record, "record", problems) then
    local problem = problems[1] or "record is malformed"
    if problem:match("^record ") then
      return nil, ("not a tuning record of format %d (the %s)"):format(M.FORMAT, problem)
    end
    return nil, (problem:gsub("^record%.", ""))
  end
  return check_entries(record)
end

-- Helpers for the backends' checks (spk.lstm.tunables): only `allowed` keys in o.
function M.check_option_keys(o, allowed, backend)
  if type(o) ~= "table" then return nil, "options must be an object" end
  for key in pairs(o) do
    if not allowed[key] then
      return nil, ("%s is not an option a record chooses for backend %s"):format(shown(key), backend)
    end
  end
  return true
end

-- A kernel table against `known` (option -> "integer" | "boolean" | "string");
-- integers are bounded before any C code reads them as an int.
function M.check_kernel(kernel, known, where)
  if kernel == nil then return true end
  if type(kernel) ~= "table" then return nil, where .. " must be an object" end
  for key, value in pairs(kernel) do
    local kind = type(key) == "string" and known[key]
    if not kind then return nil, ("%s has no option %s"):format(where, shown(key)) end
    local ok = kind == "integer" and math.type(value) == "integer" and value >= 1 and value <= 1 << 20
      or kind == "boolean" and type(value) == "boolean" or kind == "string" and type(value) == "string"
    if not ok then
      return nil, ("%s.%s must be %s, got %s"):format(where, key,
        kind == "integer" and "an integer in 1 .. 1048576" or kind == "boolean" and "true or false" or "a string",
        shown(value))
    end
  end
  return true
end

-- The check a kernel backend registers as spk.lstm.tunables[backend]
-- ("persistent", "cluster"): a record chooses a kernel table only, whose keys
-- and value types are the backend's option table's (lstm.kernel_options, from
-- C: a word option takes a string, the others an integer), and the variant a
-- plan of the record's shape would compile from it passes the backend's own
-- checks (lstm.kernel_variant; no device).
function M.kernel_tunable(lstm, backend)
  local known
  return function(o, shape)
    local ok, why = M.check_option_keys(o, { kernel = true }, backend)
    if not ok then return nil, why end
    if not known then
      known = {}
      for _, option in ipairs(lstm.kernel_options(backend).options) do
        known[option.name] = option.words and "string" or "integer"
      end
    end
    ok, why = M.check_kernel(o.kernel, known, "kernel")
    if not ok then return nil, why end
    shape = type(shape) == "table" and shape or {}
    local fits, err = pcall(lstm.kernel_variant, { backend = backend, kernel = o.kernel, batch = shape.batch,
                                                   hidden = shape.hidden })
    if not fits then return nil, tostring(err) end
    return true
  end
end

function M.decode(text)
  if type(text) ~= "string" then return nil, "the record is not text" end
  if #text > M.MAX_RECORD_BYTES then
    return nil, ("larger than %d bytes, so no record"):format(M.MAX_RECORD_BYTES)
  end
  local report = require "spk.report"
  local ok, record = pcall(report.json_decode, text)
  if not ok then return nil, "not valid JSON (" .. tostring(record) .. ")" end
  M.migrate(record)
  local valid, why = M.check_record(record)
  if not valid then return nil, why end
  local kok, key = pcall(M.key, record.fields)
  if not kok then return nil, "its key fields are incomplete" end
  if record.key ~= key then return nil, "its key does not match its fields" end
  return record
end

function M.load(path, fields)
  -- spk's reader: a regular file (a FIFO never blocks), at most the record limit
  local _, core = core_cuda()
  local ok, text = pcall(core.files.read, path, M.MAX_RECORD_BYTES)
  if not ok then return nil, "cannot read it (" .. tostring(text):gsub("^[^:]*%.lua:%d+: ", "") .. ")" end
  local record, why = M.decode(text)
  if not record then return nil, why end
  if fields then
    local diff = differences(record.fields, fields)
    if #diff > 0 then return nil, "stale: made for other drivers or kernels (" .. table.concat(diff, ", ") .. ")" end
  end
  return record
end

-- Records written before the persistent kernels' tile_rows was split in two
-- (max_tile_rows: the most rows a tile carries, what that tile_rows meant;
-- tile_rows: the tile height the schedule runs) are read with their
-- tile_rows as max_tile_rows, and record.migrated says so, a line a change.
-- Returns the record.
function M.migrate(record)
  if type(record) ~= "table" or type(record.entries) ~= "table" then return record end
  local notes = {}
  local function move(choice, where)
    local k = type(choice) == "table" and choice.backend == "persistent" and type(choice.options) == "table"
      and choice.options.kernel
    if type(k) == "table" and k.tile_rows ~= nil and k.max_tile_rows == nil then
      k.max_tile_rows, k.tile_rows = k.tile_rows, nil
      notes[#notes + 1] = ("%s.options.kernel.tile_rows read as max_tile_rows (the persistent kernels' most rows "
        .. "a tile carries; tile_rows is now the tile height the schedule runs)"):format(where)
    end
  end
  for i, e in ipairs(record.entries) do
    if type(e) == "table" then
      move(e.winner, ("entries[%d].winner"):format(i))
      for j, c in ipairs(type(e.candidates) == "table" and e.candidates or {}) do
        move(c, ("entries[%d].candidates[%d]"):format(i, j))
      end
    end
  end
  if #notes > 0 then record.migrated = notes end
  return record
end

-- The files tuning.find has warned about (one warning per file per process).
M.warned = {}
local warned = M.warned

function M.find(fields, dir)
  if fields == nil then
    local why
    fields, why = M.facts()
    if not fields then return nil, why end
  end
  local path = M.path(M.key(fields), dir)
  local _, core = core_cuda()
  if not core.files.kind(path) then return nil, "no tuning record for this device, drivers and kernels", path end
  local record, why = M.load(path, fields)
  if not record then
    if not warned[path] then
      warned[path] = true
      M.warn(("ignoring the tuning record %s: %s"):format(path, why))
    end
    return nil, "the tuning record is ignored: " .. why, path
  end
  if record.migrated and not warned[path] then
    warned[path] = true
    M.warn(("the tuning record %s was migrated on reading: %s"):format(path, table.concat(record.migrated, "; ")))
  end
  return record, path
end

local function shape_of(e)
  return ("%d/%d/%d/%d"):format(e.hidden or 0, e.input or 0, e.layers or 0, e.steps_class or 0)
end

function M.merge(record, entries)
  local replaced = {}
  for _, e in ipairs(entries) do replaced[shape_of(e) .. "/" .. tostring(e.batch)] = true end
  local out = {}
  for _, e in ipairs(record.entries) do
    if not replaced[shape_of(e) .. "/" .. tostring(e.batch)] then out[#out + 1] = e end
  end
  for _, e in ipairs(entries) do out[#out + 1] = e end
  table.sort(out, function(a, b)
    for _, k in ipairs { "hidden", "input", "layers", "steps_class", "batch" } do
      if (a[k] or 0) ~= (b[k] or 0) then return (a[k] or 0) < (b[k] or 0) end
    end
    return false
  end)
  record.entries = out
  return record
end

-- ------------------------------------------------------------------ lookup

function M.steps_class(steps)
  if math.type(steps) ~= "integer" or steps < 1 then
    error("tuning.steps_class: steps must be a positive integer, got " .. tostring(steps), 2)
  end
  local c = 1
  while c < steps do c = c * 2 end
  return c
end

local function check_shape(shape)
  if type(shape) ~= "table" then error("tuning: shape must be a table {hidden, input, layers, batch, steps}") end
  for _, k in ipairs { "hidden", "input", "layers", "batch", "steps" } do
    if math.type(shape[k]) ~= "integer" or shape[k] < 1 then
      error(("tuning: shape.%s must be a positive integer, got %s"):format(k, tostring(shape[k])))
    end
  end
end

function M.lookup(record, shape)
  check_shape(shape)
  local class = M.steps_class(shape.steps)
  local above, largest
  for _, e in ipairs(record.entries or {}) do
    if type(e.winner) == "table" and e.hidden == shape.hidden and e.input == shape.input
        and e.layers == shape.layers and e.steps_class == class and math.type(e.batch) == "integer" then
      if e.batch >= shape.batch and (not above or e.batch < above.batch) then above = e end
      if not largest or e.batch > largest.batch then largest = e end
    end
  end
  if above then
    if above.batch == shape.batch then return above, ("tuned at batch %d"):format(above.batch) end
    return above, ("tuned at batch %d, the nearest tuned batch >= %d"):format(above.batch, shape.batch)
  end
  if largest then
    return largest, ("tuned at batch %d, the largest tuned batch (%d is above every tuned batch)"):format(
      largest.batch, shape.batch)
  end
  return nil, ("the record has no entry for hidden %d, input %d, %d layers, %d steps (class <= %d)"):format(
    shape.hidden, shape.input, shape.layers, shape.steps, class)
end

-- ------------------------------------------------------------------ choosing

local function cc_number(cc)
  local major, minor = tostring(cc):match("^(%d+)%.(%d+)$")
  if not major then return 0 end
  return tonumber(major) + tonumber(minor) / 10
end

-- The cluster plan's own per-batch default (spk.lstm.kernel_variant{backend
-- = "cluster"}: gate blocks with direct pushes, clusters of 2 to 8 blocks,
-- tiles of 1 to 8 rows up to batch 256, 16 above) and the persistent plan's
-- own table carry their variants, so a default adds no options.
function M.default_choice(facts, batch)
  if not facts then
    return { backend = "cpu", options = {}, reason = "the f32 CPU reference" }
  end
  local cc = cc_number(facts.cc)
  -- The tensor-core kernel is the faster above batch 128 up to 256, the cluster
  -- kernel at every batch measured up to 128 (README's results; docs/tuning.md);
  -- above 256 neither is measured against the persistent kernel, which stays the
  -- default there. The tensor-core kernel runs on 9.0 alone (sm_90a).
  if cc == 9.0 and batch > 128 and batch <= 256 then
    return { backend = "tensor_core", options = {},
             reason = ("default for compute capability %s, batch %d: tensor_core with its per-batch default, "
               .. "measured fastest on the H200 at batch 256"):format(facts.cc, batch) }
  end
  if cc >= 9.0 and batch <= 256 then
    return { backend = "cluster", options = {},
             reason = ("default for compute capability %s, batch %d: cluster with its per-batch default, "
               .. "measured fastest on the H200 at batch 1..%s (2.2x to 7x cuDNN's best)"):format(facts.cc, batch,
               cc == 9.0 and "128" or "256") }
  end
  if cc >= 9.0 then
    return { backend = "persistent", options = {},
             reason = ("default for compute capability %s, batch %d: persistent with its per-batch variant table "
               .. "above batch 256, where the cluster rows are not measured against it"):format(facts.cc, batch) }
  end
  return { backend = "persistent", options = {},
           reason = ("default for compute capability %s (the cluster kernel needs 9.0): persistent, "
             .. "its per-batch variant table"):format(tostring(facts.cc)) }
end

function M.fallbacks(facts)
  if not facts then return { "cpu" } end
  if cc_number(facts.cc) >= 9.0 then return { "cluster", "persistent", "cudnn" } end -- order of trial after the choice
  -- (tensor_core, where it is the choice, falls back to cluster first)
  return { "persistent", "cudnn" }
end

function M.choose(shape, opts)
  check_shape(shape)
  opts = require("spk.options").check_keys(opts, { "facts", "why", "dir" }, "tuning.choose")
  local facts, why = opts.facts, opts.why
  if facts == nil then facts, why = M.facts() end
  if not facts then
    local c = M.default_choice(nil, shape.batch)
    local cuda = core_cuda()
    why = cuda and cuda.no_device_reason and cuda.no_device_reason(why or "no CUDA device") or why
    c.reason = ("%s: %s"):format(c.reason, why or "no CUDA device")
    c.source = "default"
    return c
  end
  local record, detail, path = M.find(facts, opts.dir)
  if record then
    path = detail
    local entry, rule = M.lookup(record, shape)
    if entry then
      local w = entry.winner -- of the schema: M.find loads only records that are
      local math_mode = w.math ~= require("spk.benchmark").maths[1] and w.math or nil
      return { backend = w.backend, options = type(w.options) == "table" and w.options or {}, math = math_mode,
               source = "record", record = path, tuned_batch = entry.batch,
               reason = ("tuning record: %s (%s)%s, %s ms there, %s"):format(w.backend, tostring(w.variant),
                 math_mode and (", math " .. math_mode) or "", w.median_ms and ("%.3f"):format(w.median_ms) or "?",
                 rule) }
    end
    detail = rule
  end
  local c = M.default_choice(facts, shape.batch)
  c.source = "default"
  c.reason = ("%s; %s"):format(c.reason, detail)
  return c
end

-- An argument a function does not take is an error that names it.
do
  local options = require "spk.options"
  M.choose = options.takes(2, "tuning.choose", M.choose)
  M.lookup = options.takes(2, "tuning.lookup", M.lookup)
end

return M
