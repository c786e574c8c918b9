-- Helpers for the interactive session (spk repl): how results are shown.
local M = {}

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

-- The text the session prints for one result. Strings print as they are
-- (as in lua); tables print on one line, nested tables one level deep;
-- everything else (tensors included) prints with tostring.
function M.format(value)
  if type(value) == "string" then
    return value
  elseif type(value) == "table" and not has_own_text(value) then
    return render_table(value, 2)
  end
  return tostring(value)
end

return M
