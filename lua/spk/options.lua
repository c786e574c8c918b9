-- spk.options: what the command-line commands (lua/spk/cli/) share to read
-- their arguments. A bad argument raises {usage_error = message}, which the
-- command catches, prints after its name and answers with exit status 2.
--
-- And the rule every spk function follows: an argument a function does not
-- take is an error that names it. M.check_keys (an option table's keys) and
-- M.takes (extra positional arguments) are the Lua side; the C bindings'
-- spk_lua_checkkeys and checked registration (src/lua/bind.h) give the same
-- messages:
--   "<where>: unknown option '<key>' (known: a, b, c)"
--   "bad argument #<n> to '<where>' (unexpected argument (<value>): <where> takes (<parameters>))"
-- A nil is no argument: trailing nils are fine, as for every optional one.
--
-- Exit statuses, the same for every command, experiment and tool (README,
-- spk help), defined once in src/core/exit_status.h and read through spk.core:
--   options.EXIT = {ok = 0, error = 1, usage = 2, no_gpu = 3}
--   options.gpu_status() -> true | false, why: whether a CUDA device can be used
--   options.no_gpu(who[, what]) -> options.EXIT.no_gpu, after "<who>: needs a CUDA GPU: <why>.
--     Nothing was run." (what replaces "needs a CUDA GPU") on stderr: the one way "no GPU" is said
--   options.header_comment(path) -> the first comment block of a Lua file, without its "-- "
--
-- And what a script of tools/ (an spk script) starts with, so each answers
-- --help and refuses a missing GPU the same way:
--   local script = options.script{gpu = "required" | "optional", dry_run = true, usage = "line"}
--     --help (or -h) anywhere prints the script's header comment (its first
--     comment block, the documentation), the usage line and the shared
--     options, and exits 0; no device is looked for. With gpu = "required" a
--     machine without a usable device gets M.no_gpu (exit 3) unless --dry-run
--     is given (dry_run = true: the script lists its work with script:plan).
--   script.args   the arguments without --help and --dry-run
--   script.name   the file's name without .lua; script.dry_run, script.gpu
--   script:usage_error(message) prints "<name>: message" and the usage line, exits 2
--   options.plan(name, dry_run, items[, header]), script:plan(items[, header]) -> a progress
--     reporter (spk.progress) over #items;
--     in a dry run prints header and one line per item (a string or {what =}) and exits 0
local M = {}

-- src/core/exit_status.h, through spk.core (under a spk.so without it: the same numbers).
do
  local ok, core = pcall(require, "spk.core")
  local statuses = ok and type(core) == "table" and core.system_exit_status
  M.EXIT = {}
  for k, v in pairs(statuses or { ok = 0, error = 1, usage = 2, no_gpu = 3 }) do M.EXIT[k] = v end
end

-- Whether a CUDA device can be used, and why not.
function M.gpu_status()
  local spk = require "spk"
  if not (spk.cuda and spk.cuda.available) then return false, "spk was built without the GPU runtime" end
  local ok, available = pcall(spk.cuda.available)
  if ok and available then return true end
  return false, spk.cuda.no_device_reason()
end

function M.no_gpu(who, what)
  local _, why = M.gpu_status()
  io.stderr:write(("%s: %s: %s. Nothing was run.\n"):format(who, what or "needs a CUDA GPU", why or "no CUDA device"))
  io.stderr:flush()
  return M.EXIT.no_gpu
end

-- The name of a value's type for messages: a userdata by its metatable's
-- __name (never "userdata" where one is known).
local function type_name(v)
  if type(v) == "userdata" then
    local mt = debug.getmetatable(v)
    local name = type(mt) == "table" and rawget(mt, "__name")
    if type(name) == "string" then return name end
  end
  return type(v)
end
M.type_name = type_name

local function article(word)
  return (word:match("^[aeioAEIO]") and "an " or "a ") .. word
end

-- The sorted names of `known`, a set {name = true} or a list {"name", ...}.
local function known_names(known)
  local names = {}
  for k, v in pairs(known) do
    names[#names + 1] = type(k) == "string" and k or v
  end
  table.sort(names)
  return names
end

-- Raises, at `level` as error() counts it from the caller (default 2: the
-- caller's caller), the error naming the first key of `opts` that is not in
-- `known` (read raw: no metamethod of opts runs). nil is fine; anything else
-- that is not a table is an error too. Returns opts, or {} for nil.
function M.check_keys(opts, known, where, level)
  level = (level or 2) + 1
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(("%s: options must be a table, got %s"):format(where, article(type_name(opts))), level)
  end
  local set = {}
  for k, v in pairs(known) do set[type(k) == "string" and k or v] = true end
  local key = next(opts)
  while key ~= nil do
    if not set[key] then
      local names = table.concat(known_names(known), ", ")
      if type(key) == "string" then
        error(("%s: unknown option '%s' (known: %s)"):format(where, key, names), level)
      end
      error(("%s: unknown option %s (%s key; known: %s)"):format(where, tostring(key), article(type(key)), names),
        level)
    end
    key = next(opts, key)
  end
  return opts
end

-- What a value is in an argument message, as the C bindings say it
-- (spk_lua_describe in src/lua/bind.c): number 2, string "x", boolean
-- true, table, tensor, cuda.stream.
function M.describe(v)
  local kind = type(v)
  if kind == "number" then
    if math.type(v) == "integer" then return ("number %d"):format(v) end
    if v ~= v then return "number nan" end
    return ("number %.14g"):format(v)
  elseif kind == "string" then
    if #v > 40 then return ('string "%s..."'):format(v:sub(1, 37)) end
    return ('string "%s"'):format(v)
  elseif kind == "boolean" then
    return "boolean " .. tostring(v)
  end
  local name = type_name(v)
  return (name:gsub("^spk%.", ""))
end

-- The first `max` parameter names of a Lua function, without self, as a
-- message lists them ("x, opts"; "..." for a vararg function); nil for a C
-- function.
local function params_of(fn, max)
  local info = debug.getinfo(fn, "Su")
  if info.what == "C" then return nil end
  local names = {}
  for i = 1, math.min(info.nparams, max) do
    local name = debug.getlocal(fn, i)
    if not (i == 1 and name == "self") then names[#names + 1] = name end
  end
  if info.isvararg and info.nparams < max then names[#names + 1] = "..." end
  return table.concat(names, ", ")
end

-- fn, wrapped so that a call with a non-nil argument after the first `max`
-- is an error naming it, in the words the C bindings use (src/lua/bind.h):
-- "bad argument #3 to 'spk.lstm.load' (unexpected argument (number 2):
-- spk.lstm.load takes (path))". The wrapper tail-calls fn, so fn's own
-- error levels still point at its caller. A method counts self, as the C
-- bindings do, and its message numbers the arguments without it.
function M.takes(max, where, fn)
  local params = params_of(fn, max)
  local sig = params == nil and ("%s takes at most %d arguments"):format(where, max)
    or params == "" and where .. " takes no arguments" or ("%s takes (%s)"):format(where, params)
  return function(...)
    local n = select("#", ...)
    for i = max + 1, n do
      local v = select(i, ...)
      if v ~= nil then
        local errors = package.loaded["spk.errors"]
        local info = errors and errors.call_info(1) or debug.getinfo(1, "n")
        local shown = info and info.namewhat == "method" and i - 1 or i
        error(("bad argument #%d to '%s' (unexpected argument (%s): %s)"):format(shown, where, M.describe(v), sig), 2)
      end
    end
    return fn(...)
  end
end

-- Raises the usage error `message`.
function M.fail(message)
  error({ usage_error = message }, 0)
end

-- How a message names the value `what` reads: a flag ("rounds": "--rounds"),
-- or a positional argument as its usage writes it ("BATCHES" as it is).
local function named(what)
  return tostring(what):match("^%u[%u_]*$") and what or "--" .. tostring(what)
end

-- The integer in `text`, which must be >= least (default 1); `what` names the
-- option in the message.
function M.positive(text, what, least)
  least = least or 1
  local n = math.tointeger(tonumber(text))
  if not n or n < least then
    M.fail(("%s: '%s' is not an integer >= %d"):format(named(what), tostring(text), least))
  end
  return n
end

-- The comma-separated items of `text` (at least one).
function M.list(text, what)
  local out = {}
  for item in tostring(text):gmatch("[^,]+") do out[#out + 1] = item end
  if #out == 0 then M.fail(("%s needs a value"):format(named(what))) end
  return out
end

-- The comma-separated items of `text`, each a key of the set `known`; `noun`
-- names one item in the message ("--math: unknown math 'x' (known: fp32, tf32)").
function M.choices(text, what, noun, known)
  local out = M.list(text, what)
  for _, item in ipairs(out) do
    if not known[item] then
      local names = {}
      for name in pairs(known) do names[#names + 1] = name end
      table.sort(names)
      M.fail(("%s: unknown %s '%s' (known: %s)"):format(named(what), noun, item, table.concat(names, ", ")))
    end
  end
  return out
end

-- Each of `names` one of spk.lstm.backends ("--backends: unknown backend 'x'
-- (registered: auto, cluster, ...)"); with `math`, each one that has it
-- (spk.lstm.check_math's message). Returns names.
function M.check_backends(names, what, math)
  local spk = require "spk"
  for _, backend in ipairs(names) do
    if type(spk.lstm.backends[backend]) ~= "function" then
      local known = {}
      for name in pairs(spk.lstm.backends) do known[#known + 1] = name end
      table.sort(known)
      M.fail(("%s: unknown backend '%s' (registered: %s)"):format(named(what), backend, table.concat(known, ", ")))
    end
    local ok, why = spk.lstm.check_math(math, backend)
    if not ok then M.fail(("%s: %s"):format(named(what), why)) end
  end
  return names
end

-- The comma-separated backends of `text`, checked as check_backends does.
function M.backends(text, what, math) return M.check_backends(M.list(text, what), what, math) end

-- The comma-separated integers >= 1 of `text` (at least one).
function M.positives(text, what)
  local out = {}
  for i, item in ipairs(M.list(text, what)) do out[i] = M.positive(item, what) end
  return out
end

-- The text of an error caught around parsing: the usage error's message, or
-- any other error as a string.
function M.message(err)
  return type(err) == "table" and err.usage_error or tostring(err)
end

-- The start every command shares: parses `args` with parse(args) → opts, and
-- answers a usage error (exit 2, message after the command's name on stderr)
-- and --help (the usage text, exit 0). Returns opts, out (write and progress
-- functions, io_override in tests), or nil, exit status.
function M.start(command, parse, args, io_override, usage)
  local out = io_override or { write = function(s) io.stdout:write(s) end,
                               progress = function(s) io.stderr:write(s) end }
  local ok, o = pcall(parse, args or {})
  if not ok then
    io.stderr:write("spk ", command, ": ", M.message(o), "\n")
    return nil, 2
  end
  if o.help then
    out.write(usage .. "\n")
    return nil, 0
  end
  return o, out
end

-- ------------------------------------------------------------ spk scripts

-- The first comment block of a Lua file, without its "-- " marks.
local function header_comment(path)
  local f = path and io.open(path)
  if not f then return nil end
  local lines = {}
  for line in f:lines() do
    if #lines == 0 and line:match("^#!") then goto continue end
    local text = line:match("^%-%-%s?(.*)$")
    if not text then break end
    lines[#lines + 1] = text
    ::continue::
  end
  f:close()
  return #lines > 0 and table.concat(lines, "\n") or nil
end
M.header_comment = header_comment

local Script = {}
Script.__index = Script

-- The value after flag `name` among the script's arguments ("--rounds 5": "5"), true for a
-- flag last on the line, nil where it is not given.
function Script:option(name)
  for i = 1, #self.args do
    if self.args[i] == name then return self.args[i + 1] or true end
  end
  return nil
end

-- The value of flag `name` read by `read` (one of this module's readers:
-- M.positive, M.positives, M.list, M.backends, ..., with its further
-- arguments), `default` where the flag is not given; a value the reader
-- refuses, or a flag without one, is a usage error naming it (exit 2), never
-- a default in its place.
function Script:read(name, default, read, ...)
  local text = self:option(name)
  if text == nil then return default end
  if text == true then self:usage_error(("%s needs a value"):format(name)) end
  return self:value(text, (name:gsub("^%-%-", "")), read, ...)
end

-- `text` read by `read` as the value `what` names (a flag's name, or a
-- positional argument's as the usage writes it: "BATCHES"), with the reader's
-- further arguments; a value it refuses is a usage error (exit 2).
function Script:value(text, what, read, ...)
  local ok, value = pcall(read, text, what, ...)
  if not ok then self:usage_error(M.message(value)) end
  return value
end

function Script:usage_error(message)
  io.stderr:write(("%s: %s\n"):format(self.name, message))
  if self.usage then io.stderr:write("usage: ", self.usage, "\n") end
  os.exit(M.EXIT.usage)
end

-- The work of a script or experiment: in a dry run, printed (exit 0); else a
-- progress reporter counting it.
function M.plan(name, dry_run, items, header)
  if dry_run then
    local out = { header or ("%s (dry run): %d steps; nothing is measured"):format(name, #items) }
    for i, item in ipairs(items) do
      out[#out + 1] = ("  %d. %s"):format(i, type(item) == "table" and tostring(item.what) or tostring(item))
    end
    io.stdout:write(table.concat(out, "\n"), "\n")
    os.exit(M.EXIT.ok)
  end
  return require("spk.progress").new { label = name, total = #items }
end

-- A script of gpu = "required" on a machine without a usable device: the
-- no-GPU line and exit 3, once its arguments are read (a usage error comes
-- first, as in spk.experiment), so at its plan or where it calls this.
function Script:require_gpu()
  if self.gpu_required and not self.gpu and not self.dry_run then os.exit(M.no_gpu(self.name)) end
end

function Script:plan(items, header)
  self:require_gpu()
  self.progress_line = M.plan(self.name, self.dry_run, items, header)
  return self.progress_line
end

local script_keys = { "gpu", "dry_run", "usage", "arg", "level" }

function M.script(spec)
  spec = M.check_keys(spec or {}, script_keys, "options.script")
  -- the script: the first caller outside spk's own Lua files (spk.errors may guard this call)
  local path
  for level = spec.level or 2, 20 do
    local info = debug.getinfo(level, "S")
    if not info then break end
    local file = info.source:match("^@(.*)$")
    if file and not file:match("/spk/[%w_]+%.lua$") then path = file break end
  end
  local name = path and path:match("([^/]+)%.lua$") or "script"
  local self = setmetatable({ name = name, path = path, usage = spec.usage, args = {}, dry_run = false }, Script)
  local help = false
  for _, a in ipairs(spec.arg or rawget(_G, "arg") or {}) do
    if a == "--help" or a == "-h" then help = true
    elseif a == "--dry-run" and spec.dry_run then self.dry_run = true
    else self.args[#self.args + 1] = a end
  end
  if help then
    local lines = { header_comment(path) or name }
    lines[#lines + 1] = ""
    if spec.usage then lines[#lines + 1] = "usage: " .. spec.usage end
    lines[#lines + 1] = "  --help      this text"
    if spec.dry_run then lines[#lines + 1] = "  --dry-run   list what it would run and exit (no device needed)" end
    if spec.gpu == "required" then
      lines[#lines + 1] = ("Needs a CUDA GPU: without one it says so and exits %d."):format(M.EXIT.no_gpu)
    end
    io.stdout:write(table.concat(lines, "\n"), "\n")
    os.exit(M.EXIT.ok)
  end
  if spec.gpu then self.gpu = M.gpu_status() end -- no device probe for a script that needs none
  self.gpu_required = spec.gpu == "required"
  return self
end

return M
