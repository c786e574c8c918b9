-- Times spk.load_safetensors on a header of N one-element f32 tensors (the
-- size docs/reliability.md reports; no GPU needed):
--
--   build/spk run tools/safetensors_many.lua [N = 1000000] [file = /tmp/spk-many.safetensors]
local spk = require "spk"
local script = require("spk.options").script { usage = "spk run tools/safetensors_many.lua [N] [FILE]" }

local n = math.tointeger(tonumber(arg[1] or "1000000"))
local path = arg[2] or "/tmp/spk-many.safetensors"
if not n or n < 1 then script:usage_error(("N must be an integer >= 1, got '%s'"):format(tostring(arg[1]))) end

local parts = {}
for i = 1, n do
  parts[i] = ('"t%d":{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}'):format(i - 1, 4 * (i - 1), 4 * i)
end
local header = "{" .. table.concat(parts, ",") .. "}"
header = header .. string.rep(" ", (8 - #header % 8) % 8)
spk.files.write(path, string.pack("<I8", #header) .. header .. string.rep("\0", 4 * n))
parts = nil
collectgarbage()

local wall0, cpu0 = spk.clock_ms(), os.clock()
local named, names = spk.load_safetensors(path)
local wall, cpu = spk.clock_ms() - wall0, os.clock() - cpu0
assert(#names == n and named["t" .. (n - 1)])
print(("%d tensors, header %.1f MB: %.2f s wall, %.2f s CPU"):format(n, #header / 1e6, wall / 1000, cpu))
os.remove(path)
