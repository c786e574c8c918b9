-- The GPU area's Lua side: spk.cuda (devices, streams, events, graphs,
-- NVRTC modules and kernels, the kernel cache), spk.blas.gemm, the typed
-- kernel scalars spk.u32/i32/u64/i64/f32/f64 and spk.bench. The bindings are
-- in src/lua/cuda.c (spk.core.cuda, spk.core.blas); this adds what reads
-- better in Lua.
return function(spk, core)
  local cuda, blas = core.cuda, core.blas
  spk.cuda, spk.blas = cuda, blas

  for _, kind in ipairs { "u32", "i32", "u64", "i64", "f32", "f64" } do
    spk[kind] = cuda[kind]
  end

  --- spk.cuda.graph(function(s) ... end, [s]) -> graph
  -- Captures what fn enqueues on stream s (default: a new stream) and
  -- returns an instantiated graph; graph:replay([stream]) runs it again. An
  -- error inside fn ends the capture and is re-raised.
  function cuda.graph(fn, s)
    s = s or cuda.stream()
    cuda.capture_begin(s)
    local ok, err = pcall(fn, s)
    if not ok then
      cuda.capture_abort(s)
      error(err, 0)
    end
    return cuda.capture_end(s)
  end

  --- spk.cuda.time(fn, [stream]) -> ms: one timed call of fn(stream).
  function cuda.time(fn, s)
    s = s or cuda.default_stream()
    local start, stop = cuda.event(), cuda.event()
    start:record(s)
    fn(s)
    stop:record(s)
    stop:synchronize()
    return start:elapsed(stop)
  end

  local bench = require "spk.bench"
  local options = require "spk.options"
  spk.bench = options.takes(2, "spk.bench", function(fn, opts) return bench.run(fn, opts) end)
  -- An argument a function does not take is an error that names it.
  cuda.graph = options.takes(2, "spk.cuda.graph", cuda.graph)
  cuda.time = options.takes(2, "spk.cuda.time", cuda.time)

  -- The one phrase for a machine without a usable GPU. The runtime's message
  -- already says "spk.cuda: no CUDA device (<what CUDA said>)"; whoever
  -- reports it (auto's reason, spk info, the experiments) passes it through
  -- this, so the fact appears once, never wrapped in itself.
  function cuda.no_device_reason(message)
    if message == nil then
      local ok, info = pcall(cuda.info)
      message = ok and type(info) == "table" and info.error or nil
    end
    if message == nil then return "no CUDA device" end
    local text = tostring(message):gsub("^spk%.cuda: ", "")
    if text:match("^no CUDA device") then return text end
    return ("no CUDA device (%s)"):format(text)
  end

  -- NVTX ranges of a script's own, beside the ones the forward passes push
  -- (src/cuda/nvtx.h): a range closes however fn ends.
  local nvtx = {}
  function nvtx.range(name, fn)
    if type(name) ~= "string" then
      error(("spk.nvtx.range: name must be a string, got %s"):format(type(name)), 2)
    end
    if type(fn) ~= "function" then
      error(("spk.nvtx.range: fn must be a function, got %s"):format(type(fn)), 2)
    end
    return core.system_nvtx_range(name, fn)
  end
  nvtx.range = options.takes(2, "spk.nvtx.range", nvtx.range)
  function nvtx.enabled() return (select(2, core.system_nvtx_counts())) end
  function nvtx.enable(on)
    if type(on) ~= "boolean" then
      error(("spk.nvtx.enable: on must be true or false, got %s"):format(type(on)), 2)
    end
    return core.system_nvtx_enable(on)
  end
  nvtx.enabled = options.takes(0, "spk.nvtx.enabled", nvtx.enabled)
  nvtx.enable = options.takes(1, "spk.nvtx.enable", nvtx.enable)
  spk.nvtx = nvtx

  local doc = require "spk.doc"
  doc(nvtx, [[
spk.nvtx: NVTX ranges, which profilers (nsys profile build/spk run ...) show on the timeline beside the
ranges the forward passes push (layers, projections, recurrences). On unless $SPK_NVTX=0.]])
  doc(nvtx.range, [[
spk.nvtx.range(name, fn) -> fn's results
Calls fn() inside an NVTX range named name in the domain "spk"; the range closes whether fn returns
or raises (the error passes through).]])
  doc(nvtx.enabled, "spk.nvtx.enabled() -> boolean\nWhether ranges are emitted now ($SPK_NVTX=0 starts them off).")
  doc(nvtx.enable, [[
spk.nvtx.enable(on) -> was_on
Turns ranges on or off from now on (an A/B of their cost in one process, as tools/nvtx_cost.lua does); an error
while a range is open.]])
  doc(cuda.graph, [[
spk.cuda.graph(function(s) ... end[, s]) -> graph
Captures what fn enqueues on stream s (default: a new stream) and returns an instantiated graph;
graph:replay([stream]) runs it again. An error inside fn ends the capture and is raised again.]])
  cuda.no_device_reason = options.takes(1, "spk.cuda.no_device_reason", cuda.no_device_reason)
  doc(cuda.no_device_reason, [[
spk.cuda.no_device_reason([message]) -> "no CUDA device (...)"
Why no GPU can be used, in one phrase: the runtime's own message (spk.cuda.info().error, or the
message given) with "no CUDA device" said once.]])
  doc(cuda.time, [[
spk.cuda.time(fn[, stream]) -> ms
One call of fn(stream) timed by two CUDA events on stream (default: the default stream).]])
  doc(spk.bench, [[
spk.bench(fn, {warmup = 3, rounds = 10, iters = 1, graph = false, stream =}) -> {median_ms, min_ms, max_ms, spread, samples}
Times fn(stream)'s GPU work with CUDA events: warmup rounds discarded, then each round's iters calls
(or graph replays of one captured call) between two events; spread = (max - min) / median.]])
  doc.area { name = "cuda", source = "spk.cuda",
             summary = "the GPU: devices, streams, events, graphs, NVRTC kernels and their cache, cuBLAS, timing",
             contents = { cuda, blas, spk.bench, nvtx, "spk.cuda.stream", "spk.cuda.event", "spk.cuda.graph",
                          "spk.cuda.module", "spk.cuda.kernel", "spk.cuda.scalar" } }
end
