-- spk.bound: the error bound a stack's output is held to against the f64
-- reference, in one place. spk bench (spk.benchmark), the busted helpers
-- (assert.within_reference without bounds) and scripts (spk.lstm.bound) all
-- take it from here.
--
-- The rule, per backend and math (relative L2 = ||y - ref|| / ||ref|| and max
-- abs = max |y - ref| over the whole output):
--   cudnn   every FP32 algorithm rel_l2 <= 1e-4; TF32 algorithms <= 1e-2
--   cpu     the f32 C reference rel_l2 <= 1e-4
--   a GPU kernel (persistent, cluster, a kernel of one's own: every other
--           backend) rel_l2 <= 1.1 x and max_abs <= 2 x the errors of cuDNN's
--           standard algorithm on the same weights and input, in the math the
--           kernel's rows are held to (3xtf32 claims FP32's accuracy, so FP32);
--           a TF32 kernel row with no cuDNN standard TF32 row to compare with
--           <= 1e-2. The kernels are held to cuDNN's error rather than to a
--           fixed number because that error grows with the weights, the input
--           and the length of the sequence.
--
--   bound.bound{backend = "kernel", math = "fp32", against = {rel_l2 =, max_abs =} | layers =, x =}
--       -> {rel_l2 =, max_abs = (nil: no max abs bound)}, a bounds table as check_near takes it, with
--          .rule (the rule in words) and .against (the errors it was made from) readable too
--       against: cuDNN standard's errors (spk.compare(y_cudnn, ref)); layers and x instead
--       measure them (cuDNN's standard algorithm and the f64 reference: a GPU)
--   bound.held_to[math]   the cuDNN math a math's rows are held to and timed against
--   bound.fixed = {cudnn = 1e-4, cpu = 1e-4, tf32 = 1e-2}, bound.factor = {rel_l2 = 1.1, max_abs = 2}
local M = {}

-- The stacks' maths and what each is held to: the one list (src/cuda/math_modes.h), the first the default.
-- A reduced math is held to itself rather than to the default's accuracy (TF32's inputs).
local MATHS = {}
M.held_to = {}
for _, m in ipairs(require("spk.core").blas.math_modes) do
  if m.stacks then
    MATHS[#MATHS + 1] = m.name
    M.held_to[m.name] = m.held_to
  end
end
local DEFAULT = MATHS[1]
local function reduced(held) return held ~= DEFAULT end
M.fixed = { cudnn = 1e-4, cpu = 1e-4, tf32 = 1e-2 }
M.factor = { rel_l2 = 1.1, max_abs = 2 }

local KEYS = { backend = true, math = true, against = true, layers = true, x = true }

local function fail(message) error("spk.lstm.bound: " .. message, 3) end

-- cuDNN standard's errors on layers and x, in math.
local function measure(layers, x, math_mode)
  local spk = require "spk"
  if not spk.is_tensor(x) or x:dim() ~= 3 then fail("x must be the input tensor [batch, steps, input]") end
  if not spk.cuda.available() then
    fail(("measuring cuDNN's standard algorithm needs a GPU (%s); give against = {rel_l2 =, max_abs =}")
      :format(spk.cuda.no_device_reason()))
  end
  local plan <close> = spk.lstm.stack { backend = "cudnn", layers = layers, batch = x:size(1), steps = x:size(2),
                                        algo = "standard", math = math_mode }
  local y = plan:forward(x)
  if y.device ~= "cpu" then y = y:cpu() end
  local c = spk.compare(y, (spk.lstm.reference(layers, x, { precision = "f64" })))
  return { rel_l2 = c.rel_l2, max_abs = c.max_abs }
end

-- A bound: rel_l2 and max_abs as its only keys (so it is a bounds table for
-- spk.check_near and assert.within_reference as it is), its rule and what it
-- was measured against readable as fields, printing as one line.
local function made(rel_l2, max_abs, rule, against)
  local about = { rule = rule, against = against }
  return setmetatable({ rel_l2 = rel_l2, max_abs = max_abs }, {
    __index = about,
    __tostring = function(b)
      return ("rel_l2 <= %.3g%s (%s)"):format(b.rel_l2, b.max_abs and (", max_abs <= %.3g"):format(b.max_abs) or "",
        about.rule)
    end,
  })
end

local function number_or_nil(v, what)
  if v ~= nil and (type(v) ~= "number" or v ~= v or v < 0) then
    fail(("%s must be a number >= 0, got %s"):format(what, tostring(v)))
  end
  return v
end

function M.bound(spec)
  if type(spec) ~= "table" then fail("expects a table {backend =, math =, against = | layers =, x =}") end
  for key in pairs(spec) do
    if not KEYS[key] then
      fail(("unknown option '%s' (known: against, backend, layers, math, x)"):format(tostring(key)))
    end
  end
  local backend, math_mode = spec.backend or "kernel", spec.math or DEFAULT
  if type(backend) ~= "string" then fail("backend must be a backend's name, got " .. tostring(backend)) end
  local held = M.held_to[math_mode]
  if not held then
    fail(("math must be %s or %s, got %s"):format(table.concat(MATHS, ", ", 1, #MATHS - 1), MATHS[#MATHS],
      tostring(math_mode)))
  end
  if backend == "cudnn" then
    local b = reduced(held) and M.fixed.tf32 or M.fixed.cudnn
    return made(b, nil, ("cuDNN's %s algorithms: a fixed bound"):format(held:upper()))
  elseif backend == "cpu" then
    return made(M.fixed.cpu, nil, "the f32 C reference: a fixed bound")
  end
  local against = spec.against
  if against ~= nil and type(against) ~= "table" then
    fail("against must be cuDNN standard's errors {rel_l2 =, max_abs =}, got " .. tostring(against))
  end
  if against == nil and spec.layers ~= nil then
    if spec.x == nil then fail("layers = needs x = (the input both run on)") end
    against = measure(spec.layers, spec.x, held)
  end
  if against == nil then
    if reduced(held) then
      return made(M.fixed.tf32, nil, ("a %s row without cuDNN standard %s to compare with"):format(held:upper(),
        held:upper()))
    end
    fail("a kernel's bound is relative to cuDNN standard's error on the same input: give against = {rel_l2 =, "
      .. "max_abs =}, or layers = and x = (which measures it on a GPU)")
  end
  local rel = number_or_nil(against.rel_l2, "against.rel_l2")
  local abs = number_or_nil(against.max_abs, "against.max_abs")
  if rel == nil then fail("against needs rel_l2 (cuDNN standard's relative L2 against the f64 reference)") end
  return made(M.factor.rel_l2 * rel, abs and M.factor.max_abs * abs or nil,
    ("%gx the rel_l2%s of cuDNN standard %s on the same input (%.3g%s)"):format(M.factor.rel_l2,
      abs and (" and %gx the max_abs"):format(M.factor.max_abs) or "", held:upper(), rel,
      abs and (", %.3g"):format(abs) or ""), { rel_l2 = rel, max_abs = abs })
end

return M
