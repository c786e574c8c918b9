-- Quick start: a seeded random tensor, saved to a .npy file, loaded back and
-- compared with the original; then an f32 copy measured against f64.
-- Run: build/spk run experiments/quickstart.lua [seed]
local spk = require "spk"

local seed = tonumber(arg and arg[1]) or 1

-- A scratch folder for the file (removed at the end).
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"), "cannot make " .. dir)
local path = dir .. "/x.npy"

local x = spk.randn({ 3, 4 }, { seed = seed, dtype = "f64" })
print(x)

x:save(path)
local y = spk.load(path)
local round_trip = spk.compare(y, x)
print(("round trip through %s: %s %s, max_abs %g"):format(path, y:dtype(), table.concat(y:shape(), "x"),
  round_trip.max_abs))

-- The usual use of compare: a less precise result against an f64 truth.
local rounded = spk.compare(x:to("f32"), x)
print(("f32 copy against f64: max_abs %.3g, rel_l2 %.3g, max_ulp %g"):format(rounded.max_abs, rounded.rel_l2,
  rounded.max_ulp))

os.remove(path)
os.remove(dir)
if round_trip.max_abs ~= 0 or rounded.max_ulp > 0.5 then
  error("quickstart: the numbers did not survive the round trip")
end
print("ok")
