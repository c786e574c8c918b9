-- The spk side of the ONNX Runtime check of spk.lstm.save{format = "onnx"}:
-- writes a pyannote-sized stack (4 layers, input 60, hidden 128, f32 weights
-- from spk.lstm.random{seed = 11}) as DIR/model.onnx, an input x [2, 589, 60]
-- (f32) as DIR/x.npy and spk.lstm.reference(layers, x) in f64 as DIR/y64.npy,
-- then prints spk's own f32 reference error for comparison. ONNX Runtime's
-- side is tools/onnx_ort_check.py, which needs no Lua:
--
--   build/spk run tools/onnx_save_check.lua DIR [--steps 589] [--batch 2]
--   python3 tools/onnx_ort_check.py DIR/model.onnx DIR/x.npy DIR/y64.npy
local spk = require "spk"
local script = require("spk.options").script { usage = "spk run tools/onnx_save_check.lua DIR [--steps 589] [--batch 2]" }

local dir = arg[1]
local opts = { steps = 589, batch = 2 }
for i = 2, #arg, 2 do
  local key = arg[i] and arg[i]:match("^%-%-(%w+)$")
  if not key or opts[key] == nil or not math.tointeger(tonumber(arg[i + 1])) then dir = nil break end
  opts[key] = math.tointeger(tonumber(arg[i + 1]))
end
if not dir or dir:sub(1, 1) == "-" then script:usage_error("needs a folder and integer options") end

spk.files.make_folder(dir)
local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 11 }
local x = spk.randn({ opts.batch, opts.steps, 60 }, { seed = 12 })
local y64 = spk.lstm.reference(layers, x, { precision = "f64" })
local y32 = spk.lstm.reference(layers, x, { precision = "f32" })
spk.lstm.save(dir .. "/model.onnx", layers)
spk.save(dir .. "/x.npy", x)
spk.save(dir .. "/y64.npy", y64)
local c = spk.compare(y32, y64)
print(("wrote %s/model.onnx, x.npy [%d, %d, 60], y64.npy; spk's f32 reference: rel_l2 %.3e, max_abs %.3e "
       .. "against f64"):format(dir, opts.batch, opts.steps, c.rel_l2, c.max_abs))
