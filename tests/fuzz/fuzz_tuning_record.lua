-- Fuzz target for the tuning-record reader (lua/spk/tuning.lua with the JSON
-- reader of lua/spk/report.lua and the backends' option checks it calls),
-- run inside the spk program: `make check-fuzz` replays the committed corpus
-- and fuzzes for 20 s under the ASan build; `make fuzz` for FUZZ_SECONDS.
--
--   spk run tests/fuzz/fuzz_tuning_record.lua [--seconds N] [--seed S]
--       [--artifacts DIR] [--corpus-out DIR] [--max-len BYTES] [--timeout S]
--       CORPUS_DIR...
-- (an input that takes more than --timeout CPU seconds, default 10, is a
-- failure, as libFuzzer's -timeout makes it)
--
-- Why not a libFuzzer target like the other three: the reader is Lua, and
-- libFuzzer's guidance is the compiler's instrumentation of C, which the Lua
-- interpreter (Debian's liblua5.4) does not have, so a C harness would mutate
-- blind; the reader also calls spk's bindings (the persistent and cluster
-- variant checks) that the core-only fuzz build does not link. So this driver
-- is libFuzzer's loop in Lua: coverage is the edges between executed Lua
-- lines of the reader (a line hook), an input reaching a new edge joins the
-- corpus, and mutations know JSON (values swapped for boundary numbers,
-- wrong types, path-like and backend-like strings, keys dropped or added,
-- entries duplicated) as well as bytes. The C the reader reaches runs under
-- ASan and UBSan in `make check-fuzz`.
--
-- The property, for every input (a file at the record's path):
--   * tuning.decode and tuning.choose never raise;
--   * an input that decodes is a record of the schema, and choose takes its
--     winners only: a backend spk.lstm.tunables knows, options its check
--     accepts at that shape, no layers, batch, steps or math among them,
--     and a math beside them only of FP32's accuracy (tuning.fp32_maths)
--     and one its backend has;
--   * an input that does not decode gives the documented default, with one
--     warning for its file, and a reason naming why;
--   * a valid record warns only when it was migrated on reading (a record
--     written before a rename), once for its file, saying so.
-- A failing input is written to the artifacts folder, with the command that
-- replays it.
local spk = require "spk"
local tuning = require "spk.tuning"
local report = require "spk.report"

local args = { ... }
local opts = { seconds = 0, seed = os.time(), artifacts = nil, corpus_out = nil, max_len = 1 << 16, timeout = 10,
               dirs = {} }
local i = 1
while i <= #args do
  local a = args[i]
  local function value()
    i = i + 1
    if args[i] == nil then error("fuzz_tuning_record: " .. a .. " needs a value", 0) end
    return args[i]
  end
  if a == "--seconds" then opts.seconds = tonumber(value())
  elseif a == "--seed" then opts.seed = math.tointeger(tonumber(value()))
  elseif a == "--artifacts" then opts.artifacts = value()
  elseif a == "--corpus-out" then opts.corpus_out = value()
  elseif a == "--max-len" then opts.max_len = math.tointeger(tonumber(value()))
  elseif a == "--timeout" then opts.timeout = tonumber(value())
  elseif a:sub(1, 2) == "--" then error("fuzz_tuning_record: unknown option " .. a, 0)
  else opts.dirs[#opts.dirs + 1] = a end
  i = i + 1
end
if not opts.seconds or not opts.seed or not opts.max_len then error("fuzz_tuning_record: bad option value", 0) end
math.randomseed(opts.seed)

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, text)
  spk.files.write(path, text)
end

local function list(dir)
  local p = io.popen("ls -A " .. shell_quote(dir) .. " 2>/dev/null")
  local out = {}
  for name in p:lines() do out[#out + 1] = dir .. "/" .. name end
  p:close()
  table.sort(out)
  return out
end

-- The device the records are made for (no GPU is needed: choose is told).
local FACTS = { device = "NVIDIA H200", cc = "9.0", sms = 132, driver = 13000, runtime = 13000, cudnn = 91400,
                kernels = { ["lstm_cell.cuh"] = string.rep("a", 64), ["lstm_cluster.cu"] = string.rep("b", 64) } }
local KEY = tuning.key(FACTS)
local SHAPES = { { hidden = 128, input = 60, layers = 4, batch = 8, steps = 589 },
                 { hidden = 128, input = 60, layers = 4, batch = 300, steps = 589 },
                 { hidden = 64, input = 60, layers = 2, batch = 1, steps = 100 } }

local scratch = io.popen("mktemp -d"):read("l")
local path = tuning.path(KEY, scratch)
local warnings = {}
tuning.warn = function(message) warnings[#warnings + 1] = message end

local FORBIDDEN = { layers = true, batch = true, steps = true, math = true, backend = true, tune_dir = true }

-- One input: nil if the property holds, else what failed; and whether it
-- is a valid record.
local last_valid = false
local function check(text)
  write(path, text)
  local ok, record, why = pcall(tuning.decode, text)
  if not ok then return "tuning.decode raised: " .. tostring(record) end
  if record == nil and type(why) ~= "string" then return "tuning.decode gave no reason" end
  last_valid = record ~= nil
  if record ~= nil then
    local valid, problem = tuning.check_record(record)
    if not valid then return "decode accepted a record the schema refuses: " .. tostring(problem) end
  end
  -- the reader forgets it warned, so that each input's one warning is seen
  tuning.warned[path] = nil
  warnings = {}
  for s = 1, record and #SHAPES or 1 do
    local shape = SHAPES[s]
    local cok, c = pcall(tuning.choose, shape, { facts = FACTS, dir = scratch })
    if not cok then return "tuning.choose raised: " .. tostring(c) end
    if type(c) ~= "table" or type(c.backend) ~= "string" or type(c.options) ~= "table" or type(c.reason) ~= "string" then
      return "tuning.choose gave a malformed choice"
    end
    if not spk.lstm.tunables[c.backend] then return "chose an unknown backend " .. tostring(c.backend) end
    for k in pairs(c.options) do
      if FORBIDDEN[k] then return ("a record's options set %s"):format(tostring(k)) end
    end
    if c.math ~= nil then
      local fp32_class = false
      for _, m in ipairs(tuning.fp32_maths()) do fp32_class = fp32_class or c.math == m end
      if not fp32_class then return "chose a math not of FP32's accuracy: " .. tostring(c.math) end
      if not spk.lstm.check_math(c.math, c.backend) then return "chose a math its backend lacks: " .. c.math end
      if c.source ~= "record" then return "a default chose a math" end
    end
    if c.source == "record" then
      if record == nil then return "choose took a record that does not decode (" .. tostring(why) .. ")" end
      local tok, fine, reason = pcall(spk.lstm.tunables[c.backend], c.options, shape)
      if not tok or not fine then return "chose options its backend refuses: " .. tostring(reason or fine) end
      if math.type(c.tuned_batch) ~= "integer" then return "a record choice without its tuned batch" end
    elseif c.source ~= "default" then
      return "choice source " .. tostring(c.source)
    end
    if record == nil and c.source ~= "default" then return "an invalid record was used" end
  end
  if record == nil and #warnings ~= 1 then
    return ("%d warnings for an invalid record (one is wanted): %s"):format(#warnings, table.concat(warnings, " | "))
  end
  if record ~= nil and record.migrated then
    -- a record written before a rename is valid and read once with one note
    if #warnings ~= 1 or not warnings[1]:find("was migrated on reading", 1, true) then
      return ("%d warnings for a migrated record (one saying so is wanted): %s"):format(#warnings,
        table.concat(warnings, " | "))
    end
  elseif record ~= nil and #warnings ~= 0 then
    return "a warning for a valid record: " .. warnings[1]
  end
  return nil
end

-- ------------------------------------------------------------------ coverage

-- Edges between consecutive executed lines while tuning.decode reads the
-- input (the JSON reader, the schema and the backends' option checks: the
-- only Lua that runs then); choose reads the same file again unhooked.
local edges, edge_count = {}, 0
-- A CPU-time budget of opts.timeout seconds for fn(), kept by a count hook
-- (the line hook during decode keeps it too).
local function budget()
  local deadline = os.clock() + opts.timeout
  return function()
    if os.clock() > deadline then error("timeout: more than " .. opts.timeout .. " s of CPU", 0) end
  end
end

local function run_covered(text, mutate_from)
  local new, prev = 0, 0
  local decode = tuning.decode
  local slow = budget()
  local function hook(event, line)
    if event == "count" then return slow() end
    local e = prev * 65536 + line
    if not edges[e] then
      edges[e] = true
      edge_count = edge_count + 1
      new = new + 1
    end
    prev = line
  end
  tuning.decode = function(t)
    debug.sethook(hook, "l", 10000)
    local r = table.pack(pcall(decode, t))
    debug.sethook(slow, "", 10000)
    tuning.decode = decode
    if not r[1] then error(r[2], 0) end
    return table.unpack(r, 2, r.n)
  end
  debug.sethook(slow, "", 10000)
  local ok, failure = pcall(function()
    if mutate_from then text = mutate_from() end
    return check(text)
  end)
  debug.sethook()
  tuning.decode = decode
  if not ok then failure = "the check raised: " .. tostring(failure) end
  return failure, new, text
end

-- ------------------------------------------------------------------ mutations

local INTERESTING = { -1, 0, 1, 2, 7, 8, 32, 33, 256, 1024, 65536, 1 << 20, (1 << 20) + 1, 1 << 31, 1 << 53,
  math.maxinteger, math.mininteger, -0.0, 0.5, 1.5, 1e308, -1e308, 3.1, "abc", "", "../../etc", "/etc/passwd",
  "cluster", "persistent", "cudnn", "cpu", "auto", "tf32", "fp32", "lanes", "direct", "warp", "mbarrier",
  "standard", "seq_major", true, false, report.null }
local KEYS = { "layers", "batch", "steps", "math", "backend", "kernel", "algo", "layout", "tune_dir", "units",
  "threads", "tile_rows", "cluster", "push", "cell", "store", "exchange", "gate_block", "gates_ahead", "directions",
  "row_phases", "row_group", "min_blocks", "hidden", "acq_rel", "gather", "weights", "winner", "options",
  "median_ms", "rel_l2", "speedup", "variant", "candidates", "cudnn_best", "steps_class", "input", "format", "key",
  "fields", "entries", "bogus" }
local TOKENS = { "{", "}", "[", "]", ",", ":", '"', "null", "true", "false", "-", "1e9", "\\u0000", "\\ud800",
  '"backend"', '"options"', '"kernel"', '"winner"', '"median_ms"' }

local function pick(t) return t[math.random(#t)] end

local function copy(v)
  if type(v) ~= "table" or v == report.null then return v end
  local out = setmetatable({}, getmetatable(v))
  for k, x in pairs(v) do out[k] = copy(x) end
  return out
end

-- Every table node of a decoded value, with its parent and key.
local function nodes(v, out, parent, key)
  out = out or {}
  out[#out + 1] = { value = v, parent = parent, key = key }
  if type(v) == "table" and v ~= report.null then
    for k, x in pairs(v) do nodes(x, out, v, k) end
  end
  return out
end

local function structural(text)
  local ok, value = pcall(report.json_decode, text)
  if not ok or type(value) ~= "table" then return nil end
  value = copy(value)
  for _ = 1, math.random(1, 3) do
    local all = nodes(value)
    local n = pick(all)
    local r = math.random(6)
    if n.parent and r <= 2 then
      n.parent[n.key] = pick(INTERESTING)
    elseif n.parent and r == 3 then
      n.parent[n.key] = nil
    elseif type(n.value) == "table" and n.value ~= report.null and r == 4 then
      if #n.value > 0 then n.value[#n.value + 1] = copy(pick(n.value)) else n.value[pick(KEYS)] = pick(INTERESTING) end
    elseif type(n.value) == "table" and n.value ~= report.null and r == 5 then
      n.value[pick(KEYS)] = copy(pick(all).value)
    elseif n.parent then
      n.parent[n.key] = copy(pick(all).value)
    end
  end
  local eok, out = pcall(report.json_encode, value)
  return eok and out or nil
end

local function bytes(text, corpus)
  local r = math.random(6)
  local n = #text
  local at = math.random(0, n)
  if r == 1 and n > 0 then
    local p = math.random(n)
    return text:sub(1, p - 1) .. string.char(math.random(0, 255)) .. text:sub(p + 1)
  elseif r == 2 then
    return text:sub(1, at) .. pick(TOKENS) .. text:sub(at + 1)
  elseif r == 3 and n > 0 then
    local len = math.random(1, math.min(64, n))
    return text:sub(1, at) .. text:sub(at + len + 1)
  elseif r == 4 and n > 0 then
    local from = math.random(n)
    local len = math.random(1, math.min(256, n - from + 1))
    return text:sub(1, at) .. text:sub(from, from + len - 1) .. text:sub(at + 1)
  elseif r == 5 then
    local other = pick(corpus)
    return text:sub(1, at) .. other:sub(math.random(#other + 1))
  end
  return text:sub(1, at) .. tostring(pick(INTERESTING)) .. text:sub(at + 1)
end

local function mutate(text, corpus)
  local out
  if math.random() < 0.7 then out = structural(text) end
  out = out or bytes(text, corpus)
  if #out > opts.max_len then out = out:sub(1, opts.max_len) end
  return out
end

-- ------------------------------------------------------------------ the loop

local function fail(text, failure)
  local name = "tuning_record-" .. spk.cuda.sha256(text):sub(1, 16) .. ".json"
  local dir = opts.artifacts or scratch
  os.execute("mkdir -p " .. shell_quote(dir))
  write(dir .. "/" .. name, text)
  io.stderr:write(("fuzz_tuning_record: FAILED: %s\n  input: %s/%s\n  replay: build/spk run "
    .. "tests/fuzz/fuzz_tuning_record.lua --seconds 0 %s\n"):format(failure, dir, name, dir))
  os.execute("rm -rf " .. shell_quote(scratch))
  os.exit(1)
end

local corpus, replayed = {}, 0
for _, dir in ipairs(opts.dirs) do
  for _, file in ipairs(list(dir)) do
    local text = read(file)
    local failure = run_covered(text)
    if failure then fail(text, failure .. " (corpus file " .. file .. ")") end
    corpus[#corpus + 1] = text
    replayed = replayed + 1
  end
end
if #corpus == 0 then corpus[1] = "{}" end

local start, mutated, kept = os.time(), 0, 0 -- wall clock: the budget is CI's time
local valid, invalid = 0, 0
while os.time() - start < opts.seconds do
  local parent = pick(corpus)
  local failure, new, text = run_covered(parent, function() return mutate(parent, corpus) end)
  if text == parent and failure then text = parent .. "\n" end -- the mutation itself failed: keep its parent
  if failure then fail(text, failure) end
  mutated = mutated + 1
  if last_valid then valid = valid + 1 else invalid = invalid + 1 end
  if new > 0 then
    corpus[#corpus + 1] = text
    kept = kept + 1
    if opts.corpus_out then
      os.execute("mkdir -p " .. shell_quote(opts.corpus_out))
      write(opts.corpus_out .. "/" .. spk.cuda.sha256(text):sub(1, 16) .. ".json", text)
    end
  end
end
os.execute("rm -rf " .. shell_quote(scratch))
print(("fuzz_tuning_record: %d replayed, %d mutated (%d valid records, %d refused) in %.0f s, seed %d: %d edges, "
  .. "%d inputs kept, 0 failures"):format(replayed, mutated, valid, invalid, os.time() - start, opts.seed, edge_count,
  kept))
