-- The GPU runtime from Lua: what needs no GPU (no-device errors, NVRTC, the
-- kernel cache, argument marshalling, gemm shape checks) runs everywhere;
-- gpu_it specs run on a CUDA machine and are reported as skipped elsewhere.
local spk = require "spk"
local cuda = spk.cuda

local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local SAXPY = [[
extern "C" __global__ void saxpy(unsigned n, float a, const float *x, float *y)
{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = SCALE * a * x[i] + y[i]; }
]]

local selftest = cuda.kernel_dir() .. "/selftest.cu"
local BUILD = os.getenv("BUILD") or "build"

describe("spk.cuda without a device", function()
  it("reports versions and availability in info()", function()
    local info = cuda.info()
    assert.is_true(info.runtime_version >= 13000)
    assert.matches("^%d+%.%d+$", info.nvrtc_version)
    assert.are.equal(cuda.available(), info.available)
    assert.are.equal("table", type(info.devices))
    if info.available then
      assert.is_nil(info.error)
      assert.is_true(#info.devices >= 1)
    else
      assert.are.equal(0, #info.devices)
    end
  end)

  nogpu_it("fails every GPU call with one clear message and keeps the session", function()
    local msg = cuda.info().error
    assert.matches("^spk%.cuda: no CUDA device %(cudaGetDeviceCount: .+%)$", msg)
    local t = spk.tensor { 1, 2, 3 }
    local calls = {
      function() return cuda.stream() end,
      function() return cuda.event() end,
      function() return cuda.default_stream() end,
      function() return cuda.device(0) end,
      function() return cuda.devices() end,
      function() return cuda.set_device(0) end,
      function() return cuda.synchronize() end,
      function() return cuda.zeros({ 4 }) end,
      function() return t:cuda() end,
      function() return t:to("cuda") end,
      function() return cuda.graph(function() end) end,
      function() return cuda.compile { source = SAXPY, defines = { SCALE = 1 } } end, -- no arch: the device's
      function() return spk.bench(function() end) end,
    }
    for i, call in ipairs(calls) do
      local err = error_of(call)
      assert.is_truthy(err:find(msg, 1, true), ("call %d: %s"):format(i, err))
    end
    -- Compiling for a named arch needs no device; loading does.
    local m = cuda.compile { source = SAXPY, defines = { SCALE = 1 }, arch = "sm_90", cache = false }
    assert.is_truthy(error_of(m.kernel, m, "saxpy"):find(msg, 1, true))
    -- The session still works.
    assert.are.same({ 2, 4, 6 }, (t * 2):tolist())
    assert.are.equal(t, t:cpu())
    assert.are.equal(t, t:to("cpu"))
  end)
end)

describe("spk.cuda.compile", function()
  local dir
  setup(function()
    dir = spec_tmpdir()
    cuda.set_cache_dir(dir .. "/cache")
  end)
  teardown(function()
    cuda.set_cache_dir(nil)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("gives PTX for compute_XX and a cubin for sm_XX", function()
    local ptx = cuda.compile { source = SAXPY, defines = { SCALE = "2.0f" }, arch = "compute_90" }
    assert.are.equal("ptx", ptx.format)
    assert.matches("%.target sm_90", ptx.ptx)
    assert.matches("%.entry saxpy", ptx.ptx)
    local code, size = ptx:code()
    assert.are.equal(#code, size)
    local cubin = cuda.compile { file = selftest, arch = "sm_90" }
    assert.are.equal("cubin", cubin.format)
    assert.is_nil(cubin.ptx)
    assert.are.equal("\127ELF", cubin:code():sub(1, 4))
    assert.are.equal("sm_90", cubin.arch)
    assert.matches("^%x+$", cubin.key)
    assert.are.equal(64, #cubin.key)
  end)

  it("compiles every kernel in kernels/ for sm_80 and sm_90", function()
    local p = assert(io.popen("ls '" .. cuda.kernel_dir() .. "'"))
    local n = 0
    for name in p:lines() do
      if name:match("%.cu$") then
        for _, arch in ipairs { "sm_80", "sm_90" } do
          local m = cuda.compile { file = cuda.kernel_dir() .. "/" .. name, arch = arch }
          assert.is_true(m.size > 0)
          n = n + 1
        end
      end
    end
    p:close()
    assert.is_true(n >= 4)
  end)

  it("raises NVRTC's log on a compile error", function()
    local err = error_of(cuda.compile, { source = "extern \"C\" __global__ void k() { nope = 1; }", arch = "sm_80" })
    assert.matches("identifier \"nope\" is undefined", err)
    assert.matches("NVRTC_ERROR_COMPILATION", err)
  end)

  it("checks its options", function()
    assert.matches("unknown option 'sauce'", error_of(cuda.compile, { sauce = SAXPY, arch = "sm_90" }))
    assert.matches("exactly one of", error_of(cuda.compile, { arch = "sm_90" }))
    assert.matches("exactly one of", error_of(cuda.compile, { source = SAXPY, file = selftest, arch = "sm_90" }))
    assert.matches("sm_XY", error_of(cuda.compile, { source = SAXPY, arch = "ampere" }))
  end)

  it("passes defines: numbers, strings, true (defined) and false (left out)", function()
    local src = [[
#if !defined(FLAG) || defined(OFF)
#error flags wrong
#endif
extern "C" __global__ void k(float *x) { x[0] = WIDTH * SCALE; }
]]
    local m = cuda.compile { source = src, arch = "compute_80",
                             defines = { WIDTH = 4, SCALE = "0.5f", FLAG = true, OFF = false } }
    assert.are.equal("ptx", m.format)
  end)
end)

describe("the kernel cache", function()
  local dir
  before_each(function()
    dir = spec_tmpdir()
    cuda.set_cache_dir(dir)
  end)
  after_each(function()
    cuda.set_cache_dir(nil)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("hits on the same inputs and misses on any change", function()
    local base = { source = SAXPY, defines = { SCALE = "1.0f" }, arch = "sm_90" }
    local first = cuda.compile(base)
    assert.is_false(first.cached)
    local again = cuda.compile(base)
    assert.is_true(again.cached)
    assert.are.equal(first:code(), again:code())
    local info = cuda.cache_info()
    assert.are.equal(dir, info.dir)
    assert.are.same({ 1, 1, 1 }, { info.hits, info.misses, info.entries })
    local variants = {
      { source = SAXPY, defines = { SCALE = "2.0f" }, arch = "sm_90" },
      { source = SAXPY, defines = { SCALE = "1.0f", EXTRA = 1 }, arch = "sm_90" },
      { source = SAXPY, defines = { SCALE = "1.0f" }, arch = "sm_80" },
      { source = SAXPY, defines = { SCALE = "1.0f" }, arch = "compute_90" },
      { source = SAXPY, defines = { SCALE = "1.0f" }, arch = "sm_90", options = { "-lineinfo" } },
      { source = SAXPY .. "\n", defines = { SCALE = "1.0f" }, arch = "sm_90" },
    }
    local keys = { [first.key] = true }
    for i, v in ipairs(variants) do
      local m = cuda.compile(v)
      assert.is_false(m.cached, "variant " .. i)
      assert.is_nil(keys[m.key], "variant " .. i)
      keys[m.key] = true
    end
    assert.are.equal(1 + #variants, cuda.cache_info().entries)
    cuda.cache_clear()
    assert.are.equal(0, cuda.cache_info().entries)
    assert.is_false(cuda.compile(base).cached)
  end)

  it("misses when an included file changes", function()
    write_file(dir .. "/part.cuh", "#define PART 1\n")
    write_file(dir .. "/main.cu", "#include \"part.cuh\"\nextern \"C\" __global__ void k(int *x) { x[0] = PART; }\n")
    local o = { file = dir .. "/main.cu", arch = "sm_90" }
    local a = cuda.compile(o)
    assert.is_true(cuda.compile(o).cached)
    write_file(dir .. "/part.cuh", "#define PART 2\n")
    local b = cuda.compile(o)
    assert.is_false(b.cached)
    assert.are_not.equal(a.key, b.key)
  end)

  it("recompiles and rewrites a corrupt or truncated entry", function()
    local o = { source = SAXPY, defines = { SCALE = "3.0f" }, arch = "sm_90" }
    local m = cuda.compile(o)
    local path = dir .. "/" .. m.key .. ".bin"
    local good = assert(read_file(path))
    write_file(path, good:sub(1, 56) .. "garbage" .. good:sub(64))
    local again = cuda.compile(o)
    assert.is_false(again.cached)
    assert.are.equal(m:code(), again:code())
    assert.are.equal(1, cuda.cache_info().rejected)
    assert.are.equal(good, read_file(path)) -- rewritten whole
    write_file(path, good:sub(1, 40))
    assert.is_false(cuda.compile(o).cached)
    assert.is_true(cuda.compile(o).cached)
  end)

  -- Runs a Lua snippet in a fresh spk process of this build (the program
  -- carries the module, so this works in the sanitizer build too).
  local function child(code, env)
    local script = dir .. "/child.lua"
    write_file(script, code)
    return ("env %s '%s/spk' run '%s'"):format(env or "", BUILD, script)
  end

  it("survives two processes compiling the same kernel at once", function()
    local code = [[
local spk = require "spk"
local m = spk.cuda.compile { source = 'extern "C" __global__ void k(float *x) { x[0] = 42.0f; }', arch = "sm_90" }
io.write(m.size > 0 and "ok" or "bad")
]]
    local cmd = child(code, "SPK_CACHE_DIR='" .. dir .. "/shared'")
    assert.is_true(os.execute(("(%s > '%s/a.out' 2>&1 & %s > '%s/b.out' 2>&1 & wait)"):format(cmd, dir, cmd, dir)))
    assert.are.equal("ok", read_file(dir .. "/a.out"))
    assert.are.equal("ok", read_file(dir .. "/b.out"))
    cuda.set_cache_dir(dir .. "/shared")
    local info = cuda.cache_info()
    assert.are.equal(1, info.entries)
    assert.is_true(cuda.compile { source = 'extern "C" __global__ void k(float *x) { x[0] = 42.0f; }',
                                  arch = "sm_90" }.cached)
  end)

  it("works without a writable folder and warns once", function()
    write_file(dir .. "/blocker", "a file, not a folder\n")
    local code = [[
local spk = require "spk"
for i = 1, 3 do
  spk.cuda.compile { source = 'extern "C" __global__ void k(float *x) { x[0] = ' .. i .. '; }', arch = "sm_90" }
end
io.write("compiled ", spk.cuda.cache_info().entries, tostring(spk.cuda.cache_info().writable))
]]
    local cmd = child(code, "SPK_CACHE_DIR='" .. dir .. "/blocker/cache'")
    local p = assert(io.popen(cmd .. " 2>&1"))
    local out = p:read("a")
    p:close()
    local _, warnings = out:gsub("spk: warning: kernel cache", "")
    assert.are.equal(1, warnings, out)
    assert.matches("compiled 0false", out)
  end)
end)

describe("kernel arguments", function()
  it("makes typed scalars and checks their ranges", function()
    assert.are.equal("u32", spk.u32(7).kind)
    assert.are.equal(7, spk.u32(7).value)
    assert.are.equal(8, spk.u64(1).size)
    assert.are.equal(4, spk.f32(1.5).size)
    assert.are.equal(1.5, spk.f32(1.5).value)
    assert.are.equal(-3, spk.i32(-3).value)
    assert.matches("out of range", error_of(spk.u32, -1))
    assert.matches("out of range", error_of(spk.u32, 2 ^ 32 // 1))
    assert.matches("out of range", error_of(spk.i32, 2 ^ 31 // 1))
    assert.matches("negative", error_of(spk.u64, -1))
  end)

  it("packs against the kernel's parameter sizes and names what is wrong", function()
    local packed = cuda.pack_args({ 4, 4, 8, 8 }, { spk.u32(1), spk.f32(2), spk.f64(3), spk.i64(4) }, "k")
    assert.are.same({ { kind = "u32", size = 4 }, { kind = "f32", size = 4 }, { kind = "f64", size = 8 },
      { kind = "i64", size = 8 } }, packed)
    assert.matches("kernel k takes 2 arguments, got 1", error_of(cuda.pack_args, { 4, 8 }, { spk.u32(1) }, "k"))
    assert.matches("argument 2 is f32 %(4 bytes%), parameter 2 is 8 bytes",
      error_of(cuda.pack_args, { 4, 8 }, { spk.u32(1), spk.f32(1) }, "k"))
    assert.matches("argument 1 is a plain number",
      error_of(cuda.pack_args, { 4 }, { 1 }, "k"))
    assert.matches("argument 1 is a host tensor",
      error_of(cuda.pack_args, { 8 }, { spk.zeros({ 2 }) }, "k"))
    assert.matches("argument 1 is a string", error_of(cuda.pack_args, { 8 }, { "x" }, "k"))
  end)
end)

describe("spk.blas.gemm checks", function()
  it("rejects mismatched shapes before touching the GPU", function()
    local z = spk.zeros
    assert.matches("op%(a%) is 2 x 3 and op%(b%) is 4 x 5: inner sizes differ",
      error_of(spk.blas.gemm, { a = z({ 2, 3 }), b = z({ 4, 5 }), c = z({ 2, 5 }) }))
    assert.matches("c is 3 x 5, op%(a%) op%(b%) is 2 x 5",
      error_of(spk.blas.gemm, { a = z({ 2, 3 }), b = z({ 3, 5 }), c = z({ 3, 5 }) }))
    assert.matches("op%(a%) is 3 x 2",
      error_of(spk.blas.gemm, { a = z({ 2, 3 }), b = z({ 3, 5 }), c = z({ 2, 5 }), transa = true }))
    assert.matches("a is f64", error_of(spk.blas.gemm, { a = z({ 2, 3 }, "f64"), b = z({ 3, 5 }), c = z({ 2, 5 }) }))
    assert.matches("b has 1 dimension", error_of(spk.blas.gemm, { a = z({ 2, 3 }), b = z({ 3 }), c = z({ 2, 5 }) }))
    assert.matches("gemm.math must be \"fp32\", \"tf32\", \"pedantic\" or \"3xtf32\", got \"fp16\"",
      error_of(spk.blas.gemm, { a = z({ 2, 3 }), b = z({ 3, 5 }), c = z({ 2, 5 }), math = "fp16" }))
    -- Shapes that fit: the remaining complaint is where the tensors live.
    assert.matches("a is a host tensor", error_of(spk.blas.gemm, { a = z({ 2, 3 }), b = z({ 3, 5 }), c = z({ 2, 5 }) }))
    assert.matches("a is a host tensor", error_of(spk.blas.gemm_check,
      { a = z({ 3, 5 }), b = z({ 3, 2 }), c = z({ 5, 2 }), transa = true }))
  end)

  it("takes a 3-D c as a batch, with a and b batches of as many or one shared matrix", function()
    local z = spk.zeros
    assert.matches("b is a batch of matrices but c is one matrix; give c as %[2, 4, 5%]",
      error_of(spk.blas.gemm, { a = z({ 4, 3 }), b = z({ 2, 3, 5 }), c = z({ 4, 5 }) }))
    assert.matches("c holds 3 matrices but a holds 2",
      error_of(spk.blas.gemm, { a = z({ 2, 4, 3 }), b = z({ 3, 5 }), c = z({ 3, 4, 5 }) }))
    assert.matches("c is 4 x 6, op%(a%) op%(b%) is 4 x 5",
      error_of(spk.blas.gemm, { a = z({ 4, 3 }), b = z({ 2, 5, 3 }), c = z({ 2, 4, 6 }), transb = true }))
    assert.matches("a has 4 dimensions, gemm needs 2 %(a matrix%) or 3",
      error_of(spk.blas.gemm, { a = z({ 1, 2, 4, 3 }), b = z({ 3, 5 }), c = z({ 2, 4, 5 }) }))
    assert.matches("a is a host tensor",
      error_of(spk.blas.gemm, { a = z({ 4, 3 }), b = z({ 2, 5, 3 }), c = z({ 2, 4, 5 }), transb = true }))
  end)
end)

-- ---- on a GPU -----------------------------------------------------------

describe("spk.cuda on a GPU", function()
  local mod
  local function selftest_module()
    mod = mod or cuda.compile { file = selftest }
    return mod
  end

  gpu_it("describes the device", function()
    local d = cuda.device()
    assert.is_true(d.sms > 0 and d.threads_per_block >= 1024 and d.smem_per_block_optin >= d.smem_per_block)
    assert.are.equal(#cuda.devices(), #cuda.info().devices)
    if d.name:find("H200") then
      assert.are.equal(132, d.sms)
      assert.are.equal("9.0", d.cc)
      assert.is_true(d.cooperative and d.cluster)
    end
  end)

  gpu_it("round-trips copies, views included, and refuses host operations on device tensors", function()
    local x = spk.randn({ 3, 5 }, { seed = 7 })
    local s = cuda.stream()
    local d = x:cuda(s)
    assert.are.equal("cuda:" .. cuda.current_device(), d.device)
    assert.are.equal("cpu", x.device)
    assert.are.equal("cpu", d:cpu().device)
    assert.are.same(x:tolist(), d:cpu(s):tolist())
    assert.are.same(x:tolist(), x:to("cuda"):to("cpu"):tolist())
    assert.are.same(x:transpose(1, 2):tolist(), d:transpose(1, 2):cpu():tolist())
    assert.are.same(x:transpose(1, 2):tolist(), x:transpose(1, 2):cuda():cpu():tolist())
    local i = spk.tensor({ 1, -2, 2147483647 }, "i32")
    assert.are.same(i:tolist(), i:cuda():cpu():tolist())
    assert.has_error(function() return d:get(1, 1) end)
    assert.has_error(function() return d + d end)
  end)

  gpu_it("runs a runtime-compiled saxpy with the right values", function()
    local k = selftest_module():kernel("saxpy")
    local n = 1000
    local x, y = spk.randn({ n }, { seed = 1 }), spk.randn({ n }, { seed = 2 })
    local dx, dy = x:cuda(), y:cuda()
    k:launch { grid = (n + 255) // 256, block = 256, args = { spk.u32(n), spk.f32(2.5), dx, dy } }
    local got = dy:cpu()
    for j = 1, n, 37 do
      local want = string.unpack("<f", string.pack("<f", 2.5 * x:get(j) + y:get(j)))
      assert.is_true(math.abs(got:get(j) - want) <= 1e-6 * math.max(1, math.abs(want)))
    end
    -- A define changes the code (and the result).
    local k2 = cuda.compile { file = selftest, defines = { SELFTEST_SCALE = "2.0f" } }:kernel("saxpy")
    local dz = y:cuda()
    k2:launch { grid = 4, block = 256, args = { spk.u32(n), spk.f32(2.5), dx, dz } }
    assert.is_true(math.abs(dz:cpu():get(5) - 2 * (2.5 * x:get(5) + y:get(5))) < 1e-4)
  end)

  gpu_it("checks arguments against the kernel before launching", function()
    local k = selftest_module():kernel("saxpy")
    assert.are.same({ 4, 4, 8, 8 }, k:params())
    local d = cuda.zeros({ 4 })
    assert.matches("takes 4 arguments, got 3", error_of(k.launch, k, { grid = 1, block = 1,
      args = { spk.u32(4), spk.f32(1), d } }))
    assert.matches("argument 1 is u64 %(8 bytes%), parameter 1 is 4 bytes", error_of(k.launch, k,
      { grid = 1, block = 1, args = { spk.u64(4), spk.f32(1), d, d } }))
    assert.matches("argument 3 is a host tensor", error_of(k.launch, k,
      { grid = 1, block = 1, args = { spk.u32(4), spk.f32(1), spk.zeros({ 4 }), d } }))
    assert.matches("no kernel named \"nothing\"", error_of(selftest_module().kernel, selftest_module(), "nothing"))
  end)

  gpu_it("reports attributes, occupancy and cooperative capacity", function()
    local k = selftest_module():kernel("grid_sync_sum")
    local a = k:attributes()
    local d = cuda.device()
    assert.is_true(a.registers > 0 and a.registers <= 255)
    assert.is_true(a.max_threads > 0 and a.max_threads <= 1024)
    assert.are.equal(d.cc_major * 10 + d.cc_minor, a.binary_version)
    local per_sm = k:occupancy { block = 256 }
    assert.is_true(per_sm >= 1 and per_sm * 256 <= d.threads_per_sm)
    assert.are.equal(per_sm * d.sms, k:cooperative_capacity { block = 256 })
    -- More dynamic shared memory per block can only lower occupancy.
    assert.is_true(k:occupancy { block = 256, smem = 100 * 1024 } <= per_sm)
  end)

  gpu_it("runs a cooperative launch whose grid-wide barrier holds", function()
    local k = selftest_module():kernel("grid_sync_sum")
    local blocks = k:cooperative_capacity { block = 128 }
    local partial, out = cuda.zeros({ blocks }, "i32"), cuda.zeros({ 2 }, "i32")
    k:launch { grid = blocks, block = 128, cooperative = true, args = { partial, out } }
    local r = out:cpu()
    assert.are.equal(blocks * (blocks - 1) // 2, r:get(1))
    assert.are.equal(blocks, r:get(2))
  end)

  gpu_it("runs a cluster launch with cluster.sync() and distributed shared memory", function()
    if not cuda.device().cluster then
      pending("device has no cluster launch")
      return
    end
    local k = selftest_module():kernel("cluster_ring")
    local out = cuda.zeros({ 8 * 3 }, "i32")
    k:launch { grid = 8, block = 64, cluster = { 2, 1, 1 }, args = { out } }
    local r = out:cpu()
    for b = 0, 7 do
      local rank, size, neighbour = r:get(3 * b + 1), r:get(3 * b + 2), r:get(3 * b + 3)
      assert.are.equal(b % 2, rank)
      assert.are.equal(2, size)
      assert.are.equal((rank + 1) % 2, neighbour)
    end
  end)

  gpu_it("orders streams with events and times with them", function()
    local k = selftest_module():kernel("delayed_copy")
    local s1, s2 = cuda.stream(), cuda.stream()
    local n = 4096
    local x = spk.randn({ n }, { seed = 3 })
    local dx, dy = x:cuda(s1), cuda.zeros({ n }, "f32", s1)
    local start, e = cuda.event(), cuda.event()
    start:record(s1)
    k:launch { grid = 8, block = 256, stream = s1, args = { spk.u32(n), dx, dy, spk.u64(200000000) } }
    e:record(s1)
    s2:wait(e)
    assert.are.same(x:tolist(), dy:cpu(s2):tolist()) -- s2 waited for the copy kernel
    e:synchronize()
    assert.is_true(start:elapsed(e) > 1, "a 2e8-cycle spin takes more than 1 ms")
  end)

  gpu_it("captures a graph and replays it", function()
    local k = selftest_module():kernel("saxpy")
    local n = 512
    local x, y = spk.randn({ n }, { seed = 4 }), spk.randn({ n }, { seed = 5 })
    local s = cuda.stream()
    local dx, dy = x:cuda(s), y:cuda(s)
    s:synchronize()
    local g = cuda.graph(function(st)
      k:launch { grid = 2, block = 256, stream = st, args = { spk.u32(n), spk.f32(1), dx, dy } }
    end, s)
    assert.are.equal(1, g:nodes())
    assert.are.same(y:tolist(), dy:cpu(s):tolist()) -- capturing ran nothing
    for _ = 1, 3 do g:replay(s) end
    local got = dy:cpu(s)
    for j = 1, n, 17 do
      assert.is_true(math.abs(got:get(j) - (y:get(j) + 3 * x:get(j))) < 1e-4)
    end
    assert.has_error(function() cuda.graph(function() error("inside") end, s) end)
    g:replay(s) -- the stream still works after a failed capture
    s:synchronize()
  end)

  -- a · b (or a · bᵀ) of host tensors, in f64
  local function f64_product(a, b, transb)
    local m, k = a:shape()[1], a:shape()[2]
    local n = transb and b:shape()[1] or b:shape()[2]
    local out = spk.zeros({ m, n }, "f64")
    for i = 1, m do
      for j = 1, n do
        local acc = 0
        for p = 1, k do acc = acc + a:get(i, p) * (transb and b:get(j, p) or b:get(p, j)) end
        out:set(i, j, acc)
      end
    end
    return out
  end

  gpu_it("multiplies with cuBLAS like the CPU, FP32 by default", function()
    local m, n, k = 33, 17, 65
    local a, b = spk.randn({ m, k }, { seed = 11 }), spk.randn({ k, n }, { seed = 12 })
    local want = f64_product(a, b)
    local c = cuda.zeros({ m, n })
    spk.blas.gemm { a = a:cuda(), b = b:cuda(), c = c }
    assert.tensor_near(c:cpu():to("f64"), want, { rel_l2 = 1e-6 })
    -- transposed operands, as flags and as transposed views
    local at, bt = a:transpose(1, 2):contiguous(), b:transpose(1, 2):contiguous()
    local c2 = cuda.zeros({ m, n })
    spk.blas.gemm { a = at:cuda(), b = bt:cuda(), c = c2, transa = true, transb = true }
    assert.tensor_near(c2:cpu():to("f64"), want, { rel_l2 = 1e-6 })
    local c3 = cuda.zeros({ m, n })
    spk.blas.gemm { a = at:cuda():transpose(1, 2), b = b:cuda(), c = c3 }
    assert.tensor_near(c3:cpu():to("f64"), want, { rel_l2 = 1e-6 })
    -- alpha, beta and TF32 (looser: 10-bit mantissas)
    spk.blas.gemm { a = a:cuda(), b = b:cuda(), c = c, alpha = 2, beta = -1 }
    assert.tensor_near(c:cpu():to("f64"), want, { rel_l2 = 1e-6 })
    local c4 = cuda.zeros({ m, n })
    spk.blas.gemm { a = a:cuda(), b = b:cuda(), c = c4, math = "tf32" }
    assert.tensor_near(c4:cpu():to("f64"), want, { rel_l2 = 1e-2 })
  end)

  gpu_it("multiplies a batch in one call, a shared operand included, as matrix by matrix", function()
    local count, m, n, k = 2, 37, 19, 61
    local a = spk.randn({ m, k }, { seed = 21 })
    local b = spk.randn({ count, n, k }, { seed = 22 })
    local c = cuda.zeros({ count, m, n })
    spk.blas.gemm { a = a:cuda(), b = b:cuda(), c = c, transb = true }
    assert.are.equal(count, select(4, spk.blas.gemm_check { a = a:cuda(), b = b:cuda(), c = c, transb = true }))
    local got = c:cpu():to("f64")
    for i = 1, count do
      local bi = b:select(1, i)
      assert.tensor_near(got:select(1, i), f64_product(a, bi, true), { rel_l2 = 1e-6 })
      -- the same matrix alone, through cublasGemmEx
      local one = cuda.zeros({ m, n })
      spk.blas.gemm { a = a:cuda(), b = bi:contiguous():cuda(), c = one, transb = true }
      assert.tensor_near(got:select(1, i), one:cpu():to("f64"), { rel_l2 = 1e-6 })
    end
    -- a batch of a against one b, with beta accumulating into c
    local a3 = spk.randn({ count, m, k }, { seed = 23 })
    local b2 = spk.randn({ k, n }, { seed = 24 })
    local c3 = cuda.zeros({ count, m, n })
    spk.blas.gemm { a = a3:cuda(), b = b2:cuda(), c = c3 }
    spk.blas.gemm { a = a3:cuda(), b = b2:cuda(), c = c3, beta = 1 }
    local got3 = c3:cpu():to("f64")
    for i = 1, count do
      local one = cuda.zeros({ m, n })
      spk.blas.gemm { a = a3:select(1, i):contiguous():cuda(), b = b2:cuda(), c = one, alpha = 2 }
      assert.tensor_near(got3:select(1, i), one:cpu():to("f64"), { rel_l2 = 1e-6 })
    end
  end)

  gpu_it("keeps a dropped tensor alive until its stream passes", function()
    local k = selftest_module():kernel("delayed_copy")
    local fill = selftest_module():kernel("fill")
    -- Collect earlier specs' garbage first: unloading a module (cudaLibraryUnload)
    -- waits for the whole device, which would finish the stream below.
    collectgarbage()
    collectgarbage()
    local s, other = cuda.stream(), cuda.stream()
    local n = 1 << 20
    local dx = spk.full({ n }, 7):cuda(s)
    local dy = cuda.zeros({ n }, "f32", s)
    k:launch { grid = 64, block = 256, stream = s, args = { spk.u32(n), dx, dy, spk.u64(500000000) } }
    dx = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    assert.is_false(s:query(), "dropping the tensor must not wait for the stream")
    -- New allocations elsewhere must not get the memory the kernel still reads.
    for _ = 1, 4 do
      local z = cuda.zeros({ n }, "f32", other)
      fill:launch { grid = 64, block = 256, stream = other, args = { spk.u32(n), spk.f32(99), z } }
    end
    s:synchronize()
    local y = dy:cpu(s)
    assert.are.equal(n * 7, y:sum())
  end)

  gpu_it("raises out-of-memory with the size and keeps working", function()
    local err = error_of(cuda.zeros, { 1 << 40 })
    assert.matches("out of device memory allocating 4398046511104 bytes", err)
    local ok = cuda.zeros({ 16 })
    assert.are.equal(0, ok:cpu():sum())
  end)

  gpu_it("closes streams, events and modules idempotently", function()
    local s = cuda.stream()
    s:close()
    s:close()
    assert.matches("stream is closed", error_of(s.synchronize, s))
    do
      local e <close> = cuda.event()
      e:record()
    end
  end)
end)
