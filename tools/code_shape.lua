-- The shape of spk's source: the length of every function (C, CUDA and Lua)
-- and of every C and CUDA file, against the limits the project keeps (no
-- function over 120 lines, no C file over 1,500), longest first.
--
--   build/spk run tools/code_shape.lua [--check] [--except PATH ...] [--top N] [PATH ...]
--
-- PATHs are files or folders (default: src kernels lua); folders are walked
-- for *.c, *.h, *.cu, *.cuh and *.lua. A C or CUDA function is a top-level
-- brace block whose statement has a parameter list, counted from its first
-- line (the signature) to its closing brace, with braces counted outside
-- comments, strings and the later branches of an #if. A Lua function runs
-- from its `function` to its `end` (keywords counted outside comments and
-- strings); the installer an area file returns (`return function(spk, core)`
-- at the top of a chunk) is the file, not a unit, and is not counted.
-- --except PATH leaves a file out of the limits (it is still measured and
-- listed as excepted). The last lines: the longest function, the longest C
-- file and "N functions over 120 lines, N C files over 1500 lines". --check:
-- exit status 1 when any file that is not excepted is past a limit.
require "spk"
require("spk.options").script {
  usage = "spk run tools/code_shape.lua [--check] [--except PATH ...] [--top N] [PATH ...]" }
local MAX_FUNCTION, MAX_FILE = 120, 1500

local paths, excepted, check, top = {}, {}, false, 10
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--check" then
      check = true
    elseif a == "--except" then
      excepted[arg[i + 1]] = true
      i = i + 1
    elseif a == "--top" then
      top = math.tointeger(tonumber(arg[i + 1])) or top
      i = i + 1
    else
      paths[#paths + 1] = a
    end
    i = i + 1
  end
end
if #paths == 0 then paths = { "src", "kernels", "lua" } end

local function is_source(name)
  return name:match("%.c$") or name:match("%.h$") or name:match("%.cu$") or name:match("%.cuh$")
    or name:match("%.lua$")
end

local function files_of(path)
  local out = {}
  local p = io.popen(("find '%s' -type f 2>/dev/null | sort"):format(path:gsub("'", "'\\''")))
  for f in p:lines() do
    if is_source(f) then out[#out + 1] = f end
  end
  p:close()
  return out
end

-- ---- C and CUDA --------------------------------------------------------------

-- A line without its comments and string literals; whether a block comment
-- runs on past it.
local function strip_c(line, in_comment)
  local out, i = {}, 1
  while i <= #line do
    if in_comment then
      local e = line:find("*/", i, true)
      if not e then return table.concat(out), true end
      i, in_comment = e + 2, false
    else
      local c2 = line:sub(i, i + 1)
      local c = line:sub(i, i)
      if c2 == "//" then break end
      if c2 == "/*" then
        in_comment, i = true, i + 2
      elseif c == '"' or c == "'" then
        local e = i + 1
        while e <= #line and line:sub(e, e) ~= c do e = e + (line:sub(e, e) == "\\" and 2 or 1) end
        out[#out + 1] = " "
        i = e + 1
      else
        out[#out + 1] = c
        i = i + 1
      end
    end
  end
  return table.concat(out), in_comment
end

local function c_functions(path)
  local functions, lines = {}, 0
  local depth, in_comment, start, statement = 0, false, nil, ""
  local current
  local conditionals = {} -- per open #if: true while in a later branch (its braces are not counted)
  for line in io.lines(path) do
    lines = lines + 1
    local code
    code, in_comment = strip_c(line, in_comment)
    local directive = code:match("^%s*#%s*(%a+)")
    local skipping = false
    for _, later in ipairs(conditionals) do skipping = skipping or later end
    if directive == "if" or directive == "ifdef" or directive == "ifndef" then
      conditionals[#conditionals + 1] = false
    elseif directive == "elif" or directive == "else" then
      conditionals[#conditionals] = true
    elseif directive == "endif" then
      conditionals[#conditionals] = nil
    end
    if directive or skipping then code = "" end
    for ch in code:gmatch("[^%s]") do
      if depth == 0 and not start then start = lines end
      if ch == "{" then
        if depth == 0 then
          local text = statement .. " " .. code
          if text:match("%)%s*[%w_]*%s*{?%s*$") or text:match("%)") then
            local name
            for word in text:gmatch("([%w_]+)%s*%b()") do name = word end -- the last: past __launch_bounds__(...)
            current = { name = name or ("at line " .. lines), first = start or lines }
          end
        end
        depth = depth + 1
      elseif ch == "}" then
        depth = depth - 1
        if depth == 0 then
          if current then
            current.lines = lines - current.first + 1
            functions[#functions + 1] = current
            current = nil
          end
          start, statement = nil, ""
        end
      elseif ch == ";" and depth == 0 then
        start, statement = nil, ""
      end
    end
    if depth == 0 and code:match("%S") and not code:match("[;}]%s*$") then statement = statement .. " " .. code end
    if depth == 0 and not code:match("%S") and line:match("^%s*$") then start, statement = nil, "" end
  end
  return functions, lines
end

-- ---- Lua -------------------------------------------------------------------------

-- The code of a Lua file line by line, comments and strings blanked (their
-- line breaks kept, so lines keep their numbers).
local function lua_code(text)
  local out, i, n = {}, 1, #text
  while i <= n do
    local c = text:sub(i, i)
    local long = text:match("^%[(=*)%[", i)
    if text:sub(i, i + 1) == "--" then
      local level = text:match("^%-%-%[(=*)%[", i)
      local close
      if level then
        close = text:find("]" .. level .. "]", i, true)
      else
        close = text:find("\n", i, true)
        if close then close = close - 1 end
      end
      close = close or n
      if level then close = close + #level + 1 end
      out[#out + 1] = text:sub(i, close):gsub("[^\n]", " ")
      i = close + 1
    elseif long then
      local close = text:find("]" .. long .. "]", i, true) or n
      close = close + #long + 1
      out[#out + 1] = text:sub(i, close):gsub("[^\n]", " ")
      i = close + 1
    elseif c == '"' or c == "'" then
      local e = i + 1
      while e <= n and text:sub(e, e) ~= c and text:sub(e, e) ~= "\n" do
        e = e + (text:sub(e, e) == "\\" and 2 or 1)
      end
      out[#out + 1] = " " .. text:sub(i + 1, e - 1):gsub("[^\n]", " ") .. " "
      i = e + 1
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return table.concat(out)
end

local OPENS = { ["function"] = true, ["do"] = true, ["if"] = true, ["repeat"] = true }
local CLOSES = { ["end"] = true, ["until"] = true }

local function lua_functions(path)
  local f = assert(io.open(path, "r"))
  local text = f:read("a")
  f:close()
  local code = lua_code(text)
  local functions, stack, lineno = {}, {}, 1
  local lines = select(2, text:gsub("\n", "\n")) + (text:sub(-1) == "\n" and 0 or 1)
  for line in (code .. "\n"):gmatch("([^\n]*)\n") do
    local pos = 1
    while true do
      local s, e, word = line:find("([%a_][%w_]*)", pos)
      if not s then break end
      local before = line:sub(1, s - 1)
      if OPENS[word] then
        local frame = { kind = word, first = lineno }
        if word == "function" then
          frame.name = line:match("^%s*([%w_.:]+)%s*%(", e + 1) or before:match("([%w_.%[%]\"]+)%s*=%s*$")
            or ("at line " .. lineno)
          frame.installer = #stack == 0 and before:match("^%s*return%s*$") ~= nil
        end
        stack[#stack + 1] = frame
      elseif CLOSES[word] then
        local frame = table.remove(stack)
        if frame and frame.kind == "function" and not frame.installer then
          functions[#functions + 1] = { name = frame.name, first = frame.first, lines = lineno - frame.first + 1 }
        end
      end
      pos = e + 1
    end
    lineno = lineno + 1
  end
  return functions, lines
end

-- ---- the report ---------------------------------------------------------------------

local units, file_lengths = {}, {}
for _, path in ipairs(paths) do
  local list = is_source(path) and { path } or files_of(path)
  for _, file in ipairs(list) do
    local is_lua = file:match("%.lua$")
    local functions, lines = (is_lua and lua_functions or c_functions)(file)
    for _, fn in ipairs(functions) do
      units[#units + 1] = { file = file, name = fn.name, first = fn.first, lines = fn.lines }
    end
    if not is_lua then file_lengths[#file_lengths + 1] = { file = file, lines = lines } end
  end
end
table.sort(units, function(a, b) return a.lines > b.lines end)
table.sort(file_lengths, function(a, b) return a.lines > b.lines end)

local over_functions, over_files, bad = 0, 0, false
print(("functions over %d lines (counted from the signature):"):format(MAX_FUNCTION))
for _, u in ipairs(units) do
  if u.lines > MAX_FUNCTION then
    local note = excepted[u.file] and "  (excepted)" or ""
    print(("  %4d  %s:%d  %s%s"):format(u.lines, u.file, u.first, u.name, note))
    over_functions = over_functions + (excepted[u.file] and 0 or 1)
    bad = bad or not excepted[u.file]
  end
end
print(("C and CUDA files over %d lines:"):format(MAX_FILE))
for _, f in ipairs(file_lengths) do
  if f.lines > MAX_FILE then
    local note = excepted[f.file] and "  (excepted)" or ""
    print(("  %5d  %s%s"):format(f.lines, f.file, note))
    over_files = over_files + (excepted[f.file] and 0 or 1)
    bad = bad or not excepted[f.file]
  end
end
print(("the longest functions (top %d):"):format(top))
for i = 1, math.min(top, #units) do
  local u = units[i]
  print(("  %4d  %s:%d  %s%s"):format(u.lines, u.file, u.first, u.name, excepted[u.file] and "  (excepted)" or ""))
end
local longest_kept, longest_file = nil, nil
for _, u in ipairs(units) do if not excepted[u.file] then longest_kept = longest_kept or u end end
for _, f in ipairs(file_lengths) do if not excepted[f.file] then longest_file = longest_file or f end end
if longest_kept then
  print(("longest function: %d lines, %s (%s:%d)"):format(longest_kept.lines, longest_kept.name, longest_kept.file,
    longest_kept.first))
end
if longest_file then print(("longest C file: %d lines, %s"):format(longest_file.lines, longest_file.file)) end
print(("%d functions over %d lines, %d C files over %d lines (%d functions and %d files measured)"):format(
  over_functions, MAX_FUNCTION, over_files, MAX_FILE, #units, #file_lengths))
if check and bad then os.exit(1) end
