-- The outputs of the per-batch defaults, as fixtures: for each backend, math
-- and batch, one forward of the benchmark stack through the plan's default
-- kernel (no kernel options), its output written by spk.save and that file's
-- SHA-256, with a few of its values. Run on the GPU with the tree whose
-- outputs are the reference (GPU only; runs on earlier trees too: it uses
-- only spk.lstm.random, spk.randn, spk.lstm.stack, spk.save, spk.cuda.sha256):
--
--   build/spk run tools/default_fixtures.lua OUT_DIR [--batches 1,3,8,...] [--backends cluster,persistent]
--                                            [--math fp32,tf32] [--steps 589]
--
-- Each fixture is OUT_DIR/<backend>_<math>_b<batch>.json:
--   {"backend": "cluster", "math": "fp32", "batch": 8, "steps": 589, "seed": 1,
--    "input": 60, "hidden": 128, "layers": 4,
--    "sha256": "<64 hex digits of the .npy file spk.save writes of the output>",
--    "first": [the output's first 8 values], "variant": "<plan.variant>", "commit": "<git commit, if known>"}
-- The inputs: spk.lstm.random{layers = 4, input = 60, hidden = 128, seed = 1}
-- and spk.randn({batch, steps, 60}, {seed = 1}), the benchmark's.
-- tests/spec/default_bits_spec.lua runs every fixture it finds in
-- tests/fixtures/defaults/ against this tree's defaults.
local spk = require "spk"
local report = require "spk.report"

local out = arg[1]
local function option(name, default)
  for i = 2, #arg do
    if arg[i] == name then return arg[i + 1] end
  end
  return default
end
local function list(text)
  local t = {}
  for item in text:gmatch("[^,]+") do t[#t + 1] = math.tointeger(tonumber(item)) or item end
  return t
end
if not out or out:match("^%-") then
  io.stderr:write("usage: spk run tools/default_fixtures.lua OUT_DIR [--batches LIST] [--backends LIST] "
    .. "[--math LIST] [--steps N]\n")
  os.exit(2)
end
if not spk.cuda.available() then
  io.stderr:write("default_fixtures: needs a CUDA device\n")
  os.exit(3)
end
local batches = list(option("--batches", "1,3,8,13,32,33,64,100,128,129,200,256,257"))
local backends = list(option("--backends", "cluster,persistent"))
local maths = list(option("--math", "fp32,tf32"))
local steps = math.tointeger(tonumber(option("--steps", "589")))
local commit = io.popen("git rev-parse --short HEAD 2>/dev/null"):read("l") or ""

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
for _, batch in ipairs(batches) do
  local x = spk.randn({ batch, steps, 60 }, { seed = 1 })
  for _, backend in ipairs(backends) do
    for _, m in ipairs(maths) do
      local plan = spk.lstm.stack { layers = layers, batch = batch, steps = steps, backend = backend, math = m }
      local y = plan:forward(x)
      local path = os.tmpname() .. ".npy"
      spk.save(path, y)
      local f = assert(io.open(path, "rb"))
      local bytes = f:read("a")
      f:close()
      os.remove(path)
      local first = report.array {}
      local flat = y:contiguous():view { y:numel() }
      for i = 1, 8 do first[i] = flat:get(i) end
      local fixture = report.object { backend = backend, math = m, batch = batch, steps = steps, seed = 1,
                                      input = 60, hidden = 128, layers = 4, sha256 = spk.cuda.sha256(bytes),
                                      first = first, variant = plan.variant, commit = commit }
      local name = ("%s/%s_%s_b%d.json"):format(out, backend, m, batch)
      report.json(name, fixture)
      print(("%s  %s  %s"):format(name, fixture.sha256, plan.variant))
      plan:close()
    end
  end
end
