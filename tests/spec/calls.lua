-- The catalogue the argument specs share (rawargs_spec.lua, arguments_spec.lua):
-- every function spk exports and every method of the objects it hands out,
-- found by walking the module tables and the objects' metatables (so a new
-- function or method is in it without being listed), and a valid call of each
-- (a recipe: a fresh set of arguments per call, so a call may close or
-- consume them).
--
-- A recipe is {n = the most positional arguments the function takes,
-- args = function(m) return ... end, opts = the position of an options table
-- (its keys are checked), gpu = true where the call needs a CUDA device to
-- get past its first checks, area = "tensor" for the tensor area's functions
-- and methods (their argument rule is that area's)}. m makes the arguments
-- and keeps every object it made, so m.close_all() can close them all.
local M = {}

local SOURCE = 'extern "C" __global__ void k(float *p, unsigned long long n) { if (threadIdx.x < n) p[threadIdx.x] = 1; }'

function M.maker(spk)
  local m = { objects = {} }
  function m.keep(o)
    m.objects[#m.objects + 1] = o
    return o
  end
  function m.t23() return m.keep(spk.arange(6):view { 2, 3 }) end
  function m.t(shape, dtype) return m.keep(spk.zeros(shape, dtype)) end
  function m.layers()
    local layers = spk.lstm.random { layers = 1, input = 3, hidden = 2, seed = 1 }
    for _, l in ipairs(layers) do m.keep(l.W); m.keep(l.R); m.keep(l.B) end
    return layers
  end
  -- the GPU plans' kernels want a hidden size their variants fit
  function m.gpu_layers()
    local layers = spk.lstm.random { layers = 1, input = 3, hidden = 128, seed = 1 }
    for _, l in ipairs(layers) do m.keep(l.W); m.keep(l.R); m.keep(l.B) end
    return layers
  end
  function m.x() return m.keep(spk.rand({ 1, 2, 3 }, { seed = 2 })) end
  function m.y() return m.keep(spk.rand({ 1, 2, 4 }, { seed = 3 })) end
  function m.torch()
    local named = {}
    for name, t in pairs(spk.core.lstm.to_torch(m.layers()[1])) do named[name] = m.keep(t) end
    return named
  end
  function m.stack(backend)
    backend = backend or "cpu"
    return m.keep(spk.lstm.stack { layers = backend == "cpu" and m.layers() or m.gpu_layers(), batch = 1, steps = 2,
                                   backend = backend })
  end
  function m.module() return m.keep(spk.cuda.compile { source = SOURCE, arch = "sm_90" }) end
  function m.ptx_module() return m.keep(spk.cuda.compile { source = SOURCE, arch = "compute_90" }) end
  -- a kernel of one's own (docs/kernels.md): the signature of SOURCE's k as the contract names it
  function m.kernel_spec()
    return { source = SOURCE, entry = "k", args = { "output", "timeout_ns" }, launch = { grid = 1, block = 32 },
             check_writes = false }
  end
  function m.kernel_stack()
    local spec = m.kernel_spec()
    spec.layers, spec.batch, spec.steps = m.gpu_layers(), 1, 2
    return m.keep(spk.lstm.kernel_stack(spec))
  end
  function m.kernel() return m.keep(m.module():kernel("k")) end
  function m.stream() return m.keep(spk.cuda.stream()) end
  function m.event() return m.keep(spk.cuda.event()) end
  function m.device(shape) return m.keep(spk.cuda.zeros(shape or { 2, 3 })) end
  -- a timeline build's raw buffer: one block, steps 1 and 2 of one stage "a"
  -- (header, the block's anchor, then each mark's globaltimer and clock64)
  function m.raw_timeline()
    local r = m.t({ 26 }, "u64")
    for i, v in ipairs { 0x31454d49544b5053, 2, 0, 0, 2, 0, 1, 0, 0, 2 } do r:set(i, v) end
    for i, v in ipairs { 1000, 0, 2000, 2000, 0, 2500, 3000, 4000, 0, 4500 } do r:set(16 + i, v) end
    return r
  end
  -- a recorded timeline as spk.timeline reads it (one block, two steps or `steps`, two stages)
  function m.timeline(steps)
    local stamps = { { 0, 1, 0, 1, 2, 0, 2, 4 }, { 0, 2, 3, 4, 6, 6, 8, 12 } }
    for s = 3, steps or 2 do stamps[s] = { 0, s, 3 * s, 3 * s + 1, 3 * s + 2, 6 * s, 6 * s + 2, 6 * s + 4 } end
    return { stamps = stamps,
             columns = { "block", "step", "start", "a", "b", "start_cycles", "a_cycles", "b_cycles" },
             stages = { "a", "b" }, waits_for = { a = "b" }, kernel = "recipe",
             selection = { layer = 1, direction = "forward", step_range = { 1, 2 }, blocks = { 0, 0 }, warp = 0 } }
  end
  -- the timeline demo's plan (a GPU of compute capability 9.0) and its input
  function m.demo() return m.keep(spk.timeline.demo { batch = 1, steps = 2, cluster = 2 }) end
  function m.close_all()
    for i = #m.objects, 1, -1 do
      local o = m.objects[i]
      pcall(function() o:close() end)
    end
    m.objects = {}
  end
  return m
end

-- Files a recipe reads, made in the current folder: t.npy, t.safetensors and
-- the weight folder w.
function M.setup_files(spk)
  spk.save("t.npy", spk.arange(6):view { 2, 3 })
  spk.save_safetensors("t.safetensors", { a = spk.arange(6):view { 2, 3 } })
  spk.lstm.save("w", spk.lstm.random { layers = 1, input = 3, hidden = 2, seed = 1 })
end

local function fn_args(fn)
  return function() return fn end
end

-- ------------------------------------------------------------------ functions

M.recipes = {
  -- the tensor area
  ["spk.tensor"] = { area = "tensor", n = 2, args = function() return { { 1, 2 }, { 3, 4 } }, "f64" end },
  ["spk.zeros"] = { area = "tensor", n = 2, args = function() return { 2, 3 }, "f64" end },
  ["spk.ones"] = { area = "tensor", n = 2, args = function() return { 2 } end },
  ["spk.full"] = { area = "tensor", n = 3, args = function() return { 2, 2 }, 1.5 end },
  ["spk.arange"] = { area = "tensor", n = 4, args = function() return 0, 4, 1 end },
  ["spk.is_tensor"] = { area = "tensor", n = 1, args = function(m) return m.t23() end },
  ["spk.rand"] = { area = "tensor", n = 2, opts = 2, args = function() return { 2, 2 }, { seed = 1, low = 0, high = 2 } end },
  ["spk.randn"] = { area = "tensor", n = 2, opts = 2, args = function() return { 2 }, { seed = 1, mean = 0, std = 1 } end },
  ["spk.generator"] = { area = "tensor", n = 1, args = function() return 1 end },
  ["spk.seed"] = { area = "tensor", n = 1, args = function() return 0 end },
  ["spk.initial_seed"] = { area = "tensor", n = 0, args = function() end },
  ["spk.next_seed"] = { area = "tensor", n = 0, args = function() end },
  ["spk.empty"] = { area = "tensor", n = 2, args = function() return { 2, 3 }, "f64" end },
  ["spk.linspace"] = { area = "tensor", n = 4, args = function() return 0, 1, 5, "f64" end },
  ["spk.eye"] = { area = "tensor", n = 3, args = function() return 2, 3, "i32" end },
  ["spk.cat"] = { area = "tensor", n = 2, args = function(m) return { m.t23(), m.t23() }, 2 end },
  ["spk.stack"] = { area = "tensor", n = 2, args = function(m) return { m.t23(), m.t23() }, 1 end },
  ["spk.where"] = { area = "tensor", n = 3, args = function(m) return m.t23(), m.t23(), 0 end },
  ["spk.matmul"] = { area = "tensor", n = 2, args = function(m) return m.t23(), m.t23():transpose() end },
  ["spk.exp"] = { area = "tensor", n = 1, args = function(m) return m.t23() end },
  ["spk.log"] = { area = "tensor", n = 1, args = function(m) return m.t23() end },
  ["spk.sqrt"] = { area = "tensor", n = 1, args = function(m) return m.t23() end },
  ["spk.abs"] = { area = "tensor", n = 1, args = function(m) return m.t23() end },
  ["spk.isnan"] = { area = "tensor", n = 1, args = function(m) return m.t23() end },
  ["spk.isfinite"] = { area = "tensor", n = 1, args = function(m) return m.t23() end },
  ["spk.print_options"] = { area = "tensor", n = 1, opts = 1, args = function() return { digits = 0 } end },
  ["spk.format_float"] = { area = "tensor", n = 3, args = function() return 0.1, "f32", 0 end },
  ["spk.repl.precision"] = { n = 1, args = function() return 0 end },
  -- files, comparison, clock
  ["spk.load"] = { n = 1, args = function() return "t.npy" end },
  ["spk.save"] = { n = 2, args = function(m) return "s.npy", m.t23() end },
  ["spk.load_safetensors"] = { n = 1, args = function() return "t.safetensors" end },
  ["spk.save_safetensors"] = { n = 2, args = function(m) return "s.safetensors", { a = m.t23(), b = m.t23() } end },
  ["spk.compare"] = { n = 2, args = function(m) return m.t23(), m.t23() end },
  ["spk.digest"] = { n = 1, args = function(m) return m.t23() end },
  ["spk.allclose"] = { area = "tensor", n = 3, opts = 3, args = function(m) return m.t23(), m.t23(), { rtol = 1e-5, atol = 1e-8 } end },
  ["spk.check_near"] = { area = "tensor", n = 3, opts = 3, args = function(m) return m.t23(), m.t23(), { rel_l2 = 1e-3 } end },
  ["spk.bits_equal"] = { area = "tensor", n = 3, args = function(m) return m.t23(), m.t23(), "what" end },
  ["spk.clock_ms"] = { n = 0, args = function() end },
  ["spk.nvtx.range"] = { n = 2, args = function() return "calls", function() end end },
  ["spk.nvtx.enabled"] = { n = 0, args = function() end },
  ["spk.nvtx.enable"] = { n = 1, args = function() return true end },
  ["spk.bench"] = { n = 2, opts = 2, gpu = true, args = function() return function() end, { rounds = 1, warmup = 0 } end },
  -- cuBLAS
  ["spk.blas.gemm"] = { n = 1, opts = 1, gpu = true, args = function(m)
    return { a = m.device { 2, 3 }, b = m.device { 3, 4 }, c = m.device { 2, 4 }, alpha = 1, beta = 0, math = "fp32" }
  end },
  ["spk.blas.gemm_check"] = { n = 1, opts = 1, args = function(m)
    return { a = m.t { 2, 3 }, b = m.t { 3, 4 }, c = m.t { 2, 4 }, transa = false }
  end },
  ["spk.blas.split_tf32"] = { n = 2, args = function(m) return m.t23():to("f32") end },
  ["spk.blas.split_f16"] = { n = 2, args = function(m) return m.t { 2, 4 } end },
  ["spk.blas.f16_scale_exponent"] = { n = 1, args = function() return 0.5 end },
  -- the GPU runtime
  ["spk.cuda.available"] = { n = 0, args = function() end },
  ["spk.cuda.require"] = { n = 0, gpu = true, args = function() end },
  ["spk.cuda.info"] = { n = 0, args = function() end },
  ["spk.cuda.device"] = { n = 1, gpu = true, args = function() return 0 end },
  ["spk.cuda.devices"] = { n = 0, gpu = true, args = function() end },
  ["spk.cuda.set_device"] = { n = 1, gpu = true, args = function() return 0 end },
  ["spk.cuda.current_device"] = { n = 0, gpu = true, args = function() end },
  ["spk.cuda.synchronize"] = { n = 0, gpu = true, args = function() end },
  ["spk.cuda.stream"] = { n = 0, gpu = true, args = function() end },
  ["spk.cuda.default_stream"] = { n = 0, gpu = true, args = function() end },
  ["spk.cuda.event"] = { n = 1, gpu = true, args = function() return true end },
  ["spk.cuda.capture_begin"] = { n = 1, gpu = true, args = function(m) return m.stream() end },
  ["spk.cuda.capture_end"] = { n = 1, gpu = true, args = function(m) return m.stream() end },
  ["spk.cuda.capture_abort"] = { n = 1, gpu = true, args = function(m) return m.stream() end },
  ["spk.cuda.graph"] = { n = 2, gpu = true, args = function(m) return function() end, m.stream() end },
  ["spk.cuda.time"] = { n = 2, gpu = true, args = function(m) return function() end, m.stream() end },
  ["spk.cuda.zeros"] = { n = 3, gpu = true, args = function() return { 2, 3 }, "f32" end },
  ["spk.cuda.compile"] = { n = 1, opts = 1, args = function()
    return { source = SOURCE, arch = "sm_90", defines = { N = 2, FLAG = true }, options = { "-lineinfo" } }
  end },
  ["spk.cuda.cache_info"] = { n = 0, args = function() end },
  ["spk.cuda.cache_clear"] = { n = 0, args = function() end },
  ["spk.cuda.set_cache_dir"] = { n = 1, args = function() return "cache" end },
  ["spk.cuda.set_kernel_dir"] = { n = 1, args = function(_) return require("spk").cuda.kernel_dir() end },
  ["spk.cuda.kernel_dir"] = { n = 0, args = function() end },
  ["spk.cuda.launch_limits"] = { n = 1, args = function() return "sm_90" end },
  ["spk.cuda.cubin_entries"] = { n = 2, args = function(m) return (m.module():code()), "sm_90" end },
  ["spk.cuda.check_launch"] = { n = 4, opts = 3, args = function()
    return "sm_90", { name = "k", registers = 8 }, { grid = 1, block = 32 }, "k"
  end },
  ["spk.cuda.kernel_files"] = { n = 1, args = function() return require("spk").cuda.kernel_dir() end },
  ["spk.cuda.sha256"] = { n = 1, args = function() return "abc" end },
  ["spk.cuda.no_device_reason"] = { n = 1, args = function() return "spk.cuda: no CUDA device (test)" end },
  ["spk.find_dir"] = { n = 1, args = function() return "kernels" end },
  ["spk.lstm.math_suffix"] = { n = 1, args = function() return "3xtf32" end },
  ["spk.files.read"] = { n = 2, args = function() return "t.npy", 4096 end },
  ["spk.files.list"] = { n = 1, args = function() return "." end },
  ["spk.files.write"] = { n = 2, args = function() return "written.txt", "text" end },
  ["spk.files.kind"] = { n = 1, args = function() return "t.npy" end },
  ["spk.files.real_path"] = { n = 1, args = function() return "t.npy" end },
  ["spk.files.is_link"] = { n = 1, args = function() return "t.npy" end },
  ["spk.files.remove"] = { n = 1, args = function() return "absent.txt" end },
  ["spk.files.make_folder"] = { n = 1, args = function() return "made/inner" end },
  ["spk.files.remove_folder"] = { n = 1, args = function() return "absent_folder" end },
  ["spk.onnx.load_lstm"] = { n = 1, args = function() return require("spk").find_dir("lua") .. "/../tests/fixtures/onnx/seg_torchscript.onnx" end },
  ["spk.onnx.save_lstm"] = { n = 2, args = function(m) return "s.onnx", m.layers() end },
  ["spk.doc_registry"] = { n = 0, args = function() end },
  ["spk.help"] = { n = 1, args = function() return "no such word anywhere" end },
  ["spk.cuda.pack_args"] = { n = 3, args = function() return { 8, 4 }, { require("spk").u64(1), require("spk").f32(2) }, "k" end },
  ["spk.u32"] = { n = 1, args = function() return 3 end },
  ["spk.i32"] = { n = 1, args = function() return -3 end },
  ["spk.u64"] = { n = 1, args = function() return 3 end },
  ["spk.i64"] = { n = 1, args = function() return -3 end },
  ["spk.f32"] = { n = 1, args = function() return 1.5 end },
  ["spk.f64"] = { n = 1, args = function() return 1.5 end },
  -- the LSTM area
  ["spk.lstm.validate"] = { n = 1, args = function(m) return m.layers() end },
  ["spk.lstm.load"] = { n = 1, args = function() return "w" end },
  ["spk.lstm.save"] = { n = 3, opts = 3, args = function(m) return "w2", m.layers(), { format = "npy" } end },
  ["spk.lstm.bound"] = { n = 1, opts = 1, args = function() return { backend = "kernel", math = "fp32",
                                                                      against = { rel_l2 = 2e-7, max_abs = 5e-8 } } end },
  ["spk.lstm.random"] = { n = 1, opts = 1, args = function() return { layers = 1, input = 3, hidden = 2, seed = 1 } end },
  ["spk.lstm.pack_directions"] = { n = 2, opts = 2, args = function(m) return m.layers()[1].W, { from = "iofc", to = "ifco" } end },
  ["spk.lstm.unpack_directions"] = { n = 2, opts = 2, args = function(m) return m.layers()[1].W, { from = "iofc", to = "ifco" } end },
  ["spk.lstm.pack_bias"] = { n = 2, opts = 2, args = function(m) return m.layers()[1].B, { from = "iofc", to = "ifco" } end },
  ["spk.lstm.reorder_gates"] = { n = 4, args = function(m) return m.layers()[1].W, 2, "iofc", "ifco" end },
  ["spk.lstm.reference"] = { n = 3, opts = 3, args = function(m)
    return m.layers(), m.x(), { precision = "f64", threads = 2, team_threads = 1, vector = "portable",
                                layers_out = true, trace = { layer = 1, direction = "reverse", steps = { 1, 2 } } }
  end },
  ["spk.lstm.cpu_info"] = { n = 0, args = function() end },
  ["spk.lstm.stack"] = { n = 1, opts = 1, args = function(m) return { layers = m.layers(), batch = 1, steps = 2, backend = "cpu" } end },
  ["spk.lstm.backends.cpu"] = { n = 1, opts = 1, args = function(m) return { layers = m.layers(), batch = 1, steps = 2, threads = 1 } end },
  ["spk.lstm.backends.persistent"] = { n = 1, opts = 1, gpu = true, args = function(m)
    return { layers = m.gpu_layers(), batch = 1, steps = 2, kernel = { units = 4 }, timeout_ms = 2000 }
  end },
  ["spk.lstm.backends.cluster"] = { n = 1, opts = 1, gpu = true, args = function(m)
    return { layers = m.gpu_layers(), batch = 1, steps = 2, kernel = { cluster = 2 } }
  end },
  ["spk.lstm.backends.tensor_core"] = { n = 1, opts = 1, gpu = true, args = function(m)
    return { layers = m.gpu_layers(), batch = 1, steps = 2, kernel = { cluster = 8 } }
  end },
  ["spk.lstm.backends.cudnn"] = { n = 1, opts = 1, gpu = true, args = function(m) return { layers = m.gpu_layers(), batch = 1, steps = 2 } end },
  ["spk.lstm.backends.auto"] = { n = 1, opts = 1, args = function(m) return { layers = m.layers(), batch = 1, steps = 2, tune_dir = "tune" } end },
  ["spk.lstm.auto_choice"] = { n = 1, opts = 1, args = function(m) return { layers = m.layers(), batch = 1, steps = 2, tune_dir = "tune" } end },
  ["spk.lstm.check_math"] = { n = 2, args = function() return "fp32", "cpu" end },
  ["spk.lstm.persistent_variant"] = { n = 3, args = function() return { units = 4 }, 8, 128 end },
  ["spk.lstm.cluster_variant"] = { n = 3, args = function() return { cluster = 2 }, 8, 128 end },
  ["spk.lstm.tensor_core_variant"] = { n = 3, args = function() return { cluster = 4 }, 8, 128 end },
  ["spk.lstm.kernel_options"] = { n = 1, args = function() return "cluster" end },
  ["spk.lstm.kernel_variant"] = { n = 1, opts = 1, args = function()
    return { backend = "persistent", batch = 8, hidden = 128, kernel = { units = 8 } }
  end },
  ["spk.lstm.plan_options"] = { n = 3, opts = 1, args = function(m)
    return { layers = m.layers(), batch = 1, steps = 2 }, "mine", { threads = true }
  end },
  ["spk.lstm.new_plan"] = { n = 2, args = function()
    return { backend = "mine", batch = 1, steps = 2, input = 3, hidden = 2 },
      { forward = function() end, samples = function() return { 1 } end, name = function() return "mine" end }
  end },
  ["spk.lstm.kernel_contract"] = { n = 0, args = function() end },
  ["spk.lstm.kernel_check"] = { n = 2, opts = 2, args = function(m) return m.kernel_spec(), { batch = 2 } end },
  ["spk.lstm.kernel_file"] = { n = 1, args = function()
    return require("spk").find_dir("experiments") .. "/kernels/row_block.lua"
  end },
  ["spk.lstm.kernel_backend"] = { n = 2, args = function(m) return "recipe_kernel", m.kernel_spec() end },
  ["spk.lstm.kernel_stack"] = { n = 1, opts = 1, gpu = true, args = function(m)
    local spec = m.kernel_spec()
    spec.layers, spec.batch, spec.steps = m.gpu_layers(), 1, 2
    return spec
  end },
  ["spk.lstm.cluster_stack"] = { n = 1, opts = 1, gpu = true, args = function(m) return { layers = m.gpu_layers(), batch = 1, steps = 2 } end },
  ["spk.lstm.cudnn_stack"] = { n = 1, opts = 1, gpu = true, args = function(m) return { layers = m.gpu_layers(), batch = 1, steps = 2 } end },
  ["spk.lstm.cudnn_algorithms"] = { n = 1, opts = 1, gpu = true, args = function() return { batch = 1, steps = 2, layers = 1, hidden = 8, input = 4 } end },
  ["spk.lstm.tunables.persistent"] = { n = 2, args = function() return { kernel = { units = 4 } }, { hidden = 128, batch = 8 } end },
  ["spk.lstm.tunables.cluster"] = { n = 2, args = function() return { kernel = { cluster = 2 } }, { hidden = 128, batch = 8 } end },
  ["spk.lstm.tunables.tensor_core"] = { n = 2, args = function() return { kernel = { cluster = 4 } }, { hidden = 128, batch = 8 } end },
  ["spk.lstm.tunables.cudnn"] = { n = 2, args = function() return { algo = "standard" }, { hidden = 128, batch = 8 } end },
  ["spk.lstm.tunables.cpu"] = { n = 2, args = function() return {}, { hidden = 128, batch = 8 } end },
  ["spk.schedule.new"] = { n = 1, opts = 1, args = function() return { batch = 8, capacity = 16, groups = 2, heights = { 8 } } end },
  ["spk.schedule.check"] = { n = 2, args = function() return { tile_rows = 8, tiles = 1, tiles_per_launch = 1, groups = 2 }, 8 end },
  -- numeric debugging
  ["spk.debug.first_divergence"] = { n = 3, opts = 3, args = function(m) return m.y(), m.y(), { tol = 0 } end },
  ["spk.debug.ulp_histogram"] = { n = 2, args = function(m) return m.t23(), m.t23() end },
  ["spk.debug.summary"] = { n = 1, args = function(m) return m.t23() end },
  ["spk.debug.ulp_distance"] = { n = 3, args = function() return 1.0, 1.5, "f32" end },
  -- the bindings under spk.core that scripts reach through the Lua API
  ["spk.core.system_build"] = { n = 0, args = function() end },
  ["spk.core.system_environment"] = { n = 0, args = function() end },
  ["spk.core.system_isatty"] = { n = 1, args = function() return io.stderr end },
  ["spk.core.system_nvtx_counts"] = { n = 1, args = function() return false end },
  ["spk.core.system_nvtx_enable"] = { n = 1, args = function() return true end },
  ["spk.core.system_nvtx_range"] = { n = 2, args = function() return "calls", function() end end },
  ["spk.core.lstm.pack_directions"] = { n = 3, args = function(m) return m.layers()[1].W, "iofc", "ifco" end },
  ["spk.core.lstm.unpack_directions"] = { n = 3, args = function(m) return m.layers()[1].W, "iofc", "ifco" end },
  ["spk.core.lstm.pack_bias"] = { n = 3, args = function(m) return m.layers()[1].B, "iofc", "ifco" end },
  ["spk.core.lstm.random"] = { n = 6, args = function() return 1, 3, 2, 1, 1.0, "f32" end },
  ["spk.core.lstm.from_torch"] = { n = 2, args = function(m) return m.torch(), 1 end },
  ["spk.core.lstm.to_torch"] = { n = 1, args = function(m) return m.layers()[1] end },
  ["spk.core.schedule.new"] = { n = 5, args = function() return 8, 16, nil, 32, { 8, 16 } end },
  ["spk.core.schedule.launches"] = { n = 2, args = function() return 4, 2 end },
  ["spk.core.schedule.check"] = { n = 3, args = function()
    return { tile_rows = 8, tiles = 1, tiles_per_launch = 1, groups = 2 }, 8, { { first = 0, count = 1 } }
  end },
  ["spk.core.plan_new"] = { n = 1, gpu = true, args = function(m)
    return { backend = "persistent", layers = m.gpu_layers(), batch = 1, steps = 2,
             kernel = { units = 4, hidden = 128 }, timeout_ms = 2000 }
  end },
  ["spk.core.kernel_variant"] = { n = 4, args = function() return "persistent", { units = 4, gate_block = 1 }, 8, 128 end },
  ["spk.core.kernel_families"] = { n = 0, args = function() end },
  ["spk.core.persistent_schedule_fits"] = { n = 5, args = function()
    return { batch = 8, groups = 1, tile_rows = 8, tiles = 1, tiles_per_launch = 1 }, { units = 4 }, 1000, 1000, 128
  end },
  ["spk.core.trace_check"] = { n = 3, args = function()
    return { layer = 1, direction = "forward", steps = { 1, 2 } }, 1, 2
  end },
  ["spk.core.cluster_schedule_pick"] = { n = 4, args = function() return 8, { 1, 2, 4 }, { 8, 8, 8 }, 0 end },
  ["spk.core.kernel_stack_new"] = { n = 1, gpu = true, args = function(m)
    return { layers = m.gpu_layers(), batch = 1, steps = 2, module = m.module(), entry = "k",
             args = { "output", "timeout_ns" }, launches = { { grid = 1, block = 32 } } }
  end },
  ["spk.core.kernel_stack_set_timeline"] = { n = 3, gpu = true, args = function(m)
    return m.kernel_stack().handle, m.module(), "k"
  end },
  ["spk.core.kernel_stack_check"] = { n = 2, args = function()
    return { name = "k", args = { "output", "timeout_ns" }, launches = { { grid = 1, block = 32 } } },
      { { type = "u64", size = 8 }, { type = "u64", size = 8 } }
  end },
  ["spk.core.kernel_stack_contract"] = { n = 0, args = function() end },
  ["spk.cudnn.stack"] = { n = 1, opts = 1, gpu = true, args = function(m) return { layers = m.gpu_layers(), batch = 1, steps = 2 } end },
  ["spk.cudnn.algorithms"] = { n = 1, opts = 1, gpu = true, args = function(m) return { layers = m.gpu_layers(), batch = 1, steps = 2 } end },
  ["spk.cudnn.version"] = { n = 0, args = function() end },
  -- step timelines
  ["spk.timeline.selection"] = { n = 2, opts = 1, args = function()
    return { layer = 1, direction = "reverse", step_range = { 1, 2 }, warp = 0 }, { step_range = { 1, 4 }, blocks = { 0, 3 } }
  end },
  ["spk.timeline.make"] = { n = 5, opts = 4, args = function(m)
    local tl = m.timeline()
    return tl.stamps, tl.columns, {}, { stages = tl.stages, waits_for = tl.waits_for, kernel = "k" }, tl.selection
  end },
  ["spk.timeline.records"] = { n = 1, args = function(m) return m.timeline() end },
  ["spk.timeline.durations"] = { n = 1, args = function(m) return m.timeline() end },
  ["spk.timeline.stats"] = { n = 2, opts = 2, args = function(m) return m.timeline(), {} end },
  ["spk.timeline.critical_path"] = { n = 2, opts = 2, args = function(m) return m.timeline(), { step_range = { 1, 2 } } end },
  ["spk.timeline.critical_view"] = { n = 2, opts = 2, args = function(m)
    return m.timeline(3), { step_range = { 1, 3 }, wait_floor_ns = 10 }
  end },
  ["spk.timeline.describe_view"] = { n = 1, args = function(m)
    return { chain = { { stage = "a", ns = 2, share = 1 } }, hidden = {}, steps = 1, step_ns = 2, jumps = 0,
             blocks = 1, attack = { stage = "a", ns = 2, share = 1 } }
  end },
  ["spk.timeline.load_stamps"] = { n = 2, opts = 2, args = function()
    return "docs/results/2026-12-01-h200-stack/step_timeline/stamps_b1.csv", { kernel = "recorded" }
  end },
  ["spk.timeline.percentile"] = { n = 2, args = function() return { 1, 2, 3 }, 0.5 end },
  ["spk.timeline.decode"] = { n = 2, opts = 2, args = function(m)
    return m.raw_timeline(), { stages = { "a" }, waits_for = {}, kernel = "k" }
  end },
  ["spk.timeline.demo"] = { n = 1, opts = 1, gpu = true, args = function() return { batch = 1, steps = 2, cluster = 2 } end },
  ["spk.timeline.demo_description"] = { n = 0, args = function() end },
  ["spk.core.timeline_decode"] = { n = 3, args = function(m) return m.raw_timeline(), { "a" }, 2 end },
  ["spk.core.timeline_columns"] = { n = 1, args = function() return { "a", "b" } end },
  ["spk.core.timeline_demo_stages"] = { n = 0, args = function() end },
  ["spk.core.timeline_demo_new"] = { n = 1, opts = 1, gpu = true, args = function(m)
    return { cluster = 2, batch = 1, steps = 2, weights = m.t({ 2, 64, 64 }, "f32") }
  end },
}

-- Functions of the Lua library modules that take an options table.
M.modules = {
  ["report.table"] = { n = 3, opts = 3, args = function() return { { a = 1 } }, { "a" }, { title = "t" } end },
  ["report.json_encode"] = { n = 2, opts = 2, args = function() return { a = 1 }, { indent = 1 } end },
  ["report.json"] = { n = 3, opts = 3, args = function() return "r.json", { a = 1 }, { indent = 1 } end },
  ["plot.ticks"] = { n = 3, opts = 3, args = function() return 1, 10, { log = true } end },
  ["plot.line"] = { n = 1, opts = 1, args = function() return { series = { { name = "a", x = { 1, 2 }, y = { 1, 2 } } } } end },
  ["plot.bar"] = { n = 1, opts = 1, args = function() return { categories = { "a" }, series = { { name = "a", y = { 1 } } } } end },
  ["benchmark.run"] = { n = 1, opts = 1, args = function()
    return { batches = { 1 }, steps = 2, layers = 1, backends = { "cpu" }, rounds = 1, warmup = 0, check = false,
             progress = function() end }
  end },
  ["experiment.measure_plan"] = { n = 4, opts = 4, args = function(m) return m.stack(), m.x(), nil, { rounds = 1, warmup = 0 } end },
  ["tuning.choose"] = { n = 2, opts = 2, args = function() return { hidden = 2, input = 3, layers = 1, batch = 1, steps = 2 }, { facts = false } end },
  ["report.timeline"] = { n = 2, opts = 2, args = function(m) return m.timeline(), { per_block = false, title = "t" } end },
  ["report.timeline_rows"] = { n = 2, opts = 2, args = function(m) return m.timeline(), { per_block = false } end },
  ["plot.gantt"] = { n = 1, opts = 1, args = function()
    return { tracks = { "a" }, categories = { "x" }, bars = { { track = 1, from = 0, to = 1, category = "x" } } }
  end },
  ["plot.timeline"] = { n = 2, opts = 2, args = function(m) return m.timeline(), { step_range = { 1, 2 } } end },
  ["tuning.lookup"] = { n = 2, args = function() return { entries = {} }, { hidden = 2, input = 3, layers = 1, batch = 1, steps = 2 } end },
}

-- ------------------------------------------------------------------ objects

-- The kinds of object spk hands out: how to make one, the metatable name it
-- carries (the registry's spk.* metatables must all be covered), and
-- recipes for its methods (self first). A method without a recipe is called
-- with self alone.
M.objects = {
  { kind = "tensor", area = "tensor", metatable = "spk.tensor", make = function(m) return m.t23() end, methods = {
      size = { 1 }, narrow = { 1, 1, 1 }, select = { 1, 1 }, slice = { 2, 1, 3, 2 }, transpose = { 1, 2 },
      view = { { 3, 2 } }, reshape = { { 3, 2 } }, to = { "f64" }, fill = { 2 }, get = { 1, 2 }, set = { 1, 2, 5 },
      add = { "t" }, sub = { "t" }, mul = { "t" }, scale = { 2 }, save = { "m.npy" }, to_device = { "cpu" },
      __add = { "t" }, __sub = { "t" }, __mul = { 2 }, __div = { 2 }, __eq = { "t" },
      mm = { "t'" }, matmul = { "t'" }, pow = { 2 }, mod = { "t" }, squeeze = { 1 }, unsqueeze = { 1 },
      permute = { 2, 1 }, any = { 1 }, all = { 1, true }, __pow = { 2 }, __mod = { 3 },
    } },
  { kind = "generator", area = "tensor", metatable = "spk.generator", make = function() return require("spk").generator(3) end,
    methods = { uniform = { { 2 }, { low = 0, high = 1 } }, normal = { { 2 }, { mean = 0, std = 2 } } } },
  { kind = "comparison", metatable = "spk.comparison", make = function(m) return require("spk").compare(m.t23(), m.t23()) end,
    methods = {} },
  { kind = "schedule", make = function() return require("spk").schedule.new { batch = 8, capacity = 16, groups = 2, heights = { 8 } } end,
    methods = {}, arity = { launches = 1 } },
  { kind = "cpu plan", make = function(m) return m.stack("cpu") end,
    methods = { forward = { "x", { trace = { layer = 1, direction = "forward", steps = { 1 } } } },
                time = { { rounds = 1, warmup = 0, x = "x" } } },
    arity = { forward = 3, time = 2, close = 1, is_closed = 1 }, opts = { forward = 3, time = 2 } },
  { kind = "cuda module", metatable = "spk.cuda.module", make = function(m) return m.module() end,
    methods = { kernel = { "k" }, params = { "k" } }, arity = { kernel = 2, code = 1, params = 2, close = 1 } },
  { kind = "cuda module (PTX)", make = function(m) return m.ptx_module() end,
    methods = { kernel = { "k" }, params = { "k" } }, arity = { kernel = 2, code = 1, params = 2, close = 1 } },
  { kind = "typed scalar", metatable = "spk.cuda.scalar", make = function() return require("spk").u32(3) end, methods = {} },
  { kind = "stream", gpu = true, metatable = "spk.cuda.stream", make = function(m) return m.stream() end,
    methods = { wait = { "event" } }, arity = { synchronize = 1, query = 1, wait = 2, close = 1 } },
  { kind = "event", gpu = true, metatable = "spk.cuda.event", make = function(m) return m.event() end,
    methods = { record = { "stream" }, elapsed = { "event" } },
    arity = { record = 2, synchronize = 1, query = 1, elapsed = 2, close = 1 } },
  { kind = "graph", gpu = true, metatable = "spk.cuda.graph", make = function(m)
      return m.keep(require("spk").cuda.graph(function() end, m.stream()))
    end, methods = { replay = { "stream" } }, arity = { replay = 2, nodes = 1, close = 1 } },
  { kind = "kernel", gpu = true, metatable = "spk.cuda.kernel", make = function(m) return m.kernel() end,
    methods = { launch = { { grid = 1, block = 32, args = { "device", "u64" }, smem = 0 } },
                occupancy = { { block = 32, smem = 0 } }, cooperative_capacity = { { block = 32 } },
                set_max_dynamic_smem = { 0 } },
    arity = { launch = 2, attributes = 1, occupancy = 2, cooperative_capacity = 2, params = 1, set_max_dynamic_smem = 2,
              close = 1 },
    opts = { launch = 2, occupancy = 2, cooperative_capacity = 2 } },
  { kind = "device tensor", gpu = true, area = "tensor", metatable = "spk.tensor", make = function(m) return m.device() end,
    methods = { cpu = {}, to_device = { "cpu" } } },
  { kind = "persistent plan", gpu = true, make = function(m) return m.stack("persistent") end,
    methods = { forward = { "x", { trace = { layer = 1, direction = "forward", steps = { 1 } } } },
                time = { { rounds = 1, warmup = 0, x = "x" } } },
    arity = { forward = 3, time = 2, close = 1, is_closed = 1 }, opts = { forward = 3, time = 2 } },
  { kind = "persistent plan (core)", gpu = true, metatable = "spk.lstm.plan", make = function(m) return m.stack("persistent").handle end,
    methods = { forward = { "x", { trace = { layer = 1, direction = "forward", steps = { 1 } } } },
                time = { "x", 1, 0, { layer = 0, direction = 0, first_step = 0, steps = 2, first_block = 0, blocks = 2 } } },
    arity = { forward = 3, time = 5, info = 1, close = 1 } },
  { kind = "cluster plan", gpu = true, make = function(m) return m.stack("cluster") end,
    methods = { forward = { "x", { timeline = { step_range = { 1, 2 }, blocks = { 0, 1 } } } },
                time = { { rounds = 1, warmup = 0, x = "x", timeline = { step_range = { 1, 2 } } } } },
    arity = { forward = 3, time = 2, close = 1, is_closed = 1 }, opts = { forward = 3, time = 2 } },
  { kind = "cluster plan (core)", gpu = true, metatable = "spk.lstm.plan", make = function(m) return m.stack("cluster").handle end,
    methods = { forward = { "x", { timeline = { layer = 0, direction = 0, first_step = 0, steps = 2, first_block = 0,
                                                blocks = 2 } } },
                time = { "x", 1, 0, { layer = 0, direction = 1, first_step = 1, steps = 1, first_block = 0, blocks = 1 } } },
    arity = { forward = 3, time = 5, info = 1, close = 1 } },
  { kind = "kernel stack plan", gpu = true, make = function(m) return m.kernel_stack() end,
    methods = { forward = { "x" }, time = { { rounds = 1, warmup = 0, x = "x" } } },
    arity = { forward = 3, time = 2, close = 1, is_closed = 1 }, opts = { forward = 3, time = 2 } },
  { kind = "kernel stack plan (core)", gpu = true, metatable = "spk.lstm.plan",
    make = function(m) return m.kernel_stack().handle end,
    methods = { forward = { "x" }, time = { "x", 1, 0 } }, arity = { forward = 3, time = 5, info = 1, close = 1 } },
  { kind = "cudnn plan", gpu = true, metatable = "spk.cudnn.stack", make = function(m) return m.stack("cudnn") end,
    methods = { forward = { "x" }, forward_into = { "device x", "device y" }, device_buffers = { "x" },
                time = { { rounds = 1, warmup = 0 } } },
    arity = { forward = 3, forward_into = 4, device_buffers = 3, time = 2, is_closed = 1, close = 1 },
    opts = { time = 2 } },
  { kind = "timeline demo", gpu = true, make = function(m) return m.demo() end,
    methods = { forward = { "demo x", { timeline = { step_range = { 1, 2 }, blocks = { 0, 1 } } } },
                time = { { rounds = 1, warmup = 0, build = "timeline" } } },
    arity = { forward = 3, time = 2, close = 1, is_closed = 1 }, opts = { forward = 3, time = 2 } },
  { kind = "timeline demo (core)", gpu = true, metatable = "spk.timeline_demo", make = function(m) return m.demo().core end,
    methods = { forward = { "demo x", { layer = 0, direction = 0, first_step = 0, steps = 2, first_block = 0, blocks = 2 } },
                time = { "demo x", "timeline", 1, 0 } },
    arity = { forward = 3, time = 6, info = 1, close = 1 } },
}

-- Resolves the placeholders of a method recipe ("t", "x", "event", ...) with
-- fresh objects from m.
function M.method_args(m, spec)
  local spk = require "spk"
  local out = {}
  for i, a in ipairs(spec or {}) do
    local v = a
    if a == "t" then v = m.t23()
    elseif a == "t'" then v = m.t23():transpose() -- a [3, 2] for matrix products with t
    elseif a == "x" then v = m.x()
    elseif a == "event" then v = m.event()
    elseif a == "stream" then v = m.stream()
    elseif a == "device x" then v = m.device { 1, 2, 3 }
    elseif a == "device y" then v = m.device { 1, 2, 256 } -- the GPU plans' hidden 128, both directions
    elseif a == "demo x" then v = m.t { 1, 2, 64 } -- the timeline demo's 64 units
    elseif type(a) == "table" then
      v = {}
      for k, x in pairs(a) do
        if x == "x" then x = m.x() elseif x == "device" then x = m.device() elseif x == "u64" then x = spk.u64(6) end
        if type(x) == "table" then
          local inner = {}
          for ik, ix in pairs(x) do
            if ix == "device" then ix = m.device() elseif ix == "u64" then ix = spk.u64(6) elseif ix == "x" then ix = m.x() end
            inner[ik] = ix
          end
          x = inner
        end
        v[k] = x
      end
    end
    out[i] = v
  end
  return out
end

-- The methods of an object: its metatable's __index table (or the methods
-- table a C __index closes over, or its "methods" field), its class's
-- functions for Lua objects, and the metamethods it answers.
function M.methods_of(object)
  local mt = debug.getmetatable(object)
  local index = mt and rawget(mt, "__index")
  if type(index) == "function" then
    local _, up = debug.getupvalue(index, 1)
    index = type(up) == "table" and up or rawget(mt, "methods")
  end
  local out, seen = {}, {}
  local function add(name, fn)
    if type(fn) == "function" and not seen[name] then
      seen[name] = true
      out[#out + 1] = { name, fn }
    end
  end
  if type(index) == "table" then
    local keys = {}
    for k, v in pairs(index) do if type(k) == "string" and type(v) == "function" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do add(k, index[k]) end
  end
  if mt then
    for _, meta in ipairs { "__index", "__add", "__sub", "__mul", "__div", "__unm", "__len", "__eq", "__tostring",
                            "__call", "__concat", "__lt", "__le" } do
      add(meta, rawget(mt, meta))
    end
  end
  return out
end

-- Every function reachable from spk's tables, once each (by its first name
-- in sorted order); names[fn] lists every name it has.
function M.functions(spk)
  local out, names, seen = {}, {}, {}
  local function walk(tbl, prefix)
    if seen[tbl] then return end
    seen[tbl] = true
    local keys = {}
    for k in pairs(tbl) do if type(k) == "string" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = rawget(tbl, k)
      if type(v) == "function" then
        if not names[v] then
          names[v] = {}
          out[#out + 1] = { prefix .. k, v }
        end
        table.insert(names[v], prefix .. k)
      elseif type(v) == "table" and getmetatable(v) == nil then
        walk(v, prefix .. k .. ".")
      end
    end
  end
  -- the public names first, so an alias under spk.core is reported by them
  local core = spk.core
  local public = {}
  for k, v in pairs(spk) do if k ~= "core" then public[k] = v end end
  walk(public, "spk.")
  walk(core, "spk.core.")
  return out, names
end

-- The recipe of a function, under any of its names.
function M.recipe(names, fn)
  for _, name in ipairs(names[fn] or {}) do
    if M.recipes[name] then return M.recipes[name], name end
  end
end

return M
