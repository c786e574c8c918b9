-- The small GPU workload scripts/gpu-sanitize.sh runs under compute-sanitizer:
-- every stack backend at batch 3, steps 5, 2 layers, hidden 128 (checked
-- against the f64 reference), a NaN input through the persistent kernel,
-- a CUDA-graph replay, the example kernels of one's own
-- (experiments/kernels/*.lua: checked, traced, replayed) and the self-test
-- kernels (plain, cooperative, cluster). Small on purpose: under the sanitizer the recurrence kernels'
-- flag polls run orders of magnitude slower, so the poll timeout is 10 min.
local spk = require "spk"
local cuda = spk.cuda

-- Modes: (none) every case below; --kernel FILE: a stack around that kernel
-- file's kernel alone (a kernel of one's own); --out-of-bounds: the fixture
-- kernel that reads far past R (tests/fixtures/kernels/out_of_bounds.cu), which
-- memcheck must report.
local argv, kernel_file, out_of_bounds = { ... }, nil, false
for i = 1, #argv do
  if argv[i] == "--kernel" then kernel_file = argv[i + 1] end
  if argv[i] == "--out-of-bounds" then out_of_bounds = true end
end

local B, T, IN, H, L = 3, 5, 60, 128, 2
local TIMEOUT_MS = 600000
local layers = spk.lstm.random { layers = L, input = IN, hidden = H, seed = 1 }
local x = spk.randn({ B, T, IN }, { seed = 2 })
local truth = spk.lstm.reference(layers, x, { precision = "f64" })
local failures = 0

local function step(name, fn)
  local t0 = spk.clock_ms()
  local ok, err = pcall(fn)
  print(("sanitize: %-40s %s (%.0f ms)"):format(name, ok and "ok" or ("FAILED: " .. tostring(err)), spk.clock_ms() - t0))
  if not ok then failures = failures + 1 end
end

local function check_stack(name, opts)
  step(name, function()
    opts.layers, opts.batch, opts.steps = layers, B, T
    local plan = spk.lstm.stack(opts)
    local y = plan:forward(x):cpu()
    local ok, report = spk.check_near(y, truth, { rel_l2 = 1e-4 })
    assert(ok, tostring(report))
    if opts.backend == "persistent" then
      -- NaN in the input: values never steer the exchange, so this returns
      local bad = x:clone()
      bad:set(2, 3, 1, 0 / 0)
      local yn = plan:forward(bad):cpu()
      assert(yn:get(2, 3, 1) ~= yn:get(2, 3, 1), "NaN did not reach the output")
      assert(yn:get(1, 3, 1) == yn:get(1, 3, 1), "NaN reached another row")
      -- a CUDA-graph replay
      plan:time { rounds = 1, warmup = 0, x = x }
    end
    plan:close()
  end)
end

print("sanitize: device " .. tostring(cuda.device().name))
local root = (spk.find_dir("experiments") or "experiments") .. "/.."
if out_of_bounds then
  step("out-of-bounds kernel (memcheck must report its read)", function()
    local plan = spk.lstm.kernel_stack { layers = layers, batch = B, steps = T, check_writes = false,
      file = root .. "/tests/fixtures/kernels/out_of_bounds.cu", entry = "out_of_bounds",
      args = { "gates", "r", "bias", "output", "batch", "steps", "direction" },
      launch = function(shape) return { grid = shape.batch, block = shape.hidden } end }
    plan:forward(x)
    plan:close()
  end)
  cuda.synchronize()
  os.exit(failures == 0 and 0 or 1, true)
end
-- A kernel of one's own: its stack, against the f64 reference, traced and
-- replayed in a graph when it can be.
local function check_kernel(path)
  local spec = spk.lstm.kernel_file(path)
  spk.lstm.kernel_backend(spec.name, spec)
  check_stack(("kernel %s (%s)"):format(spec.name, path), { backend = spec.name, timeout_ms = TIMEOUT_MS })
  step(("kernel %s: trace and graph replay"):format(spec.name), function()
    local plan = spk.lstm.stack { backend = spec.name, layers = layers, batch = B, steps = T, timeout_ms = TIMEOUT_MS }
    if plan.kernel.traceable then
      plan:forward(x, { trace = { layer = 2, direction = "reverse", steps = { 1, T } } })
    end
    plan:time { rounds = 1, warmup = 0, x = x }
    plan:close()
  end)
end
if kernel_file then
  check_kernel(kernel_file)
  cuda.synchronize()
  print(("sanitize: %d failed"):format(failures))
  os.exit(failures == 0 and 0 or 1, true)
end
check_stack("persistent (default variant)", { backend = "persistent", timeout_ms = TIMEOUT_MS })
check_stack("persistent units 8, 256 threads", { backend = "persistent", timeout_ms = TIMEOUT_MS,
                                                 kernel = { units = 8, threads = 256 } })
check_stack("persistent units 4, 128 threads, tile 32", { backend = "persistent", timeout_ms = TIMEOUT_MS,
                                                          kernel = { units = 4, threads = 128, tile_rows = 32 } })
check_stack("cudnn", { backend = "cudnn" })
if spk.lstm.backends.cluster and cuda.device().cluster then
  check_stack("cluster (default: gate blocks, direct pushes)", { backend = "cluster" })
  check_stack("cluster baseline (scalar pushes, a cluster barrier a step)", { backend = "cluster",
    kernel = { push = "scalar", cluster = 8 } })
  check_stack("cluster gate blocks, warp pushes, tile 2", { backend = "cluster",
    kernel = { gate_block = 4, threads = 128, tile_rows = 2, push = "warp", cluster = 8, gates_ahead = 1 } })
  check_stack("cluster 2, 256 threads, gate blocks, warp pushes, gates 3 steps ahead, tile 2", { backend = "cluster",
    kernel = { cluster = 2, gate_block = 4, threads = 256, tile_rows = 2, push = "warp", gates_ahead = 3 } })
  check_stack("cluster one gate row a thread, direct pushes, tile 2", { backend = "cluster",
    kernel = { gate_block = 1, cluster = 8, tile_rows = 2, push = "direct", gates_ahead = 1 } })
  check_stack("cluster 2, two row phases, direct pushes, gates 3 steps ahead, tile 8", { backend = "cluster",
    kernel = { cluster = 2, gate_block = 4, threads = 256, tile_rows = 8, push = "direct", gates_ahead = 3,
               row_phases = 2 } })
  check_stack("cluster 2, two row phases, warp pushes, tile 2", { backend = "cluster",
    kernel = { cluster = 2, gate_block = 4, threads = 256, tile_rows = 2, push = "warp", gates_ahead = 3,
               row_phases = 2 } })
else
  print("sanitize: cluster backend not present or no cluster launch on this device: skipped")
end
check_stack("cpu (reference, no GPU work)", { backend = "cpu" })
check_kernel(root .. "/experiments/kernels/row_block.lua")
if cuda.device().cluster then check_kernel(root .. "/experiments/kernels/cluster_registers.lua") end

local m = cuda.compile { file = cuda.kernel_dir() .. "/selftest.cu" }
step("selftest saxpy", function()
  local n = 1000
  local dx, dy = spk.ones({ n }):cuda(), spk.ones({ n }):cuda()
  m:kernel("saxpy"):launch { grid = 4, block = 256, args = { spk.u32(n), spk.f32(2), dx, dy } }
  assert(dy:cpu():get(n) == 3)
end)
step("selftest fill", function()
  local d = cuda.zeros({ 300 })
  m:kernel("fill"):launch { grid = 2, block = 256, args = { spk.u32(300), spk.f32(5), d } }
  assert(d:cpu():get(300) == 5)
end)
step("selftest grid_sync_sum (cooperative)", function()
  local k = m:kernel("grid_sync_sum")
  local blocks = math.min(8, k:cooperative_capacity { block = 128 })
  local partial, out = cuda.zeros({ blocks }, "i32"), cuda.zeros({ 2 }, "i32")
  k:launch { grid = blocks, block = 128, cooperative = true, args = { partial, out } }
  assert(out:cpu():get(1) == blocks * (blocks - 1) // 2)
end)
if cuda.device().cluster then
  step("selftest cluster_ring (cluster)", function()
    local out = cuda.zeros({ 8 * 3 }, "i32")
    m:kernel("cluster_ring"):launch { grid = 8, block = 64, cluster = { 2, 1, 1 }, args = { out } }
    assert(out:cpu():get(2) == 2)
  end)
end
step("selftest delayed_copy", function()
  local n = 256
  local dx, dy = spk.randn({ n }, { seed = 3 }):cuda(), cuda.zeros({ n })
  m:kernel("delayed_copy"):launch { grid = 1, block = 256, args = { spk.u32(n), dx, dy, spk.u64(1000) } }
  assert(dy:cpu():get(n) == dx:cpu():get(n))
end)
m:close()
cuda.synchronize()
print(("sanitize: %d failed"):format(failures))
-- close = true: the state closes, finalizers free every device tensor and
-- the process-wide handles go, so memcheck's leak check sees only real leaks
os.exit(failures == 0 and 0 or 1, true)
