-- The tensor area's Lua side. The bindings (src/lua/tensor.c and friends)
-- provide spk.tensor, zeros, ones, full, arange, empty, linspace, eye, cat,
-- stack, where, matmul, exp, log, sqrt, abs, isnan, isfinite, print_options,
-- rand, randn, generator, load, save, load_safetensors, save_safetensors,
-- compare, allclose, is_tensor and dtypes; this adds what reads better in Lua.
return function(spk, core)
  local function fmt_index(index)
    if not index or #index == 0 then return "[]" end
    return "[" .. table.concat(index, ", ") .. "]"
  end

  local function within(value, bound)
    return bound == nil or value <= bound -- NaN is never within
  end

  -- What a value is, as messages say it (spk's objects by kind, never "userdata").
  local function kind(v)
    if spk.is_tensor(v) then return "tensor" end
    local mt = type(v) == "userdata" and getmetatable(v)
    if type(mt) == "table" and type(mt.__name) == "string" then return mt.__name end
    return type(v) == "userdata" and "object of another library" or type(v)
  end

  -- The first non-nil argument past a function's parameters is an error, in
  -- the words the C bindings use (src/lua/bind.h); `first` is its position.
  local function no_extra(name, params, first, ...)
    for i = 1, select("#", ...) do
      local v = select(i, ...)
      if v ~= nil then
        local what = type(v) == "string" and ('string "%s"'):format(v)
          or type(v) == "number" and ("number %s"):format(v) or kind(v)
        error(("bad argument #%d to '%s' (unexpected argument (%s): spk.%s takes (%s))")
          :format(first + i - 1, name, what, name, params), 3)
      end
    end
  end

  local known_bounds = { rel_l2 = true, max_abs = true }

  -- spk.check_near{actual =, expected =, rel_l2 =, max_abs =}: the named form.
  local function named_near(t)
    local bounds = {}
    for key, value in pairs(t) do
      if key ~= "actual" and key ~= "expected" then
        if not known_bounds[key] then
          error(("check_near: unknown field '%s' (known: actual, expected, max_abs, rel_l2)"):format(tostring(key)),
            3)
        end
        bounds[key] = value
      end
    end
    if t.actual == nil or t.expected == nil then
      error("check_near{...}: give actual = and expected = (the tensor checked and the truth)", 3)
    end
    return t.actual, t.expected, bounds
  end

  --- spk.check_near(actual, expected, {rel_l2 = ..., max_abs = ...})
  --- spk.check_near{actual =, expected =, rel_l2 =, max_abs =}
  -- Compares actual against the truth `expected` (spk.compare(actual,
  -- expected): the order of every comparison in spk); at least one bound is
  -- required, each a number. Returns ok, a one-paragraph report (measured
  -- values, bounds, the worst index and both values there), and the
  -- comparison table (nil if the shapes differ).
  function spk.check_near(actual, expected, bounds, ...)
    no_extra("check_near", "actual, expected, bounds", 4, ...)
    if type(actual) == "table" and not spk.is_tensor(actual) and expected == nil and bounds == nil then
      actual, expected, bounds = named_near(actual)
    end
    if bounds ~= nil and type(bounds) ~= "table" then
      error(("bad argument #3 to 'check_near' (table of bounds expected, got %s)"):format(kind(bounds)), 2)
    end
    bounds = bounds or {}
    for key, value in pairs(bounds) do
      if not known_bounds[key] then
        error(("check_near: unknown bound '%s' (known: max_abs, rel_l2)"):format(tostring(key)), 2)
      end
      if type(value) ~= "number" or value ~= value then
        error(("check_near: bound '%s' must be a number, got %s"):format(key, tostring(value)), 2)
      end
    end
    if bounds.rel_l2 == nil and bounds.max_abs == nil then
      error("check_near: give a bound, rel_l2 and/or max_abs", 2)
    end
    if not (spk.is_tensor(expected) and spk.is_tensor(actual)) then
      return false, ("expected two tensors (actual, expected), got %s and %s"):format(kind(actual), kind(expected))
    end
    local ok, c = pcall(spk.compare, actual, expected)
    if not ok then
      return false, tostring(c)
    end
    local pass = within(c.rel_l2, bounds.rel_l2) and within(c.max_abs, bounds.max_abs)
      and c.nan_mismatch == 0 and c.inf_mismatch == 0
    local report = ("rel_l2 %.6g (bound %s), max_abs %.6g (bound %s), worst index %s: expected %.9g, actual %.9g"):format(
      c.rel_l2, tostring(bounds.rel_l2 or "none"), c.max_abs, tostring(bounds.max_abs or "none"),
      fmt_index(c.worst), c.b_worst or 0 / 0, c.a_worst or 0 / 0)
    if c.nan_mismatch > 0 or c.inf_mismatch > 0 then
      report = report .. (", %d NaN and %d Inf mismatches"):format(c.nan_mismatch, c.inf_mismatch)
    end
    return pass, report, c
  end

  -- ---- bits_equal ----

  local function shape_text(t)
    return "[" .. table.concat(t:shape(), ", ") .. "]"
  end

  local function host(t)
    if t.device ~= nil and t.device ~= "cpu" then return t:cpu() end
    return t
  end

  -- A value and its bits, as "0.123456791 (bits 0x3dfcd6ea)".
  local function value_text(value, dtype)
    if dtype == "f32" then
      return ("%.9g (bits 0x%08x)"):format(value, string.unpack("<I4", string.pack("<f", value)))
    elseif dtype == "f64" then
      return ("%.17g (bits 0x%016x)"):format(value, string.unpack("<i8", string.pack("<d", value)))
    end
    return tostring(value)
  end

  -- The 1-based row-major index of flat position `pos` in `shape`.
  local function unravel(pos, shape)
    local index, rest = {}, pos - 1
    for d = #shape, 1, -1 do
      index[d] = rest % shape[d] + 1
      rest = rest // shape[d]
    end
    return index
  end

  local function same(c)
    return c.max_ulp == 0 and c.nan_mismatch == 0 and c.inf_mismatch == 0
  end

  --- spk.bits_equal(a, b[, what]) -> equal, report, where
  -- The same values bit for bit in the sense of spk.compare: 0 ulp
  -- everywhere (+0 and -0 count as equal), NaN and Inf at the same places,
  -- same shape and dtype. report names the first differing element in
  -- row-major order (its 1-based index and flat position) and both values
  -- with their bits; `what` heads it. where = {index =, element =, a =, b =}
  -- (nil when equal, or when shape or dtype differ).
  function spk.bits_equal(a, b, what, ...)
    no_extra("bits_equal", "a, b, what", 4, ...)
    local head = what and (tostring(what) .. ": ") or ""
    if not (spk.is_tensor(a) and spk.is_tensor(b)) then
      return false, ("%sexpected two tensors, got %s and %s"):format(head, kind(a), kind(b))
    end
    if a:dtype() ~= b:dtype() or shape_text(a) ~= shape_text(b) then
      return false, ("%sthe tensors differ in shape or dtype: %s %s and %s %s"):format(head, shape_text(a),
        a:dtype(), shape_text(b), b:dtype())
    end
    a, b = host(a), host(b)
    local n = a:numel()
    local c = spk.compare(a, b)
    if same(c) then
      return true, ("%sequal bit for bit: %d elements of %s %s"):format(head, n, shape_text(a), a:dtype())
    end
    -- The first differing position: the shortest prefix that differs (bisection, each step one spk.compare).
    local fa, fb = a:contiguous():view({ n }), b:contiguous():view({ n })
    local lo, hi = 1, n
    while lo < hi do
      local mid = (lo + hi) // 2
      if same(spk.compare(fa:narrow(1, 1, mid), fb:narrow(1, 1, mid))) then lo = mid + 1 else hi = mid end
    end
    local index = unravel(lo, a:shape())
    local report = ("%sfirst difference at index [%s] (element %d of %d): a = %s, b = %s; max_ulp %.0f"):format(head,
      table.concat(index, ", "), lo, n, value_text(fa:get(lo), a:dtype()), value_text(fb:get(lo), b:dtype()),
      c.max_ulp)
    if c.nan_mismatch > 0 or c.inf_mismatch > 0 then
      report = report .. (", %d NaN and %d Inf mismatches"):format(c.nan_mismatch, c.inf_mismatch)
    end
    return false, report, { index = index, element = lo, a = fa:get(lo), b = fb:get(lo) }
  end

  local doc = require "spk.doc"
  doc(spk.check_near, [[
spk.check_near(actual, expected, {rel_l2 =, max_abs =}) -> ok, report, comparison
Compares actual against the truth expected (spk.compare(actual, expected): actual first, as in every
comparison of spk); also spk.check_near{actual =, expected =, rel_l2 =, max_abs =}. At least one bound
is required. report is one paragraph: measured values, bounds, the worst index and both values there.]])
  doc(spk.bits_equal, [[
spk.bits_equal(a, b[, what]) -> equal, report, where
Whether a and b hold the same values bit for bit (0 ulp everywhere, +0 and -0 equal, NaN and Inf at the
same places, same shape and dtype). report names the first differing element (1-based index, flat
position, both values with their bits), headed by `what`; where = {index, element, a, b}.]])
  doc.area { name = "tensor", source = "spk.tensor",
             summary = "tensors, random numbers, .npy and .safetensors files, comparison",
             contents = { spk.tensor, spk.zeros, spk.ones, spk.full, spk.arange, spk.empty, spk.linspace, spk.eye,
                          spk.is_tensor, spk.cat, spk.stack, spk.where, spk.matmul, spk.exp, spk.log, spk.sqrt,
                          spk.abs, spk.isnan, spk.isfinite, spk.print_options, spk.rand, spk.randn,
                          spk.generator, spk.load, spk.save, spk.load_safetensors, spk.save_safetensors,
                          spk.compare, spk.allclose, spk.check_near, spk.bits_equal, spk.clock_ms, "spk.tensor", "spk.generator" } }
end
