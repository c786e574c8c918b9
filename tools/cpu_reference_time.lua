-- The CPU reference's time on the benchmark stack (4 layers, input 60,
-- hidden 128, spk.lstm.random seed 1; x = spk.randn seed 1), as wall clock
-- and as the process's CPU time (os.clock), the best of the rounds: on a
-- machine shared with other work the CPU time of one thread is the steadier
-- figure for comparing two builds, the wall clock the one a user waits for.
-- Also the split of the work and where the threads' time went (profile).
--
--   build/spk run tools/cpu_reference_time.lua [f64|f32] [batch 8] [threads 0] [rounds 3] [steps 589]
--   (threads 0: the default, SPK_THREADS or the CPUs this process may use)
local spk = require "spk"

if arg[1] == "--help" or arg[1] == "-h" then
  print("usage: spk run tools/cpu_reference_time.lua [f64|f32] [batch 8] [threads 0] [rounds 3] [steps 589]")
  os.exit(0)
end
local precision = arg[1] or "f64"
local function count(i, default, least)
  local v = math.tointeger(tonumber(arg[i] or default))
  if precision ~= "f64" and precision ~= "f32" or not v or v < least then
    io.stderr:write("usage: spk run tools/cpu_reference_time.lua [f64|f32] [batch 8] [threads 0] [rounds 3] "
      .. "[steps 589]\n")
    os.exit(2)
  end
  return v
end
local batch, threads, rounds, steps = count(2, 8, 1), count(3, 0, 0), count(4, 3, 1), count(5, 589, 1)

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local x = spk.randn({ batch, steps, 60 }, { seed = 1 })
local opts = { precision = precision, threads = threads > 0 and threads or nil, profile = true }
local wall, cpu, profile = math.huge, math.huge, nil
for _ = 1, rounds do
  local start, clock = spk.clock_ms(), os.clock()
  local y, info = spk.lstm.reference(layers, x, opts)
  local ms, cpu_ms = spk.clock_ms() - start, (os.clock() - clock) * 1000
  if ms < wall then wall, profile = ms, info.profile end
  cpu = math.min(cpu, cpu_ms)
  y:close()
end
local p = profile
print(("%s batch %d, %d steps: wall %.1f ms, CPU %.1f ms (best of %d); %s, %d threads in %d teams of %d"):format(
  precision, batch, steps, wall, cpu, rounds, p.vector, p.threads, p.teams, p.team_threads))
print(("  the threads' time: projections %.1f ms (%.2f GFLOP/s a thread), steps %.1f ms (%.2f GFLOP/s a thread, "
  .. "cells included), waiting %.1f ms"):format(p.project_ms, p.project_flops / p.project_ms / 1e6, p.step_ms,
  p.step_flops / p.step_ms / 1e6, p.wait_ms))
