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

  --- spk.check_near(expected, actual, {rel_l2 = ..., max_abs = ...})
  -- Compares actual against the truth `expected` (spk.compare(actual,
  -- expected)); at least one bound is required. Returns ok, a one-paragraph
  -- report (measured values, bounds, the worst index and both values there),
  -- and the comparison table (nil if the shapes differ).
  function spk.check_near(expected, actual, bounds)
    bounds = require("spk.options").check_keys(bounds, { "rel_l2", "max_abs" }, "check_near")
    if bounds.rel_l2 == nil and bounds.max_abs == nil then
      error("check_near: give a bound, rel_l2 and/or max_abs", 2)
    end
    if not (spk.is_tensor(expected) and spk.is_tensor(actual)) then
      return false, ("expected two tensors, got %s and %s"):format(type(expected), type(actual))
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
  spk.check_near = require("spk.options").takes(3, "spk.check_near", spk.check_near)
end
