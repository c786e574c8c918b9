-- The shape of the kernel sources: per file, the preprocessor branches
-- (#if, #ifdef, #ifndef, #elif, #else) inside function bodies, and per
-- function its length in lines, longest first. The targets the kernels are
-- written to: at most 10 such branches a file, no function over 120 lines.
--
--   build/spk run tools/kernel_metrics.lua [--check] [kernels/*.cu kernels/*.cuh]
--
-- --check: exit status 1 when a file named is past either target.
-- The measure is spk.code_shape's (tools/code_shape.lua reports the same
-- lengths): braces are counted outside comments and strings, and in the first
-- branch of an #if only (its #else/#elif branches repeat the block's opening);
-- a function is a top-level brace block whose declaration has a parameter
-- list, and its length runs from the declaration's first line (the signature,
-- with its return type and attributes) to the closing brace.
local spk = require "spk"
require("spk.options").script { usage = "spk run tools/kernel_metrics.lua [--check] [FILE ...]" }
local shape = require "spk.code_shape"
local files, check = {}, false
for _, a in ipairs { ... } do
  if a == "--check" then check = true else files[#files + 1] = a end
end
if #files == 0 then
  for _, name in ipairs(spk.files.list("kernels")) do
    if name:match("%.cuh?$") then files[#files + 1] = "kernels/" .. name end
  end
end

local worst_branches, worst_length = 0, 0
for _, path in ipairs(files) do
  local measured = shape.c_file(path)
  local branches, functions = measured.branches, measured.functions
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
