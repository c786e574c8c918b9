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
--      winner = {backend =, options = {kernel = {...}} | {algo = ...}, variant =, median_ms =,
--                rel_l2 =, speedup =} | nil (no candidate passed its bound),
--      cudnn_best = {variant =, median_ms =} | nil,
--      candidates = {{backend =, options =, variant =, median_ms =, rel_l2 =, max_abs =,
--                     bound =, bound_ok =, eligible =, error =}, ...}}
--   tuning.save(record[, dir]) -> path: written to a temporary file in the
--     folder (made if missing), then renamed over the record, so a reader sees
--     the old record or the new one, never half of one.
--   tuning.load(path[, fields]) -> record | nil, reason: reason says why the
--     file is no record (missing, not JSON, wrong format) or, given fields,
--     stale (its key fields differ from them). No warning.
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
--   tuning.choose(shape[, {facts =, why =, dir =}]) -> {backend, options, source = "record" | "default",
--     record = path | nil, reason, tuned_batch}
--     facts = false means "no CUDA device" (for tests and scripts); why, the
--     runtime's message then, is added to the reason.
--   tuning.warn(message): prints "spk: warning: <message>" on stderr; replace
--     it to capture warnings.
local M = {}

M.FORMAT = 1

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

local function read_all(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local text = f:read("a")
  f:close()
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
    local why = "no CUDA device"
    if cuda then
      local ok, info = pcall(cuda.info)
      if ok and info.error then why = info.error end
    end
    return nil, why
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

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

function M.save(record, dir)
  if type(record) ~= "table" or type(record.fields) ~= "table" then
    error("tuning.save: expects a record (tuning.new_record)", 2)
  end
  local report = require "spk.report"
  record.key = M.key(record.fields)
  dir = dir or M.dir()
  if not os.execute("mkdir -p " .. shell_quote(dir) .. " 2>/dev/null") then
    error("tuning.save: cannot make the folder " .. dir, 2)
  end
  local path = M.path(record.key, dir)
  local text = report.json_encode(record, { indent = 1 }) .. "\n"
  local tmp = ("%s.tmp-%d-%d"):format(path, os.time(), math.random(1, 1 << 30))
  local f, err = io.open(tmp, "wb")
  if not f then error("tuning.save: cannot write " .. tostring(err), 2) end
  local ok, werr = f:write(text)
  f:close()
  if not ok then
    os.remove(tmp)
    error("tuning.save: cannot write " .. tmp .. ": " .. tostring(werr), 2)
  end
  local renamed, rerr = os.rename(tmp, path)
  if not renamed then
    os.remove(tmp)
    error("tuning.save: cannot rename onto " .. path .. ": " .. tostring(rerr), 2)
  end
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

function M.load(path, fields)
  local text, err = read_all(path)
  if not text then return nil, "cannot read it (" .. tostring(err) .. ")" end
  local report = require "spk.report"
  local ok, record = pcall(report.json_decode, text)
  if not ok then return nil, "not valid JSON (" .. tostring(record) .. ")" end
  if type(record) ~= "table" or record.format ~= M.FORMAT or type(record.fields) ~= "table"
      or type(record.entries) ~= "table" then
    return nil, ("not a tuning record of format %d"):format(M.FORMAT)
  end
  for _, e in ipairs(record.entries) do
    if type(e) ~= "table" then return nil, "an entry is not an object" end
  end
  local kok, key = pcall(M.key, record.fields)
  if not kok then return nil, "its key fields are incomplete" end
  if record.key ~= key then return nil, "its key does not match its fields" end
  if fields then
    local diff = differences(record.fields, fields)
    if #diff > 0 then return nil, "stale: made for other drivers or kernels (" .. table.concat(diff, ", ") .. ")" end
  end
  return record
end

local warned = {}

function M.find(fields, dir)
  if fields == nil then
    local why
    fields, why = M.facts()
    if not fields then return nil, why end
  end
  local path = M.path(M.key(fields), dir)
  local f = io.open(path, "rb")
  if not f then return nil, "no tuning record for this device, drivers and kernels", path end
  f:close()
  local record, why = M.load(path, fields)
  if not record then
    if not warned[path] then
      warned[path] = true
      M.warn(("ignoring the tuning record %s: %s"):format(path, why))
    end
    return nil, "the tuning record is ignored: " .. why, path
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

local function check_shape(shape, level)
  if type(shape) ~= "table" then error("tuning: shape must be a table {hidden, input, layers, batch, steps}", level) end
  for _, k in ipairs { "hidden", "input", "layers", "batch", "steps" } do
    if math.type(shape[k]) ~= "integer" or shape[k] < 1 then
      error(("tuning: shape.%s must be a positive integer, got %s"):format(k, tostring(shape[k])), level)
    end
  end
end

function M.lookup(record, shape)
  check_shape(shape, 3)
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
    return { backend = "cpu", options = {}, reason = "no CUDA device: the f32 CPU reference" }
  end
  local cc = cc_number(facts.cc)
  -- The cluster kernel is the faster at every batch measured up to 256 (README's
  -- results; docs/tuning.md); above 256 its rows are not measured against the
  -- persistent kernel, which stays the default there.
  if cc >= 9.0 and batch <= 256 then
    return { backend = "cluster", options = {},
             reason = ("default for compute capability %s, batch %d: cluster with its per-batch default, "
               .. "measured fastest on the H200 at batch 1..256 (2.2x to 7x cuDNN's best)"):format(facts.cc, batch) }
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
  return { "persistent", "cudnn" }
end

function M.choose(shape, opts)
  check_shape(shape, 3)
  opts = opts or {}
  local facts, why = opts.facts, opts.why
  if facts == nil then facts, why = M.facts() end
  if not facts then
    local c = M.default_choice(nil, shape.batch)
    if why then c.reason = ("%s (%s)"):format(c.reason, why) end
    c.source = "default"
    return c
  end
  local record, detail, path = M.find(facts, opts.dir)
  if record then
    path = detail
    local entry, rule = M.lookup(record, shape)
    if entry then
      local w = entry.winner
      return { backend = w.backend, options = type(w.options) == "table" and w.options or {}, source = "record",
               record = path, tuned_batch = entry.batch,
               reason = ("tuning record: %s (%s), %s ms there, %s"):format(w.backend, tostring(w.variant),
                 w.median_ms and ("%.3f"):format(w.median_ms) or "?", rule) }
    end
    detail = rule
  end
  local c = M.default_choice(facts, shape.batch)
  c.source = "default"
  c.reason = ("%s; %s"):format(c.reason, detail)
  return c
end

return M
