-- The kernel file of lstm_skeleton.cu, the recurrence kernel to copy: what
-- spk needs to run it in the stack (docs/kernels.md, "The kernel's spec").
-- Copy both files, rename them, and change what EDIT marks; then
--
--   build/spk run experiments/custom_kernel.lua --kernel my_kernel.lua --quick
--   build/spk bench --kernel my_kernel.lua --backends cluster,cudnn --quick
--
-- check it against the f64 reference, for determinism, and time it beside the
-- built-in kernels and cuDNN, held to the bound spk bench holds every kernel
-- to (spk.lstm.bound).
return {
  name = "skeleton",                -- EDIT: its name in messages, plans and bench rows
  file = "lstm_skeleton.cu",        -- EDIT: the .cu file, relative to this one
  entry = "lstm_skeleton",          -- EDIT: its extern "C" __global__ function
  -- its parameters in order, by the contract's names (spk.lstm.kernel_contract()); EDIT with the kernel's
  args = { "gates", "r", "bias", "output", "batch", "steps", "direction", "trace", "trace_slot", "trace_slots" },
  -- where the gates sit in W, R, the bias and x·Wᵀ: any of the 24 orders, "units" (row u*4 + p) or
  -- "rows" (row p*H + u); the kernel reads SPK_GATE_* and SPK_PACK_ROWS, so any one works
  packing = { order = "ifco", layout = "units" },
  -- the launches a layer at the plan's shape {batch, steps, hidden, input, layers}: it takes `direction`,
  -- so one a direction, the reverse one beside the forward one on a side stream (concurrent)
  launch = function(shape)
    return { grid = { shape.batch, 1, 1 }, block = shape.hidden, concurrent = true } -- EDIT with the kernel
  end,
  -- the stages a step runs, as its timeline build stamps them (the kernel's STAGE_* marks, in this order),
  -- so plan:forward(x, {timeline = {...}}) records them (docs/timeline.md); no stage waits for another
  -- block (a kernel whose blocks exchange h: waits_for = {wait = "publish"}). EDIT with the kernel's
  timeline = { stages = { "dot", "cell" }, waits_for = {} },
}
