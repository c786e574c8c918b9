-- One forward of the benchmark stack (4 layers, input 60, hidden 128, 589
-- steps, random weights seed 1) through one backend at one batch: the
-- workload tools/ncu_forward.sh profiles. GPU only.
--
--   build/spk run tools/profile_forward.lua [backend] [batch] [math] [kernel options]
--   (defaults: cluster 1 fp32, the backend's default kernel); kernel options
--   as key=value pairs for the cluster backend's `kernel` table, e.g.
--   "cluster=2,threads=512,gate_block=4,tile_rows=8,gates_ahead=3,push=direct" (left out: the batch's default)
local spk = require "spk"
local script = require("spk.options").script { gpu = "required",
  usage = "spk run tools/profile_forward.lua [BACKEND] [BATCH] [MATH] [KERNEL OPTIONS]" }
local backend = arg[1] or "cluster"
local batch = math.tointeger(tonumber(arg[2] or "1"))
local math_mode = arg[3] or "fp32"
if not batch or batch < 1 then
  io.stderr:write("profile_forward: batch must be an integer >= 1\n")
  os.exit(2)
end
-- "a=1,b=x" -> {a = 1, b = "x"}
local kernel
if arg[4] and arg[4] ~= "" then
  kernel = {}
  for pair in arg[4]:gmatch("[^,]+") do
    local key, value = pair:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if not key or value == "" then
      io.stderr:write(("profile_forward: kernel options are key=value pairs, got %q\n"):format(pair))
      os.exit(2)
    end
    kernel[key] = math.tointeger(tonumber(value)) or value
  end
end
script:require_gpu()
local steps = 589
local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local x = spk.randn({ batch, steps, 60 }, { seed = 2 })
local plan = spk.lstm.stack { layers = layers, batch = batch, steps = steps, backend = backend,
                              math = math_mode, kernel = kernel }
local y = plan:forward(x)
spk.cuda.synchronize()
print(("profile_forward: %s batch %d %s: output %s, variant %s"):format(
  backend, batch, math_mode, tostring(y), tostring(plan.kernel and plan.kernel.name or "-")))
plan:close()
