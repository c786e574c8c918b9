-- What the input projections of the benchmark stack cost on their own: per
-- batch, the cuBLAS GEMMs one forward makes (4 layers, input 60 then 256,
-- hidden 128: per layer gates[d] = x · W[d]ᵀ, x [batch*589, in], W [2, 512, in]),
-- timed with spk.bench (CUDA graph, median of rounds). Columns: FP32 strict
-- as one call a direction, FP32 strict as one batched call a layer (what the
-- stacks run), and TF32 batched.
-- GPU only:
--
--   build/spk run tools/projection_gemm.lua [batches, default 1,8,32,64,256] [rounds, default 5] [--dry-run]
local spk = require "spk"
local script = require("spk.options").script { gpu = "required", dry_run = true,
  usage = "spk run tools/projection_gemm.lua [BATCHES] [ROUNDS] [--dry-run]" }
local args = script.args
local options = require "spk.options"
local batches = script:value(args[1] or "1,8,32,64,256", "BATCHES", options.positives)
local rounds = script:value(args[2] or "5", "ROUNDS", options.positive)
local work = {}
for _, batch in ipairs(batches) do
  work[#work + 1] = ("batch %d: FP32 a call a direction, FP32 batched, TF32 batched"):format(batch)
end
local status = script:plan(work)
local steps, hidden = 589, 128
local inputs = { 60, 2 * hidden, 2 * hidden, 2 * hidden }

print(("%6s %14s %14s %12s %10s"):format("batch", "fp32 2 calls", "fp32 batched", "tf32 ms", "fp32 TF/s"))
for i, batch in ipairs(batches) do
  status:step(work[i])
  local rows = batch * steps
  local a, w, c, flops = {}, {}, {}, 0
  for l, input in ipairs(inputs) do
    a[l] = spk.randn({ rows, input }, { seed = l }):cuda()
    w[l] = spk.randn({ 2, 4 * hidden, input }, { seed = 10 + l }):cuda()
    c[l] = spk.cuda.zeros({ 2, rows, 4 * hidden })
    flops = flops + 2 * 2 * rows * input * 4 * hidden -- two directions
  end
  local function forward(math_mode, batched)
    return function(stream)
      for l = 1, #inputs do
        if batched then
          spk.blas.gemm { a = a[l], b = w[l], c = c[l], transb = true, math = math_mode, stream = stream }
        else
          for d = 1, 2 do
            spk.blas.gemm { a = a[l], b = w[l]:select(1, d), c = c[l]:select(1, d), transb = true,
              math = math_mode, stream = stream }
          end
        end
      end
    end
  end
  local two = spk.bench(forward("fp32", false), { rounds = rounds, graph = true }).median_ms
  local fp32 = spk.bench(forward("fp32", true), { rounds = rounds, graph = true }).median_ms
  local tf32 = spk.bench(forward("tf32", true), { rounds = rounds, graph = true }).median_ms
  print(("%6d %14.3f %14.3f %12.3f %10.1f"):format(batch, two, fp32, tf32, flops / fp32 / 1e9))
end
