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
local M = {}

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

-- The integer in `text`, which must be >= least (default 1); `what` names the
-- option in the message.
function M.positive(text, what, least)
  least = least or 1
  local n = math.tointeger(tonumber(text))
  if not n or n < least then
    M.fail(("--%s: '%s' is not an integer >= %d"):format(what, tostring(text), least))
  end
  return n
end

-- The comma-separated items of `text` (at least one).
function M.list(text, what)
  local out = {}
  for item in tostring(text):gmatch("[^,]+") do out[#out + 1] = item end
  if #out == 0 then M.fail(("--%s needs a value"):format(what)) end
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
      M.fail(("--%s: unknown %s '%s' (known: %s)"):format(what, noun, item, table.concat(names, ", ")))
    end
  end
  return out
end

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

return M
