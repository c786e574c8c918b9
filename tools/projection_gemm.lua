-- What the input projections of the benchmark stack cost on their own: per
-- batch, the cuBLAS GEMMs one forward makes (4 layers, input 60 then 256,
-- hidden 128: per layer and direction [batch*589, in] x [512, in]^T), timed
-- with spk.bench (CUDA graph, median of rounds) in FP32 strict and TF32.
-- GPU only:
--
--   build/spk run tools/projection_gemm.lua [batches, default 1,8,32,64,256] [rounds, default 5]
local spk = require "spk"
local batches = {}
for b in (arg[1] or "1,8,32,64,256"):gmatch("[^,]+") do
  batches[#batches + 1] = assert(math.tointeger(tonumber(b)), "batches: integers, comma-separated")
end
local rounds = math.tointeger(tonumber(arg[2] or "5")) or 5
local steps, hidden = 589, 128
local inputs = { 60, 2 * hidden, 2 * hidden, 2 * hidden }

print(("%6s %12s %12s %8s %10s"):format("batch", "fp32 ms", "tf32 ms", "ratio", "fp32 TF/s"))
for _, batch in ipairs(batches) do
  local rows = batch * steps
  local a, w, c, flops = {}, {}, {}, 0
  for l, input in ipairs(inputs) do
    a[l] = spk.randn({ rows, input }, { seed = l }):cuda()
    w[l] = spk.randn({ 4 * hidden, input }, { seed = 10 + l }):cuda()
    c[l] = spk.cuda.zeros({ rows, 4 * hidden })
    flops = flops + 2 * 2 * rows * input * 4 * hidden -- two directions
  end
  local function forward(math_mode)
    return function(stream)
      for l = 1, #inputs do
        for _ = 1, 2 do
          spk.blas.gemm { a = a[l], b = w[l], c = c[l], transb = true, math = math_mode, stream = stream }
        end
      end
    end
  end
  local fp32 = spk.bench(forward("fp32"), { rounds = rounds, graph = true }).median_ms
  local tf32 = spk.bench(forward("tf32"), { rounds = rounds, graph = true }).median_ms
  print(("%6d %12.3f %12.3f %8.2f %10.1f"):format(batch, fp32, tf32, fp32 / tf32, flops / fp32 / 1e9))
end
