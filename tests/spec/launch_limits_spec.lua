-- Launch limits known without a device (src/cuda/launch_limits.h): what each kernel of a cubin uses
-- (spk.cuda.cubin_entries), a launch checked against its architecture (spk.cuda.check_launch), and
-- spk.lstm.kernel_check refusing at check time what the driver would refuse only at launch.
--
-- Oracles: ptxas's own report (-v) for what a cubin's kernels use; on a GPU, the driver: a launch at
-- each limit the check accepts runs, one past it is refused by the launch as by the check.
local spk = require "spk"

local SOURCE = [[
extern "C" __global__ void stack_and_shared(float *p, int n) {
  __shared__ float s[300];
  float a[64];
  for (int i = 0; i < 64; i++) a[i] = p[(threadIdx.x * 7 + i) % n];
  s[threadIdx.x % 300] = a[n % 64];
  __syncthreads();
  p[threadIdx.x] = s[(threadIdx.x + 1) % 300] + a[(n * 3) % 64];
}
extern "C" __global__ void __launch_bounds__(256) bounded(float *p) { p[threadIdx.x] = 1; }
extern "C" __global__ void __cluster_dims__(2, 1, 1) clustered(float *p) { p[blockIdx.x] = 2; }
extern "C" __global__ void heavy(float *p) {
  float a[96];
#pragma unroll
  for (int i = 0; i < 96; i++) a[i] = p[i * blockDim.x + threadIdx.x];
  float s = 0;
#pragma unroll
  for (int i = 0; i < 96; i++) s += a[i] * a[(i * 7 + 3) % 96] + a[(i * 5 + 1) % 96];
  p[threadIdx.x] = s;
}
extern "C" __global__ void dynamic(float *p) {
  extern __shared__ float d[];
  d[threadIdx.x] = p[threadIdx.x];
  __syncthreads();
  p[threadIdx.x] = d[(threadIdx.x + 1) % blockDim.x];
}
]]

-- {name = {registers =, stack =, smem =}} from ptxas -v's report in a compile log.
local function ptxas_report(log)
  local out, current = {}, nil
  for line in log:gmatch("[^\n]+") do
    local entry = line:match("Compiling entry function '([^']+)'")
    if entry then
      current = { registers = 0, stack = 0, smem = 0 }
      out[entry] = current
    elseif current then
      current.stack = tonumber(line:match("(%d+) bytes stack frame")) or current.stack
      current.registers = tonumber(line:match("Used (%d+) registers")) or current.registers
      current.smem = tonumber(line:match("(%d+) bytes smem")) or current.smem
    end
  end
  return out
end

local function by_name(entries)
  local t = {}
  for _, e in ipairs(entries) do t[e.name] = e end
  return t
end

local function refusal(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "accepted")
  return tostring(err)
end

describe("what a cubin's kernels use", function()
  local function compiled(opts)
    opts.arch, opts.options, opts.cache = "sm_90", { "--ptxas-options=-v" }, false
    local m = spk.cuda.compile(opts)
    local code, log = (m:code()), m.log
    m:close()
    return code, log
  end

  it("is what ptxas reports for each of them: registers, stack frame (spills included), shared memory", function()
    local sources = { { source = SOURCE } }
    for _, file in ipairs { "experiments/kernels/row_block.lua", "experiments/kernels/cluster_registers.lua" } do
      local spec = spk.lstm.kernel_file(file)
      local report = spk.lstm.kernel_check(spec)
      sources[#sources + 1] = { file = spec.dir .. "/" .. spec.file, defines = report.defines }
    end
    local compared = 0
    for _, opts in ipairs(sources) do
      local code, log = compiled(opts)
      local want = ptxas_report(log)
      local got = by_name(spk.cuda.cubin_entries(code, "sm_90"))
      for name, w in pairs(want) do
        assert.is_truthy(got[name], "no entry " .. name)
        assert.are.same({ w.registers, w.stack, w.smem },
          { got[name].registers, got[name].local_bytes, got[name].static_smem }, name)
        compared = compared + 1
      end
    end
    assert.is_true(compared >= 7, compared .. " kernels compared")
  end)

  it("includes the kernel's __launch_bounds__ and __cluster_dims__", function()
    local entries = by_name(spk.cuda.cubin_entries((compiled { source = SOURCE }), "sm_90"))
    assert.are.same({ 256, 1, 1 }, entries.bounded.max_threads)
    assert.are.same({ 2, 1, 1 }, entries.clustered.cluster_dims)
    assert.are.same({ 0, 0, 0 }, entries.heavy.max_threads)
  end)

  it("refuses bytes that are no cubin", function()
    assert.matches("not a cubin", refusal(spk.cuda.cubin_entries, "not an ELF file at all", "sm_90"), 1, true)
    assert.matches("no table for the architecture 'sm_61'", refusal(spk.cuda.launch_limits, "sm_61"), 1, true)
  end)
end)

describe("a launch against sm_90's limits", function()
  local entries
  setup(function()
    local m = spk.cuda.compile { source = SOURCE, arch = "sm_90" }
    entries = by_name(spk.cuda.cubin_entries((m:code()), "sm_90"))
    m:close()
  end)
  local function check(entry, launch) return spk.cuda.check_launch("sm_90", entries[entry], launch, "kernel t") end

  it("refuses each limit passed, naming what is asked, the limit and the fix; accepts each limit itself", function()
    local static = entries.stack_and_shared.static_smem
    local optin = spk.cuda.launch_limits("sm_90").max_smem_per_block
    local cases = {
      { { grid = { 1, 1, 65536 }, block = 32 }, "grid.z is 65536; sm_90 allows at most 65535 (fix: put the blocks along x" },
      { { grid = { 1, 65536 }, block = 32 }, "grid.y is 65536; sm_90 allows at most 65535" },
      { { grid = 1, block = { 1, 1, 65 } }, "block.z is 65; sm_90 allows at most 64 (fix: put the threads along x" },
      { { grid = 1, block = { 32, 33 } }, "a block of 1056 threads; sm_90 allows at most 1024 (fix: fewer threads" },
      { { grid = 1, block = 32, smem = 300 * 1024 },
        ("300 KiB (307200 bytes) of dynamic shared memory and %d bytes of static (the kernel stack_and_shared's own); "
         .. "sm_90 allows a block at most 227 KiB (232448 bytes) of both (fix: at most %d bytes"):format(static,
          optin - static) },
      { { grid = 1, block = 32, smem = optin - static + 1 },
        ("%d bytes of dynamic shared memory and %d bytes of static"):format(optin - static + 1, static) },
      { { grid = 64, block = 32, cluster = 64 }, "a cluster of 64 blocks; sm_90 allows at most 8 (the portable size" },
      { { grid = 32, block = 32, cluster = { 4, 4 } }, "a cluster of 16 blocks; sm_90 allows at most 8" },
    }
    for _, c in ipairs(cases) do
      assert.matches("kernel t: " .. c[2], refusal(check, "stack_and_shared", c[1]), 1, true)
    end
    for _, launch in ipairs {
      { grid = { (1 << 31) - 1, 65535, 65535 }, block = { 1024 } }, { grid = 1, block = { 1, 1, 64 } },
      { grid = 1, block = 32, smem = optin - static }, { grid = 8, block = 32, cluster = 8 },
      { grid = 16, block = 32, cluster = 16, nonportable_cluster = true },
    } do
      assert.is_true(check("stack_and_shared", launch))
    end
  end)

  it("refuses registers a block cannot have, and blocks past the kernel's own bounds", function()
    local regs = entries.heavy.registers
    assert.is_true(regs > 64, "heavy uses " .. regs .. " registers") -- so 1024 threads cannot have them
    local err = refusal(check, "heavy", { grid = 1, block = 1024 })
    assert.matches(("a block of 1024 threads at %d registers each takes %d registers (allocated 256 a warp at a "
      .. "time); sm_90 allows a block 65536 (fix: at most"):format(regs, math.ceil(regs * 32 / 256) * 256 * 32), err,
      1, true)
    local fit = tonumber(err:match("at most (%d+) threads a block"))
    assert.is_true(check("heavy", { grid = 1, block = fit }))
    assert.is_truthy(pcall(check, "heavy", { grid = 1, block = fit + 32 }) == false)
    assert.matches("a block of 512 threads; the kernel bounded is compiled for at most 256 (__launch_bounds__",
      refusal(check, "bounded", { grid = 1, block = 512 }), 1, true)
    assert.matches("the kernel clustered is compiled for {2, 1, 1} (__cluster_dims__)",
      refusal(check, "clustered", { grid = 4, block = 32, cluster = 4 }), 1, true)
    assert.matches("sm_80 has no thread-block clusters",
      refusal(spk.cuda.check_launch, "sm_80", entries.dynamic, { grid = 2, block = 32, cluster = 2 }), 1, true)
  end)
end)

describe("spk.lstm.kernel_check and the launch limits", function()
  local base = spk.lstm.kernel_file("experiments/kernels/row_block.lua")
  local function with(changes)
    local s = {}
    for k, v in pairs(base) do s[k] = v end
    s.launch = function(shape)
      local l = base.launch(shape)
      for k, v in pairs(changes) do l[k] = v end
      return l
    end
    return s
  end

  it("refuses a launch past a limit with the spec's name, the launch, what is asked, the limit and the fix", function()
    for _, c in ipairs {
      { { grid = { 1, 1, 65536 } }, "grid.z is 65536; sm_90 allows at most 65535" },
      { { block = { 1, 1, 65 } }, "block.z is 65; sm_90 allows at most 64" },
      { { smem = 300 * 1024 }, "300 KiB (307200 bytes) of dynamic shared memory" },
      { { grid = { 64, 1, 1 }, cluster = { 64, 1, 1 } }, "a cluster of 64 blocks; sm_90 allows at most 16 (fix: a cluster of 16 blocks or fewer)" },
    } do
      assert.matches("kernel_check: kernel row_block: launch 1 (forward): " .. c[2],
        refusal(spk.lstm.kernel_check, with(c[1]), { batch = 5 }), 1, true)
    end
  end)

  it("reports the registers, spills and shared memory of each entry", function()
    local r = spk.lstm.kernel_check(base, { batch = 5 })
    assert.are.equal("sm_90", r.arch)
    local e = by_name(r.entries)[base.entry]
    assert.is_truthy(e)
    assert.are.same({ e.registers, e.local_bytes, e.static_smem }, { r.registers, r.spills, r.static_smem })
    assert.is_true(r.registers > 0)
  end)
end)

describe("the limits against a device", function()
  gpu_it("the driver agrees: each limit the check accepts launches, one past it fails as the check says", function()
    local d = spk.cuda.device()
    local arch = "sm_" .. d.cc:gsub("%.", "")
    local lim = spk.cuda.launch_limits(arch)
    assert.are.equal(d.threads_per_block, lim.max_threads_per_block)
    assert.are.equal(d.regs_per_block, lim.max_regs_per_block)
    assert.are.equal(d.smem_per_block_optin, lim.max_smem_per_block)
    local m = spk.cuda.compile { source = SOURCE }
    local entries = by_name(spk.cuda.cubin_entries((m:code()), m.arch))
    local buf = spk.cuda.zeros({ 1 << 20 })
    local function launches(name, launch)
      local k = m:kernel(name)
      local l = { grid = launch.grid, block = launch.block, smem = launch.smem, cluster = launch.cluster,
                  args = name == "stack_and_shared" and { buf, spk.i32(64) } or { buf } }
      local ok, err = pcall(function() k:launch(l); spk.cuda.synchronize() end)
      return ok, err
    end
    local static = entries.dynamic.static_smem
    for _, c in ipairs {
      { "dynamic", { grid = 1, block = 32, smem = lim.max_smem_per_block - static }, true },
      { "dynamic", { grid = 1, block = 32, smem = lim.max_smem_per_block - static + 1 }, false },
      -- the kernel stores a word a thread in its dynamic shared memory: every launch gives it some
      { "dynamic", { grid = { 1, 1, lim.max_grid[3] }, block = 32, smem = 128 }, true },
      { "dynamic", { grid = { 1, 1, lim.max_grid[3] + 1 }, block = 32, smem = 128 }, false },
      { "dynamic", { grid = 1, block = { 1, 1, lim.max_block[3] }, smem = 128 }, true },
      { "dynamic", { grid = 1, block = { 1, 1, lim.max_block[3] + 1 }, smem = 128 }, false },
      { "bounded", { grid = 1, block = 256 }, true },
      { "bounded", { grid = 1, block = 512 }, false },
    } do
      local name, launch, fits = c[1], c[2], c[3]
      local checked = pcall(spk.cuda.check_launch, arch, entries[name], launch)
      local ran, err = launches(name, launch)
      assert.are.equal(fits, checked, name .. " check")
      assert.are.equal(fits, ran, name .. " launch: " .. tostring(err))
    end
    local regs = entries.heavy.registers
    local err = select(2, pcall(spk.cuda.check_launch, arch, entries.heavy, { grid = 1, block = 1024 }))
    local fit = tonumber(tostring(err):match("at most (%d+) threads a block"))
    if fit then -- heavy cannot have 1024 threads at `regs` registers
      assert.is_true((launches("heavy", { grid = 1, block = fit })), regs .. " registers x " .. fit)
      assert.is_false((launches("heavy", { grid = 1, block = fit + 32 })), regs .. " registers x " .. fit + 32)
    end
    m:close()
  end)
end)
