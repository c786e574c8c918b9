-- Loaded by busted before the specs (see .busted): shared assertions and the
-- GPU gate.
local spk = require "spk"

-- GPU specs: gpu_it(name, fn) runs fn where a CUDA device is present and is
-- reported as skipped (pending) elsewhere, so the count stays visible.
local function has_gpu()
  return spk.cuda ~= nil and spk.cuda.available ~= nil and spk.cuda.available()
end

function _G.gpu_it(name, fn)
  if has_gpu() then
    it(name, fn)
  else
    pending(name .. " [GPU: no CUDA device]")
  end
end
