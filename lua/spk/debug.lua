-- spk.debug: numeric debugging helpers for the REPL and for scripts.
--
--   spk.debug.first_divergence(a, b[, {tol = 0}]) -> where, or nil, none
--     Finds the first place, in the order the recurrence computes it, where
--     |a - b| > tol (or exactly one side is NaN, or the sides differ in
--     infinity). Where nothing diverges: nil and `none`, which prints as
--     "no divergence above <tol> (max |a-b| <m>)" ({tol =, max_diff =}). a
--     and b are both one of:
--       * stack outputs [B, T, 2H] (forward direction in features 1..H,
--         reverse in H+1..2H): steps are visited in processing order, step
--         s = 1..T covering the forward direction at t = s and then the
--         reverse direction at t = T + 1 - s (the two directions run side by
--         side). Within a step the first (batch, unit) in row order is
--         reported.
--       * lists of layer outputs (spk.lstm.reference's info.layers, or a
--         GPU plan's per-layer outputs): layer 1 first, each as above; the
--         result carries `layer`.
--       * traces {h = [S, B, H], c = [S, B, H], layer =, direction =, steps =}
--         (spk.lstm.reference's info.trace, or a GPU plan's trace): the traced
--         steps in processing order (ascending t forward, descending t
--         reverse), h before c at each step; both traces must cover the same
--         layer, direction and steps.
--     where = {layer =, direction = "forward" | "reverse", step = t (1-based
--              time position, as in traces), order = processing step (1..T),
--              batch =, unit = (1..H), a =, b =, diff = |a - b|,
--              state = "h" | "c" (traces only), max_diff = largest finite
--              |a - b| in that step, nan = "a" | "b" (the side that is NaN
--              there alone: the first NaN one side has), nans = how many
--              elements of that step are NaN on one side only, first_nan =
--              where a NaN on one side first appears when later than where
--              (outputs: {layer, direction, step, order, batch, unit, side})},
--              printing as one line.
--   spk.debug.ulp_histogram(a, b) -> histogram
--     Distances in ulps, counted in the less precise of the two dtypes (as
--     spk.compare counts max_ulp), bucketed 0, 1, 2-3, 4-7, 8-15, ... plus
--     NaN mismatches. histogram.buckets = {{lo =, hi =, count =}, ...},
--     histogram.nan, .count, .max_ulp; tostring(histogram) is the text table.
--   spk.debug.summary(t) -> {min =, max =, mean = (over finite values), nan =,
--                            inf =, numel =, dtype =, shape =}, printing as one line.
--   spk.debug.ulp_distance(x, y, dtype) -> ulps between two numbers in "f32" or "f64".
return function(spk)
  local debug = {}

  local function is_tensor(t) return spk.is_tensor(t) end

  local function to_host(t)
    if t.device ~= nil and t.device ~= "cpu" then return t:cpu() end
    return t
  end

  local function flat(t)
    t = to_host(t)
    return t:contiguous():reshape { t:numel() }:tolist()
  end

  local function differ(x, y, tol)
    if x ~= x or y ~= y then return not (x ~= x and y ~= y) end
    if x == y then return false end -- equal infinities included
    return not (math.abs(x - y) <= tol)
  end

  -- ------------------------------------------------------------- results

  local function number(x)
    if x ~= x then return "NaN" end
    return ("%.9g"):format(x)
  end

  local function place(w)
    local parts = {}
    if w.layer then parts[#parts + 1] = ("layer %d"):format(w.layer) end
    if w.state then
      parts[#parts + 1] = ("%s t=%d (traced step %d)"):format(w.direction, w.step, w.order)
      parts[#parts + 1] = w.state
    else
      parts[#parts + 1] = ("%s t=%d (step %d of the direction)"):format(w.direction, w.step, w.order)
    end
    parts[#parts + 1] = ("batch %d unit %d"):format(w.batch, w.unit)
    return table.concat(parts, ", ")
  end

  local Where = {}
  Where.__index = Where
  Where.__name = "spk.debug.divergence"
  function Where:__tostring()
    local text = ("first divergence: %s: a=%s b=%s |a-b|=%s"):format(place(self), number(self.a), number(self.b),
      self.nan and "NaN" or ("%.3g"):format(self.diff))
    if self.nan then
      text = text .. (" (%s is NaN here and %s is not: the first NaN one side has)"):format(self.nan,
        self.nan == "a" and "b" or "a")
    end
    if self.nans and self.nans > 0 then
      text = text .. (" (step max %.3g over the finite pairs; %d NaN on one side in the step)"):format(self.max_diff,
        self.nans)
    else
      text = text .. (" (step max %.3g)"):format(self.max_diff)
    end
    if self.first_nan then
      text = text .. ("; the first NaN on one side: %s, in %s"):format(place(self.first_nan), self.first_nan.side)
    end
    return text
  end

  -- What first_divergence returns beside nil: the tolerance and the largest
  -- |a - b| (NaN on both sides, and equal infinities, counting as equal).
  local None = {}
  None.__index = None
  None.__name = "spk.debug.no_divergence"
  function None:__tostring()
    if self.max_diff == 0 then return ("no divergence above %g (max |a-b| 0: the same values)"):format(self.tol) end
    return ("no divergence above %g (max |a-b| %.3g)"):format(self.tol, self.max_diff)
  end

  -- The largest |a - b| of two host tensors, pairs that do not differ (NaN
  -- and NaN, equal infinities) counting 0.
  local function max_difference(a, b)
    if a:numel() == 0 then return 0 end
    local d = (a:to("f64") - b:to("f64")):abs()
    return spk.where(d:isnan(), 0, d):max()
  end

  -- Scans a [B, H] host slice pair (as flat lists) for the first differing
  -- element; returns batch, unit, a, b, diff, max_diff (over the finite
  -- pairs), the side that is NaN there alone, and the step's count of NaN on
  -- one side.
  local function first_in_slice(sa, sb, tol)
    local da, db = flat(sa), flat(sb)
    local shape = sa:shape()
    local H = shape[#shape]
    local hit, maxd, nans = nil, 0, 0
    for i = 1, #da do
      local x, y = da[i], db[i]
      local d = math.abs(x - y)
      if d == d and d > maxd and d ~= math.huge then maxd = d end
      if (x ~= x) ~= (y ~= y) then nans = nans + 1 end
      if not hit and differ(x, y, tol) then hit = i end
    end
    if not hit then return nil end
    local x, y = da[hit], db[hit]
    local nan = x ~= x and y == y and "a" or (y ~= y and x == x and "b") or nil
    return (hit - 1) // H + 1, (hit - 1) % H + 1, x, y, math.abs(x - y), maxd, nan, nans
  end

  -- The largest |a - b| of a slice pair, NaN when any difference is NaN
  -- (the reductions propagate NaN), as a cheap test before a scan.
  local function slice_may_differ(da, tol)
    local m = da:max()
    return m ~= m or m > tol
  end

  local function check_shapes(a, b, what)
    local sa, sb = a:shape(), b:shape()
    if table.concat(sa, ",") ~= table.concat(sb, ",") then
      error(("first_divergence: %s shapes differ: [%s] and [%s]"):format(what, table.concat(sa, ", "),
        table.concat(sb, ", ")), 4)
    end
    return sa
  end

  -- The [B, H] slices of an output [B, T, 2H] at processing step s: the
  -- forward direction at t = s, then the reverse at t = T + 1 - s.
  local function each_slice(T, H, fn)
    for s = 1, T do
      for _, dir in ipairs { "forward", "reverse" } do
        local t = dir == "forward" and s or T + 1 - s
        local first = dir == "forward" and 1 or H + 1
        local found = fn(s, dir, t, first)
        if found then return found end
      end
    end
    return nil
  end

  -- Where a NaN on one side first appears in processing order, after the
  -- divergence `w` (nil when there is no such NaN, or it is w itself).
  local function first_nan_of(a, b, T, H, w)
    local alone = a:isnan():ne(b:isnan())
    if w.nan or not alone:any() then return nil end
    return each_slice(T, H, function(s, dir, t, first)
      local m = alone:select(2, t):narrow(2, first, H)
      if m:any() then
        local pos = m:contiguous():view { -1 }:argmax()
        local batch, unit = (pos - 1) // H + 1, (pos - 1) % H + 1
        local side = a:get(batch, t, first + unit - 1) ~= a:get(batch, t, first + unit - 1) and "a" or "b"
        return { layer = w.layer, direction = dir, step = t, order = s, batch = batch, unit = unit, side = side }
      end
    end)
  end

  local function output_divergence(a, b, tol, layer)
    a, b = to_host(a), to_host(b)
    local shape = check_shapes(a, b, "output")
    if #shape ~= 3 or shape[3] % 2 ~= 0 then
      error(("first_divergence: expected outputs [B, T, 2H], got [%s]"):format(table.concat(shape, ", ")), 3)
    end
    local T, H = shape[2], shape[3] // 2
    local diff = (a:to("f64") - b:to("f64")):abs()
    if not slice_may_differ(diff, tol) then return nil end
    local w = each_slice(T, H, function(s, dir, t, first)
      local d = diff:select(2, t):narrow(2, first, H)
      if slice_may_differ(d, tol) then
        local batch, unit, x, y, dd, maxd, nan, nans = first_in_slice(a:select(2, t):narrow(2, first, H),
          b:select(2, t):narrow(2, first, H), tol)
        if batch then
          return setmetatable({ layer = layer, direction = dir, step = t, order = s, batch = batch, unit = unit,
                                a = x, b = y, diff = dd, max_diff = maxd, nan = nan, nans = nans }, Where)
        end
      end
    end)
    if w then w.first_nan = first_nan_of(a, b, T, H, w) end
    return w
  end

  local function is_trace(t)
    return type(t) == "table" and is_tensor(t.h) and is_tensor(t.c) and type(t.steps) == "table"
  end

  local function trace_divergence(a, b, tol)
    if a.layer ~= b.layer or a.direction ~= b.direction or #a.steps ~= #b.steps then
      error(("first_divergence: the traces cover different places (layer %s %s, %d steps; layer %s %s, %d steps)")
        :format(tostring(a.layer), tostring(a.direction), #a.steps, tostring(b.layer), tostring(b.direction),
          #b.steps), 3)
    end
    for i = 1, #a.steps do
      if a.steps[i] ~= b.steps[i] then
        error(("first_divergence: the traces record different steps (entry %d: t=%s and t=%s)"):format(i,
          tostring(a.steps[i]), tostring(b.steps[i])), 3)
      end
    end
    local ha, hb, ca, cb = to_host(a.h), to_host(b.h), to_host(a.c), to_host(b.c)
    check_shapes(ha, hb, "trace h")
    check_shapes(ca, cb, "trace c")
    local order = {}
    for i = 1, #a.steps do order[i] = i end
    local reverse = a.direction == "reverse"
    table.sort(order, function(i, j)
      if reverse then return a.steps[i] > a.steps[j] end
      return a.steps[i] < a.steps[j]
    end)
    for rank, e in ipairs(order) do
      for _, state in ipairs { "h", "c" } do
        local xa = state == "h" and ha or ca
        local xb = state == "h" and hb or cb
        local sa, sb = xa:select(1, e), xb:select(1, e)
        local d = (sa:to("f64") - sb:to("f64")):abs()
        if slice_may_differ(d, tol) then
          local batch, unit, x, y, dd, maxd, nan, nans = first_in_slice(sa, sb, tol)
          if batch then
            local t = a.steps[e]
            -- a trace does not record T, so `order` is the rank among the traced steps
            return setmetatable({ layer = a.layer, direction = a.direction or "forward", step = t,
                                  order = rank, batch = batch, unit = unit, a = x, b = y, diff = dd,
                                  max_diff = maxd, nan = nan, nans = nans, state = state, entry = e }, Where)
          end
        end
      end
    end
    return nil
  end

  local function none(tol, pairs)
    local m = 0
    for _, p in ipairs(pairs) do m = math.max(m, max_difference(to_host(p[1]), to_host(p[2]))) end
    return nil, setmetatable({ tol = tol, max_diff = m }, None)
  end

  function debug.first_divergence(a, b, opts)
    opts = require("spk.options").check_keys(opts, { "tol" }, "first_divergence")
    local tol = opts.tol or 0
    if type(tol) ~= "number" or not (tol >= 0) then
      error("first_divergence: tol must be a number >= 0, got " .. tostring(tol), 2)
    end
    if is_tensor(a) and is_tensor(b) then
      local w = output_divergence(a, b, tol, nil)
      if w then return w end
      return none(tol, { { a, b } })
    end
    if is_trace(a) and is_trace(b) then
      local w = trace_divergence(a, b, tol)
      if w then return w end
      return none(tol, { { a.h, b.h }, { a.c, b.c } })
    end
    if type(a) == "table" and type(b) == "table" and is_tensor(a[1]) and is_tensor(b[1]) then
      if #a ~= #b then
        error(("first_divergence: %d layer outputs against %d"):format(#a, #b), 2)
      end
      local pairs = {}
      for k = 1, #a do
        local w = output_divergence(a[k], b[k], tol, k)
        if w then return w end
        pairs[k] = { a[k], b[k] }
      end
      return none(tol, pairs)
    end
    error("first_divergence: expects two output tensors [B, T, 2H], two lists of layer outputs or two traces "
      .. "{h =, c =, layer =, direction =, steps =}, got " .. type(a) .. " and " .. type(b), 2)
  end

  -- ---------------------------------------------------------------- ulps

  local function ulp_distance(x, y, dtype)
    if x ~= x or y ~= y then return 0 / 0 end
    local ix, iy
    if dtype == "f32" then
      ix = string.unpack("<I4", string.pack("<f", x))
      iy = string.unpack("<I4", string.pack("<f", y))
      local mx, my = ix & 0x7FFFFFFF, iy & 0x7FFFFFFF
      if (ix >> 31) == (iy >> 31) then return math.abs(mx - my) + 0.0 end
      return mx + my + 0.0
    end
    ix = string.unpack("<i8", string.pack("<d", x))
    iy = string.unpack("<i8", string.pack("<d", y))
    local mx, my = ix & 0x7FFFFFFFFFFFFFFF, iy & 0x7FFFFFFFFFFFFFFF
    if (ix < 0) == (iy < 0) then return math.abs(mx - my) + 0.0 end
    return (mx + 0.0) + my
  end
  debug.ulp_distance = ulp_distance

  local Histogram = {}
  Histogram.__index = Histogram
  Histogram.__name = "spk.debug.ulp_histogram"
  function Histogram:__tostring()
    local lines = { ("ulp distances (%s), %d values, max %.0f ulp%s"):format(self.dtype, self.count, self.max_ulp,
      self.nan > 0 and (", %d NaN mismatches"):format(self.nan) or "") }
    local top = 0
    for _, bkt in ipairs(self.buckets) do top = math.max(top, bkt.count) end
    for _, bkt in ipairs(self.buckets) do
      local label = bkt.lo == bkt.hi and ("%d"):format(bkt.lo) or ("%d-%d"):format(bkt.lo, bkt.hi)
      if bkt.hi == math.huge then label = (">=%d"):format(bkt.lo) end
      local bar = top > 0 and string.rep("#", math.ceil(bkt.count / top * 40)) or ""
      lines[#lines + 1] = ("%21s ulp %10d %6.2f%%  %s"):format(label, bkt.count,
        self.count > 0 and 100 * bkt.count / self.count or 0, bar)
    end
    if self.nan > 0 then lines[#lines + 1] = ("%21s     %10d"):format("NaN", self.nan) end
    return table.concat(lines, "\n")
  end

  function debug.ulp_histogram(a, b)
    if not (is_tensor(a) and is_tensor(b)) then error("ulp_histogram: expects two tensors", 2) end
    a, b = to_host(a), to_host(b)
    if table.concat(a:shape(), ",") ~= table.concat(b:shape(), ",") then
      error(("ulp_histogram: shapes differ: [%s] and [%s]"):format(table.concat(a:shape(), ", "),
        table.concat(b:shape(), ", ")), 2)
    end
    local dtype = (a:dtype() == "f32" or b:dtype() == "f32") and "f32" or "f64"
    if (a:dtype() ~= "f32" and a:dtype() ~= "f64") or (b:dtype() ~= "f32" and b:dtype() ~= "f64") then
      error("ulp_histogram: expects f32 or f64 tensors", 2)
    end
    local da, db = flat(a), flat(b)
    local counts, nan, max_ulp, top = {}, 0, 0, 0
    for i = 1, #da do
      local u = ulp_distance(da[i], db[i], dtype)
      if u ~= u then
        if not (da[i] ~= da[i] and db[i] ~= db[i]) then nan = nan + 1 end
      else
        if u > max_ulp then max_ulp = u end
        -- bucket 0: 0 ulp, bucket k >= 1: [2^(k-1), 2^k - 1]
        local k = 0
        if u >= 1 then k = math.floor(math.log(u, 2) + 1e-12) + 1 end
        counts[k] = (counts[k] or 0) + 1
        if k > top then top = k end
      end
    end
    local buckets = {}
    for k = 0, top do
      local lo = k == 0 and 0 or 2 ^ (k - 1)
      local hi = k == 0 and 0 or 2 ^ k - 1
      buckets[#buckets + 1] = { lo = math.tointeger(lo) or lo, hi = math.tointeger(hi) or hi, count = counts[k] or 0 }
    end
    return setmetatable({ buckets = buckets, nan = nan, count = #da, max_ulp = max_ulp, dtype = dtype }, Histogram)
  end

  -- ------------------------------------------------------------- summary

  local Summary = {}
  Summary.__index = Summary
  Summary.__name = "spk.debug.summary"
  function Summary:__tostring()
    return ("%s [%s]: numel %d, min %.9g, max %.9g, mean %.9g, NaN %d, Inf %d"):format(self.dtype,
      table.concat(self.shape, ", "), self.numel, self.min, self.max, self.mean, self.nan, self.inf)
  end

  function debug.summary(t)
    if not is_tensor(t) then error("summary: expects a tensor, got " .. type(t), 2) end
    local values = flat(t)
    local lo, hi, sum, n, nan, inf = math.huge, -math.huge, 0.0, 0, 0, 0
    for i = 1, #values do
      local v = values[i]
      if v ~= v then
        nan = nan + 1
      elseif v == math.huge or v == -math.huge then
        inf = inf + 1
      else
        if v < lo then lo = v end
        if v > hi then hi = v end
        sum = sum + v
        n = n + 1
      end
    end
    if n == 0 then lo, hi = 0 / 0, 0 / 0 end
    return setmetatable({ min = lo, max = hi, mean = n > 0 and sum / n or 0 / 0, nan = nan, inf = inf,
                          numel = #values, dtype = t:dtype(), shape = t:shape() }, Summary)
  end

  -- An argument a function does not take is an error that names it.
  local options = require "spk.options"
  debug.first_divergence = options.takes(3, "spk.debug.first_divergence", debug.first_divergence)
  debug.ulp_histogram = options.takes(2, "spk.debug.ulp_histogram", debug.ulp_histogram)
  debug.summary = options.takes(1, "spk.debug.summary", debug.summary)
  debug.ulp_distance = options.takes(3, "spk.debug.ulp_distance", debug.ulp_distance)
  local doc = require "spk.doc"
  doc(debug.first_divergence, [[
spk.debug.first_divergence(a, b[, {tol = 0}]) -> where | nil, none
The first place, in the order the recurrence computes them, where |a - b| > tol (or one side is NaN,
or they differ in infinity). a and b are both stack outputs [B, T, 2H], or both lists of layer
outputs (the result carries `layer`), or both h/c traces. where = {layer, direction, step (time t),
order (processing step), batch, unit, a, b, diff, state, max_diff, nan (the side NaN there alone),
nans, first_nan (where a NaN on one side first appears, if later)}, printing as one line. Where
nothing diverges: nil and none = {tol, max_diff}, printing "no divergence above tol (max |a-b| ...)".]])
  doc(debug.ulp_histogram, [[
spk.debug.ulp_histogram(a, b) -> histogram
Distances in ulps (in the less precise dtype, as spk.compare's max_ulp) bucketed 0, 1, 2-3, 4-7, ...
plus NaN mismatches: {buckets = {{lo, hi, count}, ...}, nan, count, max_ulp}; prints as a table.]])
  doc(debug.summary, [[
spk.debug.summary(t) -> {min, max, mean (over finite values), nan, inf, numel, dtype, shape}
Printing as one line.]])
  doc(debug.ulp_distance, [[
spk.debug.ulp_distance(x, y, dtype) -> ulps
The distance between two numbers in ulps of "f32" or "f64".]])
  doc.area { name = "debug", source = "spk.debug",
             summary = "numeric debugging: first divergence of two outputs or traces, ulp histograms, summaries",
             contents = { debug } }
  spk.debug = debug
end
