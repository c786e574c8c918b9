-- Loaded by busted before the specs (see .busted): shared assertions and the
-- GPU gate.
local spk = require "spk"

-- GPU specs: gpu_it(name, fn) runs fn where a CUDA device is present and is
-- reported as skipped (pending) elsewhere, so the count stays visible.
local function has_gpu()
  return spk.cuda ~= nil and spk.cuda.available ~= nil and spk.cuda.available()
end

-- busted's own it/pending (the helper does not run in the spec environment).
local busted = require "busted"

function _G.gpu_it(name, fn)
  if has_gpu() then
    busted.it(name, fn)
  else
    busted.pending(name .. " [GPU: no CUDA device]")
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

-- The Python used for NumPy cross-checks: $SPK_PYTHON, else /usr/bin/python3
-- (Debian's python3-numpy serves it; `make setup` installs it).
_G.PYTHON = os.getenv("SPK_PYTHON") or "/usr/bin/python3"

-- Whether that Python can import numpy (specs that need it report a visible
-- skip otherwise).
local numpy_ok
function _G.has_numpy()
  if numpy_ok == nil then
    numpy_ok = os.execute(PYTHON .. " -c 'import numpy' >/dev/null 2>&1") == true
  end
  return numpy_ok
end

-- The committed fixture cases: names of the folders under tests/fixtures
-- that hold an x.npy (see tests/fixtures/README.md), sorted.
function _G.fixture_cases(root)
  root = root or "tests/fixtures"
  local found = {}
  local p = io.popen("ls -1 '" .. root .. "' 2>/dev/null")
  if p then
    for name in p:lines() do
      local f = io.open(("%s/%s/x.npy"):format(root, name), "rb")
      if f then
        f:close()
        found[#found + 1] = name
      end
    end
    p:close()
  end
  table.sort(found)
  return found
end
