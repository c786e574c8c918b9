-- Loaded by busted before the specs (see .busted). The GPU gate (gpu_it,
-- nogpu_it) and the assertions (tensor_near, bits_equal, within_reference,
-- no_slower) are spk's own test helpers, lua/spk/busted.lua, the module
-- researchers' suites use through `spk test`; what follows is particular to
-- this repository's specs.
local spk = require "spk"
local luassert = require "luassert"
require "spk.busted"

-- Scratch files for a spec, in $TMPDIR (scripts/test.sh gives each run a
-- private one and reports whatever a spec leaves there): spec_tmpdir() makes
-- a fresh folder, spec_tmpfile() a fresh empty file; the spec removes them
-- (os.execute("rm -rf ...")) in its teardown. os.tmpname is spec_tmpfile
-- here: Lua's own makes its files in /tmp whatever TMPDIR says.
local function mktemp(args)
  local p = io.popen("mktemp " .. args)
  local path = p:read("l")
  p:close()
  assert(path and path ~= "", "mktemp failed")
  return path
end

function _G.spec_tmpdir() return mktemp("-d") end
function _G.spec_tmpfile() return mktemp("") end
os.tmpname = _G.spec_tmpfile

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

-- Files and the shell, for specs that write inputs or read outputs.
-- shell_quote(s): s as one word of a shell command.
function _G.shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- read_file(path): the whole file, or nil where it cannot be opened.
function _G.read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

-- remove_scratch(dir): what was left in the folder (`ls -A`), the folder removed.
function _G.remove_scratch(dir)
  local p = io.popen("ls -A " .. shell_quote(dir))
  local left = p:read("a")
  p:close()
  os.execute("rm -rf " .. shell_quote(dir))
  return left
end

function _G.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- The built program: $BUILD/spk (build/spk by default).
_G.SPK = (os.getenv("BUILD") or "build") .. "/spk"

-- The working folder, and a path made absolute against it.
local cwd
function _G.absolute(path)
  if path:sub(1, 1) == "/" then return path end
  if not cwd then
    local p = io.popen("pwd")
    cwd = p:read("l")
    p:close()
  end
  return cwd .. "/" .. path
end

-- run_spk(args, {stdin =, env =, cwd =}): runs the program with the argument
-- list `args`; opts.stdin is written to its standard input (empty otherwise);
-- opts.env sets variables (a value of false unsets one); opts.cwd is the
-- folder it runs in (default: this one). Returns stdout, stderr and the exit
-- status; a run killed by a signal fails the spec.
function _G.run_spk(args, opts)
  opts = opts or {}
  local input, out, err = os.tmpname(), os.tmpname(), os.tmpname()
  write_file(input, opts.stdin or "")
  local unset, set = {}, {}
  for name, value in pairs(opts.env or {}) do
    if value == false then
      unset[#unset + 1] = "-u " .. name
    else
      set[#set + 1] = name .. "=" .. shell_quote(value)
    end
  end
  table.sort(unset)
  table.sort(set)
  local words = { opts.cwd and ("cd " .. shell_quote(opts.cwd) .. " && env") or "env" }
  table.move(unset, 1, #unset, #words + 1, words)
  table.move(set, 1, #set, #words + 1, words)
  words[#words + 1] = shell_quote(opts.cwd and absolute(SPK) or SPK)
  for _, a in ipairs(args) do words[#words + 1] = shell_quote(a) end
  local command = table.concat(words, " ") .. " <" .. shell_quote(input) .. " >" .. shell_quote(out)
    .. " 2>" .. shell_quote(err)
  local _, how, code = os.execute(command)
  local stdout, stderr = read_file(out), read_file(err)
  os.remove(input); os.remove(out); os.remove(err)
  luassert.are.equal("exit", how, "spk was killed by a signal: " .. command .. "\n" .. tostring(stderr))
  return stdout, stderr, code
end

-- Tensors for the LSTM specs.
-- bit_compare(a, b): whether a and b hold the same values bit for bit (0 ulp
-- everywhere, NaN and Inf at the same places), and spk.compare's report.
function _G.bit_compare(a, b)
  local c = spk.compare(a, b)
  return c.max_ulp == 0 and c.nan_mismatch == 0 and c.inf_mismatch == 0, c
end

-- same_bits(a, b): bit_compare's verdict alone.
function _G.same_bits(a, b)
  return (bit_compare(a, b))
end

-- An f32 tensor of `shape` from a fixed LCG seeded with `seed`, uniform in
-- [-1, 1): the same values on every machine.
function _G.lcg_uniform(shape, seed)
  local x = spk.zeros(shape, "f32")
  local n = x:numel()
  local flat = x:view({ n })
  local state = seed
  for i = 1, n do
    state = (state * 1103515245 + 12345) % 2147483648
    flat:set(i, 2 * state / 2147483648 - 1)
  end
  return x
end

-- cudnn_oracle(layers, x) -> y_cudnn_f32, y_f64: PyTorch's cuDNN LSTM in FP32
-- and its f64 CPU forward (tools/torch_lstm.py, in a scratch folder removed
-- afterwards), or nil where python3 has no torch or no GPU.
function _G.cudnn_oracle(layers, x)
  local dir = spec_tmpdir()
  spk.lstm.save(dir, layers)
  spk.save(dir .. "/x.npy", x)
  local ycudnn, y64
  if os.execute(("python3 tools/torch_lstm.py %s >/dev/null 2>&1"):format(shell_quote(dir))) then
    local written = io.open(dir .. "/y_cudnn_f32.npy", "rb")
    if written then
      written:close()
      ycudnn, y64 = spk.load(dir .. "/y_cudnn_f32.npy"), spk.load(dir .. "/y_f64.npy")
    end
  end
  os.execute("rm -rf " .. shell_quote(dir))
  return ycudnn, y64
end

-- check_against_cudnn(y, y64, ycudnn, what): y within the kernels' bound
-- (spk.lstm.bound: 1.1x cuDNN FP32's rel_l2 and 2x its max abs) against the
-- f64 truth y64; without ycudnn (no torch), against the error cuDNN's FP32
-- reaches on such weights (4e-6, tests/fixtures/README.md) with 2x headroom.
-- `what` (optional) heads the failure message.
function _G.check_against_cudnn(y, y64, ycudnn, what)
  local ours = spk.compare(y, y64)
  local head = what and (what .. ": ") or ""
  local theirs = ycudnn and spk.compare(ycudnn, y64) or { rel_l2 = 2 * 4e-6 }
  local bound = spk.lstm.bound { against = { rel_l2 = theirs.rel_l2, max_abs = theirs.max_abs } }
  luassert.is_true(ours.rel_l2 <= bound.rel_l2,
    ("%srel_l2 %.3g, bound %s (worst %s)"):format(head, ours.rel_l2, tostring(bound), tostring(ours)))
  if bound.max_abs then
    luassert.is_true(ours.max_abs <= bound.max_abs,
      ("%smax_abs %.3g, bound %s (worst %s)"):format(head, ours.max_abs, tostring(bound), tostring(ours)))
  end
end

-- assert_provenance(text, where[, run]): the results file's text (JSON, CSV or
-- SVG, as spk writes them) carries the provenance record (spk.provenance),
-- with every field a result needs to be reproduced, this build's version and
-- commit, and run's fields where given. Returns the record.
function _G.assert_provenance(text, where, run)
  local provenance = require "spk.provenance"
  local record = provenance.read(text)
  luassert.is_table(record, where .. ": no provenance record")
  -- the fields, listed here independently of provenance.REQUIRED
  for _, path in ipairs { "spk.version", "spk.commit", "command", "date", "host", "device.name", "driver",
                          "runtime", "cudnn", "rng.seed", "run.seeds", "run.shape", "run.dtype", "run.math",
                          "run.backends", "run.variants" } do
    local v = record
    for part in path:gmatch("[^.]+") do v = type(v) == "table" and v[part] or nil end
    luassert.is_not_nil(v, where .. ": the provenance has no " .. path)
  end
  luassert.are.equal(spk.version.version, record.spk.version, where)
  luassert.are.equal(spk.version.commit, record.spk.commit, where)
  luassert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$", record.date, nil, where)
  luassert.are.equal(spk.cuda.available() and spk.cuda.device(0).name or "none", record.device.name, where)
  for key, value in pairs(run or {}) do luassert.are.same(value, record.run[key], where .. ": run." .. key) end
  return record
end
