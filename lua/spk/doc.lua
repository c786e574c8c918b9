-- spk.doc: the one doc registry behind help() and the REPL's completion. The
-- C bindings feed it beside each registration (src/lua/bind.h: spk_lua_reg);
-- the Lua areas declare theirs here, beside each definition:
--
--   local doc = require "spk.doc"
--   function lstm.random(opts) ... end
--   doc(lstm.random, [[
--   spk.lstm.random{layers = 4, input = 60, hidden = 128, seed =, ...} -> layers
--   PyTorch's default initialisation, ...]])
--
-- A doc's first line is the call as a script writes it; the lines after it
-- say what it does. Each area declares itself once, its long text being the
-- header comment of its Lua file:
--
--   doc.area{name = "lstm", summary = "one line", source = "spk.lstm",
--            contents = {spk.lstm, spk.schedule}}   -- tables, functions, type names
--   (header = text instead of source: an area without a Lua file of its own)
--
--   doc(value, text) -> value          documents a function or table
--   doc.type(name, methods, text)      a type of values whose metatable __name (or
--                                      the class table itself) is `name`
--   doc.get(value) -> text | nil
--   doc.type_of(value) -> {name =, methods =, doc =} | nil
--   doc.field(value, key) -> the field, read without running any metamethod
--   doc.keys(value) -> {name, ...}: the string keys field() can read, sorted
--   doc.resolve(path) -> value, found: "spk.lstm.stack", "x:narrow" from _G, raw
--   doc.help_text([value | topic]) -> text: what help() prints
--
-- Nothing here runs user code: fields are read with rawget, a metatable's
-- __index is followed only when it is a table, and a userdata's methods come
-- from its registered type, so help() and Tab completion are safe on any
-- value (no __index, __pairs, __len or __tostring of the user's runs).
local core = require "spk.core"

local values, types = core.doc_registry()

local M = { areas = {} }

local function first_line(text)
  return (tostring(text):match("^[^\n]*"))
end

function M.add(value, text)
  if type(text) ~= "string" or text == "" then
    error("doc: a documentation text is required", 2)
  end
  local kind = type(value)
  if kind ~= "function" and kind ~= "table" and kind ~= "userdata" then
    error(("doc: can document functions and tables, not a %s"):format(kind), 2)
  end
  rawset(values, value, (text:gsub("^\n+", ""):gsub("%s+$", "")))
  return value
end

setmetatable(M, { __call = function(_, value, text) return M.add(value, text) end })

function M.get(value)
  if value == nil then return nil end
  local kind = type(value)
  if kind ~= "function" and kind ~= "table" and kind ~= "userdata" then return nil end
  return rawget(values, value)
end

function M.type(name, methods, text)
  rawset(types, name, { methods = methods, doc = (text:gsub("%s+$", "")) })
end

-- ------------------------------------------------------------ raw access

local function metatable_of(value)
  local mt = getmetatable(value) -- runs no code (a __metatable field is only returned)
  if type(mt) == "table" then return mt end
  return nil
end

-- The registered type of a value: by its metatable's __name, by the
-- metatable the C side registered under the type's name (luaL_newmetatable;
-- a __name shown in messages may differ from that key), or (Lua classes) by
-- the metatable itself being a registered methods table.
local registry = debug.getregistry()
function M.type_of(value)
  local mt = metatable_of(value)
  if not mt then return nil end
  local name = rawget(mt, "__name")
  if type(name) == "string" then
    local entry = rawget(types, name)
    if entry then return { name = name, methods = entry.methods, doc = entry.doc } end
  end
  for tname, entry in next, types do
    if rawequal(rawget(registry, tname), mt) or rawequal(entry.methods, mt)
        or rawequal(entry.methods, rawget(mt, "__index")) then
      return { name = tname, methods = entry.methods, doc = entry.doc }
    end
  end
  return nil
end

-- The tables a field is looked up in, in order: the value itself (a table),
-- then each metatable's __index while it is a table, then the methods of
-- the value's registered type.
local function lookup_chain(value)
  local chain, seen = {}, {}
  local current = value
  for _ = 1, 8 do
    if type(current) == "table" and not seen[current] then
      seen[current] = true
      chain[#chain + 1] = current
    end
    local mt = metatable_of(current)
    if not mt then break end
    local index = rawget(mt, "__index")
    if type(index) ~= "table" or seen[index] then break end
    current = index
  end
  local t = M.type_of(value)
  if t and type(t.methods) == "table" and not seen[t.methods] then chain[#chain + 1] = t.methods end
  return chain
end

function M.field(value, key)
  for _, t in ipairs(lookup_chain(value)) do
    local v = rawget(t, key)
    if v ~= nil then return v end
  end
  return nil
end

local function is_identifier(key)
  return type(key) == "string" and key:match("^[%a_][%w_]*$") ~= nil
end

function M.keys(value)
  local set, list = {}, {}
  for _, t in ipairs(lookup_chain(value)) do
    for key in next, t do
      if is_identifier(key) and not set[key] then
        set[key] = true
        list[#list + 1] = key
      end
    end
  end
  table.sort(list)
  return list
end

-- "a.b.c" or "a.b:c" (identifiers only) from the globals (spk is the
-- module even where no global holds it); found is false
-- where a step is missing or the path is not of that form.
function M.resolve(path)
  if type(path) ~= "string" or not path:match("^[%a_][%w_]*[%w_.:]*$") or path:find("[.:][.:]")
    or path:find(":.*[.:]") or path:find("[.:]$") then
    return nil, false
  end
  local value, first = _G, true
  for _, name in ("." .. path):gmatch("([.:])([%a_][%w_]*)") do
    local v = M.field(value, name)
    -- "spk.x" in a script that holds spk in a local
    if v == nil and first and name == "spk" then v = package.loaded.spk end
    if v == nil then return nil, false end
    value, first = v, false
  end
  return value, true
end

-- ------------------------------------------------------------ names

local LUA_MANUAL = "a Lua %s (see the Lua 5.4 manual)"
local plain_text

-- value -> "spk.a.b": every documented or spk value by the path scripts
-- reach it through (spk.core's only where nothing else leads there).
local function name_index()
  local spk = package.loaded.spk
  local names = {}
  local function walk(t, path, depth, weak)
    if depth > 4 then return end
    for key, v in next, t do
      if is_identifier(key) and (type(v) == "function" or type(v) == "table") then
        local p = path .. "." .. key
        if names[v] == nil or (names[v].weak and not weak) then
          names[v] = { path = p, weak = weak }
          if type(v) == "table" then walk(v, p, depth + 1, weak or key == "core") end
        end
      end
    end
  end
  if type(spk) == "table" then
    names[spk] = { path = "spk" }
    walk(spk, "spk", 1, false)
  end
  for tname, entry in next, types do
    if type(entry.methods) == "table" then
      for key, v in next, entry.methods do
        if is_identifier(key) and type(v) == "function" and names[v] == nil then
          names[v] = { path = ("%s:%s"):format(tname, key) }
        end
      end
    end
  end
  return names
end

function M.name_of(value)
  local entry = name_index()[value]
  return entry and entry.path or nil
end

-- ------------------------------------------------------------ areas

local function check_area(spec)
  if type(spec) ~= "table" or type(spec.name) ~= "string" or type(spec.summary) ~= "string" then
    error("doc.area: expects {name =, summary =, source =, contents = {...}}", 3)
  end
end

function M.area(spec)
  check_area(spec)
  for i, a in ipairs(M.areas) do
    if a.name == spec.name then
      M.areas[i] = spec
      return spec
    end
  end
  M.areas[#M.areas + 1] = spec
  return spec
end

function M.find_area(name)
  for _, a in ipairs(M.areas) do
    if a.name == name then return a end
  end
  return nil
end

-- The area whose contents hold this table or function.
local function area_of(value)
  for _, a in ipairs(M.areas) do
    for _, item in ipairs(a.contents or {}) do
      if rawequal(item, value) then return a end
    end
    if a.require and rawequal(package.loaded[a.require], value) then return a end
  end
  return nil
end

-- The header comment of a Lua module's file (package.path), without "-- ".
function M.header(module)
  if type(module) ~= "string" then return nil end
  local path = package.searchpath(module, package.path)
  local f = path and io.open(path, "r")
  if not f then return nil end
  local lines = {}
  for line in f:lines() do
    local text = line:match("^%-%-+ ?(.*)$")
    if not text then break end
    lines[#lines + 1] = text
  end
  f:close()
  if #lines == 0 then return nil end
  return table.concat(lines, "\n")
end

-- The paragraph of a header that documents `key`: the first line with
-- "key(", "key{" or "key =" after a word boundary, and the lines after it
-- indented deeper (the library modules document their functions so).
local function header_entry(header, key)
  local lines, found, indent = {}, nil, nil
  for line in (header .. "\n"):gmatch("([^\n]*)\n") do
    if found then
      local lead = #line:match("^ *")
      if line:match("^%s*$") or lead <= indent then break end
      lines[#lines + 1] = line:sub(indent + 1)
    else
      local at = line:find("%f[%w_]" .. key .. "%s*[({]")
      if at then
        found = true
        indent = #line:match("^ *")
        lines[1] = line:sub(indent + 1)
      end
    end
  end
  return found and table.concat(lines, "\n") or nil
end

-- The comment right above "function M.key(...)" in a module's file (or
-- above the local function that "M.key = name" exports), under the call as
-- the definition spells it.
local function comment_entry(module, name, key)
  local path = package.searchpath(module, package.path)
  local f = path and io.open(path, "r")
  if not f then return nil end
  local lines = {}
  for line in f:lines() do lines[#lines + 1] = line end
  f:close()
  local function entry(i, params)
    local comment = {}
    for j = i - 1, 1, -1 do
      local c = lines[j]:match("^%-%- ?(.*)$")
      if not c then break end
      table.insert(comment, 1, c)
    end
    local text = name .. "." .. key .. params
    if #comment > 0 then text = text .. "\n" .. table.concat(comment, "\n") end
    return text
  end
  local alias
  for i, line in ipairs(lines) do
    local params = line:match("^function [%w_]+%." .. key .. "(%b())")
      or line:match("^[%w_]+%." .. key .. " = function(%b())")
    if params then return entry(i, params) end
    alias = alias or line:match("^[%w_]+%." .. key .. " = ([%a_][%w_]*)%s*$")
  end
  if alias then
    for i, line in ipairs(lines) do
      local params = line:match("^local function " .. alias .. "(%b())")
      if params then return entry(i, params) end
    end
  end
  return nil
end

-- For a library module's function without a doc of its own: its paragraph
-- in the module's header, else the comment above its definition.
local function documented_in_header(value)
  for _, a in ipairs(M.areas) do
    local module = a.require and package.loaded[a.require]
    if type(module) == "table" then
      for key, v in next, module do
        if rawequal(v, value) and type(key) == "string" then
          local header = M.header(a.source)
          return header and header_entry(header, key) or comment_entry(a.source, a.require, key)
        end
      end
    end
  end
  return nil
end

-- ------------------------------------------------------------ help text

local function sorted_keys(t)
  local keys = {}
  for key in next, t do
    if is_identifier(key) then keys[#keys + 1] = key end
  end
  table.sort(keys)
  return keys
end


-- Whether a doc line already starts with the entry's name (its call).
local function names_itself(label, text)
  local last = label:match("[%w_]+$") or label
  local head = text:match("^[%w_.:]+")
  return head ~= nil and (head == label or head:match("[.:]" .. last .. "$") ~= nil)
end

-- One line per entry: the doc's first line where it names the entry (its
-- call), else "name   description".
local function listing(entries)
  local width = 0
  for _, e in ipairs(entries) do
    if not names_itself(e[1], e[2]) then width = math.max(width, #e[1]) end
  end
  width = math.min(width, 28)
  local lines = {}
  for _, e in ipairs(entries) do
    if names_itself(e[1], e[2]) then
      lines[#lines + 1] = "  " .. e[2]
    else
      lines[#lines + 1] = ("  %-" .. width .. "s  %s"):format(e[1], e[2])
    end
  end
  return table.concat(lines, "\n")
end

-- A value as text without its __tostring (numbers, booleans and nil as
-- tostring writes them; a userdata by its metatable's __name).
plain_text = function(value)
  local kind = type(value)
  if kind == "number" or kind == "boolean" or kind == "nil" then return tostring(value) end
  if kind == "string" then return value end
  local mt = metatable_of(value)
  local name = mt and rawget(mt, "__name")
  return ("a %s%s"):format(kind, type(name) == "string" and (" (" .. name .. ")") or "")
end

-- A short table: its array of plain values, or its sorted names.
local function brief_table(t)
  local n, parts = 0, {}
  for _ in next, t do n = n + 1 end
  if n == 0 then return "{}" end
  if n > 8 then return ("a table (%d entries)"):format(n) end
  if n == #t then
    for i = 1, n do
      local v = rawget(t, i)
      if type(v) == "string" then parts[i] = ("%q"):format(v)
      elseif type(v) == "number" or type(v) == "boolean" then parts[i] = tostring(v)
      else return ("a table (%d entries)"):format(n) end
    end
  else
    parts = sorted_keys(t)
    if #parts ~= n then return ("a table (%d entries)"):format(n) end
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function describe(value)
  local text = M.get(value) or (type(value) == "function" and documented_in_header(value))
  if text then return first_line(text) end
  local t = M.type_of(value)
  if t then return first_line(t.doc) end
  local kind = type(value)
  if kind == "table" then
    return brief_table(value)
  elseif kind == "string" then
    return ("%q"):format(value)
  elseif kind == "function" then
    return "(no documentation)"
  end
  return plain_text(value)
end

local function table_entries(t, prefix, method)
  local entries = {}
  for _, key in ipairs(sorted_keys(t)) do
    local v = rawget(t, key)
    entries[#entries + 1] = { prefix .. (method and ":" or ".") .. key, describe(v) }
  end
  return entries
end

local function type_text(t)
  local parts = { t.doc }
  if type(t.methods) == "table" then
    local entries = {}
    for _, key in ipairs(sorted_keys(t.methods)) do
      local v = rawget(t.methods, key)
      if type(v) == "function" and not key:match("^__") then
        local d = M.get(v)
        entries[#entries + 1] = { key, d and first_line(d) or "(no documentation)" }
      end
    end
    if #entries > 0 then parts[#parts + 1] = "\nmethods:\n" .. listing(entries) end
  end
  return table.concat(parts, "\n")
end

local function area_text(a)
  local parts = { ("%s: %s"):format(a.name, a.summary) }
  local header = a.header or M.header(a.source)
  if header then parts[#parts + 1] = "\n" .. header end
  local contents = a.contents
  if a.require then
    local ok, module = pcall(require, a.require)
    if ok and type(module) == "table" then contents = { module } end
  end
  local loose = {}
  for _, item in ipairs(contents or {}) do
    if type(item) == "table" then
      local name = M.name_of(item) or (a.require or a.name)
      parts[#parts + 1] = ("\n%s:\n%s"):format(name, listing(table_entries(item, name)))
    elseif type(item) == "string" then
      local entry = rawget(types, item)
      if entry then parts[#parts + 1] = "\n" .. type_text({ name = item, methods = entry.methods, doc = entry.doc }) end
    else
      loose[#loose + 1] = { M.name_of(item) or "?", describe(item) }
    end
  end
  if #loose > 0 then parts[#parts + 1] = "\nfunctions:\n" .. listing(loose) end
  return table.concat(parts, "\n")
end

local function overview()
  local program = package.loaded["spk.program"]
  local version = type(program) == "table" and program.version or nil
  local entries = {}
  for _, a in ipairs(M.areas) do entries[#entries + 1] = { a.name, a.summary } end
  return table.concat({
    ("spk%s: persistent LSTM kernels, scriptable in Lua."):format(version and (" " .. version) or ""),
    "help(x) prints the documentation of a function, table or tensor x; help \"area\" one area's;",
    "?name at the prompt is help(name), and Tab completes names (x:<Tab> lists methods).",
    "",
    "areas:",
    listing(entries),
  }, "\n")
end

-- Names (from the spk tables and the registered types) whose path or doc
-- mentions the word.
local function search(word)
  local found = {}
  for value, entry in next, name_index() do
    local text = M.get(value) or ""
    if entry.path:find(word, 1, true) or text:find(word, 1, true) then
      found[#found + 1] = { entry.path, describe(value) }
    end
  end
  table.sort(found, function(a, b) return a[1] < b[1] end)
  return found
end

function M.help_text(...)
  if select("#", ...) == 0 then return overview() end
  local value = ...
  if type(value) == "string" then
    local a = M.find_area(value)
    if a then return area_text(a) end
    local v, found = M.resolve(value)
    if found and v ~= nil and type(v) ~= "string" then return M.help_text(v) end
    -- "x:narrow" where x is not defined: the names ending so
    local word = value:match("[.:]([%a_][%w_]*)$")
    local hits = search(word or value)
    if word and #hits > 0 then
      return ("%s leads nowhere here; %d names mention %q:\n%s"):format(value, #hits, word, listing(hits))
    end
    if #hits == 0 then return ("no help for %q (help() lists the areas)"):format(value) end
    return ("%d names mention %q:\n%s"):format(#hits, value, listing(hits))
  end
  local text = M.get(value)
  local kind = type(value)
  if kind == "function" then
    text = text or documented_in_header(value)
    if text then return text end
    local name = M.name_of(value)
    if name then return name .. ": (no documentation)" end
    return LUA_MANUAL:format("function") .. ", or one without documentation"
  end
  if kind == "table" then
    if rawequal(value, package.loaded.spk) then return overview() end
    local a = area_of(value)
    if a and not text then return area_text(a) end
    local t = M.type_of(value)
    if t and not text then
      return type_text(t) .. ("\n\nfields: %s"):format(table.concat(sorted_keys(value), ", "))
    end
    local name = M.name_of(value) or "table"
    local body = listing(table_entries(value, name))
    if text then return text .. (body ~= "" and ("\n\n" .. body) or "") end
    return ("%s (%d names):\n%s"):format(name, #sorted_keys(value), body)
  end
  if kind == "userdata" then
    local t = M.type_of(value)
    if t then return type_text(t) end
    return plain_text(value) .. " without documentation"
  end
  return ("a %s: %s"):format(kind, plain_text(value))
end

-- ------------------------------------------------------------ modules

-- Whether a table is a module: documented, part of an area, or a loaded
-- package (string, math, spk.report ...). Such tables print as their names.
function M.is_module(t)
  if type(t) ~= "table" then return false end
  if M.get(t) or area_of(t) then return true end
  for _, loaded in next, package.loaded do
    if rawequal(loaded, t) then return true end
  end
  return false
end

function M.module_name(t)
  local name = M.name_of(t)
  if name then return name end
  for key, loaded in next, package.loaded do
    if rawequal(loaded, t) then return key end
  end
  return "module"
end

return M
