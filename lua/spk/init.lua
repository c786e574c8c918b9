-- The spk module as scripts see it: the C bindings (spk.core) plus what is
-- better written in Lua. Each area file lua/spk/<area>.lua returns a function
-- install(spk, core) that adds that area's API to the module table.
local core = require "spk.core"

-- The plan constructors and variant helpers of the GPU backends
-- (persistent_*, cluster_*) are reached through spk.lstm (stack{backend =
-- ...}, kernel_variant, kernel_options, ...); they stay in spk.core only.
local function internal(name)
  return name:match("^persistent_") or name:match("^cluster_")
end

local spk = { core = core }
for name, value in pairs(core) do
  if not internal(name) then
    spk[name] = value
  end
end

for _, area in ipairs { "tensor", "cuda", "lstm", "stack", "cpu", "persistent", "cluster", "cudnn", "debug", "auto" } do
  require("spk." .. area)(spk, core)
end

return spk
