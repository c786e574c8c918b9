-- The spk module as scripts see it: the C bindings (spk.core) plus what is
-- better written in Lua. Each area file lua/spk/<area>.lua returns a function
-- install(spk, core) that adds that area's API to the module table.
local core = require "spk.core"

local spk = {}
for name, value in pairs(core) do
  spk[name] = value
end

for _, area in ipairs { "tensor", "cuda", "lstm", "stack", "cluster", "cudnn", "debug", "auto" } do
  require("spk." .. area)(spk, core)
end

return spk
