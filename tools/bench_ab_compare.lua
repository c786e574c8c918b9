-- The table of tools/bench_ab.sh run: per built-in backend, math and batch,
-- the better median of the reference's two runs and of this tree's two,
-- their ratio, and "ok" within 2 % (this tree no more than 1.02x the
-- reference's).
--   build/spk run tools/bench_ab_compare.lua OUT_DIR
require "spk"
local report = require "spk.report"
local script = require("spk.options").script { usage = "spk run tools/bench_ab_compare.lua [OUT_DIR]" }
local dir = script.args[1] or "results/bench_ab"
local RUNS = { { "1_before.json", "before" }, { "2_after.json", "after" }, { "3_before.json", "before" },
               { "4_after.json", "after" } }
local found = 0
for _, run in ipairs(RUNS) do
  local f = io.open(dir .. "/" .. run[1])
  if f then
    f:close()
    found = found + 1
  end
end
if found == 0 then
  script:usage_error(("%s holds none of tools/bench_ab.sh's results (1_before.json .. 4_after.json)"):format(dir))
end

local function rows(name)
  local f = io.open(dir .. "/" .. name)
  if not f then return {} end
  local d = report.json_decode(f:read("a"))
  f:close()
  return d.rows or {}
end

local builtin = {}
for _, f in ipairs(require("spk.core").kernel_families()) do builtin[f.backend] = true end
local best = {}
for _, run in ipairs(RUNS) do
  for _, r in ipairs(rows(run[1])) do
    if builtin[r.backend] then
      local m = r.math or "fp32"
      local key = r.backend .. " " .. m .. " " .. r.batch
      best[key] = best[key] or { backend = r.backend, math = m, batch = r.batch }
      local b = best[key]
      b[run[2]] = math.min(b[run[2]] or math.huge, r.median_ms)
    end
  end
end
local keys = {}
for k in pairs(best) do keys[#keys + 1] = k end
table.sort(keys, function(a, b)
  local x, y = best[a], best[b]
  if x.backend ~= y.backend then return x.backend < y.backend end
  if x.math ~= y.math then return x.math < y.math end
  return x.batch < y.batch
end)
local ok, slower = 0, 0
print(("%-11s %-7s %6s %10s %10s %7s"):format("backend", "math", "batch", "before ms", "after ms", "ratio"))
for _, k in ipairs(keys) do
  local b = best[k]
  if b.before and b.after then
    local ratio = b.after / b.before
    local good = ratio <= 1.02
    if good then ok = ok + 1 else slower = slower + 1 end
    print(("%-11s %-7s %6d %10.3f %10.3f %7.3f  %s"):format(b.backend, b.math, b.batch, b.before, b.after, ratio,
      good and "ok" or "SLOWER"))
  else
    slower = slower + 1
    print(("%-11s %-7s %6d  missing a run"):format(b.backend, b.math, b.batch))
  end
end
print(("bench_ab: %d rows within 2 %%, %d slower"):format(ok, slower))
os.exit(slower == 0 and #keys > 0 and 0 or 1)
