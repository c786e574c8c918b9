-- spk.errors: an error about what a script passed points at the script's
-- line, never at spk's own Lua files.
--
-- Every Lua function spk exports (the spk table and its subtables, the
-- methods of the objects they return, and the library modules spk.report,
-- spk.plot, ... when required) is guarded: a call runs under a message
-- handler, and an error that spk's own code raised (error() in lua/spk, or a
-- binding called from there) has its location replaced by the first caller
-- outside lua/spk, whatever level error() was given or however deep in spk it
-- happened. So spk's functions raise with a plain error(message): no level
-- is threaded through them (tests/spec/error_location_spec.lua checks the
-- lines, tests/spec/code_shape_spec.lua that no level is passed on).
--
-- What is left alone: errors that are not strings (usage errors are tables),
-- errors raised in the script's own code (a callback spk called), and
-- runtime errors of spk's Lua code itself ("attempt to index a nil value"),
-- whose location is the place to fix.
--
--   errors.guard(fn) -> the guarded function (the same one for the same fn)
--   errors.guard_table(t) -> t, its spk functions (and subtables') guarded
--   errors.install(spk) guards spk and every spk.* module, now and later
--   errors.is_own(source) -> whether a chunk's source is one of spk's files
local M = {}

local getinfo, getmetatable, type, select = debug.getinfo, getmetatable, type, select
local raise, xpcall = error, xpcall

-- "@<lua dir>/spk/": the source prefix of spk's own chunks (this file's).
local own = getinfo(1, "S").source:match("^(@.*/)errors%.lua$")

function M.is_own(source)
  return own ~= nil and source ~= nil and source:sub(1, #own) == own
end

-- Whether a location's file part ("<short_src>") names one of spk's files.
-- Lua shortens long chunk names to "..." and their tail.
local function own_location(file)
  if not own then return false end
  local full = own:sub(2)
  if file:sub(1, 3) == "..." then
    local tail = file:sub(4)
    local rel = tail:match("spk/([%w_/%.%-]+%.lua)$")
    return rel ~= nil and (full .. rel):sub(-#tail) == tail
  end
  return file:sub(1, #full) == full
end

local function location(info)
  return ("%s:%d:"):format(info.short_src, info.currentline)
end

-- The first Lua frame from `frame` up that is outside spk: its location,
-- and the locations of the frames on the way (ones an error() level may have
-- picked).
local function caller_from(frame)
  local on_stack = {}
  while true do
    local info = getinfo(frame, "Sl")
    if not info then return nil, on_stack end
    if info.what ~= "C" then
      local at = location(info)
      if not M.is_own(info.source) then return at, on_stack end
      on_stack[at] = true
    end
    frame = frame + 1
  end
end

-- The message handler of the guarded function `name`: runs where the error
-- was raised, with the stack intact.
local function repoint(message, name)
  if type(message) ~= "string" then return message end
  local frame = 2 -- the function that raised (1 is this handler)
  local raiser = getinfo(frame, "S")
  if not raiser then return message end
  if raiser.what ~= "C" then
    -- A runtime error of Lua code ("attempt to index a nil value"): the
    -- script's own is theirs; spk's is an argument it did not check (or a
    -- bug): it is reported at the script's line, naming the function, with
    -- spk's place last.
    if not M.is_own(raiser.source) then return message end
    local caller = caller_from(frame)
    if not caller then return message end
    local file, line, rest = message:match("^([^\n]-):(%d+): (.*)$")
    if not file then return caller .. " " .. name .. ": " .. message end
    return ("%s %s: %s (spk/%s:%s)"):format(caller, name, rest, file:match("spk/(.*)$") or file, line)
  end
  -- The first Lua frame above the raising C function (error, or a binding)
  -- says whose error it is.
  repeat
    frame = frame + 1
    raiser = getinfo(frame, "S")
  until not raiser or raiser.what ~= "C"
  if not raiser or not M.is_own(raiser.source) then return message end
  local caller, on_stack = caller_from(frame)
  if not caller then return message end
  local file, line, rest = message:match("^([^\n]-):(%d+): (.*)$")
  if file then
    if not (own_location(file) or on_stack[file .. ":" .. line .. ":"] or file .. ":" .. line .. ":" == caller) then
      return message -- someone else's location (a callback's error passed on)
    end
    message = rest
  end
  return caller .. " " .. message
end
M.repoint = repoint

local wrapper_of = setmetatable({}, { __mode = "k" }) -- function -> its guard
local is_guard = setmetatable({}, { __mode = "k" })
local seen_mt = setmetatable({}, { __mode = "k" })

local guard_methods

local function finish(ok, ...)
  if not ok then raise((...), 0) end
  -- The methods of an object a guarded function returns are guarded too
  -- (once per metatable), so plans, schedules and results are covered.
  if select("#", ...) > 0 then
    local r = ...
    local kind = type(r)
    if kind == "table" or kind == "userdata" then
      local mt = getmetatable(r)
      if type(mt) == "table" and not seen_mt[mt] then guard_methods(mt) end
    end
  end
  return ...
end

local function is_own_function(fn)
  local info = getinfo(fn, "S")
  return info.what == "Lua" and M.is_own(info.source)
end

-- `name` is what a runtime error inside fn is reported as coming from.
function M.guard(fn, name)
  if type(fn) ~= "function" or is_guard[fn] or not is_own_function(fn) then return fn end
  local g = wrapper_of[fn]
  if not g then
    name = name or "spk"
    local function handler(message) return repoint(message, name) end
    g = function(...) return finish(xpcall(fn, handler, ...)) end
    wrapper_of[fn], is_guard[g] = g, true
    -- help(g) says what help(fn) said (the doc registry is keyed by value).
    local docs = package.loaded["spk.doc"]
    local text = docs and docs.get(fn)
    if text then docs(g, text) end
  end
  return g
end

-- The name info (debug.getinfo's "n") of the call that reached the function
-- at `level` of the caller: for a guarded function, which runs through
-- xpcall and so has no name, the guard's, which is what the script called
-- (a method call numbers its arguments without self).
function M.call_info(level)
  local frame = level + 1 -- the caller's frame, seen from here
  local info = getinfo(frame, "nf")
  local c = getinfo(frame + 1, "S")
  if c and c.what == "C" then
    local g = getinfo(frame + 2, "nf")
    if g and is_guard[g.func] then return g end
  end
  return info
end

-- Metamethods that run on every access or at collection stay as they are.
local unguarded = { __index = true, __newindex = true, __gc = true, __close = true, __mode = true }

-- `shallow`: only t's own functions, not its subtables (a metatable may be
-- a script's, with its own data hanging off it).
function M.guard_table(t, prefix, seen, shallow)
  seen = seen or {}
  prefix = prefix or ""
  if type(t) ~= "table" or seen[t] then return t end
  seen[t] = true
  for k, v in pairs(t) do
    if type(k) == "string" and not unguarded[k] then
      if type(v) == "function" then
        t[k] = M.guard(v, prefix .. k)
      elseif type(v) == "table" and k ~= "core" and not shallow then
        M.guard_table(v, prefix .. k .. ".", seen)
      end
    end
  end
  return t
end

function guard_methods(mt)
  seen_mt[mt] = true
  local prefix = (type(rawget(mt, "__name")) == "string" and rawget(mt, "__name") or "method") .. ":"
  M.guard_table(mt, prefix, nil, true)
  local index = rawget(mt, "__index")
  if type(index) == "table" then M.guard_table(index, prefix, nil, true) end
end

-- Modules left as they are: the bindings, this one, and spk.busted, whose
-- assertions run inside luassert and name the spec's line themselves.
local unguarded_module = { ["spk.core"] = true, ["spk.errors"] = true, ["spk.busted"] = true }

-- Guards spk, the spk.* modules loaded so far, and (through a searcher in
-- front of Lua's own) every spk.* module required later.
function M.install(spk)
  M.guard_table(spk, "spk.")
  for name, mod in pairs(package.loaded) do
    if type(name) == "string" and name:match("^spk%.") and not unguarded_module[name] and type(mod) == "table" then
      M.guard_table(mod, name .. ".")
    end
  end
  if not M.searcher_installed then
    M.searcher_installed = true
    local lua_searcher = package.searchers[2]
    table.insert(package.searchers, 2, function(name)
      if type(name) ~= "string" or not name:match("^spk%.") or unguarded_module[name] then return nil end
      local loader, extra = lua_searcher(name)
      if type(loader) ~= "function" then return loader end
      return function(...)
        local mod = loader(...)
        if type(mod) == "table" then M.guard_table(mod, name .. ".") end
        return mod
      end, extra
    end)
  end
  return spk
end

return M
