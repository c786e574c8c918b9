-- The kernel file of the tensor-core recurrence (kernels/lstm_tc.cu, FP16x3
-- products): its spec, with the per-batch defaults, comes from spk.tensor_core
-- (docs/kernels.md, "The tensor-core recurrence").
--   spk bench --kernel experiments/kernels/tensor_core.lua --backends cluster,cudnn --math fp32,3xtf32
require "spk" -- sets the path spk.tensor_core is found on
return require("spk.tensor_core").spec { split = "f16" }
