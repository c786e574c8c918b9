-- The spk module as scripts see it: the C bindings (spk.core) plus what is
-- better written in Lua. Each area file lua/spk/<area>.lua returns a function
-- install(spk, core) that adds that area's API to the module table.
local core = require "spk.core"

-- The plan constructors and variant helpers of the GPU backends
-- (persistent_*, cluster_*, kernel_stack_*) are reached through spk.lstm
-- (stack{backend = ...}, kernel_variant, kernel_options, kernel_stack, ...),
-- the step timeline's bindings (timeline_*) through spk.timeline; they stay
-- in spk.core only.
local function internal(name)
  return name:match("^persistent_") or name:match("^cluster_") or name:match("^timeline_")
    or name:match("^kernel_stack_")
end

local spk = { core = core }
for name, value in pairs(core) do
  if not internal(name) then
    spk[name] = value
  end
end

for _, area in ipairs { "tensor", "cuda", "lstm", "stack", "cpu", "persistent", "cluster", "kernel_stack", "cudnn",
                        "debug", "auto", "timeline", "help" } do
  require("spk." .. area)(spk, core)
end

-- Every backend registers what a tuning record may choose for it; one doc
-- covers them all, whichever backends exist.
if type(spk.lstm.tunables) == "table" then
  local doc = require "spk.doc"
  for name, check in pairs(spk.lstm.tunables) do
    doc(check, ("spk.lstm.tunables.%s(options[, shape]) -> true | nil, message\n"
      .. "Whether a tuning record's options for backend %q are ones it takes (spk.tuning checks records with\n"
      .. "it before backend \"auto\" uses them)."):format(name, name))
  end
end

-- The interactive session's settings (its machinery is the module spk.repl).
spk.repl = { precision = require("spk.repl").precision }
do
  local doc = require "spk.doc"
  doc(spk.repl, [[
spk.repl: the interactive session's settings. spk.repl.precision(digits) sets how many significant
digits floats print with (0: the shortest exact form).]])
end

-- Errors about a script's arguments point at the script's line (spk.errors).
require("spk.errors").install(spk)

return spk
