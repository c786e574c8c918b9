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
--   spk.lstm.load(path)  -- a folder of l<k>_W.npy, l<k>_R.npy, l<k>_B.npy
--                        -- (k from 0), or a .safetensors file named l<k>_W...
--                        -- or with nn.LSTM's names (weight_ih_l<k>, weight_hh_l<k>,
--                        -- bias_ih_l<k>, bias_hh_l<k>, and *_reverse), gates
--                        -- converted from PyTorch's i, f, g, o to ONNX's i, o, f, c
--   spk.lstm.save(path, layers[, {format = "npy" | "safetensors" | "torch"}])
--                        -- default: "safetensors" for a *.safetensors path, else
--                        -- "npy" (a folder, created if missing); "torch" writes a
--                        -- .safetensors file with nn.LSTM's names and gate order
--   spk.lstm.random{layers = 4, input = 60, hidden = 128, seed = 0, scale = 1,
--                   dtype = "f32"}
--                        -- PyTorch's default initialisation, uniform in
--                        -- [-scale/sqrt(H), scale/sqrt(H)), from one generator
--                        -- (spk.generator's algorithm) seeded with `seed`. Draw
--                        -- order: layer 1's W (direction 1 then 2, row-major),
--                        -- its R, its B, then layer 2's W, R, B, ...
--   spk.lstm.pack_directions(W, {from = "iofc", to = "ifco"})
--                        -- ONNX row g*H + u to packed row u*4 + p, p = position
--                        -- in `to` of gate g of `from` (any two orders of "iofc")
--   spk.lstm.unpack_directions(P, {from = "iofc", to = "ifco"})  -- the inverse
--   spk.lstm.pack_bias(B, {from = "iofc", to = "ifco"}) -> [2, 4H], Wb + Rb
--   spk.lstm.reorder_gates(t, dim, from, to)  -- gate blocks along dim (1-based)
--   spk.lstm.reference(layers, x, {precision = "f64" | "f32", threads = n,
--                                  layers_out = false,
--                                  trace = {layer = k, direction = "forward" |
--                                           "reverse", steps = {...}}})
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
--        threads defaults to the number of online CPUs; the result is bitwise
--        the same for any thread count.
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
  local lstm, schedule = {}, {}

  local function ends_with(s, suffix)
    return s:sub(-#suffix) == suffix
  end

  local function exists(path)
    local f = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
  end

  local function check_options(opts, known, where)
    if opts == nil then return {} end
    if type(opts) ~= "table" then
      error(("%s: options must be a table, got %s"):format(where, type(opts)), 3)
    end
    for key in pairs(opts) do
      if not known[key] then
        local names = {}
        for name in pairs(known) do names[#names + 1] = name end
        table.sort(names)
        error(("%s: unknown option '%s' (known: %s)"):format(where, tostring(key), table.concat(names, ", ")), 3)
      end
    end
    return opts
  end

  lstm.validate = clstm.validate
  lstm.reorder_gates = clstm.reorder_gates

  function lstm.pack_directions(W, opts)
    opts = check_options(opts, { from = true, to = true }, "pack_directions")
    return clstm.pack_directions(W, opts.from or "iofc", opts.to or "ifco")
  end

  function lstm.unpack_directions(P, opts)
    opts = check_options(opts, { from = true, to = true }, "unpack_directions")
    return clstm.unpack_directions(P, opts.from or "iofc", opts.to or "ifco")
  end

  function lstm.pack_bias(B, opts)
    opts = check_options(opts, { from = true, to = true }, "pack_bias")
    return clstm.pack_bias(B, opts.from or "iofc", opts.to or "ifco")
  end

  function lstm.random(opts)
    opts = check_options(opts, { layers = true, input = true, hidden = true, seed = true, scale = true,
                                 dtype = true }, "lstm.random")
    return clstm.random(opts.layers or 4, opts.input or 60, opts.hidden or 128, opts.seed or 0,
                        opts.scale or 1, opts.dtype or "f32")
  end

  function lstm.reference(layers, x, opts)
    return clstm.reference(layers, x, opts)
  end

  -- Layers from a name -> tensor table in ONNX naming (l<k>_W ...), k from 0.
  local function from_onnx_names(named, where)
    local layers = {}
    local k = 0
    while named[("l%d_W"):format(k)] do
      local layer = {}
      for _, part in ipairs { "W", "R", "B" } do
        layer[part] = named[("l%d_%s"):format(k, part)]
        if not layer[part] then error(("%s: l%d_%s missing"):format(where, k, part), 3) end
      end
      layers[#layers + 1] = layer
      k = k + 1
    end
    return layers
  end

  local function from_torch_names(named)
    local layers = {}
    local k = 0
    while named[("weight_ih_l%d"):format(k)] do
      local parts = {}
      for _, name in ipairs { "weight_ih", "weight_hh", "bias_ih", "bias_hh" } do
        parts[name] = named[("%s_l%d"):format(name, k)]
        parts[name .. "_reverse"] = named[("%s_l%d_reverse"):format(name, k)]
      end
      layers[#layers + 1] = clstm.from_torch(parts, k + 1)
      k = k + 1
    end
    return layers
  end

  function lstm.load(path)
    local layers
    if ends_with(path, ".safetensors") then
      local named = spk.load_safetensors(path)
      if named.l0_W then
        layers = from_onnx_names(named, path)
      elseif named.weight_ih_l0 then
        layers = from_torch_names(named)
      else
        error(path .. ": no LSTM weights (expected l0_W, l0_R, l0_B, ... or weight_ih_l0, weight_hh_l0, ...)", 2)
      end
    elseif clstm.is_directory(path) then
      layers = {}
      local k = 0
      while exists(("%s/l%d_W.npy"):format(path, k)) do
        local layer = {}
        for _, part in ipairs { "W", "R", "B" } do
          local file = ("%s/l%d_%s.npy"):format(path, k, part)
          if not exists(file) then error(file .. ": missing", 2) end
          layer[part] = spk.load(file)
        end
        layers[#layers + 1] = layer
        k = k + 1
      end
      if #layers == 0 then error(path .. ": no l0_W.npy in this folder", 2) end
    else
      error(path .. ": not a folder of l<k>_W.npy files nor a .safetensors file", 2)
    end
    lstm.validate(layers)
    return layers
  end

  function lstm.save(path, layers, opts)
    opts = check_options(opts, { format = true }, "lstm.save")
    lstm.validate(layers)
    local format = opts.format or (ends_with(path, ".safetensors") and "safetensors" or "npy")
    if format == "npy" then
      clstm.make_directory(path)
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
      error(("lstm.save: format must be \"npy\", \"safetensors\" or \"torch\", got %s"):format(tostring(format)), 2)
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

  schedule.Schedule = Schedule
  spk.lstm, spk.schedule = lstm, schedule
end
