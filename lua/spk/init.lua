-- The spk module as scripts see it: the C bindings (spk.core) plus what is
-- better written in Lua. Each area file lua/spk/<area>.lua returns a function
-- install(spk, core) that adds that area's API to the module table.
local core = require "spk.core"

-- The plan constructors and variant helpers of the GPU backends (plan_new,
-- kernel_*, the families' persistent_* and cluster_* helpers) are reached
-- through spk.lstm (stack{backend = ...}, kernel_variant, kernel_options,
-- kernel_stack, ...), the step timeline's bindings (timeline_*) through
-- spk.timeline; they stay in spk.core only.
local function internal(name)
  return name:match("^persistent_") or name:match("^cluster_") or name:match("^timeline_")
    or name:match("^kernel_") or name == "plan_new" or name == "trace_check"
end

local spk = { core = core }
for name, value in pairs(core) do
  if not internal(name) then
    spk[name] = value
  end
end

for _, area in ipairs { "tensor", "cuda", "lstm", "stack", "cpu", "families", "kernel_stack", "cudnn", "debug",
                        "auto", "timeline", "help" } do
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

-- Errors about a script's arguments point at the script's line (spk.errors).
require("spk.errors").install(spk)

return spk
