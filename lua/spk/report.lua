-- spk.report: results as text and files — aligned terminal tables, CSV and
-- JSON. Plain Lua (no GPU, no C), so any script or command can use it:
--
--   local report = require "spk.report"
--
-- Tables
--   report.table(rows, columns[, opts]) -> string (ends with "\n")
--     rows:    a list of tables (one per line).
--     columns: a list; each entry is a key name ("batch") or a table
--              {key =, title = key, format = fn | "%fmt", align = "left" | "right",
--               empty = "-"}
--              format(value, row) -> string, or a string.format pattern; without
--              one, numbers print with %.6g (integers as they are) and booleans
--              as true/false. nil (or a formatted nil) prints `empty`.
--              align defaults to "right" when every non-nil value of the
--              column is a number, else "left".
--     opts:    {title = "line above the table",
--               sort = "key" | {"key1", "key2"} | function(a, b) -> boolean
--                      (keys sort ascending, nil last; rows is not modified),
--               footer = "line" | {"line", ...},
--               separator = "  " (between columns)}
--     Widths count UTF-8 characters, so "≥" or "×" keep columns aligned.
--
-- CSV (RFC 4180: comma separated, CRLF-free "\n" lines, a header line of
-- column titles; a field with a comma, quote, CR, LF or leading/trailing space
-- is quoted with quotes doubled)
--   report.csv_string(rows, columns) -> string
--   report.csv(path, rows, columns[, {provenance = run | record | false}]) -> path
--     (raises on an I/O error) columns as above, except `format` is not applied:
--     values are written exactly (numbers with the shortest text that reads
--     back to the same double, nil as an empty field, NaN/inf as nan/inf/-inf,
--     booleans as true/false). A column given as a string is its own title.
--     The file's first line is "# provenance {...}": where the result came
--     from (spk.provenance.record(run) as JSON; false: no such line), so read
--     it with comment = "#" (pandas) or skip lines starting with "#".
--
-- JSON
--   report.json_encode(value[, {indent = 2}]) -> string
--   report.json(path, value[, {indent = 2, provenance = run | record | false}]) -> path
--     (raises on an I/O error) A value that is an object without a "provenance"
--     key gets one: spk.provenance.record(run), where the result came from
--     (false: none; an array is written as it is).
--     nil -> null; booleans; integers as integers; finite floats with the
--     shortest text that reads back to the same double; NaN and ±inf -> null
--     (JSON has no such numbers); strings escaped (", \, control characters;
--     invalid UTF-8 bytes become U+FFFD). A table is an array when all its keys
--     are positive integers and the largest is at most twice their count
--     (holes become null), else an object with sorted keys (integer keys
--     written as strings; other key types are an error). An empty table is
--     `[]`, unless marked report.object({}); report.array(t) forces an array.
--     Cycles and functions/userdata are errors naming the path ($.rows[3].x).
--     indent = 0 (or nil) writes one line; indent = n pretty-prints.
--   report.json_decode(text) -> value
--     The inverse for reading results back (null -> report.null, a unique
--     sentinel, inside arrays so positions are kept; absent from objects).
--
-- Step timelines (the table a timeline forward returns as info.timeline; spk.timeline
-- computes, this formats)
--   report.timeline(tl[, {per_block = true, path = critical_path, title =}]) -> string
--     per stage (then "gap" and "step"): n, median, p10 and p90 of its duration in ns, its
--     median in cycles, and for the all-blocks row its share of the critical path (computed
--     over every recorded step unless `path` is given); per_block = false leaves out the
--     rows of each block.
--   report.timeline_rows(tl[, {per_block =, path =}]) -> the rows of that table (for CSV and JSON)
--
-- Number formats (nil and non-finite values print as "-")
--   report.fmt_ms(ms)          -- 3 significant decimals: 0.812, 12.35, 241.4
--   report.fmt_sci(x[, digits])-- "1.23e-07" (digits after the point, 2)
--   report.fmt_pct(fraction)   -- 0.034 -> "3.4%"
--   report.fmt_ratio(x)        -- 1.234 -> "1.23x"
--   report.fmt_int(n)          -- 1234567 -> "1234567"
--   Each works as a column `format` directly: {key = "median_ms", format = report.fmt_ms}.
local M = {}

local function finite(x)
  return type(x) == "number" and x == x and x ~= math.huge and x ~= -math.huge
end
M.is_finite = finite

-- ---------------------------------------------------------------- numbers

function M.fmt_ms(ms)
  if not finite(ms) then return "-" end
  local a = math.abs(ms)
  if a >= 100 then return ("%.1f"):format(ms) end
  if a >= 10 then return ("%.2f"):format(ms) end
  return ("%.3f"):format(ms)
end

function M.fmt_sci(x, digits)
  if not finite(x) then return "-" end
  if math.type(digits) ~= "integer" then digits = 2 end -- also called as a column format (value, row)
  return ("%." .. digits .. "e"):format(x)
end

function M.fmt_pct(fraction)
  if not finite(fraction) then return "-" end
  return ("%.1f%%"):format(fraction * 100)
end

function M.fmt_ratio(x)
  if not finite(x) then return "-" end
  return ("%.2fx"):format(x)
end

function M.fmt_int(n)
  if not finite(n) then return "-" end
  return ("%d"):format(math.floor(n))
end

-- The shortest %.Ng (N = 15..17) that reads back to the same double.
local function exact_number(x)
  if math.type(x) == "integer" then return ("%d"):format(x) end
  for digits = 15, 17 do
    local s = ("%." .. digits .. "g"):format(x)
    if tonumber(s) == x then return s end
  end
  return ("%.17g"):format(x)
end
M.exact_number = exact_number

-- ---------------------------------------------------------------- columns

local function normalise_columns(columns, where)
  if type(columns) ~= "table" or #columns == 0 then
    error(where .. ": columns must be a non-empty list", 3)
  end
  local out = {}
  for i, c in ipairs(columns) do
    if type(c) == "string" then
      out[i] = { key = c, title = c, empty = "-" }
    elseif type(c) == "table" and c.key ~= nil then
      out[i] = { key = c.key, title = c.title or tostring(c.key), format = c.format, align = c.align,
                 empty = c.empty or "-" }
      if out[i].align ~= nil and out[i].align ~= "left" and out[i].align ~= "right" then
        error(("%s: column '%s': align must be \"left\" or \"right\""):format(where, tostring(c.key)), 3)
      end
    else
      error(("%s: column %d must be a key name or a table with a key"):format(where, i), 3)
    end
  end
  return out
end

local function width(s)
  return utf8.len(s) or #s
end

local function plain(value)
  if value == nil then return nil end
  if math.type(value) == "integer" then return ("%d"):format(value) end
  if type(value) == "number" then
    if value ~= value then return "nan" end
    if value == math.huge then return "inf" end
    if value == -math.huge then return "-inf" end
    return ("%.6g"):format(value)
  end
  return tostring(value)
end

local function cell(column, row)
  local value = row[column.key]
  local text
  if type(column.format) == "function" then
    text = column.format(value, row)
  elseif type(column.format) == "string" and value ~= nil then
    text = column.format:format(value)
  else
    text = plain(value)
  end
  if text == nil then return column.empty end
  return tostring(text)
end

local function sorted_rows(rows, sort)
  local copy = {}
  for i, r in ipairs(rows) do copy[i] = r end
  if sort == nil then return copy end
  local less = sort
  if type(sort) ~= "function" then
    local keys = type(sort) == "table" and sort or { sort }
    less = function(a, b)
      for _, k in ipairs(keys) do
        local x, y = a[k], b[k]
        if x ~= y then
          if x == nil then return false end
          if y == nil then return true end
          if type(x) == type(y) and (type(x) == "number" or type(x) == "string") then return x < y end
          return tostring(x) < tostring(y)
        end
      end
      return false
    end
  end
  -- table.sort is not stable: keep the input order among equal rows.
  local position = {}
  for i, r in ipairs(copy) do position[r] = i end
  table.sort(copy, function(a, b)
    if less(a, b) then return true end
    if less(b, a) then return false end
    return position[a] < position[b]
  end)
  return copy
end

function M.table(rows, columns, opts)
  if type(rows) ~= "table" then error("report.table: rows must be a list of tables", 2) end
  columns = normalise_columns(columns, "report.table")
  opts = require("spk.options").check_keys(opts, { "title", "sort", "separator", "footer" }, "report.table")
  local ordered = sorted_rows(rows, opts.sort)
  local sep = opts.separator or "  "
  local cells, widths, numeric = {}, {}, {}
  for j, c in ipairs(columns) do
    widths[j] = width(c.title)
    numeric[j] = true
  end
  for i, row in ipairs(ordered) do
    cells[i] = {}
    for j, c in ipairs(columns) do
      local text = cell(c, row)
      cells[i][j] = text
      widths[j] = math.max(widths[j], width(text))
      local v = row[c.key]
      if v ~= nil and type(v) ~= "number" then numeric[j] = false end
    end
  end
  local function pad(text, j)
    local align = columns[j].align or (numeric[j] and "right" or "left")
    local fill = (" "):rep(widths[j] - width(text))
    return align == "right" and fill .. text or text .. fill
  end
  local function line(texts)
    local parts = {}
    for j, t in ipairs(texts) do parts[j] = pad(t, j) end
    return (table.concat(parts, sep):gsub("%s+$", ""))
  end
  local out = {}
  if opts.title then out[#out + 1] = tostring(opts.title) end
  local titles, rules = {}, {}
  for j, c in ipairs(columns) do
    titles[j] = c.title
    rules[j] = ("-"):rep(widths[j])
  end
  out[#out + 1] = line(titles)
  out[#out + 1] = line(rules)
  for i = 1, #ordered do out[#out + 1] = line(cells[i]) end
  local footer = opts.footer
  if type(footer) == "string" then footer = { footer } end
  for _, f in ipairs(footer or {}) do out[#out + 1] = tostring(f) end
  return table.concat(out, "\n") .. "\n"
end

-- ---------------------------------------------------------------- files

local function write_file(path, text, where)
  if type(path) ~= "string" or path == "" then error(where .. ": path must be a non-empty string", 3) end
  local ok, err = pcall(require("spk.core").files.write, path, text)
  if not ok then error(("%s: %s"):format(where, err), 3) end
  return path
end

-- ---------------------------------------------------------------- CSV

local function csv_field(value)
  local text
  if value == nil then
    text = ""
  elseif type(value) == "number" then
    text = finite(value) and exact_number(value) or plain(value)
  else
    text = tostring(value)
  end
  if text:find('[,"\r\n]') or text:find("^%s") or text:find("%s$") then
    text = '"' .. text:gsub('"', '""') .. '"'
  end
  return text
end
M.csv_field = csv_field

function M.csv_string(rows, columns)
  if type(rows) ~= "table" then error("report.csv: rows must be a list of tables", 2) end
  columns = normalise_columns(columns, "report.csv")
  local lines = {}
  local header = {}
  for j, c in ipairs(columns) do header[j] = csv_field(c.title) end
  lines[1] = table.concat(header, ",")
  for i, row in ipairs(rows) do
    local fields = {}
    for j, c in ipairs(columns) do fields[j] = csv_field(row[c.key]) end
    lines[i + 1] = table.concat(fields, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

-- The provenance record a file gets under opts.provenance (nil: the
-- environment's alone), or nil for false.
local function provenance_of(opts, where)
  local p = opts and opts.provenance
  if p == false then return nil end
  if p ~= nil and type(p) ~= "table" then
    error(("%s: provenance must be a table (the run) or false, got %s"):format(where, type(p)), 3)
  end
  return require("spk.provenance").record(p)
end

function M.csv(path, rows, columns, opts)
  require("spk.options").check_keys(opts, { "provenance" }, "report.csv", 2)
  local record = provenance_of(opts, "report.csv")
  local text = M.csv_string(rows, columns)
  if record then text = require("spk.provenance").csv_comment(record) .. text end
  return write_file(path, text, "report.csv")
end

-- ---------------------------------------------------------------- JSON

local ARRAY, OBJECT = {}, {}
local array_mt = { __name = "spk.report.array", [ARRAY] = true }
local object_mt = { __name = "spk.report.object", [OBJECT] = true }

function M.array(t) return setmetatable(t or {}, array_mt) end
function M.object(t) return setmetatable(t or {}, object_mt) end

M.null = setmetatable({}, { __name = "spk.report.null", __tostring = function() return "null" end })

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
                  ["\r"] = "\\r", ["\t"] = "\\t" }

-- Keeps valid UTF-8 sequences, replaces each invalid byte with U+FFFD.
local function valid_utf8(s)
  if utf8.len(s) then return s end
  local out, i = {}, 1
  while i <= #s do
    local ok, n = utf8.len(s, i)
    if ok then
      out[#out + 1] = s:sub(i)
      break
    end
    out[#out + 1] = s:sub(i, n - 1)
    out[#out + 1] = "\u{FFFD}"
    i = n + 1
  end
  return table.concat(out)
end

local function json_string(s)
  s = valid_utf8(s)
  return '"' .. s:gsub('[%c"\\]', function(ch)
    return escapes[ch] or ("\\u%04x"):format(ch:byte())
  end) .. '"'
end

-- "array", n or "object", sorted keys
local function shape(t, path)
  local mt = getmetatable(t)
  if mt and mt[OBJECT] then
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    return "object", keys
  end
  local count, max = 0, 0
  local all_positive = true
  for k in pairs(t) do
    count = count + 1
    if math.type(k) == "integer" and k >= 1 then
      if k > max then max = k end
    else
      all_positive = false
    end
  end
  if (mt and mt[ARRAY]) or count == 0 or (all_positive and max <= 2 * count) then
    if not all_positive then error(("report.json: %s is marked as an array but has non-integer keys"):format(path), 0) end
    return "array", max
  end
  local keys = {}
  for k in pairs(t) do
    if type(k) ~= "string" and math.type(k) ~= "integer" then
      error(("report.json: %s has a key of type %s (keys must be strings or integers)"):format(path, type(k)), 0)
    end
    keys[#keys + 1] = k
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return "object", keys
end

local function encode(value, indent, depth, path, seen, out)
  local kind = type(value)
  if value == nil or value == M.null then
    out[#out + 1] = "null"
  elseif kind == "boolean" then
    out[#out + 1] = value and "true" or "false"
  elseif kind == "number" then
    out[#out + 1] = finite(value) and exact_number(value) or "null"
  elseif kind == "string" then
    out[#out + 1] = json_string(value)
  elseif kind == "table" then
    if seen[value] then error(("report.json: %s refers back to itself (a cycle)"):format(path), 0) end
    seen[value] = true
    local how, what = shape(value, path)
    local open, close = "[", "]"
    if how == "object" then open, close = "{", "}" end
    local n = how == "array" and what or #what
    if n == 0 then
      out[#out + 1] = open .. close
    else
      local newline = indent > 0 and "\n" .. (" "):rep(indent * (depth + 1)) or ""
      out[#out + 1] = open
      for i = 1, n do
        out[#out + 1] = (i > 1 and "," or "") .. newline
        if how == "array" then
          encode(value[i], indent, depth + 1, ("%s[%d]"):format(path, i), seen, out)
        else
          local k = what[i]
          out[#out + 1] = json_string(tostring(k)) .. (indent > 0 and ": " or ":")
          encode(value[k], indent, depth + 1, ("%s.%s"):format(path, tostring(k)), seen, out)
        end
      end
      out[#out + 1] = (indent > 0 and "\n" .. (" "):rep(indent * depth) or "") .. close
    end
    seen[value] = nil
  else
    error(("report.json: %s is a %s, which JSON cannot hold"):format(path, kind), 0)
  end
end

function M.json_encode(value, opts)
  require("spk.options").check_keys(opts, { "indent" }, "report.json", 2)
  local indent = opts and opts.indent or 0
  if math.type(indent) ~= "integer" or indent < 0 then error("report.json: indent must be an integer >= 0", 2) end
  local out = {}
  local ok, err = pcall(encode, value, indent, 0, "$", {}, out)
  if not ok then error(err, 2) end
  return table.concat(out)
end

local function is_object(value)
  if type(value) ~= "table" then return false end
  local mt = getmetatable(value)
  if mt == array_mt then return false end
  return mt == object_mt or value[1] == nil and next(value) ~= nil
end

function M.json(path, value, opts)
  require("spk.options").check_keys(opts, { "indent", "provenance" }, "report.json", 2)
  local record = provenance_of(opts, "report.json")
  if record and is_object(value) and value.provenance == nil then
    local copy = {}
    for k, v in pairs(value) do copy[k] = v end
    copy.provenance = record
    value = setmetatable(copy, getmetatable(value))
  end
  local ok, text = pcall(M.json_encode, value, opts and { indent = opts.indent })
  if not ok then error(text, 2) end
  return write_file(path, text .. "\n", "report.json")
end

-- A small recursive-descent reader for what json_encode (or any JSON) writes.
function M.json_decode(text)
  if type(text) ~= "string" then error("report.json_decode: expects a string", 2) end
  local pos = 1
  local function fail(what)
    error(("report.json_decode: %s at position %d"):format(what, pos), 0)
  end
  local function skip()
    pos = text:find("[^ \t\r\n]", pos) or #text + 1
  end
  local value
  local function string_value()
    local out = {}
    pos = pos + 1
    while true do
      local c = text:sub(pos, pos)
      if c == "" then fail("unterminated string") end
      if c == '"' then
        pos = pos + 1
        return table.concat(out)
      elseif c == "\\" then
        local e = text:sub(pos + 1, pos + 1)
        local simple = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
        if simple[e] then
          out[#out + 1] = simple[e]
          pos = pos + 2
        elseif e == "u" then
          local hex = text:match("^%x%x%x%x", pos + 2)
          if not hex then fail("bad \\u escape") end
          local code = tonumber(hex, 16)
          pos = pos + 6
          if code >= 0xD800 and code <= 0xDBFF then
            local low = text:match("^\\u(%x%x%x%x)", pos)
            local lc = low and tonumber(low, 16)
            if not lc or lc < 0xDC00 or lc > 0xDFFF then fail("unpaired surrogate") end
            code = 0x10000 + (code - 0xD800) * 0x400 + (lc - 0xDC00)
            pos = pos + 6
          end
          out[#out + 1] = utf8.char(code)
        else
          fail("bad escape")
        end
      elseif c:byte() < 0x20 then
        fail("control character in string")
      else
        local stop = text:find('["\\%c]', pos) or #text + 1
        out[#out + 1] = text:sub(pos, stop - 1)
        pos = stop
      end
    end
  end
  function value()
    skip()
    local c = text:sub(pos, pos)
    if c == "{" then
      local obj = {}
      pos = pos + 1
      skip()
      if text:sub(pos, pos) == "}" then
        pos = pos + 1
        return M.object(obj)
      end
      while true do
        skip()
        if text:sub(pos, pos) ~= '"' then fail("expected a string key") end
        local k = string_value()
        skip()
        if text:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        local v = value()
        if v ~= M.null then obj[k] = v end
        skip()
        local d = text:sub(pos, pos)
        pos = pos + 1
        if d == "}" then return obj end
        if d ~= "," then pos = pos - 1; fail("expected ',' or '}'") end
      end
    elseif c == "[" then
      local arr = M.array({})
      pos = pos + 1
      skip()
      if text:sub(pos, pos) == "]" then
        pos = pos + 1
        return arr
      end
      while true do
        arr[#arr + 1] = value()
        skip()
        local d = text:sub(pos, pos)
        pos = pos + 1
        if d == "]" then return arr end
        if d ~= "," then pos = pos - 1; fail("expected ',' or ']'") end
      end
    elseif c == '"' then
      return string_value()
    elseif text:find("^true", pos) then
      pos = pos + 4
      return true
    elseif text:find("^false", pos) then
      pos = pos + 5
      return false
    elseif text:find("^null", pos) then
      pos = pos + 4
      return M.null
    else
      local num = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or num == "" or num == "-" then fail("unexpected character") end
      local n = math.tointeger(tonumber(num)) or tonumber(num)
      if n == nil then fail("bad number") end
      pos = pos + #num
      return n
    end
  end
  local result = value()
  skip()
  if pos <= #text then fail("trailing characters") end
  return result
end

-- ---------------------------------------------------------------- timelines

local function timeline_rows(tl, opts)
  local timeline = require "spk.timeline_analysis"
  local path = opts.path or timeline.critical_path(tl)
  local rows = {}
  for _, r in ipairs(timeline.stats(tl, { path = path })) do
    if opts.per_block ~= false or r.block == "all" then rows[#rows + 1] = r end
  end
  return rows, path
end

function M.timeline_rows(tl, opts)
  return timeline_rows(tl, require("spk.options").check_keys(opts, { "per_block", "path" }, "report.timeline_rows"))
end

local function fmt_ns(v)
  if not finite(v) then return "-" end
  return ("%.1f"):format(v)
end

local function fmt_cycles(v)
  if not finite(v) then return "-" end
  return ("%.0f"):format(v)
end

function M.timeline(tl, opts)
  opts = require("spk.options").check_keys(opts, { "per_block", "path", "title" }, "report.timeline")
  local rows, path = timeline_rows(tl, opts)
  local sel, clock = tl.selection or {}, tl.clock or {}
  local function span(r) return type(r) == "table" and ("%s..%s"):format(tostring(r[1]), tostring(r[2])) or "?" end
  local title = opts.title or ("step timeline: %s, layer %s %s, steps %s, blocks %s, warp %s"):format(
    tostring(tl.kernel or "kernel"), tostring(sel.layer or "?"), tostring(sel.direction or "?"), span(sel.step_range),
    span(sel.blocks), tostring(sel.warp or "?"))
  local footer = {
    ("critical path over steps %d..%d: %s ns, ending in block %s"):format(path.step_range[1], path.step_range[2],
      fmt_ns(path.total_ns), tostring(path.end_block)),
  }
  if clock.cycles_per_ns then
    footer[#footer + 1] = ("clock: %.4f cycles/ns (%s), globaltimer step %s ns, alignment residual %s ns")
      :format(clock.cycles_per_ns, clock.fitted and "fitted" or "given", fmt_ns(clock.quantum_ns),
        fmt_ns(clock.residual_ns))
  end
  return M.table(rows, {
    { key = "stage", title = "stage" },
    { key = "block", title = "block", align = "right" },
    { key = "n", title = "n" },
    { key = "median_ns", title = "median ns", format = fmt_ns },
    { key = "p10_ns", title = "p10 ns", format = fmt_ns },
    { key = "p90_ns", title = "p90 ns", format = fmt_ns },
    { key = "median_cycles", title = "median cycles", format = fmt_cycles },
    { key = "path_share", title = "critical path", format = function(v) return v and M.fmt_pct(v) end, empty = "" },
  }, { title = title, footer = footer })
end

-- An argument a function does not take is an error that names it.
do
  local options = require "spk.options"
  M.table = options.takes(3, "report.table", M.table)
  M.json_encode = options.takes(2, "report.json_encode", M.json_encode)
  M.json = options.takes(3, "report.json", M.json)
  M.csv = options.takes(4, "report.csv", M.csv)
  M.timeline = options.takes(2, "report.timeline", M.timeline)
  M.timeline_rows = options.takes(2, "report.timeline_rows", M.timeline_rows)
end

return M
