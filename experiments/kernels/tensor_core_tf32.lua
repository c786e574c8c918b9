-- The kernel file of the tensor-core recurrence with 3xTF32 products
-- (kernels/lstm_tc.cu, TC_SPLIT 1): spk.tensor_core's spec, split "tf32".
require "spk" -- sets the path spk.tensor_core is found on
return require("spk.tensor_core").spec { split = "tf32" }
