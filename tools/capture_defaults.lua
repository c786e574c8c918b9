-- Records what the per-batch default kernels compute, so a change to the
-- kernels or their option handling can be checked against it bit for bit.
--
--   spk run tools/capture_defaults.lua OUT.json [batch,...] [backend,...] [math,...]
--
-- For each backend (default cluster,persistent), math (fp32,tf32) and batch
-- (default 1,5,8,32,37,64,128,200,256) it builds spk.lstm.stack with no
-- kernel options (the batch's default variant), runs one forward pass of
-- spk.randn({B, 589, 60}, {seed = 1}) through spk.lstm.random{seed = 1}
-- weights, and writes the SHA-256 of the .npy file spk.save writes of the
-- output, the variant's description, and whether a second forward gave the
-- same digest. Needs a GPU (--dry-run lists the runs without one, OUT.json
-- then optional).
local spk = require "spk"
local report = require "spk.report"
local options = require "spk.options"
local script = options.script { gpu = "required", dry_run = true,
  usage = "spk run tools/capture_defaults.lua OUT.json [BATCHES] [BACKENDS] [MATHS] [--dry-run]" }
local arg = script.args

local out = arg[1] or script.dry_run and "" or script:usage_error("needs the output file")
local batches = script:value(arg[2] or "1,5,8,32,37,64,128,200,256", "BATCHES", options.positives)
local backends = script:value(arg[3] or "cluster,persistent", "BACKENDS", options.backends)
local known_maths = {}
for _, m in ipairs(spk.lstm.math_modes) do known_maths[m] = true end
local maths = script:value(arg[4] or "fp32,tf32", "MATHS", options.choices, "math", known_maths)
for _, m in ipairs(maths) do script:value(backends, "BACKENDS", options.check_backends, m) end
local steps, seed = 589, 1

local work = {}
for _, b in ipairs(batches) do
  for _, backend in ipairs(backends) do
    for _, m in ipairs(maths) do work[#work + 1] = ("batch %d: %s %s"):format(b, backend, m) end
  end
end
local status = script:plan(work)

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = seed }
local tmp = os.tmpname() .. ".npy"
local function digest(y)
  spk.save(tmp, y)
  local f = assert(io.open(tmp, "rb"))
  local bytes = f:read("a")
  f:close()
  return spk.cuda.sha256(bytes)
end

local records = {}
for _, b in ipairs(batches) do
  local x = spk.randn({ b, steps, 60 }, { seed = seed })
  for _, backend in ipairs(backends) do
    for _, m in ipairs(maths) do
      status:step(("batch %d: %s %s"):format(b, backend, m))
      local rec = { backend = backend, batch = b, math = m, steps = steps, seed = seed }
      local ok, err = pcall(function()
        local plan = spk.lstm.stack { layers = layers, batch = b, steps = steps, backend = backend, math = m }
        rec.variant = plan.variant
        local y1 = plan:forward(x):cpu()
        rec.sha256 = digest(y1)
        local y2 = plan:forward(x):cpu()
        rec.repeat_same = digest(y2) == rec.sha256
        if b == 1 and m == "fp32" then spk.save(out:gsub("%.json$", "") .. "_" .. backend .. "_b1.npy", y1) end
        plan:close()
      end)
      if not ok then rec.error = tostring(err) end
      records[#records + 1] = rec
      io.stderr:write(("%-10s %-4s batch %3d  %s  %s\n"):format(backend, m, b, rec.sha256 or rec.error,
        rec.variant or ""))
    end
  end
end
os.remove(tmp); os.remove((tmp:gsub("%.npy$", "")))
local provenance = require "spk.provenance"
report.json(out, { environment = require("spk.benchmark").environment(), records = records }, {
  provenance = provenance.from_rows(records, { seeds = { weights = seed, input = seed }, dtype = "f32", math = maths,
    shape = { layers = 4, input = 60, hidden = 128, steps = steps, batches = batches } }) })
print("wrote " .. out)
