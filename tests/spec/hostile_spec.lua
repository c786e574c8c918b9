-- Hostile Lua: every function the spk module exports, and every method of
-- the objects it hands out, called with no arguments, with extra arguments
-- and with each argument replaced by a value of the wrong type (and closed
-- objects), must return or raise a Lua error; never crash the process.
--
-- The calls run in child processes (the spk program, one per group of
-- functions) so that a crash is seen as the child dying from a signal, or a
-- sanitizer report, instead of taking busted down. Each child runs in a
-- fresh temporary folder, so functions that write files (spk.save,
-- spk.lstm.save, t:save, the kernel cache) write there and nowhere else.
--
-- Not called: nothing is skipped for blocking or writing outside the folder.
-- spk.bench and spk.cuda.graph call the function they are given, which here
-- returns at once; spk.cuda.set_cache_dir / set_kernel_dir change only the
-- child's own state; every path argument is relative to the child's folder.
-- A value that hands a plausible but enormous size to an allocator
-- (spk.zeros{2^40}) is not in the hostile set: that is an out-of-memory test,
-- covered where the allocators are (tensor and cuda specs).
local spk = require "spk"

local BUILD = os.getenv("BUILD") or "build"

local function abspath(path)
  if path:sub(1, 1) == "/" then return path end
  local p = io.popen("pwd")
  local cwd = p:read("l")
  p:close()
  return cwd .. "/" .. path
end

local function write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

-- The child: builds sample objects, collects the functions of one group and
-- calls each with the hostile argument lists under pcall. It prints the name
-- of each function before its calls (so a crash names it) and a final
-- "hostile: <group>: N calls, M errors" line.
local CHILD = [==[
local spk = require "spk"
local group = ...
io.stdout:setvbuf("line")

local function closed_tensor()
  local t = spk.zeros { 2 }
  t:close()
  return t
end

local hostile = {
  { "nil", nil }, { "true", true }, { "1.5", 1.5 }, { "-1", -1 }, { "2^63", 2 ^ 63 },
  { "mininteger", math.mininteger }, { '"x"', "x" }, { "{}", {} },
  { "function", function() end }, { "closed tensor", closed_tensor() },
  { "coroutine", coroutine.create(function() end) },
}

-- Plausible arguments, so that each replaced position is reached with the
-- others valid.
local t23 = spk.arange(6):view { 2, 3 }
local layers = spk.lstm.random { layers = 1, input = 3, hidden = 2, seed = 1 }
local x = spk.rand({ 1, 2, 3 }, { seed = 2 })
local samples = {
  ["spk.tensor"] = { { 1, 2 } }, ["spk.zeros"] = { { 2, 2 } }, ["spk.ones"] = { { 2 } },
  ["spk.full"] = { { 2 }, 1.0 }, ["spk.arange"] = { 4 }, ["spk.rand"] = { { 2 }, { seed = 1 } },
  ["spk.randn"] = { { 2 }, { seed = 1 } }, ["spk.generator"] = { 1 },
  ["spk.load"] = { "t.npy" }, ["spk.save"] = { "t.npy", t23 },
  ["spk.load_safetensors"] = { "t.safetensors" }, ["spk.save_safetensors"] = { "t.safetensors", { a = t23 } },
  ["spk.compare"] = { t23, t23 }, ["spk.allclose"] = { t23, t23 }, ["spk.check_near"] = { t23, t23 },
  ["spk.lstm.random"] = { { layers = 1, input = 3, hidden = 2, seed = 1 } },
  ["spk.lstm.validate"] = { layers }, ["spk.lstm.reference"] = { layers, x },
  ["spk.lstm.save"] = { "w", layers }, ["spk.lstm.load"] = { "w" },
  ["spk.lstm.stack"] = { { layers = layers, batch = 1, steps = 2, backend = "cpu" } },
  ["spk.lstm.backends.cpu"] = { { layers = layers, batch = 1, steps = 2, backend = "cpu" } },
  ["spk.lstm.pack_directions"] = { layers[1].W }, ["spk.lstm.pack_bias"] = { layers[1].B },
  ["spk.lstm.unpack_directions"] = { layers[1].W }, ["spk.lstm.reorder_gates"] = { layers[1].W, 2, "iofc", "ifco" },
  ["spk.schedule.new"] = { { batch = 8, capacity = 16, groups = 2, heights = { 8 } } },
  ["spk.cuda.compile"] = { { source = "extern \"C\" __global__ void k() {}", arch = "sm_90", cache = false } },
  ["spk.cuda.zeros"] = { { 2 } }, ["spk.cuda.pack_args"] = { {} },
  ["spk.blas.gemm"] = { t23, t23:transpose(1, 2) },
  ["spk.timeline.selection"] = { {}, { step_range = { 1, 2 }, blocks = { 0, 1 } } },
  ["spk.timeline.decode"] = { spk.zeros({ 20 }, "u64"), { stages = { "a" } } },
  ["spk.timeline.demo"] = { { batch = 1, steps = 2, cluster = 2 } },
  ["spk.timeline.percentile"] = { { 1, 2, 3 }, 0.5 },
}
-- a recorded timeline for spk.timeline's analysis (one block, two steps, two stages)
local tl = { stamps = { { 0, 1, 0, 1, 2, 0, 2, 4 }, { 0, 2, 3, 4, 6, 6, 8, 12 } },
             columns = { "block", "step", "start", "a", "b", "start_cycles", "a_cycles", "b_cycles" },
             stages = { "a", "b" }, waits_for = { a = "b" } }
for _, name in ipairs { "records", "durations", "stats", "critical_path" } do
  samples["spk.timeline." .. name] = { tl }
end
samples["spk.timeline.make"] = { tl.stamps, tl.columns, {}, { stages = tl.stages }, {} }

local calls, errors = 0, 0
local function try(fn, args, n)
  calls = calls + 1
  local ok, err = pcall(fn, table.unpack(args, 1, n))
  if not ok then
    errors = errors + 1
    -- an error is a message (string or an object with __tostring), never a crash
    assert(type(tostring(err)) == "string")
  end
end

local function hammer(name, fn, base)
  io.write(name, "\n")
  base = base or samples[name] or { t23, t23 }
  local n = #base
  try(fn, {}, 0)                                      -- no arguments
  try(fn, base, n)                                    -- plausible ones
  local extra = { table.unpack(base, 1, n) }
  extra[n + 1], extra[n + 2], extra[n + 3] = "extra", 7, {}
  try(fn, extra, n + 3)                               -- extra arguments
  for i = 1, math.max(n, 3) do                        -- each position replaced
    for _, h in ipairs(hostile) do
      local args = { table.unpack(base, 1, n) }
      args[i] = h[2]
      try(fn, args, math.max(n, i))
    end
  end
end

-- Functions of a table, recursively, sorted by name.
local function functions_of(tbl, prefix, out, seen)
  out, seen = out or {}, seen or {}
  if seen[tbl] then return out end
  seen[tbl] = true
  local keys = {}
  for k in pairs(tbl) do if type(k) == "string" then keys[#keys + 1] = k end end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = tbl[k]
    if type(v) == "function" then
      out[#out + 1] = { prefix .. k, v }
    elseif type(v) == "table" then
      functions_of(v, prefix .. k .. ".", out, seen)
    end
  end
  return out
end

-- Methods reached through a userdata's metatable (__index a table, or a
-- function whose first upvalue is the methods table as in lua/spk's C types).
local function methods_of(object)
  local mt = getmetatable(object)
  local index = mt and mt.__index
  if type(index) == "function" then
    local _, methods = debug.getupvalue(index, 1)
    index = methods
  end
  local out = {}
  if type(index) == "table" then
    local keys = {}
    for k, v in pairs(index) do if type(v) == "function" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do out[#out + 1] = { k, index[k] } end
  end
  for _, meta in ipairs { "__add", "__sub", "__mul", "__div", "__unm", "__len", "__eq", "__tostring",
                          "__call", "__concat", "__lt", "__le" } do
    if mt and type(mt[meta]) == "function" then out[#out + 1] = { meta, mt[meta] } end
  end
  return out
end

local groups = {}

function groups.spk()
  for _, f in ipairs(functions_of(spk, "spk.")) do
    local top = f[1]:match("^spk%.([%w_]+)$")
    if top then hammer(f[1], f[2]) end
  end
end

for _, area in ipairs { "cuda", "blas", "lstm", "schedule", "debug", "cudnn", "core", "timeline" } do
  groups[area] = function()
    if type(spk[area]) ~= "table" then return end
    for _, f in ipairs(functions_of(spk[area], "spk." .. area .. ".")) do hammer(f[1], f[2]) end
  end
end

-- Methods of each kind of object, called on a live object with hostile
-- arguments, then on the wrong kind of self.
local function objects()
  local list = {
    { "tensor", function() return spk.arange(6):view { 2, 3 } end },
    { "generator", function() return spk.generator(3) end },
    { "comparison", function() return spk.compare(t23, t23) end },
    { "schedule", function() return spk.schedule.new { batch = 8, capacity = 16, groups = 2, heights = { 8 } } end },
    { "cpu plan", function() return spk.lstm.stack { layers = layers, batch = 1, steps = 2, backend = "cpu" } end },
    { "cuda module", function()
        return spk.cuda.compile { source = "extern \"C\" __global__ void k(float *p) {}", arch = "sm_90", cache = false }
      end },
    { "typed scalar", function() return spk.cuda.u32(3) end },
  }
  if spk.cuda.available() then
    list[#list + 1] = { "stream", function() return spk.cuda.stream() end }
    list[#list + 1] = { "event", function() return spk.cuda.event() end }
    list[#list + 1] = { "device tensor", function() return spk.cuda.zeros { 2, 3 } end }
    list[#list + 1] = { "persistent plan", function()
      return spk.lstm.stack { layers = layers, batch = 1, steps = 2, timeout_ms = 2000, backend = "persistent" } end }
    list[#list + 1] = { "cudnn plan", function()
      return spk.lstm.stack { layers = layers, batch = 1, steps = 2, backend = "cudnn" } end }
    if (spk.cuda.device(0).cc_major or 0) >= 9 then
      list[#list + 1] = { "timeline demo", function() return spk.timeline.demo { batch = 1, steps = 2, cluster = 2 } end }
    end
  end
  return list
end

function groups.methods()
  for _, kind in ipairs(objects()) do
    local ok, sample = pcall(kind[2])
    if ok and sample ~= nil then
      for _, m in ipairs(methods_of(sample)) do
        -- a fresh object per method: earlier calls may have closed it
        local okf, self = pcall(kind[2])
        if okf then
          if m[1] == "fill" or m[1] == "set" or m[1] == "forward" or m[1] == "get" then
            hammer(kind[1] .. ":" .. m[1], m[2], { self, 1, 1 })
          else
            hammer(kind[1] .. ":" .. m[1], m[2], { self, self })
          end
          hammer(kind[1] .. ":" .. m[1] .. " (wrong self)", m[2], { "x", self })
        end
      end
    else
      io.write("no sample of ", kind[1], ": ", tostring(sample), "\n")
    end
  end
end

-- Closed objects: every method but close/__close/is_closed/__tostring/__eq, called
-- with otherwise valid arguments, raises an error naming the object as
-- closed (never succeeds, never crashes).
local live_args = {
  ["tensor"] = { {}, { t23 }, { 1, 1 }, { 1 } },
  ["cpu plan"] = { { x }, { { rounds = 1, warmup = 0, x = x } } },
  ["persistent plan"] = { { x }, { { rounds = 1, warmup = 0, x = x } } },
  ["cudnn plan"] = { { x }, { { rounds = 1, warmup = 0, x = x } } },
  ["timeline demo"] = { { spk.zeros { 1, 2, 64 } }, { { rounds = 1, warmup = 0 } } },
}
function groups.closed()
  for _, kind in ipairs(objects()) do
    local ok, sample = pcall(kind[2])
    if ok and sample ~= nil and type(sample.close) == "function" then
      for _, m in ipairs(methods_of(sample)) do
        local name = m[1]
        if name ~= "close" and name ~= "__close" and name ~= "is_closed" and name ~= "__tostring"
          and name ~= "__eq" then
          local said_closed = false
          for _, args in ipairs(live_args[kind[1]] or { {}, { 1, 1 } }) do
            local self = kind[2]()
            self:close()
            local okc, err = pcall(m[2], self, table.unpack(args))
            calls = calls + 1
            if okc then
              io.write("NOT CLOSED: ", kind[1], ":", name, " succeeded on a closed object\n")
            else
              errors = errors + 1
              said_closed = said_closed or tostring(err):find("closed", 1, true) ~= nil
              if not tostring(err):find("closed", 1, true) then
                -- whatever the other arguments, a closed self is what is wrong
                io.write("NOT CLOSED FIRST: ", kind[1], ":", name, " said ", tostring(err), "\n")
              end
            end
          end
          if not said_closed then
            io.write("NOT CLOSED: ", kind[1], ":", name, " never said 'closed'\n")
          end
        end
      end
      local self = kind[2]()
      self:close()
      pcall(function() self:close() end) -- a second close is harmless (or an error, as for Lua's files)
      io.write("closed ", kind[1], " prints as ", tostring(self), "\n")
    end
  end
end

assert(groups[group], "no group " .. tostring(group))
groups[group]()
collectgarbage()
io.write(("hostile: %s: %d calls, %d errors\n"):format(group, calls, errors))
]==]

describe("hostile arguments", function()
  local dir, script, program
  setup(function()
    dir = spec_tmpdir()
    script = dir .. "/hostile_child.lua"
    write_file(script, CHILD)
    program = abspath(BUILD .. "/spk")
  end)
  teardown(function()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  -- Runs one group in a child in its own folder; returns its output and how
  -- it ended.
  local function run_group(group)
    local work = dir .. "/" .. group
    os.execute("mkdir -p '" .. work .. "'")
    local out = work .. ".out"
    local ok, how, code = os.execute(("cd '%s' && timeout 300 '%s' run '%s' %s >'%s' 2>&1")
      :format(work, program, script, group, out))
    return read_file(out), ok, how, code
  end

  for _, group in ipairs { "spk", "cuda", "blas", "lstm", "schedule", "debug", "cudnn", "timeline", "methods" } do
    it(("survives every call in group '%s' (Lua errors only, no crash)"):format(group), function()
      local output, ok, how, code = run_group(group)
      local last = output:match("([^\n]*)\n?$")
      assert(ok and how == "exit" and code == 0,
        ("child %s %s %s; last lines:\n%s"):format(tostring(ok), tostring(how), tostring(code), output:sub(-1500)))
      local calls, errors = output:match("hostile: " .. group .. ": (%d+) calls, (%d+) errors")
      assert.is_truthy(calls, output:sub(-1500))
      assert.is_truthy(last:find("hostile: " .. group, 1, true))
      if group ~= "debug" then
        -- every group has functions, and hostile calls mostly fail
        assert.is_true(tonumber(calls) > 0)
        assert.is_true(tonumber(errors) > 0)
      end
      -- sanitizer reports would be fatal in the ASan build; check anyway
      assert.is_falsy(output:find("ERROR: AddressSanitizer", 1, true))
      assert.is_falsy(output:find("runtime error:", 1, true))
    end)
  end

  it("gives 'closed' errors from every method of a closed object", function()
    local output, ok, how, code = run_group("closed")
    assert(ok and how == "exit" and code == 0, output:sub(-1500))
    assert.is_falsy(output:find("NOT CLOSED", 1, true), output) -- also "NOT CLOSED FIRST"
    assert.matches("closed tensor prints as tensor %(closed%)", output)
    assert.matches("closed cpu plan prints as lstm stack cpu %(closed%)", output)
    assert.matches("closed cuda module prints as spk%.cuda%.module %(closed%)", output)
    -- every closed object says so when printed (on a GPU: streams, events, device tensors, cudnn plans too)
    for kind, shown in output:gmatch("closed ([^\n]-) prints as ([^\n]*)") do
      assert(shown:find("(closed)", 1, true), ("closed %s prints as %s"):format(kind, shown))
    end
    local calls = tonumber(output:match("hostile: closed: (%d+) calls"))
    assert.is_true(calls >= 30)
  end)
end)

describe("closed objects in this process", function()
  it("a closed tensor refuses use as an argument anywhere", function()
    local t = spk.zeros { 2, 2 }
    t:close()
    assert.is_true(t:is_closed())
    for _, call in ipairs {
      function() return t + 1 end,
      function() return spk.compare(t, t) end,
      function() return spk.save("closed-tensor-never-written.npy", t) end,
      function() return spk.lstm.reference({ { W = t, R = t, B = t } }, t) end,
    } do
      local ok, err = pcall(call)
      assert.is_false(ok)
      assert.matches("closed", tostring(err))
    end
  end)

  -- A tensor a stream still reads stays alive until the stream passes it:
  -- tests/spec/cuda_spec.lua, "keeps a dropped tensor alive until its stream
  -- passes" (a GPU spec).
end)

describe("sizes at the edge", function()
  it("refuses shapes whose sizes overflow even when one size is 0", function()
    -- 2^62 * 2^62 overflows although the tensor would hold no element
    local ok, err = pcall(spk.zeros, { 0, 1 << 62, 1 << 62 })
    assert.is_false(ok)
    assert.matches("too large", tostring(err))
    ok, err = pcall(spk.zeros, { 1 << 62, 1 << 62, 0 })
    assert.is_false(ok)
    assert.matches("too large", tostring(err))
    -- an empty tensor of sane sizes is fine
    assert.are.equal(0, spk.zeros({ 0, 3, 4 }):numel())
  end)
end)

-- Faults of the GPU toolchain. The kernel cache's faults (truncated or
-- corrupted entry, unwritable folder, two processes compiling at once) are
-- in tests/spec/cuda_spec.lua and tests/c/test_nvrtc.c.
describe("faults surface as Lua errors and the session goes on", function()
  local cuda = spk.cuda
  local GOOD = 'extern "C" __global__ void k(float *p) { p[threadIdx.x] = 1.0f; }'
  local BAD = 'extern "C" __global__ void k(float *p) { p[threadIdx.x] = undefined_name; }'

  it("an NVRTC error carries the compiler log; compiling works again right after", function()
    for round = 1, 3 do
      local ok, err = pcall(cuda.compile, { source = BAD, arch = "sm_90", cache = false })
      assert.is_false(ok, "round " .. round)
      err = tostring(err)
      assert.matches("NVRTC_ERROR_COMPILATION", err)
      assert.matches('identifier "undefined_name" is undefined', err) -- the log, with the line
      local m = cuda.compile { source = GOOD, arch = "sm_90", cache = false }
      assert.is_truthy(m)
      m:close()
    end
    -- a bad option is refused before NVRTC runs, and the session still works
    assert.is_false((pcall(cuda.compile, { source = GOOD, arch = "sm_1" })))
    assert.are.same({ 2, 4 }, (spk.tensor { 1, 2 } * 2):tolist())
  end)

  it("a driver error (here: no CUDA device) is a Lua error naming the call; CPU work goes on", function()
    if cuda.available() then
      pending("needs a machine without a CUDA device (the GPU suite covers device errors)")
      return
    end
    for _ = 1, 2 do
      local ok, err = pcall(cuda.zeros, { 4 })
      assert.is_false(ok)
      assert.matches("no CUDA device %(cudaGetDeviceCount: .+%)", tostring(err))
      local layers = spk.lstm.random { layers = 1, input = 2, hidden = 128, seed = 1 }
      local ok2, err2 = pcall(spk.lstm.stack, { layers = layers, batch = 1, steps = 2, backend = "persistent" })
      assert.is_false(ok2)
      assert.matches("no CUDA device", tostring(err2))
      -- the CPU side is untouched
      local y = spk.lstm.reference(layers, spk.ones { 1, 2, 2 })
      assert.are.same({ 1, 2, 256 }, y:shape())
    end
  end)
end)
