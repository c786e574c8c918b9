-- Helpers for the interactive session (spk repl): how results are shown,
-- Tab completion, ?name and the banner.
--
--   repl.format(value) -> text       one result as the session prints it; a module table
--                                    (spk.lstm, string, ...) lists all its names
--   repl.complete(text) -> {match, ...}
--                                    completions of the Lua name before the cursor: globals and
--                                    keywords, fields of tables (a.b), methods (x:m, userdata
--                                    included); functions get "(". Reads fields with raw access
--                                    (spk.doc.field), so no metamethod of the user's runs.
--   repl.help_topic(text)            what "?text" at the prompt does: help(x) of the value the
--                                    name leads to, else help(text) (an area, or a search)
--   repl.banner() -> line            versions and "help() for help"
local M = {}

local doc = require "spk.doc"

-- At most this many entries of a table are shown; the rest become "...".
M.max_entries = 16

local function is_identifier(key)
  return type(key) == "string" and key:match("^[%a_][%w_]*$") ~= nil
end

-- A value that prints itself (__tostring, or a named userdata such as a
-- tensor) is shown with tostring; inside a table only its first line is kept.
local function has_own_text(value)
  local mt = getmetatable(value)
  return type(mt) == "table" and (mt.__tostring ~= nil or mt.__name ~= nil)
end

local function first_line(text)
  local line = text:match("^([^\n]*)\n")
  if line then return line .. " ..." end
  return text
end

local function key_order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then
    if ta == "number" then return true end
    if tb == "number" then return false end
    return ta < tb
  end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local render

local function render_key(key)
  if is_identifier(key) then return key end
  return "[" .. render(key, 0) .. "]"
end

-- One line for a table: array part first, then the other keys sorted;
-- nested tables are opened `depth` levels deep, deeper ones show as {...}.
local function render_table(t, depth)
  if depth <= 0 then
    return next(t) == nil and "{}" or "{...}"
  end
  local parts, shown = {}, 0
  local n = #t
  for i = 1, n do
    if shown == M.max_entries then break end
    parts[#parts + 1] = render(t[i], depth - 1)
    shown = shown + 1
  end
  local keys = {}
  for key in pairs(t) do
    if not (math.type(key) == "integer" and key >= 1 and key <= n) then
      keys[#keys + 1] = key
    end
  end
  table.sort(keys, key_order)
  for _, key in ipairs(keys) do
    if shown == M.max_entries then break end
    parts[#parts + 1] = render_key(key) .. " = " .. render(t[key], depth - 1)
    shown = shown + 1
  end
  if n + #keys > shown then
    parts[#parts + 1] = "..."
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

render = function(value, depth)
  local kind = type(value)
  if kind == "string" then
    return (string.format("%q", value):gsub("\\\n", "\\n"))
  elseif kind == "table" and not has_own_text(value) then
    return render_table(value, depth)
  end
  return first_line(tostring(value))
end

-- The terminal's width in columns ($COLUMNS, else 80).
local function columns()
  local n = math.tointeger(tonumber(os.getenv("COLUMNS") or ""))
  return n and n >= 20 and n or 80
end

-- A module's names in columns, every one of them (tables end in ".", functions
-- in "()", other values show themselves).
local function render_module(t)
  local names = {}
  for key, v in next, t do
    if type(key) == "string" then
      local kind = type(v)
      names[#names + 1] = key .. (kind == "function" and "()" or kind == "table" and "." or "")
    end
  end
  table.sort(names)
  local width = 0
  for _, n in ipairs(names) do width = math.max(width, #n) end
  width = width + 2
  local per_line = math.max(1, (columns() - 2) // width)
  local lines = { ("%s: %d names (help(%s) for more)"):format(doc.module_name(t), #names,
    doc.module_name(t)) }
  for i = 1, #names, per_line do
    local row = {}
    for j = i, math.min(i + per_line - 1, #names) do
      row[#row + 1] = j < i + per_line - 1 and j < #names and ("%-" .. width .. "s"):format(names[j]) or names[j]
    end
    lines[#lines + 1] = "  " .. table.concat(row)
  end
  return table.concat(lines, "\n")
end

-- The text the session prints for one result. Strings print as they are
-- (as in lua); a module table lists its names; other tables print on one
-- line, nested tables one level deep; everything else (tensors included)
-- prints with tostring.
function M.format(value)
  if type(value) == "string" then
    return value
  elseif type(value) == "table" and not has_own_text(value) then
    if doc.is_module(value) then return render_module(value) end
    return render_table(value, 2)
  end
  return tostring(value)
end

-- ------------------------------------------------------------ completion

local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
                   "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" }

-- At most this many matches (a table of a million keys stays usable).
M.max_matches = 500

function M.complete(text)
  local matches = {}
  if type(text) ~= "string" then return matches end
  local base, sep, partial = text:match("^(.-)([.:])([%a_]?[%w_]*)$")
  local container
  if base then
    local value, found = doc.resolve(base)
    if not found or value == nil then return matches end
    container = value
  else
    if not text:match("^[%a_]?[%w_]*$") then return matches end
    base, sep, partial, container = "", "", text, _G
    for _, word in ipairs(KEYWORDS) do
      if word:sub(1, #partial) == partial then matches[#matches + 1] = word end
    end
  end
  for _, key in ipairs(doc.keys(container)) do
    if #matches >= M.max_matches then break end
    if key:sub(1, #partial) == partial and (sep ~= ":" or type(doc.field(container, key)) == "function") then
      local v = doc.field(container, key)
      matches[#matches + 1] = base .. sep .. key .. (type(v) == "function" and "(" or "")
    end
  end
  table.sort(matches)
  return matches
end

-- ------------------------------------------------------------ ?name, banner

function M.help_topic(text)
  text = tostring(text or ""):match("^%s*(.-)%s*$")
  local help = doc.help_text
  if text == "" then
    print(help())
    return
  end
  local value, found = doc.resolve(text)
  if found and value ~= nil then
    print(help(value))
  else
    print(help(text))
  end
end

local function cuda_version(number)
  if math.type(number) ~= "integer" or number <= 0 then return nil end
  return ("%d.%d"):format(number // 1000, number % 1000 // 10)
end

function M.banner()
  local ok, program = pcall(require, "spk.program")
  program = ok and type(program) == "table" and program or {}
  local parts = { ("spk %s"):format(program.version or "(version unknown)"), program.lua_release or _VERSION }
  local toolkit = cuda_version(program.cuda_toolkit_version)
  if toolkit then parts[#parts + 1] = "CUDA " .. toolkit end
  local spk = package.loaded.spk
  local gpu = "no CUDA device"
  local got, info = pcall(function() return spk.cuda.info() end)
  if got and type(info) == "table" and type(info.devices) == "table" and #info.devices > 0 then
    local d = info.devices[1]
    gpu = ("%s%s (cc %s)"):format(#info.devices > 1 and (#info.devices .. " GPUs: ") or "GPU ", d.name, d.cc)
  end
  return ("%s; %s. help() for help, Ctrl-D to quit."):format(table.concat(parts, ", "), gpu)
end

return M
