-- The kernel file of lstm_row_block.cu (spk.lstm.kernel_file reads it): what
-- spk needs to put the kernel in a stack. Copy it beside your own kernel.
--   spk.lstm.kernel_stack(spk.lstm.kernel_file("experiments/kernels/row_block.lua") + {layers =, ...})
--   spk bench --kernel experiments/kernels/row_block.lua --backends cluster,cudnn
return {
  name = "row_block",
  file = "lstm_row_block.cu", -- beside this file
  entry = "lstm_row_block",
  -- its parameters in order, by the contract's names (docs/kernels.md)
  args = { "gates", "r", "bias", "output", "batch", "steps", "direction", "trace", "trace_slot", "trace_slots" },
  packing = { order = "ifco", layout = "units" },
  -- one block per batch row and direction, 4H threads; it takes `direction`,
  -- so the plan launches it once a direction, here both at once
  launch = function(shape)
    return { grid = { shape.batch, 1, 1 }, block = 4 * shape.hidden, concurrent = true }
  end,
}
