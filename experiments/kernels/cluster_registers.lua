-- The kernel file of lstm_cluster_registers.cu: the tutorial's second kernel
-- (docs/kernels.md), R in registers across a cluster of 8 blocks per batch row
-- and direction. Compute capability 9.0.
return {
  name = "cluster_registers",
  file = "lstm_cluster_registers.cu",
  entry = "lstm_cluster_registers",
  defines = { CLUSTER = 8 },
  -- no `direction`: one launch runs both (blockIdx.z), with both directions' pointers
  args = { "gates", "r", "bias", "output", "batch", "steps", "trace", "trace_slot", "trace_slots", "trace_direction" },
  packing = { order = "ifco", layout = "units" },
  launch = function(shape)
    return { grid = { 8, shape.batch, 2 }, cluster = { 8, 1, 1 }, block = 4 * (shape.hidden // 8) * 4 }
  end,
}
