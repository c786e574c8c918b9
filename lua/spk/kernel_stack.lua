-- spk.lstm.kernel_stack: the LSTM stack around a recurrence kernel of one's
-- own, on the machinery the built-in kernels run on (src/lstm/kernel_stack.h):
-- the weights packed as the kernel asks, both directions' input projections in
-- one batched cuBLAS GEMM, its launches per layer (one a direction, the
-- reverse one on a side stream where concurrent, or one for both), CUDA-graph
-- timing, the output layout, traces, the status word. The contract a kernel
-- keeps, with a walk-through: docs/kernels.md.
--
--   local spec = {
--     file = "my_kernel.cu",            -- or source = "..." (CUDA C++); NVRTC compiles it, with
--                                       -- spk's kernel folder on the include path (lstm_cell.cuh, ...)
--     entry = "my_lstm",                -- its extern "C" __global__ function
--     defines = {ROWS = 4},             -- or function(shape) -> table; the plan adds SPK_HIDDEN,
--                                       -- SPK_GATE_I/F/C/O (positions 0..3) and SPK_PACK_ROWS
--     options = {"-lineinfo"},          -- NVRTC options (optional)
--     args = {"gates", "r", "bias", "output", "status", "batch", "steps", "direction"},
--                                       -- its parameters, in order, by the contract's names
--                                       -- (spk.lstm.kernel_contract())
--     packing = {order = "ifco", layout = "units"}, -- any of the 24 orders; "units" (row u*4 + p)
--                                       -- or "rows" (row p*H + u)
--     launch = function(shape)          -- shape = {batch, steps, hidden, input, layers}
--       return {grid = {shape.batch, 1, 1}, block = 4 * shape.hidden, smem = 0,
--               cluster = nil, cooperative = false, co_resident = false,
--               concurrent = false,     -- a kernel taking direction: the reverse launch on a side stream
--               tile_rows = 1, state_words = 0}   -- what the tile_rows and state arguments get
--     end,                              -- or the table itself; launches = {{direction =, first_tile =,
--                                       -- grid = ...}, ...} lists them one by one
--     statuses = {[1] = "a wait timed out"},   -- what its status codes mean
--     name = "my kernel", timeout_ms = 10000, watchdog_ms = (4 x timeout + 60 s), check_writes = true,
--     arch_specific = false,            -- true: compiled for the arch-specific target (sm_90a,
--                                       -- compute_90a: wgmma and the other sm_90a instructions)
--     timeline = {stages = {"dot", "cell"}, waits_for = {}},  -- the stages the kernel's timeline
--                                       -- build (SPK_TIMELINE=1, kernels/spk_timeline.cuh) stamps, in
--                                       -- order, and a stage that waits for every block's end of
--                                       -- another at the previous step ({wait = "publish"})
--   }
--   local plan = spk.lstm.kernel_stack(spec + {layers =, batch =, steps =, math = one of spk.lstm.math_modes})
--   plan:forward(x[, {trace = {layer =, direction =, steps =}} | {timeline = {...}}]), plan:time{[timeline =]},
--   plan:close(), plan.variant, plan.kernel (registers, spills, capacity, launches, defines, args, packing, ...),
--   plan.timeline (with spec.timeline: {stages =, waits_for =, blocks =, warps =, group =}); a timeline
--   forward or timing compiles the timeline build on first use (docs/timeline.md)
--
--   spk.lstm.kernel_check(spec[, shape]) -> report   -- no device: compiles the kernel with NVRTC
--       (PTX for compute_90 and a cubin for sm_90, or the device's), checks its parameters against
--       args, the launch rule's result at shape (default: the workload's, batch 1), and each launch
--       against the architecture's limits with the cubin's registers and shared memory; the report
--       carries registers, spills, static_smem and every entry's usage; with spec.timeline also the
--       timeline build's compile and parameters (report.timeline)
--   spk.lstm.kernel_file(path) -> spec               -- a kernel file: a Lua file returning a spec,
--       whose `file` is relative to it (experiments/kernels/*.lua)
--   spk.lstm.kernel_backend(name, spec) -> constructor  -- registers spk.lstm.backends[name], so
--       spk.lstm.stack{backend = name}, spk.benchmark and spk bench --kernel run it, held to the
--       built-in kernels' bound
--   spk.lstm.kernel_contract() -> {{name =, kind =, c_type =, meaning =, both =}, ...}
return function(spk, core)
  local options = require "spk.options"
  local doc = require "spk.doc"
  local GATES = core.lstm.gate_orders

  local SPEC = { "name", "file", "source", "entry", "defines", "options", "args", "packing", "launch", "statuses",
                 "check_writes", "timeout_ms", "watchdog_ms", "dir", "arch_specific", "timeline" }
  local STACK = { "layers", "batch", "steps", "math", "backend" }
  local RESULT = { "grid", "block", "smem", "cluster", "cooperative", "co_resident", "concurrent", "tile_rows",
                   "state_words", "launches" }
  local LAUNCH = { "direction", "grid", "block", "smem", "cluster", "cooperative", "co_resident", "first_tile" }
  -- The parameters SPK_TIMELINE_PARAMS adds (src/cuda/timeline.h: SPK_TIMELINE_ARGS).
  local TIMELINE_ARGS = core.timeline_args
  local PLAN_DEFINES = { SPK_HIDDEN = true, SPK_GATE_I = true, SPK_GATE_F = true, SPK_GATE_C = true,
                         SPK_GATE_O = true, SPK_PACK_ROWS = true }
  -- The workload the checks assume without a shape: pyannote's stack at batch 1.
  local DEFAULT_SHAPE = { batch = 1, steps = 589, hidden = 128, input = 60, layers = 4 }

  local function set_of(list)
    local s = {}
    for _, k in ipairs(list) do s[k] = true end
    return s
  end

  local function fail(where, message) error(("%s: %s"):format(where, message)) end

  local function shown(v)
    if type(v) == "string" then return ("%q"):format(v) end
    return options.type_name(v) == "table" and "a table" or tostring(v)
  end

  function spk.lstm.kernel_contract()
    return core.kernel_stack_contract()
  end

  -- The defines the plan gives every kernel: the hidden size and where each gate sits.
  local function plan_defines(packing, hidden)
    local order = packing.order or GATES.packed
    local d = { SPK_HIDDEN = hidden, SPK_PACK_ROWS = (packing.layout or "units") == "rows" and 1 or 0 }
    for _, g in ipairs { "i", "f", "c", "o" } do
      local at = order:find(g, 1, true)
      d["SPK_GATE_" .. g:upper()] = at and at - 1 or -1
    end
    return d
  end

  -- The spec's own checks (no compile): returns a normalised copy.
  local function check_spec(spec, where)
    if type(spec) ~= "table" then fail(where, "expects a kernel spec table {file | source =, entry =, args =, ...}") end
    if (spec.file == nil) == (spec.source == nil) then
      fail(where, "give exactly one of file = (a .cu file) and source = (its text)")
    end
    for _, key in ipairs { "file", "source", "entry", "name", "dir" } do
      if spec[key] ~= nil and type(spec[key]) ~= "string" then
        fail(where, ("%s must be a string, got %s"):format(key, shown(spec[key])))
      end
    end
    if type(spec.entry) ~= "string" or spec.entry == "" then
      fail(where, "entry (the kernel's extern \"C\" __global__ name) is missing")
    end
    if type(spec.args) ~= "table" or #spec.args == 0 then
      fail(where, "args must list the kernel's parameters by the contract's names (spk.lstm.kernel_contract())")
    end
    if spec.launch == nil or (type(spec.launch) ~= "function" and type(spec.launch) ~= "table") then
      fail(where, "launch must be a function(shape) -> {grid =, block =, ...} or such a table")
    end
    if spec.defines ~= nil and type(spec.defines) ~= "table" and type(spec.defines) ~= "function" then
      fail(where, "defines must be a table {NAME = value} or a function(shape) -> table")
    end
    if spec.options ~= nil and type(spec.options) ~= "table" then
      fail(where, "options must be a list of NVRTC options")
    end
    local packing = spec.packing or {}
    if type(packing) ~= "table" then fail(where, "packing must be a table {order =, layout =}") end
    options.check_keys(packing, { "order", "layout" }, where .. ": packing")
    for _, key in ipairs { "check_writes", "arch_specific" } do
      if spec[key] ~= nil and type(spec[key]) ~= "boolean" then
        fail(where, ("%s must be true or false, got %s"):format(key, shown(spec[key])))
      end
    end
    for _, key in ipairs { "timeout_ms", "watchdog_ms" } do
      if spec[key] ~= nil and (math.type(spec[key]) ~= "integer" or spec[key] < 0) then
        fail(where, ("%s must be an integer >= 0, got %s"):format(key, shown(spec[key])))
      end
    end
    if spec.timeline ~= nil then
      if type(spec.timeline) ~= "table" then
        fail(where, ("timeline must be a table {stages = {\"dot\", ...}, waits_for = {...}}, got %s"):format(
          shown(spec.timeline)))
      end
      options.check_keys(spec.timeline, { "stages", "waits_for" }, where .. ": timeline")
    end
    local path = spec.file
    if path and spec.dir and path:sub(1, 1) ~= "/" then path = spec.dir .. "/" .. path end
    return { name = spec.name or spec.entry, file = path, source = spec.source, entry = spec.entry,
             args = spec.args, packing = { order = packing.order or GATES.packed, layout = packing.layout or "units" },
             launch = spec.launch, defines = spec.defines, options = spec.options, statuses = spec.statuses,
             check_writes = spec.check_writes ~= false, timeout_ms = spec.timeout_ms or 10000,
             watchdog_ms = spec.watchdog_ms, arch_specific = spec.arch_specific == true, timeline = spec.timeline }
  end

  local function check_shape(shape, where)
    if shape == nil then return DEFAULT_SHAPE end
    if type(shape) ~= "table" then fail(where, "shape must be a table {batch, steps, hidden, input, layers}") end
    options.check_keys(shape, { "batch", "steps", "hidden", "input", "layers" }, where .. ": shape")
    local out = {}
    for k, v in pairs(DEFAULT_SHAPE) do
      local given = shape[k]
      if given ~= nil and (math.type(given) ~= "integer" or given < 1) then
        fail(where, ("shape.%s must be a positive integer, got %s"):format(k, shown(given)))
      end
      out[k] = given or v
    end
    return out
  end

  -- The launch rule at a shape, as the description core takes.
  local function describe(s, shape, where)
    local result = s.launch
    if type(result) == "function" then
      local copy = {}
      for k, v in pairs(shape) do copy[k] = v end
      result = result(copy)
    end
    if type(result) ~= "table" then
      fail(where, ("the launch rule must return a table {grid =, block =, ...}, got %s"):format(shown(result)))
    end
    options.check_keys(result, RESULT, where .. ": the launch rule's result")
    local takes_direction = false
    for _, a in ipairs(s.args) do takes_direction = takes_direction or a == "direction" end
    local launches = {}
    if result.launches ~= nil then
      if type(result.launches) ~= "table" or #result.launches == 0 then
        fail(where, "the launch rule's launches must be a non-empty list")
      end
      for i, l in ipairs(result.launches) do
        if type(l) ~= "table" then fail(where, ("launches[%d] must be a table"):format(i)) end
        options.check_keys(l, LAUNCH, ("%s: launches[%d]"):format(where, i))
        local one = {}
        for _, k in ipairs(LAUNCH) do one[k] = l[k] end
        for _, k in ipairs { "grid", "block", "smem", "cluster", "cooperative", "co_resident" } do
          if one[k] == nil then one[k] = result[k] end
        end
        launches[i] = one
      end
    else
      local geometry = { grid = result.grid, block = result.block, smem = result.smem, cluster = result.cluster,
                         cooperative = result.cooperative, co_resident = result.co_resident }
      for _, dir in ipairs(takes_direction and { "forward", "reverse" } or { "both" }) do
        local one = { direction = dir }
        for k, v in pairs(geometry) do one[k] = v end
        launches[#launches + 1] = one
      end
    end
    return { name = s.name, args = s.args, launches = launches, concurrent = result.concurrent == true,
             tile_rows = result.tile_rows, state_words = result.state_words, timeout_ms = s.timeout_ms,
             watchdog_ms = s.watchdog_ms or (s.timeout_ms > 0 and 4 * s.timeout_ms + 60000 or 0),
             packing = s.packing, statuses = s.statuses, check_writes = s.check_writes, timeline = s.timeline }
  end

  local function defines_at(s, shape, where)
    local given = s.defines
    if type(given) == "function" then
      local copy = {}
      for k, v in pairs(shape) do copy[k] = v end
      given = given(copy)
      if type(given) ~= "table" then
        fail(where, ("the defines rule must return a table, got %s"):format(shown(given)))
      end
    end
    local out = plan_defines(s.packing, shape.hidden)
    for k, v in pairs(given or {}) do
      if PLAN_DEFINES[k] then
        fail(where, ("defines.%s is the plan's (it says the hidden size and the packing); leave it out"):format(k))
      end
      out[k] = v
    end
    return out
  end

  -- compute_XY (kind "compute") or sm_XY ("sm") of the device, or of 9.0 without one;
  -- with an "a" for an arch-specific spec.
  local function device_arch(s, kind)
    local ok, d = pcall(function() return spk.cuda.available() and spk.cuda.device() or nil end)
    local xy = ok and d and d.cc and tostring(d.cc):gsub("%.", "") or "90"
    return kind .. "_" .. xy .. (s.arch_specific and "a" or "")
  end

  local function compile(s, defines, arch, where)
    local ok, m = pcall(spk.cuda.compile, { file = s.file, source = s.source, defines = defines, options = s.options,
                                            arch = arch })
    if not ok then fail(where, ("kernel %s: %s"):format(s.name, tostring(m):gsub("^[^\n]-%.lua:%d+: ", ""))) end
    return m
  end

  -- The contract check without a device: the description and the PTX parameters.
  local function check_contract(s, desc, defines, where)
    local ptx = compile(s, defines, device_arch(s, "compute"), where)
    local ok, params = pcall(function() return ptx:params(s.entry) end)
    if not ok then
      ptx:close()
      fail(where, ("kernel %s: %s"):format(s.name, tostring(params):gsub("^[^\n]-%.lua:%d+: ", "")))
    end
    ptx:close()
    local checked, why = pcall(core.kernel_stack_check, desc, params)
    if not checked then fail(where, tostring(why):gsub("^[^\n]-%.lua:%d+: ", "")) end
    return params
  end

  -- The timeline build's defines: the plan's, SPK_TIMELINE=1 and the stage count the kernel's
  -- SPK_TIMELINE_SETUP must stamp (kernels/spk_timeline.cuh checks it as it compiles).
  local function timeline_defines(s, defines)
    local d = {}
    for k, v in pairs(defines) do d[k] = v end
    d.SPK_TIMELINE, d.SPK_TIMELINE_STAGE_COUNT = 1, #s.timeline.stages
    return d
  end

  -- The timeline build's contract without a device: it compiles with the stage count the spec
  -- names, takes the plan's parameters and then the recording's seven (SPK_TIMELINE_PARAMS), and
  -- stamps (SPK_TIMELINE_SETUP and SPK_TIMELINE_START read %globaltimer). Its parameters.
  local function check_timeline_build(s, desc, defines, where)
    local ptx = compile(s, timeline_defines(s, defines), device_arch(s, "compute"), where)
    local ok, params = pcall(function() return ptx:params(s.entry) end)
    local code = ok and ptx:code() or ""
    ptx:close()
    if not ok then fail(where, ("kernel %s: %s"):format(s.name, tostring(params):gsub("^[^\n]-%.lua:%d+: ", ""))) end
    local recording = #params - #s.args
    if recording ~= TIMELINE_ARGS then
      fail(where, ("kernel %s: built with SPK_TIMELINE=1 it takes %d parameters, but a timeline forward passes %d "
        .. "(its %d and the recording's %d): put SPK_TIMELINE_PARAMS right after its last parameter "
        .. "(kernels/spk_timeline.cuh), or leave timeline out of its spec"):format(s.name, #params,
        #s.args + TIMELINE_ARGS, #s.args, TIMELINE_ARGS))
    end
    local own = {}
    for i = 1, #s.args do own[i] = params[i] end
    local checked, why = pcall(core.kernel_stack_check, desc, own)
    if not checked then fail(where, "its timeline build: " .. tostring(why):gsub("^[^\n]-%.lua:%d+: ", "")) end
    if not code:find("%globaltimer", 1, true) then
      fail(where, ("kernel %s: its timeline build stamps nothing: call SPK_TIMELINE_SETUP before the step loop and "
        .. "SPK_TIMELINE_START and SPK_TIMELINE_STAMP in it (kernels/spk_timeline.cuh)"):format(s.name))
    end
    return params
  end

  -- Every launch against its architecture's limits with what the entry uses, both known without a
  -- device (src/cuda/launch_limits.h): the cubin's entries, or nil for an architecture without a table.
  local function check_limits(s, desc, cubin, where)
    if not pcall(spk.cuda.launch_limits, cubin.arch) then return nil end
    local entries = spk.cuda.cubin_entries((cubin:code()), cubin.arch)
    local entry
    for _, e in ipairs(entries) do
      if e.name == s.entry then entry = e end
    end
    if not entry then fail(where, ("kernel %s: the cubin has no kernel %s"):format(s.name, s.entry)) end
    for i, l in ipairs(desc.launches) do
      -- the plan opts into clusters above the portable size wherever a launch asks for one
      local ok, why = pcall(spk.cuda.check_launch, cubin.arch, entry,
        { grid = l.grid, block = l.block, smem = l.smem, cluster = l.cluster, nonportable_cluster = true },
        ("kernel %s: launch %d (%s)"):format(s.name, i, tostring(l.direction)))
      if not ok then fail(where, (tostring(why):gsub("^[^\n]-%.lua:%d+: ", ""))) end
    end
    return entries, entry
  end

  function spk.lstm.kernel_check(spec, shape)
    local where = "spk.lstm.kernel_check"
    local s = check_spec(spec, where)
    shape = check_shape(shape, where)
    local desc = describe(s, shape, where)
    local defines = defines_at(s, shape, where)
    local params = check_contract(s, desc, defines, where)
    local has_device = spk.cuda.available()
    local cubin_arch -- the device's (nil), or sm_90 without one; arch-specific: with its "a"
    if not has_device or s.arch_specific then cubin_arch = device_arch(s, "sm") end
    local cubin = compile(s, defines, cubin_arch, where)
    local ok, entries, entry = pcall(check_limits, s, desc, cubin, where)
    if not ok then
      cubin:close()
      error(entries, 0)
    end
    local report = { name = s.name, entry = s.entry, file = s.file, args = s.args, params = params,
                     packing = s.packing, defines = defines, launches = desc.launches, concurrent = desc.concurrent,
                     tile_rows = desc.tile_rows, state_words = desc.state_words, shape = shape, arch = cubin.arch,
                     cubin_bytes = cubin.size, cached = cubin.cached, log = cubin.log, entries = entries,
                     registers = entry and entry.registers, spills = entry and entry.local_bytes,
                     static_smem = entry and entry.static_smem }
    cubin:close()
    if s.timeline then
      local built = check_timeline_build(s, desc, defines, where)
      report.timeline = { stages = s.timeline.stages, waits_for = s.timeline.waits_for or {}, params = built }
    end
    return report
  end

  local function variant_of(s, desc)
    local l = desc.launches[1]
    local function dims(v)
      if type(v) == "table" then return "{" .. table.concat(v, ", ") .. "}" end
      return tostring(v)
    end
    return ("%s: %d launch%s a layer of grid %s x block %s%s%s, %s %s"):format(s.name, #desc.launches,
      #desc.launches == 1 and "" or "es", dims(l.grid), dims(l.block), l.cluster and (", cluster " .. dims(l.cluster))
      or "", desc.concurrent and ", concurrent" or "", s.packing.order, s.packing.layout)
  end

  local function stack(opts, backend)
    local where = ("spk.lstm.stack (%s)"):format(backend)
    if type(opts) ~= "table" then fail(where, "expects a table {layers =, batch =, steps =, file =, entry =, ...}") end
    local allowed = set_of(SPEC)
    local self = spk.lstm.plan_options(opts, backend, allowed)
    local spec = {}
    for _, k in ipairs(SPEC) do spec[k] = opts[k] end
    local s = check_spec(spec, where)
    local shape = { batch = self.batch, steps = self.steps, hidden = self.hidden, input = self.input,
                    layers = #self.layers }
    local desc = describe(s, shape, where)
    local defines = defines_at(s, shape, where)
    check_contract(s, desc, defines, where)
    if not spk.cuda.available() then
      fail(where, ("kernel %s: running it needs a GPU: %s (spk.lstm.kernel_check checks it without one)"):format(
        s.name, spk.cuda.no_device_reason()))
    end
    local module = compile(s, defines, s.arch_specific and device_arch(s, "sm") or nil, where)
    local checked, why = pcall(check_limits, s, desc, module, where)
    if not checked then
      module:close()
      error(why, 0)
    end
    local args = { layers = self.layers, batch = self.batch, steps = self.steps, math = self.math, module = module,
                   entry = s.entry }
    for k, v in pairs(desc) do args[k] = v end
    local ok, handle = pcall(core.kernel_stack_new, args)
    module:close() -- the plan holds its own reference
    if not ok then fail(where, tostring(handle):gsub("^[^\n]-%.lua:%d+: ", "")) end
    local info = handle:info()
    self.handle = handle
    self.timeline = info.timeline
    self.kernel = info.kernel
    self.kernel.name, self.kernel.entry, self.kernel.file = s.name, s.entry, s.file
    self.kernel.args, self.kernel.packing, self.kernel.defines = s.args, s.packing, defines
    self.launch = desc
    self.variant = variant_of(s, desc) .. spk.lstm.math_suffix(self.math)
    -- the timeline build, compiled and handed to the plan on the first timeline forward or timing
    local function prepare_timeline(plan)
      if plan.timeline_build_ready then return end
      check_timeline_build(s, desc, defines, where)
      local built = compile(s, timeline_defines(s, defines), s.arch_specific and device_arch(s, "sm") or nil, where)
      local given, err = pcall(core.kernel_stack_set_timeline, plan.handle, built, s.entry)
      built:close() -- the plan holds its own reference
      if not given then fail(where, tostring(err):gsub("^[^\n]-%.lua:%d+: ", "")) end
      plan.timeline_build_ready = true
    end
    return spk.lstm.new_plan(self, { forward_options = { trace = true },
                                     prepare_timeline = s.timeline and prepare_timeline or nil })
  end

  function spk.lstm.kernel_stack(opts)
    local backend = type(opts) == "table" and type(opts.backend) == "string" and opts.backend or "kernel"
    return stack(opts, backend)
  end

  function spk.lstm.kernel_file(path)
    if type(path) ~= "string" then error("spk.lstm.kernel_file: path must be a string", 2) end
    local ok, text = pcall(spk.files.read, path)
    if not ok then error("spk.lstm.kernel_file: " .. tostring(text):gsub("^[^\n]-%.lua:%d+: ", ""), 2) end
    local chunk, why = load(text, "@" .. path, "t")
    if not chunk then error(("spk.lstm.kernel_file: %s"):format(why), 2) end
    local spec = chunk()
    if type(spec) ~= "table" then
      error(("spk.lstm.kernel_file: %s must return a kernel spec table, got %s"):format(path, shown(spec)))
    end
    options.check_keys(spec, SPEC, "spk.lstm.kernel_file: " .. path)
    local copy = {}
    for k, v in pairs(spec) do copy[k] = v end
    copy.dir = copy.dir or (path:match("^(.*)/[^/]*$") or ".")
    copy.name = copy.name or path:match("([^/]+)%.lua$")
    return copy
  end

  function spk.lstm.kernel_backend(name, spec)
    if type(name) ~= "string" or not name:match("^[%w_%-]+$") then
      error("spk.lstm.kernel_backend: name must be a word (letters, digits, _ and -), got " .. shown(name))
    end
    local builtin = { cudnn = true, cpu = true, auto = true }
    for _, f in ipairs(core.kernel_families()) do builtin[f.backend] = true end
    if builtin[name] then error(("spk.lstm.kernel_backend: %q is a built-in backend"):format(name), 2) end
    check_spec(spec, "spk.lstm.kernel_backend")
    local function make(opts)
      if type(opts) ~= "table" then error(("spk.lstm.stack (%s): expects a table"):format(name), 2) end
      local merged = {}
      for k, v in pairs(spec) do merged[k] = v end
      for k, v in pairs(opts) do merged[k] = v end
      merged.backend = name
      return stack(merged, name)
    end
    make = options.takes(1, "spk.lstm.backends." .. name, make)
    spk.lstm.backends[name] = make
    -- its rows in spk.benchmark are held to the built-in kernels' bound
    local benchmark = require "spk.benchmark"
    benchmark.bounds[name] = benchmark.bounds.persistent
    return make
  end

  spk.lstm.kernel_contract = options.takes(0, "spk.lstm.kernel_contract", spk.lstm.kernel_contract)
  spk.lstm.kernel_check = options.takes(2, "spk.lstm.kernel_check", spk.lstm.kernel_check)
  spk.lstm.kernel_stack = options.takes(1, "spk.lstm.kernel_stack", spk.lstm.kernel_stack)
  spk.lstm.kernel_file = options.takes(1, "spk.lstm.kernel_file", spk.lstm.kernel_file)
  spk.lstm.kernel_backend = options.takes(2, "spk.lstm.kernel_backend", spk.lstm.kernel_backend)

  doc(spk.lstm.kernel_stack, [[
spk.lstm.kernel_stack{file | source =, entry =, args =, launch =, packing =, defines =, statuses =,
                      timeline =, layers =, batch =, steps =, math =, ...} -> plan
The stack around a recurrence kernel of one's own (docs/kernels.md): spk packs the weights as
packing says, runs both directions' input projections in one batched GEMM and the kernel's launches
per layer, checked against its parameters and for co-residency before any launch. The plan has
forward (with a trace when the kernel takes the trace arguments), time and close. With timeline =
{stages = {"dot", "cell"}, waits_for = {}} (the stages its SPK_TIMELINE=1 build stamps, in order;
waits_for {wait = "publish"}: a stage waiting for every block's end of another at the previous step),
plan.timeline says what a recording covers and forward and time take a timeline (docs/timeline.md),
the timeline build compiled on first use.]])
  doc(spk.lstm.kernel_check, [[
spk.lstm.kernel_check(spec[, shape = {batch = 1, steps = 589, hidden = 128, input = 60, layers = 4}]) -> report
Without a device: compiles the kernel with NVRTC (PTX, and a cubin for sm_90 or the device's), checks
its parameters against spec.args, the launch rule's result at shape, and every launch against the
architecture's limits (grid, block, threads, cluster, shared memory, registers: spk.cuda.check_launch);
report = {params, launches, defines, arch, cubin_bytes, registers, spills, static_smem, entries =
{{name, registers, local_bytes, static_smem, ...}, ...}, ...}. With spec.timeline, also its timeline
build: the stages checked, its parameters (the plan's, then the recording's seven) and its stamps,
report.timeline = {stages, waits_for, params}.]])
  doc(spk.lstm.kernel_file, [[
spk.lstm.kernel_file(path) -> spec
A kernel file: a Lua file returning a kernel spec (file =, entry =, args =, launch =, ...); its file =
is relative to it.]])
  doc(spk.lstm.kernel_backend, [[
spk.lstm.kernel_backend(name, spec) -> constructor
Registers spec as backend `name` (spk.lstm.stack{backend = name}, spk.benchmark, spk bench --kernel),
its rows held to the built-in kernels' bound.]])
  doc(spk.lstm.kernel_contract, [[
spk.lstm.kernel_contract() -> {{name =, kind =, c_type =, meaning =, both =}, ...}
The arguments a recurrence kernel may take, by name, with what each holds (docs/kernels.md).]])
  doc.area { name = "kernel_stack", source = "spk.kernel_stack",
             summary = "spk.lstm.kernel_stack: the stack around a recurrence kernel of one's own",
             contents = { spk.lstm.kernel_stack, spk.lstm.kernel_check, spk.lstm.kernel_file,
                          spk.lstm.kernel_backend, spk.lstm.kernel_contract } }
end
