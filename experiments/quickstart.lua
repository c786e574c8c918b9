-- Quick start: the pyannote-shaped LSTM stack (4 bidirectional layers, hidden
-- 128, input 60, 589 steps) on the backend spk picks for this machine
-- (backend "auto": a GPU kernel where there is a GPU, the C reference
-- elsewhere), checked against the f64 reference and timed; on a GPU, also
-- timed against every cuDNN algorithm on the same input.
-- Run: build/spk run experiments/quickstart.lua [batch]
local spk = require "spk"

local batch = math.tointeger(tonumber(arg and arg[1] or "2"))
if not batch or batch < 1 then
  io.stderr:write("usage: spk run experiments/quickstart.lua [batch (a positive integer, default 2)]\n")
  os.exit(2)
end
local steps = 589

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local x = spk.randn({ batch, steps, 60 }, { seed = 1 })
print(("stack: 4 bidirectional layers, hidden 128, input 60; x [%s]"):format(table.concat(x:shape(), ", ")))

local truth = spk.lstm.reference(layers, x, { precision = "f64" })
local plan = spk.lstm.stack { layers = layers, batch = batch, steps = steps, backend = "auto" }
print(("backend: %s (%s)"):format(plan.auto.backend, plan.auto.reason))

local y = plan:forward(x)
local check = spk.compare(y, truth)
print(("against the f64 reference: rel_l2 %.3g, max_abs %.3g"):format(check.rel_l2, check.max_abs))

local ms = plan:time { rounds = 5, warmup = 1, x = x }.median_ms
print(("%.3f ms per forward (median of 5)"):format(ms))

if spk.cuda.available() then
  local best, best_algo = math.huge, nil
  for _, a in ipairs(spk.lstm.cudnn_algorithms { batch = batch, steps = steps, layers = layers }) do
    if a.ok then
      local c = spk.lstm.stack { backend = "cudnn", layers = layers, batch = batch, steps = steps, algo = a.algo }
      local t = c:time { rounds = 5, warmup = 1, x = x }.median_ms
      print(("  cuDNN %-24s %8.3f ms"):format(a.algo, t))
      if t < best then best, best_algo = t, a.algo end
      c:close()
    end
  end
  if best_algo then
    print(("%.2fx the fastest cuDNN algorithm (%s)"):format(best / ms, best_algo))
  end
else
  print("no CUDA device: cuDNN not timed")
end

if not (check.rel_l2 <= 1e-4) then
  error(("quickstart: rel_l2 %.3g against the f64 reference is beyond 1e-4"):format(check.rel_l2))
end
print("ok")
