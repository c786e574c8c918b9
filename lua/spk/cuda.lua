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

  -- #include "x.cuh" finds kernels/ beside lua/ (an installed tree or the
  -- source tree); $SPK_KERNEL_DIR still wins, the build's source tree is the
  -- fallback (both in C).
  if core.lua_dir then
    cuda.set_kernel_dir(core.lua_dir .. "/../kernels")
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
end
