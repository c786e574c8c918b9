-- Helpers for the interactive session (spk repl): how results are shown,
-- the session's variables, Tab completion, ?name and the banner.
--
--   repl.format(value[, "summary"]) -> text
--                                    one result as the session prints it: numbers to the
--                                    session's precision, a module table (spk.lstm, string, ...)
--                                    lists all its names, a table on one line (one row per entry
--                                    when that line would not fit), a tensor as tostring shows it;
--                                    "summary" (the results of a call, such as R:set(...)) puts a
--                                    tensor on one line: dtype, shape and a few values
--   repl.precision([digits]) -> digits before
--                                    the significant digits floats print with, in results and in
--                                    tostring(tensor) (spk.print_options); 0, the default, is the
--                                    shortest form that reads back as the same value
--   repl.env                         the session's variables: the chunks' _ENV, holding the
--                                    top-level locals a line declared (kept for the lines after it)
--                                    and reading and writing the globals otherwise
--   repl.keep_locals()               called at the end of a line's chunk: keeps its locals in env
--   repl.complete(text) -> {match, ...}
--                                    completions of the expression before the cursor: globals,
--                                    the session's locals and keywords, fields of tables (a.b,
--                                    layers[1].W), methods (x:m, x[1]:m, userdata included);
--                                    functions get "(". Reads fields with raw access
--                                    (spk.doc.field), so no metamethod of the user's runs.
--   repl.complete_line(line, start) -> {replacement, ...}
--                                    the same for readline: line is the text before the cursor,
--                                    the word being completed starts after byte `start`
--   repl.help_topic(text)            what "?text" at the prompt does: help(x) of the value the
--                                    name leads to, else help(text) (an area, or a search)
--   repl.banner() -> line            versions and "help() for help"
local M = {}

local doc = require "spk.doc"

-- At most this many entries of a table are shown; the rest become "...".
M.max_entries = 16

-- ------------------------------------------------------------ numbers

local function spk_module() return package.loaded.spk end

-- A tensor's element as tostring(tensor) writes it (spk.format_float: the
-- print option's digits, or the fewest that read back as the same value of
-- its dtype).
local function element_text(v, dtype)
  local spk = spk_module()
  if dtype == "u64" and math.type(v) == "integer" and v < 0 then -- above 2^63: the bits of a negative integer
    local q = (v >> 1) // 5
    return ("%d%d"):format(q, v - q * 10)
  end
  if math.type(v) ~= "float" or type(spk) ~= "table" then return tostring(v) end
  return spk.format_float(v, dtype)
end

-- A Lua float the same way, written as Lua writes floats (1.0, not 1).
local function number_text(v)
  if math.type(v) ~= "float" then return tostring(v) end
  local text = element_text(v, "f64")
  if not text:find("[.eEn]") then text = text .. ".0" end
  return text
end

function M.precision(n)
  local spk = spk_module()
  if n ~= nil and (math.type(n) ~= "integer" or n < 0 or n > 17) then
    error(("repl.precision: digits must be an integer 0..17 (0: the shortest exact form), got %s")
      :format(tostring(n)), 2)
  end
  return spk.print_options(n ~= nil and { digits = n } or nil).digits
end
M.precision = require("spk.options").takes(1, "spk.repl.precision", M.precision)
doc(M.precision, [[
spk.repl.precision([digits]) -> digits before
The significant digits (1..17) the session prints floats with, its results and tostring(tensor) alike
(spk.print_options); 0, the default, is the shortest form that reads back as the same value, so two
values that differ always print differently.]])

-- ------------------------------------------------------------ results

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

local function is_tensor(value)
  local spk = package.loaded.spk
  return type(spk) == "table" and type(spk.is_tensor) == "function" and spk.is_tensor(value)
end

-- "tensor(f32, [2, 512, 128])": a tensor's first line, which names it.
local function tensor_header(t)
  return (tostring(t):match("^[^\n]*"))
end

-- One line for a tensor: its header and its first and last values
-- ("tensor(f32, [2, 512, 128]) [5.0, -1.0136549, ..., 1.1992791] (131072 values)").
local function tensor_summary(t)
  local head = tensor_header(t)
  if t:is_closed() or t.device ~= "cpu" then return head end
  local n, shape = t:numel(), t:shape()
  if n == 0 or t:dim() == 0 then return (tostring(t):gsub("\n", " ")) end
  local function at(i) -- the i-th value in row-major order
    local index, rest = {}, i - 1
    for d = #shape, 1, -1 do
      index[d] = rest % shape[d] + 1
      rest = rest // shape[d]
    end
    return element_text(t:get(table.unpack(index)), t:dtype())
  end
  local values = {}
  if n <= 8 then
    for i = 1, n do values[#values + 1] = at(i) end
    return ("%s [%s]"):format(head, table.concat(values, ", "))
  end
  for _, i in ipairs { 1, 2, 3 } do values[#values + 1] = at(i) end
  values[#values + 1] = "..."
  for _, i in ipairs { n - 2, n - 1, n } do values[#values + 1] = at(i) end
  return ("%s [%s] (%d values)"):format(head, table.concat(values, ", "), n)
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

-- The entries of a table as text, array part first, then the other keys
-- sorted; at most max_entries, then "...".
local function table_entries(t, depth)
  local parts, shown = {}, 0
  local n = #t
  for i = 1, n do
    if shown == M.max_entries then break end
    parts[#parts + 1] = { key = i, text = render(t[i], depth - 1) }
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
    parts[#parts + 1] = { key = key, named = true, text = render_key(key) .. " = " .. render(t[key], depth - 1) }
    shown = shown + 1
  end
  return parts, n + #keys > shown, n + #keys
end

-- One line for a table; nested tables are opened `depth` levels deep,
-- deeper ones show as {...}.
local function render_table(t, depth)
  if depth <= 0 then
    return next(t) == nil and "{}" or "{...}"
  end
  local parts, more = table_entries(t, depth)
  local texts = {}
  for i, p in ipairs(parts) do texts[i] = p.text end
  if more then texts[#texts + 1] = "..." end
  return "{" .. table.concat(texts, ", ") .. "}"
end

render = function(value, depth)
  local kind = type(value)
  if kind == "string" then
    return (string.format("%q", value):gsub("\\\n", "\\n"))
  elseif kind == "number" then
    return number_text(value)
  elseif is_tensor(value) then
    return tensor_header(value)
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

-- A table whose one line would not fit: one row per entry ("[1] = {...}").
local function render_rows(t)
  local parts, more, count = table_entries(t, 2)
  local lines = { ("{ -- %d entr%s"):format(count, count == 1 and "y" or "ies") }
  for _, p in ipairs(parts) do
    lines[#lines + 1] = "  " .. (p.named and p.text or ("[%d] = %s"):format(p.key, p.text)) .. ","
  end
  if more then lines[#lines + 1] = ("  ... (%d more)"):format(count - #parts) end
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n")
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
-- (as in lua); numbers to the session's precision; a module table lists its
-- names; other tables print on one line, nested tables one level deep, or
-- one row per entry when that line is wider than the terminal; tensors
-- print with tostring, or (mode "summary") on one line; everything else
-- with tostring.
function M.format(value, mode)
  if type(value) == "string" then
    return value
  elseif type(value) == "number" then
    return number_text(value)
  elseif is_tensor(value) and mode == "summary" then
    return tensor_summary(value)
  elseif type(value) == "table" and not has_own_text(value) then
    if doc.is_module(value) then return render_module(value) end
    local line = render_table(value, 2)
    if #line > columns() and next(value) ~= nil then return render_rows(value) end
    return line
  end
  return tostring(value)
end

-- ------------------------------------------------------------ the session's variables

-- The locals a line declares at its top level, kept for the lines after it
-- (each line is compiled as a chunk of its own, whose locals would end with
-- it); everything else reads and writes the globals.
local kept = {}
M.env = setmetatable(kept, { __index = _G, __newindex = _G })

-- The caller is the line's chunk: the first main chunk up the stack (guards
-- may stand between).
function M.keep_locals()
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if info == nil then return end
    if info.what == "main" then break end
    level = level + 1
  end
  for i = 1, 250 do
    local name, value = debug.getlocal(level, i)
    if name == nil then break end
    if name:sub(1, 1) ~= "(" and name ~= "_ENV" then rawset(kept, name, value) end
  end
end

-- ------------------------------------------------------------ completion

local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
                   "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" }

-- At most this many matches (a table of a million keys stays usable).
M.max_matches = 500

-- The key inside [...]: an integer or a quoted string without escapes.
local function index_key(inside)
  local n = math.tointeger(tonumber(inside:match("^%s*(%-?%d+)%s*$") or ""))
  if n then return n end
  local quoted = inside:match('^%s*"([^"\\]*)"%s*$') or inside:match("^%s*'([^'\\]*)'%s*$")
  return quoted
end

-- The expression that ends `text`, as steps from a name: {name = "x"},
-- then {field = "a"} and {index = 1 | "key"}; with the separator and the
-- partial name after it ("layers[1].W" -> steps layers, [1]; ".", "W").
-- Returns nil where the text does not end in such an expression (a call's
-- result, a string, a number).
local function parse_tail(text)
  local partial = text:match("[%a_][%w_]*$") or ""
  if text:sub(#text - #partial, #text - #partial):match("[%w_]") then return nil end -- "1e5", "x2"
  local k = #text - #partial
  local sep = text:sub(k, k)
  if sep ~= "." and sep ~= ":" then
    if sep == "]" or (sep == "." and #partial == 0) then return nil end
    return { steps = {}, sep = "", partial = partial, start = k + 1 }
  end
  local steps = {}
  k = k - 1
  while true do
    local c = text:sub(k, k)
    if c == "]" then
      local open = k - 1
      while open >= 1 and text:sub(open, open) ~= "[" do open = open - 1 end
      local key = open >= 1 and index_key(text:sub(open + 1, k - 1))
      if key == nil or key == false then return nil end
      table.insert(steps, 1, { index = key })
      k = open - 1
    else
      local name_start = k
      while name_start > 1 and text:sub(name_start - 1, name_start - 1):match("[%w_]") do
        name_start = name_start - 1
      end
      local name = text:sub(name_start, k)
      if not name:match("^[%a_][%w_]*$") then return nil end
      local before = text:sub(name_start - 1, name_start - 1)
      if before == "." then
        table.insert(steps, 1, { field = name })
        k = name_start - 2
      elseif before == ":" then
        return nil -- a method call's result
      else
        table.insert(steps, 1, { name = name })
        return { steps = steps, sep = sep, partial = partial, start = name_start }
      end
    end
  end
end

-- A name as a line sees it: the session's locals, then the globals (spk is
-- the module even where no global holds it). Raw reads only.
local function lookup_name(name)
  local v = rawget(kept, name)
  if v == nil then v = doc.field(_G, name) end
  if v == nil and name == "spk" then v = package.loaded.spk end
  return v
end

-- The value steps lead to, read without running a metamethod: a table's
-- fields; for a tensor, x[i] stands for a tensor of one dim fewer (the
-- tensor itself here, of the same type) while dims are left, then a number.
local function resolve_steps(steps)
  local value = lookup_name(steps[1].name)
  local dims -- the dims left of the tensor `value` stands for
  for i = 2, #steps do
    if value == nil then return nil end
    local step = steps[i]
    if type(value) == "table" then
      value, dims = doc.field(value, step.field or step.index), nil
    elseif step.index and math.type(step.index) == "integer" and is_tensor(value) and not value:is_closed() then
      dims = (dims or value:dim()) - 1
      if dims < 1 then value, dims = 0, nil end
    else
      value, dims = doc.field(value, step.field or step.index), nil
    end
  end
  return value
end

-- The names a bare word may complete to: keywords, the session's locals and the globals.
local function bare_names(partial, out)
  for _, word in ipairs(KEYWORDS) do
    if word:sub(1, #partial) == partial then out[#out + 1] = { text = word } end
  end
  local seen = {}
  for _, t in ipairs { kept, _G } do
    for _, key in ipairs(doc.keys(t)) do
      if #out >= M.max_matches then return end
      if not seen[key] and key:sub(1, #partial) == partial then
        seen[key] = true
        out[#out + 1] = { text = key, value = t == kept and rawget(kept, key) or doc.field(_G, key) }
      end
    end
  end
end

function M.complete(text)
  local matches = {}
  if type(text) ~= "string" then return matches end
  local tail = parse_tail(text)
  if not tail then return matches end
  local found = {}
  if #tail.steps == 0 then
    bare_names(tail.partial, found)
  else
    local container = resolve_steps(tail.steps)
    if container == nil then return matches end
    for _, key in ipairs(doc.keys(container)) do
      if #found >= M.max_matches then break end
      local v = doc.field(container, key)
      if key:sub(1, #tail.partial) == tail.partial and (tail.sep ~= ":" or type(v) == "function") then
        found[#found + 1] = { text = key, value = v }
      end
    end
  end
  local before = text:sub(1, #text - #tail.partial)
  local seen = {}
  for _, f in ipairs(found) do
    local m = before .. f.text .. (type(f.value) == "function" and "(" or "")
    if not seen[m] then
      seen[m] = true
      matches[#matches + 1] = m
    end
  end
  table.sort(matches)
  return matches
end

function M.complete_line(line, start)
  local out = {}
  for i, m in ipairs(M.complete(line)) do out[i] = m:sub(start + 1) end
  return out
end

-- ------------------------------------------------------------ ?name, banner

function M.help_topic(text)
  text = tostring(text or ""):match("^%s*(.-)%s*$")
  local help = doc.help_text
  if text == "" then
    print(help())
    return
  end
  local tail = text:match("^[%a_][%w_.:%[%]\"']*$") and parse_tail(text .. ".")
  local value = tail and #tail.steps > 0 and tail.partial == "" and resolve_steps(tail.steps)
  if not value then
    local found
    value, found = doc.resolve(text)
    if not found then value = nil end
  end
  if value ~= nil then
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
