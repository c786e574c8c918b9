-- The LSTM area's Lua side: spk.lstm (layer stacks, loaders, packing, the CPU
-- reference) and spk.schedule (tile schedules of the persistent kernel), over
-- the bindings core.lstm and core.schedule (src/lua/lstm.c).
--
-- A stack is an array of layers {W = [2, 4H, in], R = [2, 4H, H], B = [2, 8H]}
-- in ONNX layout, gate blocks i, o, f, c. Layers are counted
-- from 1 in Lua and in every message; files name them from 0 (l0_W.npy,
-- weight_ih_l0), as PyTorch and the fixtures do.
--
--   spk.lstm.validate(layers) -> {layers = n, hidden = H, input = in}
--   spk.lstm.load(path)  -- a .onnx model: its chain of bidirectional LSTM nodes
--                        -- (src/lstm/onnx_stack.h says which models load), or
--                        -- a folder of l<k>_W.npy, l<k>_R.npy, l<k>_B.npy
--                        -- (k from 0), or a .safetensors file named l<k>_W...
--                        -- or with nn.LSTM's names (weight_ih_l<k>, weight_hh_l<k>,
--                        -- bias_ih_l<k>, bias_hh_l<k>, and *_reverse), gates
--                        -- converted from PyTorch's i, f, g, o to ONNX's i, o, f, c
--   spk.lstm.save(path, layers[, {format = "npy" | "safetensors" | "torch" | "onnx"}])
--                        -- default: "safetensors" for a *.safetensors path, "onnx"
--                        -- for *.onnx, else "npy" (a folder, created if missing);
--                        -- "torch" writes a .safetensors file with nn.LSTM's names
--                        -- and gate order; "onnx" a model x [batch, steps, in] ->
--                        -- y [batch, steps, 2H] that ONNX Runtime runs
--   spk.lstm.random{layers = 4, input = 60, hidden = 128, seed =, scale = 1,
--                   dtype = "f32"}
--                        -- PyTorch's default initialisation, uniform in
--                        -- [-scale/sqrt(H), scale/sqrt(H)), from one generator
--                        -- (spk.generator's algorithm) seeded with `seed`, or
--                        -- without one with spk.next_seed() (the process-wide
--                        -- generator's next output: new weights each call). Draw
--                        -- order: layer 1's W (direction 1 then 2, row-major),
--                        -- its R, its B, then layer 2's W, R, B, ...
--   spk.lstm.pack_directions(W, {from = "iofc", to = "ifco"})
--                        -- ONNX row g*H + u to packed row u*4 + p, p = position
--                        -- in `to` of gate g of `from` (any two orders of "iofc")
--   spk.lstm.unpack_directions(P, {from = "iofc", to = "ifco"})  -- the inverse
--   spk.lstm.pack_bias(B, {from = "iofc", to = "ifco"}) -> [2, 4H], Wb + Rb
--   spk.lstm.reorder_gates(t, dim, from, to)  -- gate blocks along dim (1-based)
--   spk.lstm.reference(layers, x, {precision = "f64" | "f32", threads = n,
--                                  vector = "auto", layers_out = false,
--                                  trace = {layer = k, direction = "forward" |
--                                           "reverse", steps = {...}},
--                                  profile = false})
--     -> y, info
--        y: [B, T, 2H] in the precision's dtype (forward in features 1..H,
--           reverse in H+1..2H); x may be f32 or f64 (promoted for "f64").
--        info.layers: with layers_out, every layer's output [B, T, 2H]
--           (info.layers[#layers] equals y but is a separate tensor).
--        info.trace: with trace, {h = [#steps, B, H], c = [#steps, B, H],
--           layer =, direction =, steps =}; steps are 1-based time positions t
--           (where h is written in y, whichever the direction), so
--           info.trace.h[e][b] is y[b][steps[e]] of that direction when the
--           traced layer is the last.
--        info.profile: with profile, how the call ran (the vector unit, the
--           threads and teams, the threads' summed ms in projections, steps
--           and barrier waits, and the flops of each part).
--        threads defaults to SPK_THREADS, else the CPUs the process may use;
--        vector to the widest unit the CPU has; the result is bitwise the
--        same for any thread count and any vector unit.
--   spk.lstm.cpu_info() -> {vector, vector_bytes, vectors, cpus, threads,
--        threads_from}: what the CPU path runs on by default.
--
--   spk.schedule.new{batch =, capacity =, concurrent_capacity = (nil: unknown),
--                    groups = 32, heights = {8, 16, 32}}
--     -> {batch, tile_rows, tiles, tiles_per_launch, concurrent, groups}
--        with s:launches() -> { {first = 0, count = 4}, ... }: `first` is a
--        0-BASED tile index, as the kernel receives it.
--   spk.schedule.check(s, batch) -> s, or an error: validates a schedule a
--        script made (a table with tile_rows, tiles, tiles_per_launch, groups
--        (default 32) and either a launches method or a `launches` list).
return function(spk, core)
  local clstm, cschedule = core.lstm, core.schedule
  local GATES = clstm.gate_orders -- the gate orders spk names (src/lstm/lstm.h)
  local lstm, schedule = {}, {}

  local function ends_with(s, suffix)
    return s:sub(-#suffix) == suffix
  end

  local options = require "spk.options"
  local function check_options(opts, known, where)
    return options.check_keys(opts, known, where, 3)
  end

  lstm.validate = clstm.validate
  lstm.reorder_gates = clstm.reorder_gates

  function lstm.pack_directions(W, opts)
    opts = check_options(opts, { from = true, to = true }, "pack_directions")
    return clstm.pack_directions(W, opts.from or GATES.onnx, opts.to or GATES.packed)
  end

  function lstm.unpack_directions(P, opts)
    opts = check_options(opts, { from = true, to = true }, "unpack_directions")
    return clstm.unpack_directions(P, opts.from or GATES.onnx, opts.to or GATES.packed)
  end

  function lstm.pack_bias(B, opts)
    opts = check_options(opts, { from = true, to = true }, "pack_bias")
    return clstm.pack_bias(B, opts.from or GATES.onnx, opts.to or GATES.packed)
  end

  function lstm.random(opts)
    opts = check_options(opts, { layers = true, input = true, hidden = true, seed = true, scale = true,
                                 dtype = true }, "lstm.random")
    return clstm.random(opts.layers or 4, opts.input or 60, opts.hidden or 128, opts.seed or spk.next_seed(),
                        opts.scale or 1, opts.dtype or "f32")
  end

  lstm.reference = clstm.reference
  lstm.cpu_info = clstm.cpu_info

  -- Loading names every file (or tensor) a problem is in. A stack's layers
  -- are l0 .. l<last> with none missing, all of one dtype: a gap, a stray or
  -- partial layer, or mixed f32/f64 is an error, never a shorter stack.
  -- `shown(k, part)` names layer k's (from 0) W, R or B for messages, in
  -- full; `short(k, part)` within `where`.
  local function check_stack(layers, where, shown, short)
    local first = layers[1].W
    for k, layer in ipairs(layers) do
      for _, part in ipairs { "W", "R", "B" } do
        local t = layer[part]
        if spk.is_tensor(t) and spk.is_tensor(first) and t:dtype() ~= first:dtype() then
          error(("%s is %s, but %s is %s: the layers of a stack share one dtype"):format(
            shown(k - 1, part), t:dtype(), short(0, "W"), first:dtype()))
        end
      end
    end
    local ok, err = pcall(clstm.validate, layers)
    if not ok then
      local n, part, rest = tostring(err):match("^layer (%d+): ([WRB]) (.*)$")
      if n then error(("%s: layer %s's %s %s"):format(shown(tonumber(n) - 1, part), n, part, rest)) end
      error(("%s: %s"):format(where, tostring(err)))
    end
  end

  -- The layer numbers `names` hold (from `pattern`, capturing the number and
  -- the part): every layer from 0 to the highest must have all of `parts`.
  local function layer_numbers(names, pattern, parts, where, short)
    local found, last, last_name = {}, -1, nil
    for _, name in ipairs(names) do
      local digits, part = name:match(pattern)
      if digits then
        if #digits > 1 and digits:sub(1, 1) == "0" then
          error(("%s: %s: layer numbers have no leading zeros"):format(where, name))
        end
        if #digits > 6 then error(("%s: %s: layer number out of range"):format(where, name)) end
        local k = tonumber(digits)
        found[k] = found[k] or {}
        found[k][part] = true
        if k > last then last, last_name = k, name end
      end
    end
    for k = 0, last do
      for _, part in ipairs(parts) do
        if not (found[k] and found[k][part]) then
          error(("%s: %s is missing, but %s is there (layers run from 0 to the last with no gap)")
            :format(where, short(k, part), short(last, last_name:match("^l%d+_([WRB])"))))
        end
      end
    end
    return last
  end

  local function sorted_keys(t)
    local names = {}
    for name in pairs(t) do
      if type(name) == "string" then names[#names + 1] = name end
    end
    table.sort(names)
    return names
  end

  -- Layers from a name -> tensor table in ONNX naming (l<k>_W ...), k from 0.
  local function from_onnx_names(named, where)
    local function short(k, part) return ("tensor 'l%d_%s'"):format(k, part) end
    local function shown(k, part) return where .. ": " .. short(k, part) end
    local last = layer_numbers(sorted_keys(named), "^l(%d+)_([WRB])$", { "W", "R", "B" }, where, short)
    local layers = {}
    for k = 0, last do
      layers[k + 1] = { W = named[("l%d_W"):format(k)], R = named[("l%d_R"):format(k)], B = named[("l%d_B"):format(k)] }
    end
    check_stack(layers, where, shown, short)
    return layers
  end

  local torch_parts = { weight_ih = "W", weight_hh = "R", bias_ih = "B", bias_hh = "B" }

  local function from_torch_names(named, where)
    local last, last_name = -1, nil
    for _, name in ipairs(sorted_keys(named)) do
      local base, digits = name:match("^(%a+_%a+)_l(%d+)$")
      if not base then base, digits = name:match("^(%a+_%a+)_l(%d+)_reverse$") end
      if base and torch_parts[base] then
        if #digits > 1 and digits:sub(1, 1) == "0" then
          error(("%s: tensor '%s': layer numbers have no leading zeros"):format(where, name))
        end
        if #digits > 6 then error(("%s: tensor '%s': layer number out of range"):format(where, name)) end
        if tonumber(digits) > last then last, last_name = tonumber(digits), name end
      end
    end
    local layers = {}
    for k = 0, last do
      if not named[("weight_ih_l%d"):format(k)] then
        error(("%s: tensor 'weight_ih_l%d' is missing, but tensor '%s' is there (layers run from 0 to the "
          .. "last with no gap)"):format(where, k, last_name))
      end
      local parts = {}
      for name in pairs(torch_parts) do
        parts[name] = named[("%s_l%d"):format(name, k)]
        parts[name .. "_reverse"] = named[("%s_l%d_reverse"):format(name, k)]
      end
      local ok, layer = pcall(clstm.from_torch, parts, k + 1)
      if not ok then error(("%s: %s"):format(where, tostring(layer))) end
      layers[k + 1] = layer
    end
    local torch_name = { W = "weight_ih", R = "weight_hh", B = "bias_ih" }
    local function short(k, part) return ("tensor '%s_l%d'"):format(torch_name[part], k) end
    check_stack(layers, where, function(k, part) return where .. ": " .. short(k, part) end, short)
    return layers
  end

  -- A folder of l<k>_W.npy, l<k>_R.npy, l<k>_B.npy.
  local function from_folder(path)
    local function short(k, part) return ("l%d_%s.npy"):format(k, part) end
    local function shown(k, part) return path .. "/" .. short(k, part) end
    local last = layer_numbers(spk.files.list(path), "^l(%d+)_([WRB])%.npy$", { "W", "R", "B" }, path, short)
    if last < 0 then error(path .. ": no l0_W.npy in this folder") end
    local layers = {}
    for k = 0, last do
      layers[k + 1] = {}
      for _, part in ipairs { "W", "R", "B" } do layers[k + 1][part] = spk.load(shown(k, part)) end
    end
    check_stack(layers, path, shown, short)
    return layers
  end

  function lstm.load(path)
    if type(path) ~= "string" then error("lstm.load: path must be a string, got " .. type(path)) end
    local layers
    if type(path) == "string" and path:lower():sub(-5) == ".onnx" then
      local ok, loaded = pcall(core.onnx.load_lstm, path) -- validated as a stack in C
      if not ok then error(loaded, 2) end
      return loaded
    elseif ends_with(path, ".safetensors") then
      local named = spk.load_safetensors(path)
      if named.l0_W then
        layers = from_onnx_names(named, path)
      elseif named.weight_ih_l0 then
        layers = from_torch_names(named, path)
      else
        error(path .. ": no LSTM weights (expected l0_W, l0_R, l0_B, ... or weight_ih_l0, weight_hh_l0, ...)")
      end
    elseif spk.files.kind(path) == "folder" then
      layers = from_folder(path)
    else
      error(path .. ": not a folder of l<k>_W.npy files nor a .safetensors file")
    end
    return layers
  end

  function lstm.save(path, layers, opts)
    opts = check_options(opts, { format = true }, "lstm.save")
    lstm.validate(layers)
    local format = opts.format or (ends_with(path, ".safetensors") and "safetensors")
                   or (type(path) == "string" and path:lower():sub(-5) == ".onnx" and "onnx") or "npy"
    if format == "onnx" then
      local ok, err = pcall(core.onnx.save_lstm, path, layers)
      if not ok then error(err, 2) end
    elseif format == "npy" then
      core.files.make_folder(path)
      for k, layer in ipairs(layers) do
        for _, part in ipairs { "W", "R", "B" } do
          spk.save(("%s/l%d_%s.npy"):format(path, k - 1, part), layer[part])
        end
      end
    elseif format == "safetensors" or format == "torch" then
      local named = {}
      for k, layer in ipairs(layers) do
        if format == "safetensors" then
          for _, part in ipairs { "W", "R", "B" } do
            named[("l%d_%s"):format(k - 1, part)] = layer[part]
          end
        else
          for name, t in pairs(clstm.to_torch(layer)) do
            local base, reverse = name:match("^(.-)(_reverse)$")
            named[("%s_l%d%s"):format(base or name, k - 1, reverse or "")] = t
          end
        end
      end
      spk.save_safetensors(path, named)
    else
      error(("lstm.save: format must be \"npy\", \"safetensors\", \"torch\" or \"onnx\", got %s"):format(
        tostring(format)), 2)
    end
    return path
  end

  -- Schedules ---------------------------------------------------------------

  local Schedule = {}
  Schedule.__index = Schedule

  function Schedule:launches()
    return cschedule.launches(self.tiles, self.tiles_per_launch)
  end

  function Schedule:__tostring()
    local parts = {}
    for _, l in ipairs(self:launches()) do parts[#parts + 1] = ("(%d,%d)"):format(l.first, l.count) end
    return ("schedule(batch %d: %d tiles of %d rows, %s, %d tiles per launch, launches %s)"):format(
      self.batch, self.tiles, self.tile_rows, self.concurrent and "concurrent" or "sequential",
      self.tiles_per_launch, table.concat(parts, " "))
  end

  function schedule.new(opts)
    opts = check_options(opts, { batch = true, capacity = true, concurrent_capacity = true, groups = true,
                                 heights = true }, "schedule.new")
    if opts.batch == nil or opts.capacity == nil then
      error("schedule.new: batch and capacity are required", 2)
    end
    local s = cschedule.new(opts.batch, opts.capacity, opts.concurrent_capacity, opts.groups or 32,
                            opts.heights or { 8, 16, 32 })
    return setmetatable(s, Schedule)
  end

  function schedule.check(s, batch)
    if type(s) ~= "table" then error("schedule.check: expected a schedule table, got " .. type(s), 2) end
    local launches = s.launches
    if type(launches) == "function" then launches = s:launches() end
    if launches == nil and math.type(s.tiles) == "integer" and math.type(s.tiles_per_launch) == "integer"
        and s.tiles_per_launch > 0 then
      -- A script-made schedule without a list: consecutive launches of
      -- tiles_per_launch tiles, as spk.schedule.new makes them.
      launches = cschedule.launches(s.tiles, s.tiles_per_launch)
    end
    if type(launches) ~= "table" then
      error("schedule.check: no launches (give tiles and tiles_per_launch, a launches method or a list "
            .. "{ {first =, count =}, ... })", 2)
    end
    local fields = { tile_rows = s.tile_rows, tiles = s.tiles, tiles_per_launch = s.tiles_per_launch,
                     groups = s.groups or 32 }
    cschedule.check(fields, batch or s.batch, launches)
    return s
  end

  -- An argument a function does not take is an error that names it.
  for name, max in pairs { pack_directions = 2, unpack_directions = 2, pack_bias = 2, random = 1, load = 1,
                           save = 3 } do
    lstm[name] = options.takes(max, "spk.lstm." .. name, lstm[name])
  end
  schedule.new = options.takes(1, "spk.schedule.new", schedule.new)
  schedule.check = options.takes(2, "spk.schedule.check", schedule.check)
  Schedule.launches = options.takes(1, "launches", Schedule.launches)

  schedule.Schedule = Schedule
  spk.lstm, spk.schedule = lstm, schedule

  -- Documentation (help(spk.lstm.load), ...): the first line is the call.
  local doc = require "spk.doc"
  doc(lstm.pack_directions, [[
spk.lstm.pack_directions(W[, {from = "]] .. GATES.onnx .. [[", to = "]] .. GATES.packed .. [["}]) -> packed
W [2, 4H, K] (gate row blocks in order `from`) with each unit's four gate rows adjacent: ONNX row
g*H + u goes to packed row u*4 + p, p the position in `to` of gate g of `from`.]])
  doc(lstm.unpack_directions, [[
spk.lstm.unpack_directions(P[, {from = "]] .. GATES.onnx .. [[", to = "]] .. GATES.packed .. [["}]) -> W
The inverse of pack_directions.]])
  doc(lstm.pack_bias, [[
spk.lstm.pack_bias(B[, {from = "]] .. GATES.onnx .. [[", to = "]] .. GATES.packed .. [["}]) -> [2, 4H]
B [2, 8H] (Wb then Rb) summed Wb + Rb per row and packed as pack_directions packs rows.]])
  doc(lstm.random, [[
spk.lstm.random{layers = 4, input = 60, hidden = 128, seed =, scale = 1, dtype = "f32"} -> layers
PyTorch's default initialisation, uniform in [-scale/sqrt(H), scale/sqrt(H)), from one generator
seeded with seed (the same weights every call and run); without a seed, with spk.next_seed(), the next
output of the process-wide generator (new weights each call; spk.seed(n) reproduces a run). Draw order: layer 1's W (direction 1 then 2, row-major), its R, its B, then layer 2's.]])
  doc(lstm.reference, [[
spk.lstm.reference(layers, x[, {precision = "f64" | "f32", threads = n, vector = "auto", team_threads = n,
                                layers_out = false, trace = {layer = k, direction = "forward" | "reverse",
                                steps = {t, ...}}, profile = false}]) -> y, info
The CPU forward pass of the stack: y [B, T, 2H] in the precision's dtype (forward direction in
features 1..H, reverse in H+1..2H); x [B, T, in] f32 or f64. info.layers (layers_out): every layer's
output; info.trace: h and c [#steps, B, H] of one layer and direction at 1-based times t. threads
defaults to SPK_THREADS, else the CPUs this process may use; vector picks the unit ("auto": the
widest spk.lstm.cpu_info() lists; "portable", "avx2", "avx512"); team_threads (for measuring the
split) sets how many threads share a direction's units for a group of batch rows, meeting at every
step (left out: src/lstm/reference.c's rule). The result is bitwise the same for any thread count,
split and vector unit (the order of every sum is fixed: src/lstm/lstm.h). profile = true
adds info.profile = {vector, threads, teams, team_threads, slab_steps, wall_ms, project_ms, step_ms,
wait_ms, project_flops, step_flops}: the threads' summed time in the input projections, the steps and
at barriers. Ctrl-C in the REPL interrupts it within a step.]])
  doc(lstm.cpu_info, [[
spk.lstm.cpu_info() -> {vector =, vector_bytes =, vectors = {...}, cpus =, threads =, threads_from =}
What the CPU path (spk.lstm.reference, the cpu backend) runs on: the widest vector unit this CPU has,
all it has, the CPUs this process may use, the default thread count and where it comes from
("SPK_THREADS" or "cpus"; threads_error instead when SPK_THREADS is not a thread count).]])
  doc(lstm.load, [[
spk.lstm.load(path) -> layers
A folder of l<k>_W.npy, l<k>_R.npy, l<k>_B.npy (k from 0), or a .safetensors file named l<k>_W ...
or with nn.LSTM's names (weight_ih_l<k>, weight_hh_l<k>, bias_ih_l<k>, bias_hh_l<k>, *_reverse;
gates converted from PyTorch's i, f, g, o to ONNX's i, o, f, c). Validated.]])
  doc(lstm.save, [[
spk.lstm.save(path, layers[, {format = "npy" | "safetensors" | "torch"}]) -> path
Default: "safetensors" for a *.safetensors path, else "npy" (a folder, made if missing); "torch"
writes a .safetensors file with nn.LSTM's names and gate order.]])
  doc(schedule.new, [[
spk.schedule.new{batch =, capacity =, concurrent_capacity = nil, groups = 32, heights = {8, 16, 32}} -> schedule
The persistent kernel's tile schedule: {batch, tile_rows, tiles, tiles_per_launch, concurrent, groups}
with s:launches(). The first height whose tiles * 2 * groups fit min(capacity, concurrent_capacity)
runs both directions at once; otherwise the largest height, directions in turn.]])
  doc(schedule.check, [[
spk.schedule.check(s, batch) -> s
Validates a schedule a script made (tile_rows, tiles, tiles_per_launch, groups = 32, and a launches
method or list), or raises an error saying what is wrong.]])
  doc.type("schedule", Schedule, [[
schedule: a persistent-kernel tile schedule (spk.schedule.new{...}); fields batch, tile_rows, tiles,
tiles_per_launch, concurrent, groups.]])
  doc(Schedule.launches, [[
s:launches() -> {{first = 0, count = n}, ...}
The launch ranges, first a 0-BASED tile index as the kernel receives it.]])
  doc.area { name = "lstm", source = "spk.lstm",
             summary = "layer stacks: load, save, random, validate, gate packing, the CPU reference; tile schedules",
             contents = { lstm, schedule, "schedule" } }
end
