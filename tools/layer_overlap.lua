-- How much of a layer boundary's projection can run beside the recurrence:
-- the next layer's input projection (x [batch x steps, 2H] against both
-- directions' W [2, 4H, 2H], split-TF32 on the TMA form, as a 3xtf32 stack
-- plan projects) started on a stream of its own while a stack's forward
-- runs, timed against each alone. --dry-run needs no GPU.
--
--   build/spk run tools/layer_overlap.lua [--batches 64,128,256] [--backends cluster,tensor_core]
--                                         [--at 50] [--rounds 7] [--dry-run]
--
-- For each batch and backend one plan (4 layers, input 60, hidden 128, 589
-- steps, math 3xtf32, spk.lstm.random{seed = 1}, x on the device):
--   forward  its forward alone, on the wall clock (the forward waits for its
--            own stream), median of --rounds;
--   gemm     the projection alone (a CUDA graph on another stream), events;
--   both     a one-thread delay kernel, then the projection's graph, on the
--            other stream, and the forward right after on the host: the
--            projection starts --at percent of a layer's time (forward / 4)
--            into the forward, where a bidirectional layer's middle output
--            is complete and a layer-boundary overlap would start it. Wall
--            clock up to both streams' ends; the projection's own events.
-- "saved" = forward + gemm - both: the projection's work that ran on the
-- SMs the stack left free ("share" of the projection alone). An overlap of
-- the layer boundary can save at most that a boundary (three a forward).
-- The last line "layer_overlap: best share S% (batch B, backend)".
-- Needs a CUDA GPU of compute capability 9.0 (the TMA form): without one it
-- says so and exits 3.
local spk = require "spk"

local options = require "spk.options"
local script = options.script { dry_run = true,
  usage = "spk run tools/layer_overlap.lua [--batches 64,128,256] [--backends cluster,tensor_core] [--at 50] "
    .. "[--rounds 7] [--dry-run]" }

local batches = script:read("--batches", { 64, 128, 256 }, options.positives)
local backends = script:read("--backends", { "cluster", "tensor_core" }, options.backends, "3xtf32")
local at = script:read("--at", { 50 }, options.positives)
local rounds = script:read("--rounds", 7, options.positive)
local layers_n, input, hidden, steps = 4, 60, 128, 589
local work = {}
for _, batch in ipairs(batches) do
  for _, backend in ipairs(backends) do
    work[#work + 1] = ("batch %d: %s 3xtf32, forward and projection alone and together at %s%% of a layer, "
      .. "%d rounds"):format(batch, backend, table.concat(at, "/"), rounds)
  end
end
local status = script:plan(work)
local has_gpu = options.gpu_status()
if not has_gpu then os.exit(options.no_gpu("layer_overlap")) end

local function say(fmt, ...)
  io.stdout:write(fmt:format(...), "\n")
  io.stdout:flush()
end
local function median(values) return require("spk.bench").summarize(values).median_ms end

-- A delay on a stream that holds one thread of one SM: the projection queued
-- behind it starts once the forward's kernels hold the SMs they take.
local delay_kernel = spk.cuda.compile { arch = "sm_90", source = [[
extern "C" __global__ void spk_overlap_delay(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
]] }:kernel("spk_overlap_delay")

for _, line in ipairs(require("spk.provenance").lines()) do say("%s", line) end
say("%-5s  %-11s  %5s  %10s  %8s  %8s  %12s  %8s  %6s", "batch", "backend", "at %", "forward ms", "gemm ms",
  "both ms", "gemm in both", "saved ms", "share")
local weights = spk.lstm.random { layers = layers_n, input = input, hidden = hidden, seed = 1 }
local side = spk.cuda.stream()
local best = { share = -math.huge }
for _, batch in ipairs(batches) do
  local x = spk.randn({ batch, steps, input }, { seed = batch }):cuda()
  local m = batch * steps
  local a = spk.randn({ m, 2 * hidden }, { seed = 2 }):cuda()
  local w = spk.rand({ 2, 4 * hidden, 2 * hidden }, { low = -0.09, high = 0.09, seed = 3 }):cuda()
  local hi, lo = spk.blas.split_tf32(w)
  local c = spk.cuda.zeros({ 2, m, 4 * hidden })
  local projection = spk.cuda.graph(function(s)
    spk.blas.gemm { a = a, b = hi, b_lo = lo, c = c, transb = true, math = "3xtf32", stream = s }
  end, side)
  for _, backend in ipairs(backends) do
    status:step(("batch %d: %s"):format(batch, backend))
    local plan = spk.lstm.stack { backend = backend, layers = weights, batch = batch, steps = steps, math = "3xtf32" }
    local function forward()
      local t0 = spk.clock_ms()
      plan:forward(x):close()
      return spk.clock_ms() - t0
    end
    forward()
    local alone = spk.bench(function(s) projection:replay(s) end, { stream = side, rounds = rounds, warmup = 2 })
    local times = {}
    for r = 1, rounds do times[r] = forward() end
    local fwd = median(times)
    for _, percent in ipairs(at) do
      local start, stop = spk.cuda.event(), spk.cuda.event()
      local walls, inside = {}, {}
      for r = 1, rounds + 1 do
        spk.cuda.synchronize()
        local t0 = spk.clock_ms()
        delay_kernel:launch { grid = 1, block = 1, stream = side,
                              args = { spk.u64(math.floor(fwd / layers_n * percent / 100 * 1e6)) } }
        start:record(side)
        projection:replay(side)
        stop:record(side)
        plan:forward(x):close()
        side:synchronize()
        if r > 1 then -- the first round warms the pair up
          walls[#walls + 1] = spk.clock_ms() - t0
          inside[#inside + 1] = start:elapsed(stop)
        end
      end
      local both = median(walls)
      local saved = fwd + alone.median_ms - both
      local share = saved / alone.median_ms
      say("%5d  %-11s  %5d  %10.4f  %8.4f  %8.4f  %12.4f  %8.4f  %5.1f%%", batch, backend, percent, fwd,
        alone.median_ms, both, median(inside), saved, 100 * share)
      if share > best.share then best = { share = share, batch = batch, backend = backend } end
    end
    plan:close()
  end
end
say("layer_overlap: best share %.1f%% (batch %d, %s)", 100 * best.share, best.batch, best.backend)
