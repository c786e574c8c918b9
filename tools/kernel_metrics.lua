-- The shape of the kernel sources: per file, the preprocessor branches
-- (#if, #ifdef, #ifndef, #elif, #else) inside function bodies, and per
-- function its length in lines, longest first. The targets the kernels are
-- written to: at most 10 such branches a file, no function over 120 lines.
--
--   build/spk run tools/kernel_metrics.lua [--check] [kernels/*.cu kernels/*.cuh]
--
-- --check: exit status 1 when a file named is past either target.
-- Braces are counted outside comments and strings, and in the first branch of
-- an #if only (its #else/#elif branches repeat the block's opening); a
-- function is a top-level brace block whose declaration has a parameter list,
-- and its length runs from the declaration's first line (the signature, with
-- its return type and attributes) to the closing brace.
require "spk"
require("spk.options").script { usage = "spk run tools/kernel_metrics.lua [--check] [FILE ...]" }
local files, check = {}, false
for _, a in ipairs { ... } do
  if a == "--check" then check = true else files[#files + 1] = a end
end
if #files == 0 then
  local p = io.popen("ls kernels/*.cu kernels/*.cuh")
  for f in p:lines() do files[#files + 1] = f end
  p:close()
end

local function strip(line, in_comment)
  local out, i = {}, 1
  while i <= #line do
    if in_comment then
      local e = line:find("*/", i, true)
      if not e then return table.concat(out), true end
      i, in_comment = e + 2, false
    else
      local c2 = line:sub(i, i + 1)
      if c2 == "//" then break end
      if c2 == "/*" then
        in_comment, i = true, i + 2
      elseif line:sub(i, i) == '"' then
        local e = i + 1
        while e <= #line and line:sub(e, e) ~= '"' do e = e + (line:sub(e, e) == "\\" and 2 or 1) end
        i = e + 1
      else
        out[#out + 1] = line:sub(i, i)
        i = i + 1
      end
    end
  end
  return table.concat(out), in_comment
end

local worst_branches, worst_length = 0, 0
for _, path in ipairs(files) do
  local depth, in_comment, branches, functions = 0, false, 0, {}
  local current, declaration = nil, nil
  local n = 0
  local conditionals = {} -- per open #if: true while in a later branch (its braces not counted)
  for line in io.lines(path) do
    n = n + 1
    local code
    code, in_comment = strip(line, in_comment)
    local directive = code:match("^%s*#%s*(%a+)")
    if depth > 0 and (directive == "if" or directive == "ifdef" or directive == "ifndef" or directive == "elif"
                      or directive == "else") then
      branches = branches + 1
    end
    local skipping = false
    for _, later in ipairs(conditionals) do skipping = skipping or later end
    if directive == "if" or directive == "ifdef" or directive == "ifndef" then
      conditionals[#conditionals + 1] = false
    elseif directive == "elif" or directive == "else" then
      conditionals[#conditionals] = true
    elseif directive == "endif" then
      conditionals[#conditionals] = nil
    end
    if directive then code = "" end
    if skipping then code = "" end
    -- a top-level declaration (a function's signature) starts at its first line of code
    if depth == 0 and directive then declaration = nil end
    if depth == 0 and code:match("%S") and not declaration then declaration = { first = n, text = "" } end
    for ch in code:gmatch("[{};]") do
      if ch == "{" then
        if depth == 0 and declaration and (declaration.text .. code):match("%)") then
          local signature = (declaration.text .. " " .. code):gsub("__launch_bounds__%s*%b()", "")
          current = { name = signature:match("([%w_]+)%s*%(") or ("at line " .. n), first = declaration.first }
        end
        depth = depth + 1
      elseif ch == "}" then
        depth = depth - 1
        if depth == 0 then
          declaration = nil
          if current then
            current.lines = n - current.first + 1
            functions[#functions + 1] = current
            current = nil
          end
        end
      elseif depth == 0 then
        declaration = nil -- a top-level statement ends
      end
    end
    if depth == 0 and declaration then declaration.text = declaration.text .. " " .. code end
  end
  table.sort(functions, function(a, b) return a.lines > b.lines end)
  local longest = functions[1]
  print(("%-40s %3d branches in function bodies; longest function %s (%d lines)"):format(path, branches,
    longest and longest.name or "-", longest and longest.lines or 0))
  for i = 1, math.min(3, #functions) do
    if functions[i].lines > 120 then
      print(("  %s: %d lines (line %d)"):format(functions[i].name, functions[i].lines, functions[i].first))
    end
  end
  worst_branches = math.max(worst_branches, branches)
  worst_length = math.max(worst_length, longest and longest.lines or 0)
end
print(("most branches in a file: %d (target 10); longest function: %d lines (target 120)"):format(worst_branches,
  worst_length))
if check and (worst_branches > 10 or worst_length > 120) then os.exit(1) end
