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

-- assert.tensor_near(expected, actual, {rel_l2 = ..., max_abs = ...}): actual
-- matches the truth `expected` within the given bounds (see spk.check_near).
-- The failure message shows the measured rel_l2 and max_abs, the bounds, the
-- worst index and both values there.
local luassert = require "luassert"
local say = require "say"

local function tensor_near(_, arguments)
  local ok, report = spk.check_near(arguments[1], arguments[2], arguments[3])
  -- the message shows the report instead of the raw arguments
  arguments[1], arguments.n, arguments.nofmt = report, 1, { true }
  return ok
end

say:set("assertion.tensor_near.positive", "Expected tensors to be near:\n%s")
say:set("assertion.tensor_near.negative", "Expected tensors not to be near:\n%s")
luassert:register("assertion", "tensor_near", tensor_near,
  "assertion.tensor_near.positive", "assertion.tensor_near.negative")

-- Scratch files for a spec: spec_tmpdir() makes a fresh folder; the spec
-- removes it (os.execute("rm -rf ...")) in its teardown.
function _G.spec_tmpdir()
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute("mkdir -p '" .. path .. "'"))
  return path
end

-- Whether /usr/bin/python3 can import numpy (for cross-checks; specs that need
-- it report a visible skip otherwise).
local numpy_ok
function _G.has_numpy()
  if numpy_ok == nil then
    numpy_ok = os.execute("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == true
  end
  return numpy_ok
end
