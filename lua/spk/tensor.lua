-- The tensor area's Lua side. The bindings (src/lua/tensor.c and friends)
-- provide spk.tensor, zeros, ones, full, arange, rand, randn, generator, load,
-- save, load_safetensors, save_safetensors, compare, allclose, is_tensor and
-- dtypes; this adds what reads better in Lua.
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

  --- spk.check_near(expected, actual, {rel_l2 = ..., max_abs = ...})
  -- Compares actual against the truth `expected` (spk.compare(actual,
  -- expected)); at least one bound is required, each a number. Returns ok, a
  -- one-paragraph report (measured values, bounds, the worst index and both
  -- values there), and the comparison table (nil if the shapes differ).
  function spk.check_near(expected, actual, bounds, ...)
    no_extra("check_near", "expected, actual, bounds", 4, ...)
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
      return false, ("expected two tensors, got %s and %s"):format(kind(expected), kind(actual))
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

  local doc = require "spk.doc"
  doc(spk.check_near, [[
spk.check_near(expected, actual, {rel_l2 =, max_abs =}) -> ok, report, comparison
Compares actual against the truth expected (spk.compare(actual, expected)); at least one bound is
required. report is one paragraph: measured values, bounds, the worst index and both values there.]])
  doc.area { name = "tensor", source = "spk.tensor",
             summary = "tensors, random numbers, .npy and .safetensors files, comparison",
             contents = { spk.tensor, spk.zeros, spk.ones, spk.full, spk.arange, spk.is_tensor, spk.rand, spk.randn,
                          spk.generator, spk.load, spk.save, spk.load_safetensors, spk.save_safetensors,
                          spk.compare, spk.allclose, spk.check_near, spk.clock_ms, "spk.tensor", "spk.generator" } }
end
