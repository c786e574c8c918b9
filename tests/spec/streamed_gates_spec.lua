-- Streamed gates (kernel.streamed_gates 1 of the cluster backend): a layer's
-- input projections computed inside the layer's own launch, by its clusters
-- after the tiles' (kernels/lstm_project_stages.cuh), while the tiles' wait
-- on each step's ready counts. The option's
-- rules without a device; on a GPU (gpu_it: skipped without one) the output
-- against the f64 reference and cuDNN FP32 (PyTorch, where it is found) at
-- odd batches, steps and sizes, within the GEMM plan's error and close to its
-- output, the bits repeating across forwards and CUDA-graph replays, and the
-- plan's refusals of what the projection cannot do.
local spk = require "spk"

local function cluster(opts)
  opts.backend = "cluster"
  return spk.lstm.stack(opts)
end

describe("streamed gates", function()
  local layers = spk.lstm.random { layers = 2, input = 60, hidden = 128, seed = 31 }

  it("are an option of the cluster kernels with its rules", function()
    local function refuses(kernel, pattern)
      local ok, err = pcall(cluster, { layers = layers, batch = 2, steps = 3, kernel = kernel })
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    refuses({ streamed_gates = 2 }, "kernel.streamed_gates must be 0 .. 1")
    refuses({ streamed_gates = 1, push = "scalar", gate_block = 1, gates_ahead = 2, early_gates = 0,
              cell = "reference", mapped_pushes = 0 }, 'kernel.gates_ahead 2 .. 4 needs kernel.push "direct" or "warp"')
    refuses({ streamed_gates = 1, push = "scalar", gate_block = 1, gates_ahead = 1, early_gates = 0,
              cell = "reference", mapped_pushes = 0 }, 'kernel.streamed_gates 1 needs kernel.push "direct" or "warp"')
    refuses({ streamed_gates = 1, gates_ahead = 1 }, "kernel.streamed_gates 1 needs kernel.gates_ahead 2 .. 4")
    local v = spk.lstm.cluster_variant({ streamed_gates = 1 }, 1)
    assert.are.equal("1", v.defines.STREAMED_GATES)
    assert.are.equal("0", spk.lstm.cluster_variant({}, 1).defines.STREAMED_GATES)
  end)

  -- {batch, steps, layers, input, hidden}: batch 1 (16 steps a stage), odd batches (a stage's rows not a
  -- power of two), batch 16 and 40 (a step a stage), one and two steps (a stage past the end), hidden 64
  local cases = {
    { 1, 589, 4, 60, 128 }, { 3, 37, 2, 60, 128 }, { 8, 100, 2, 60, 128 }, { 16, 19, 2, 60, 128 },
    { 40, 23, 2, 60, 128 }, { 5, 1, 2, 60, 128 }, { 5, 2, 2, 60, 128 }, { 7, 33, 3, 12, 64 },
  }
  for _, case in ipairs(cases) do
    local batch, steps, count, input, hidden = table.unpack(case)
    gpu_it(("within FP32's bound and the GEMM plan's output: batch %d, %d steps, %d layers, input %d, hidden %d")
      :format(batch, steps, count, input, hidden), function()
      local ls = spk.lstm.random { layers = count, input = input, hidden = hidden, seed = 40 + batch }
      local x = lcg_uniform({ batch, steps, input }, batch + steps)
      local y64 = spk.lstm.reference(ls, x, { precision = "f64" })
      local gemm = cluster { layers = ls, batch = batch, steps = steps }
      local streamed = cluster { layers = ls, batch = batch, steps = steps, kernel = { streamed_gates = 1 } }
      assert.matches("streamed gates", streamed.variant)
      local yg, ys = gemm:forward(x), streamed:forward(x)
      local ycudnn = cudnn_oracle(ls, x)
      check_against_cudnn(ys, y64, ycudnn, streamed.variant)
      local ours, theirs = spk.compare(ys, y64), spk.compare(yg, y64)
      assert.is_true(ours.rel_l2 <= 1.5 * theirs.rel_l2 + 1e-9,
        ("rel_l2 %.3g against the GEMM plan's %.3g"):format(ours.rel_l2, theirs.rel_l2))
      local near = spk.compare(ys, yg)
      assert.is_true(near.rel_l2 < 1e-6, ("against the GEMM plan: %s"):format(tostring(near)))
      -- the bits repeat: a second forward, and after CUDA-graph replays
      assert.is_true(same_bits(streamed:forward(x), ys))
      streamed:time { rounds = 2, warmup = 1 }
      assert.is_true(same_bits(streamed:forward(x), ys))
      streamed:close()
      gemm:close()
    end)
  end

  gpu_it("refuse what the projection cannot do, naming it", function()
    local function refuses(opts, pattern)
      local ok, err = pcall(cluster, opts)
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    refuses({ layers = layers, batch = 2, steps = 3, math = "3xtf32", kernel = { streamed_gates = 1 } },
      'the recurrence\'s own blocks compute the projections in FP32, so math must be "fp32", got "3xtf32"')
    local odd = spk.lstm.random { layers = 2, input = 6, hidden = 128, seed = 3 }
    refuses({ layers = odd, batch = 2, steps = 3, kernel = { streamed_gates = 1 } },
      "the first layer's input size 6 must be a multiple of 4 and at most 2 %* hidden")
  end)
end)
