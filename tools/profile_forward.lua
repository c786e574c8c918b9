-- One forward of the benchmark stack (4 layers, input 60, hidden 128, 589
-- steps, random weights seed 1) through one backend at one batch: the
-- workload tools/ncu_forward.sh profiles. GPU only.
--
--   build/spk run tools/profile_forward.lua [backend] [batch] [math]
--   (defaults: cluster 1 fp32)
local spk = require "spk"
local backend = arg[1] or "cluster"
local batch = math.tointeger(tonumber(arg[2] or "1"))
local math_mode = arg[3] or "fp32"
if not batch or batch < 1 then
  io.stderr:write("profile_forward: batch must be an integer >= 1\n")
  os.exit(2)
end
local steps = 589
local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local x = spk.randn({ batch, steps, 60 }, { seed = 2 })
local plan = spk.lstm.stack { layers = layers, batch = batch, steps = steps, backend = backend,
                              math = math_mode }
local y = plan:forward(x)
spk.cuda.synchronize()
print(("profile_forward: %s batch %d %s: output %s, variant %s"):format(
  backend, batch, math_mode, tostring(y), tostring(plan.kernel and plan.kernel.name or "-")))
plan:close()
