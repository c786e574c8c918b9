-- The kernel file of the tensor-core recurrence with the wgmma form of its FP16x3
-- products (kernels/lstm_tc.cu, TC_MMA 2: a warpgroup's products in one
-- instruction, R from registers, h from shared memory; sm_90a): spk.tensor_core's
-- spec, mma "wgmma", the per-batch shapes of the default.
--   spk bench --kernel experiments/kernels/tensor_core_wgmma.lua --backends cluster,cudnn --math fp32,3xtf32
require "spk" -- sets the path spk.tensor_core is found on
return require("spk.tensor_core").spec { mma = "wgmma" }
