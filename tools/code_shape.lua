-- The shape of spk's source: the length of every function (C, CUDA and Lua)
-- and of every C and CUDA file, against the limits the project keeps (no
-- function over 120 lines, no C file over 1,500), longest first.
--
--   build/spk run tools/code_shape.lua [--check] [--except PATH ...] [--top N] [PATH ...]
--
-- PATHs are files or folders (default: src kernels lua); folders are walked
-- for *.c, *.h, *.cu, *.cuh and *.lua. The functions are spk.code_shape's
-- (the measure tools/kernel_metrics.lua reports too): a C or CUDA function is
-- a top-level brace block whose declaration has a parameter list, counted
-- from its first line (the signature) to its closing brace, with braces
-- counted outside comments, strings and the later branches of an #if. A Lua
-- function runs from its `function` to its `end` (keywords counted outside
-- comments and strings); the installer an area file returns (`return
-- function(spk, core)` at the top of a chunk) is the file, not a unit, and is
-- not counted.
-- --except PATH leaves a file out of the limits (it is still measured and
-- listed as excepted). The last lines: the longest function, the longest C
-- file and "N functions over 120 lines, N C files over 1500 lines". --check:
-- exit status 1 when any file that is not excepted is past a limit.
require "spk"
require("spk.options").script {
  usage = "spk run tools/code_shape.lua [--check] [--except PATH ...] [--top N] [PATH ...]" }
local shape = require "spk.code_shape"
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

-- ---- the report ---------------------------------------------------------------------

local units, file_lengths = {}, {}
for _, path in ipairs(paths) do
  local list = is_source(path) and { path } or files_of(path)
  for _, file in ipairs(list) do
    local is_lua = file:match("%.lua$")
    local measured = (is_lua and shape.lua_file or shape.c_file)(file)
    for _, fn in ipairs(measured.functions) do
      units[#units + 1] = { file = file, name = fn.name, first = fn.first, lines = fn.lines }
    end
    if not is_lua then file_lengths[#file_lengths + 1] = { file = file, lines = measured.lines } end
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
