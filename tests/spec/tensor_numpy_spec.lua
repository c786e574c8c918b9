-- The tensor API against NumPy, case by case: seeded random operands (0-d
-- to 8-d, sizes 0 to 5, every dtype), taken through views (narrow, select,
-- slice with positive and negative steps, transpose: non-contiguous data),
-- then one operation: every elementwise op (tensor op tensor with
-- broadcasting and mixed dtypes, tensor op number, number op tensor, through
-- methods and operators), every reduction with and without dim and keepdim,
-- every comparison, x[i] = number or tensor through the views (the whole base
-- is compared, so writes through strided views are checked), or the view
-- itself. Each case is written as the Lua
-- expression that computes it; spk runs them all, then one Python process
-- (tests/spec/tensor_numpy_check.py) rebuilds every case in NumPy from the
-- documented meaning of each call and compares the result's value, shape and
-- dtype. A failure prints the case's expression, which reproduces it:
--
--     build/spk -e 'spk = require "spk" print(spk.tensor({1, 2}, "i32"):view{2}:sum(1))'
--
-- SPK_NUMPY_SEED and SPK_NUMPY_CASES change the seed (default 20261201) and
-- the number of cases (default 10000).
local spk = require "spk"

local SEED = math.tointeger(tonumber(os.getenv("SPK_NUMPY_SEED") or "")) or 20261201
local CASES = math.tointeger(tonumber(os.getenv("SPK_NUMPY_CASES") or "")) or 10000

-- A 64-bit LCG of its own, so other specs' use of math.random does not matter.
local state
local function rand(n) -- 1..n
  state = state * 6364136223846793005 + 1442695040888963407
  return (state >> 33) % n + 1
end
local function chance(p) return rand(1000000) <= p * 1000000 end
local function pick(list) return list[rand(#list)] end

local DTYPES = { "f32", "f64", "i32", "u64" }

-- ---- values: Lua literals and their JSON twins ----

local function float_literal(v, dtype)
  if v ~= v then return "(0/0)", "NaN" end
  if v == math.huge then return "math.huge", "Infinity" end
  if v == -math.huge then return "(-math.huge)", "-Infinity" end
  local s = (dtype == "f32" and "%.9g" or "%.17g"):format(v)
  if not s:find("[%.eEn]") then s = s .. ".0" end -- stays a float in Lua, keeps -0.0 in JSON
  return s, s
end

-- u64 values are Lua integers whose bits are the value; JSON gets the
-- unsigned decimal, as text.
local function unsigned(v)
  if v >= 0 then return ("%d"):format(v) end
  local q = (v >> 1) // 5
  return ("%d%d"):format(q, v - q * 10)
end

local function int_literal(v)
  if v == math.mininteger then return "math.mininteger" end
  return ("%d"):format(v)
end

local FLOATS = { 0.0, -0.0, 1.0, -1.0, 0.5, -2.25, 3.0, 7.0, 0.1, -0.3, 1e10, -1e-5, 2 ^ 24 + 1, 100.75, 1e30 }
local I32_EDGES = { 2147483647, -2147483648, 65536, 46341, -46341 }
local U64_EDGES = { math.mininteger, -1, (1 << 53) + 1, 1 << 32, math.maxinteger }

local function random_value(dtype)
  if dtype == "f32" or dtype == "f64" then
    if chance(0.03) then return 0 / 0 end
    if chance(0.02) then return chance(0.5) and math.huge or -math.huge end
    if chance(0.4) then return pick(FLOATS) end
    return (rand(2001) - 1001) / 8
  elseif dtype == "i32" then
    if chance(0.04) then return pick(I32_EDGES) end
    return rand(41) - 21
  else
    if chance(0.04) then return pick(U64_EDGES) end
    return rand(41) - 1
  end
end

local function value_literals(dtype, v)
  if dtype == "f32" or dtype == "f64" then return float_literal(v, dtype) end
  if dtype == "u64" then return int_literal(v), '"' .. unsigned(v) .. '"' end
  return int_literal(v), ("%d"):format(v)
end

-- ---- operands: a base tensor and views of it ----

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

local function random_shape(limit)
  local ndim = pick { 0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 5, 6, 7, 8 }
  local shape = {}
  for d = 1, ndim do shape[d] = ndim <= 3 and rand(5) or rand(3) end
  if ndim > 0 and chance(0.08) then shape[rand(ndim)] = 0 end
  while numel(shape) > limit do
    local d = rand(ndim)
    if shape[d] > 1 then shape[d] = shape[d] - 1 end
  end
  return shape
end

-- An operand: base values of `shape` in `dtype`, then views. Returns the
-- operand's description and its current shape.
local function new_operand(dtype, shape)
  local lua, json = {}, {}
  for i = 1, numel(shape) do
    lua[i], json[i] = value_literals(dtype, random_value(dtype))
  end
  return { dtype = dtype, shape = shape, lua = lua, json = json, views = {} }
end

local function copy(list) return { table.unpack(list) } end

-- A dim argument: 1-based, sometimes written from the end.
local function dim_arg(d, ndim)
  if chance(0.3) then return d - ndim - 1 end
  return d
end

-- Applies one random view to `o` whose current shape is `shape`; returns the new shape.
local function random_view(o, shape)
  local ndim = #shape
  if ndim == 0 then return shape end
  local d = rand(ndim)
  local size = shape[d]
  local kind = pick { "narrow", "select", "slice", "slice", "transpose", "index" }
  local out = copy(shape)
  if kind == "index" and ndim >= 2 and shape[1] > 0 then -- x[i], i from the end now and then
    local i = rand(shape[1])
    o.views[#o.views + 1] = { "index", chance(0.3) and i - shape[1] - 1 or i }
    table.remove(out, 1)
  elseif kind == "transpose" and ndim >= 2 then
    local e = rand(ndim)
    o.views[#o.views + 1] = { "transpose", dim_arg(d, ndim), dim_arg(e, ndim) }
    out[d], out[e] = shape[e], shape[d]
  elseif size == 0 or kind == "index" or kind == "transpose" then
    return shape
  elseif kind == "narrow" then
    local start = rand(size)
    local length = rand(size - start + 2) - 1
    o.views[#o.views + 1] = { "narrow", dim_arg(d, ndim), start, length }
    out[d] = length
  elseif kind == "select" then
    local i = rand(size)
    o.views[#o.views + 1] = { "select", dim_arg(d, ndim), i }
    table.remove(out, d)
  else
    local step = pick { 1, 2, 3, -1, -2, -3, 1, -1, math.maxinteger, math.mininteger + 1 }
    local first = rand(size)
    local last = step > 0 and rand(size + 1) - 1 or rand(size)
    local count
    if step > 0 then
      count = last >= first and (last - first) // step + 1 or 0
    else
      count = first >= last and (first - last) // (-step) + 1 or 0
    end
    local fa = chance(0.3) and first - size - 1 or first
    local la = (last >= 1 and chance(0.3)) and last - size - 1 or last
    o.views[#o.views + 1] = { "slice", dim_arg(d, ndim), fa, la, step }
    out[d] = count
  end
  return out
end

-- An operand of exactly `shape`, laid out contiguously, transposed or strided.
local function operand_of_shape(dtype, shape)
  local ndim = #shape
  local layout = ndim == 0 and "plain" or pick { "plain", "plain", "transposed", "strided" }
  if layout == "transposed" and ndim >= 2 then
    local i, j = rand(ndim), rand(ndim)
    local base = copy(shape)
    base[i], base[j] = shape[j], shape[i]
    local o = new_operand(dtype, base)
    o.views[1] = { "transpose", i, j }
    return o
  elseif layout == "strided" then
    local d = rand(ndim)
    local base = copy(shape)
    if shape[d] == 0 then return new_operand(dtype, shape) end
    base[d] = 2 * shape[d] - (chance(0.5) and 1 or 0)
    local o = new_operand(dtype, base)
    o.views[1] = chance(0.5) and { "slice", d, 1, -1, 2 } or { "slice", d, -1 - (base[d] - (2 * shape[d] - 1)), 1, -2 }
    return o
  end
  return new_operand(dtype, shape)
end

local function random_operand(dtype)
  local shape = random_shape(48)
  local o = new_operand(dtype, shape)
  for _ = 1, pick { 0, 0, 1, 1, 2, 3 } do shape = random_view(o, shape) end
  return o, shape
end

-- A shape that broadcasts with `shape` (or, now and then, one that does not).
local function partner_shape(shape)
  local r = rand(100)
  local out = copy(shape)
  if r <= 55 then return out end
  if r <= 85 then
    for d = 1, #out do if chance(0.35) then out[d] = 1 end end
    while #out > 0 and chance(0.3) do table.remove(out, 1) end
    if chance(0.15) and #out < 8 then table.insert(out, 1, pick { 1, 2 }) end
    return out
  end
  if r <= 92 then return {} end
  if #out == 0 then return { 2 } end
  local d = rand(#out)
  out[d] = out[d] == 2 and 3 or 2 -- sizes differ and neither is 1 (unless it was)
  return out
end

local function view_call(v)
  if v[1] == "index" then return ("[%s]"):format(int_literal(v[2])) end
  local args = {}
  for i = 2, #v do args[#args + 1] = int_literal(v[i]) end
  return (":%s(%s)"):format(v[1], table.concat(args, ", "))
end

local function operand_expr(o)
  local shape = {}
  for i, s in ipairs(o.shape) do shape[i] = tostring(s) end
  local parts = { ("spk.tensor({%s}, %q):view{%s}"):format(table.concat(o.lua, ", "), o.dtype, table.concat(shape, ", ")) }
  for _, v in ipairs(o.views) do parts[#parts + 1] = view_call(v) end
  return table.concat(parts)
end

-- The base of `o` alone, and its views alone (to append to a variable).
local function base_expr(o)
  return operand_expr { dtype = o.dtype, shape = o.shape, lua = o.lua, views = {} }
end
local function views_expr(o)
  local parts = {}
  for _, v in ipairs(o.views) do parts[#parts + 1] = view_call(v) end
  return table.concat(parts)
end

-- ---- JSON (just what the cases hold) ----

local function json_list(items) return "[" .. table.concat(items, ",") .. "]" end
local function json_ints(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = ("%d"):format(v) end
  return json_list(out)
end

local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return ("\\u%04x"):format(c:byte()) end) .. '"'
end

local function operand_json(o)
  local views = {}
  for i, v in ipairs(o.views) do views[i] = ('["%s",%s]'):format(v[1], table.concat({ table.unpack(v, 2) }, ",")) end
  return ('{"dtype":"%s","shape":%s,"data":%s,"views":%s}'):format(o.dtype, json_ints(o.shape), json_list(o.json),
    json_list(views))
end

local function tensor_json(t)
  local dtype = t:dtype()
  local flat = t:reshape(t:numel()):tolist()
  local data = {}
  for i, v in ipairs(flat) do -- floats as exact f64 text
    local _, j = value_literals(dtype == "f32" and "f64" or dtype, v)
    data[i] = j
  end
  return ('"dtype":"%s","shape":%s,"data":%s'):format(dtype, json_ints(t:shape()), json_list(data))
end

-- ---- cases ----

local BINARY = { "add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge" }
local OPERATOR = { add = "+", sub = "-", mul = "*", div = "/" }
local REDUCTIONS = { "sum", "mean", "min", "max", "argmin", "argmax", "norm" }
local NORM_P = { { "1", 1 }, { "2", 2 }, { "math.huge", '"inf"' }, { "-math.huge", '"-inf"' }, { "0", 0 }, { "3", 3 },
                 { "0.5", 0.5 } }
local INT_SCALARS = { 0, 1, 2, -3, 7, 100, 1 << 31, -1, -(1 << 31), 1 << 40, math.maxinteger }
local FLOAT_SCALARS = { 0.5, -1.25, 0.1, 2.0, 1e10, -0.0, 0 / 0, math.huge, 1e300, 3.0 }

-- One random case: the Lua expression and the JSON fields describing it.
local function random_case()
  local r = rand(100)
  local a, shape = random_operand(pick(DTYPES))
  local ea = operand_expr(a)
  local fields = { '"a":' .. operand_json(a) }
  local expr
  if r <= 30 then -- tensor op tensor
    local op = pick(BINARY)
    local b = operand_of_shape(chance(0.5) and a.dtype or pick(DTYPES), partner_shape(shape))
    local eb = operand_expr(b)
    if OPERATOR[op] and chance(0.5) then
      expr = ("(%s %s %s)"):format(ea, OPERATOR[op], eb)
    else
      expr = ("%s:%s(%s)"):format(ea, op, eb)
    end
    fields[#fields + 1] = ('"op":"%s","b":%s'):format(op, operand_json(b))
  elseif r <= 52 then -- tensor op number, number op tensor
    local op = pick(BINARY)
    local integer = chance(0.5)
    local s = integer and pick(INT_SCALARS) or pick(FLOAT_SCALARS)
    local lit, js
    if integer then
      lit, js = int_literal(s), ("%d"):format(s)
    else
      lit, js = float_literal(s, "f64")
    end
    local first = OPERATOR[op] and chance(0.4)
    if first then
      expr = ("(%s %s %s)"):format(lit, OPERATOR[op], ea)
    elseif OPERATOR[op] and chance(0.5) then
      expr = ("(%s %s %s)"):format(ea, OPERATOR[op], lit)
    elseif op == "mul" and chance(0.5) then
      expr = ("%s:scale(%s)"):format(ea, lit)
    else
      expr = ("%s:%s(%s)"):format(ea, op, lit)
    end
    fields[#fields + 1] = ('"op":"%s","scalar":%s,"scalar_float":%s,"scalar_first":%s'):format(op, js,
      tostring(not integer), tostring(first and true or false))
  elseif r <= 60 then -- unary
    local op = pick { "neg", "abs" }
    expr = op == "neg" and (chance(0.5) and ("(-%s)"):format(ea) or ea .. ":neg()") or ea .. ":abs()"
    fields[#fields + 1] = ('"op":"%s"'):format(op)
  elseif r <= 95 then -- reductions
    local op = pick(REDUCTIONS)
    local ndim = #shape
    local dim
    if chance(0.6) then
      if chance(0.05) or ndim == 0 then
        dim = ndim + 1
      else
        dim = dim_arg(rand(ndim), ndim)
      end
    end
    local keepdim = pick { "nil", "nil", "true", "false" }
    local args = {}
    if op == "norm" then
      local p = pick(NORM_P)
      args[1] = p[1]
      fields[#fields + 1] = '"p":' .. p[2]
    end
    if dim or keepdim ~= "nil" then args[#args + 1] = dim and tostring(dim) or "nil" end
    if keepdim ~= "nil" then args[#args + 1] = keepdim end
    expr = ("%s:%s(%s)"):format(ea, op, table.concat(args, ", "))
    fields[#fields + 1] = ('"op":"%s","dim":%s,"keepdim":%s'):format(op, dim and tostring(dim) or "null",
      keepdim == "true" and "true" or "false")
  elseif r <= 97 and #shape >= 1 and shape[1] > 0 then -- x[i] = number or tensor, through the views
    local i = rand(shape[1])
    if chance(0.3) then i = i - shape[1] - 1 end
    local row = copy(shape)
    table.remove(row, 1)
    local integer_dst = a.dtype == "i32" or a.dtype == "u64"
    local value
    if chance(0.5) then -- a number the destination can hold
      local s = integer_dst and rand(21) - 1 or pick { 0.5, -1.25, 3, 1e10, -0.0, 7.0 }
      local lit, js
      if math.type(s) == "integer" then
        lit, js = int_literal(s), ("%d"):format(s)
      else
        lit, js = float_literal(s, "f64")
      end
      value = lit
      fields[#fields + 1] = ('"scalar":%s,"scalar_float":%s'):format(js, tostring(math.type(s) == "float"))
    else -- a tensor broadcast to the row; integers from integers only (NumPy's float-to-int casts of NaN differ)
      local src_dtype = integer_dst and pick { "i32", "u64" } or pick(DTYPES)
      local b = operand_of_shape(src_dtype, chance(0.7) and row or partner_shape(row))
      value = operand_expr(b)
      fields[#fields + 1] = '"b":' .. operand_json(b)
    end
    expr = ("(function() local x = %s; local v = x%s; v[%s] = %s; return x end)()"):format(base_expr(a), views_expr(a),
      int_literal(i), value)
    fields[#fields + 1] = ('"op":"assign","index":%d'):format(i)
  else -- the view itself
    expr = ea
    fields[#fields + 1] = '"op":"view"'
  end
  return expr, fields, a
end

local ENV = setmetatable({ spk = spk }, { __index = _G })

local function run_case(id, expr, fields, a)
  local chunk = assert(load("return " .. expr, "=case", "t", ENV))
  local got = table.pack(pcall(chunk))
  local result
  if not got[1] then
    result = ('{"error":%s}'):format(json_string(tostring(got[2]):sub(1, 200)))
  elseif spk.is_tensor(got[2]) then
    result = "{" .. tensor_json(got[2]) .. "}"
    if spk.is_tensor(got[3]) then fields[#fields + 1] = '"positions":{' .. tensor_json(got[3]) .. "}" end
  elseif type(got[2]) == "boolean" then
    result = ('{"boolean":%s}'):format(tostring(got[2]))
  elseif type(got[2]) == "number" then
    local v, j = got[2], nil
    if math.type(v) == "integer" then
      j = a.dtype == "u64" and not expr:find(":arg", 1, true) and '"' .. unsigned(v) .. '"' or ("%d"):format(v)
    else
      local _
      _, j = float_literal(v, "f64")
    end
    result = ('{"number":%s,"lua_type":"%s"}'):format(j, math.type(v))
  else
    result = ('{"error":"spk returned a %s"}'):format(type(got[2]))
  end
  fields[#fields + 1] = '"result":' .. result
  return ('{"id":%d,%s}'):format(id, table.concat(fields, ","))
end

-- `count` cases drawn by make_case from the generator seeded with `seed`, run here and
-- checked by tests/spec/tensor_numpy_check.py; a failure lists the first 20 with the line
-- that reproduces each.
local function check_against_numpy(seed, count, make_case, file_name)
  state = seed
  local dir = spec_tmpdir()
  local path = dir .. "/" .. file_name
  local f = assert(io.open(path, "w"))
  local exprs = {}
  for id = 1, count do
    local expr, fields, a = make_case()
    exprs[id] = expr
    f:write(run_case(id, expr, fields, a), "\n")
  end
  f:close()
  local pipe = assert(io.popen(("%s %s %s 2>&1"):format(PYTHON, shell_quote("tests/spec/tensor_numpy_check.py"),
    shell_quote(path))))
  local out = pipe:read("a")
  pipe:close()
  os.execute("rm -rf " .. shell_quote(dir))
  local failures = {}
  for id, why in out:gmatch("FAIL (%d+) ([^\n]*)") do
    if #failures < 20 then
      failures[#failures + 1] = ("case %s: %s\n  reproduce: build/spk -e %s"):format(id, why,
        shell_quote('spk = require "spk" print(' .. exprs[tonumber(id)] .. ")"))
    end
  end
  assert(out:match("checked (%d+) cases, (%d+) failed"), "the NumPy checker did not finish:\n" .. out:sub(-2000))
  assert(#failures == 0, ("seed %d: %s of %d cases disagree with NumPy; the first:\n%s"):format(seed,
    out:match("checked %d+ cases, (%d+) failed"), count, table.concat(failures, "\n")))
  assert.are.equal(tostring(count), out:match("checked (%d+) cases"))
end

local numpy_it = has_numpy() and it or function(name) pending(name .. " [needs python3-numpy]") end

describe("tensors against NumPy", function()
  numpy_it(("agree on %d seeded random cases: values, shapes and dtypes"):format(CASES), function()
    check_against_numpy(SEED, CASES, random_case, "cases.jsonl")
  end)
end)

-- ---- NumPy's other everyday functions, in a block of their own ----
--
-- The functions of src/core/tensor_math.c and friends, each against NumPy the
-- same way (the checker's check_more): linspace, eye, empty, cat, stack,
-- where, exp, log, sqrt, abs, isnan, isfinite, any, all, matmul (and x:mm),
-- squeeze, unsqueeze, permute, ^ and %, and reductions over a list of dims.
-- SPK_NUMPY_MORE_CASES sets the number of cases (default 4000).

local MORE_CASES = math.tointeger(tonumber(os.getenv("SPK_NUMPY_MORE_CASES") or "")) or 4000

-- Values of moderate size (products and sums stay far from overflow), now
-- and then NaN or an infinity for floats.
local function moderate_value(dtype)
  if dtype == "f32" or dtype == "f64" then
    if chance(0.02) then return 0 / 0 end
    if chance(0.02) then return chance(0.5) and math.huge or -math.huge end
    return (rand(41) - 21) / 4
  elseif dtype == "i32" then
    return rand(21) - 11
  end
  return rand(21) - 1
end

local function moderate_operand(dtype, shape)
  local o = new_operand(dtype, shape)
  for i = 1, numel(shape) do o.lua[i], o.json[i] = value_literals(dtype, moderate_value(dtype)) end
  if #shape >= 2 and chance(0.3) then -- a transposed layout now and then
    local base = copy(shape)
    base[1], base[2] = shape[2], shape[1]
    local t = new_operand(dtype, base)
    t.lua, t.json = o.lua, o.json
    t.views[1] = { "transpose", 1, 2 }
    return t
  end
  return o
end

local function number_literal(integer)
  if integer then
    local s = pick(INT_SCALARS)
    return int_literal(s), ("%d"):format(s)
  end
  return float_literal(pick(FLOAT_SCALARS), "f64")
end

local function dims_list(ndim, count)
  local all = {}
  for d = 1, ndim do all[d] = d end
  local out = {}
  for _ = 1, count do
    local d = table.remove(all, rand(#all))
    out[#out + 1] = chance(0.3) and d - ndim - 1 or d
  end
  return out
end

local function lua_list(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = int_literal(v) end
  return table.concat(out, ", ")
end

local MORE_UNARY = { "exp", "log", "sqrt", "isnan", "isfinite", "abs" }
local MORE_REDUCTIONS = { "sum", "mean", "min", "max", "norm", "any", "all" }

local function unary_case(a, ea, fields)
  local op = pick(MORE_UNARY)
  local method = op ~= "abs" and chance(0.5)
  fields[#fields + 1] = ('"op":"fn_%s"'):format(op)
  return method and ("%s:%s()"):format(ea, op) or ("spk.%s(%s)"):format(op, ea)
end

local function pow_mod_case(a, ea, shape, fields)
  local op = pick { "pow", "mod" }
  local symbol = op == "pow" and "^" or "%"
  if chance(0.5) then
    local b = operand_of_shape(chance(0.5) and a.dtype or pick(DTYPES), partner_shape(shape))
    if op == "pow" and chance(0.7) then b = moderate_operand(b.dtype, b.shape) end
    fields[#fields + 1] = ('"op":"%s","b":%s'):format(op, operand_json(b))
    local eb = operand_expr(b)
    return chance(0.5) and ("(%s %s %s)"):format(ea, symbol, eb) or ("%s:%s(%s)"):format(ea, op, eb)
  end
  local integer = chance(0.5)
  local lit, js = number_literal(integer)
  local first = chance(0.3)
  fields[#fields + 1] = ('"op":"%s","scalar":%s,"scalar_float":%s,"scalar_first":%s'):format(op, js,
    tostring(not integer), tostring(first))
  if first then return ("((%s) %s %s)"):format(lit, symbol, ea) end -- (-2) ^ x: ^ binds tighter than -
  return chance(0.5) and ("(%s %s %s)"):format(ea, symbol, lit) or ("%s:%s(%s)"):format(ea, op, lit)
end

local function where_case(shape, fields)
  local cond = operand_of_shape(pick(DTYPES), partner_shape(shape))
  local parts, exprs = { '"op":"where","cond":' .. operand_json(cond) }, { operand_expr(cond) }
  for _, side in ipairs { "a", "b" } do
    if chance(0.3) then
      local integer = chance(0.5)
      local lit, js = number_literal(integer)
      exprs[#exprs + 1] = lit
      parts[#parts + 1] = ('"%s_scalar":%s,"%s_float":%s'):format(side, js, side, tostring(not integer))
    else
      local o = operand_of_shape(pick(DTYPES), partner_shape(shape))
      exprs[#exprs + 1] = operand_expr(o)
      parts[#parts + 1] = ('"%s":%s'):format(side, operand_json(o))
    end
  end
  fields[1] = table.concat(parts, ",")
  return ("spk.where(%s)"):format(table.concat(exprs, ", "))
end

local function matmul_case(fields)
  local n, k, m = rand(5) - 1, rand(5) - 1, rand(5) - 1
  local form = pick { "2d", "2d", "vec_left", "vec_right", "dot", "batch", "batch" }
  local sa, sb = { n, k }, { k, m }
  if form == "vec_left" then sa = { k } elseif form == "vec_right" then sb = { k } elseif form == "dot" then
    sa, sb = { k }, { k }
  elseif form == "batch" then
    local batch = { rand(3), rand(2) }
    sa = { batch[1], batch[2], n, k }
    sb = chance(0.5) and { batch[2], k, m } or { chance(0.5) and 1 or batch[1], 1, k, m }
  end
  if chance(0.08) then sb[#sb == 1 and 1 or #sb - 1] = k + 1 end -- inner sizes differ
  local a = moderate_operand(pick(DTYPES), sa)
  local b = moderate_operand(chance(0.6) and a.dtype or pick(DTYPES), sb)
  fields[1] = ('"op":"matmul","a":%s,"b":%s'):format(operand_json(a), operand_json(b))
  local ea, eb = operand_expr(a), operand_expr(b)
  return pick { ("spk.matmul(%s, %s)"):format(ea, eb), ("%s:mm(%s)"):format(ea, eb), ("%s:matmul(%s)"):format(ea, eb) }
end

local function join_case(fields)
  local stack = chance(0.4)
  local shape = random_shape(16)
  if #shape == 0 and not stack then shape = { rand(3) } end
  local ndim = #shape + (stack and 1 or 0)
  local dim = rand(ndim)
  local list, exprs, json = {}, {}, {}
  local dtype = pick(DTYPES)
  for i = 1, rand(4) do
    local s = copy(shape)
    if not stack and chance(0.7) then s[dim] = rand(4) - 1 end
    if chance(0.05) and #s > 0 then s[rand(#s)] = 5 end -- shapes that do not join (now and then)
    list[i] = operand_of_shape(chance(0.7) and dtype or pick(DTYPES), s)
    exprs[i], json[i] = operand_expr(list[i]), operand_json(list[i])
  end
  local darg = chance(0.3) and dim - ndim - 1 or dim
  fields[1] = ('"op":"%s","list":[%s],"dim":%d'):format(stack and "stack" or "cat", table.concat(json, ","), darg)
  local call = ("spk.%s({%s}"):format(stack and "stack" or "cat", table.concat(exprs, ", "))
  if darg == 1 and chance(0.5) then return call .. ")" end
  return ("%s, %d)"):format(call, darg)
end

local function view_case(a, ea, shape, fields)
  local ndim = #shape
  local kind = pick { "squeeze", "unsqueeze", "permute" }
  if kind == "squeeze" then
    if ndim > 0 and chance(0.6) then
      local d = rand(ndim)
      fields[#fields + 1] = ('"op":"squeeze","dim":%d'):format(dim_arg(d, ndim))
      return ("%s:squeeze(%d)"):format(ea, dim_arg(d, ndim))
    end
    fields[#fields + 1] = '"op":"squeeze","dim":null'
    return ea .. ":squeeze()"
  elseif kind == "unsqueeze" then
    local d = rand(ndim + 3) - 1 -- 0 and ndim + 2 are out of range
    if chance(0.3) then d = -d end
    fields[#fields + 1] = ('"op":"unsqueeze","dim":%d'):format(d)
    return ("%s:unsqueeze(%d)"):format(ea, d)
  end
  local perm = dims_list(ndim, ndim)
  if ndim >= 2 and chance(0.08) then perm[1] = perm[2] end -- not a permutation
  fields[#fields + 1] = ('"op":"permute","dims":[%s]'):format(table.concat(perm, ","))
  if chance(0.5) then return ("%s:permute{%s}"):format(ea, lua_list(perm)) end
  return ("%s:permute(%s)"):format(ea, lua_list(perm))
end

local function reduce_dims_case(a, ea, shape, fields)
  local ndim = #shape
  local op = ndim == 0 and pick { "any", "all" } or pick(MORE_REDUCTIONS)
  local truth = op == "any" or op == "all"
  local args, p, dims, list = {}, nil, nil, false
  if op == "norm" then
    p = pick(NORM_P)
    args[1] = p[1]
  end
  if ndim > 0 and (not truth or chance(0.5)) then
    dims, list = dims_list(ndim, rand(ndim)), true
    args[#args + 1] = "{" .. lua_list(dims) .. "}"
  elseif ndim > 0 and chance(0.5) then
    dims = { dim_arg(rand(ndim), ndim) }
    args[#args + 1] = tostring(dims[1])
  end
  local keepdim = chance(0.4)
  if keepdim then
    if not dims then args[#args + 1] = "nil" end
    args[#args + 1] = "true"
  end
  fields[#fields + 1] = ('"op":"reduce_%s","dims":%s,"list":%s,"keepdim":%s%s'):format(op,
    dims and "[" .. table.concat(dims, ",") .. "]" or "null", tostring(list), tostring(keepdim),
    p and (',"p":' .. p[2]) or "")
  return ("%s:%s(%s)"):format(ea, op, table.concat(args, ", "))
end

local function creation_case(fields)
  local kind = pick { "linspace", "eye", "empty" }
  local dtype = pick { "f32", "f64", "i32", "u64", "nil" }
  local dt = dtype == "nil" and "" or (", %q"):format(dtype)
  if kind == "linspace" then
    local start, stop = pick { 0, 1, -2.5, 0.1, 10, -7 }, pick { 1, 0, 3.75, -1, 1e3, 0.3 }
    local num = rand(8) - 1
    fields[1] = ('"op":"linspace","start":%s,"stop":%s,"num":%d,"dtype":"%s"'):format(start, stop, num, dtype)
    return ("spk.linspace(%s, %s, %d%s)"):format(start, stop, num, dt)
  elseif kind == "eye" then
    local n, m = rand(5) - 1, rand(5) - 1
    fields[1] = ('"op":"eye","n":%d,"m":%d,"dtype":"%s"'):format(n, m, dtype)
    return ("spk.eye(%d, %d%s)"):format(n, m, dt)
  end
  local shape = random_shape(24)
  fields[1] = ('"op":"empty","shape":%s,"dtype":"%s"'):format(json_ints(shape), dtype)
  return ("spk.empty({%s}%s)"):format(lua_list(shape), dt)
end

local function random_more_case()
  local r = rand(100)
  local a, shape = random_operand(pick(DTYPES))
  local ea = operand_expr(a)
  local fields = { '"a":' .. operand_json(a) }
  local expr
  if r <= 14 then expr = unary_case(a, ea, fields)
  elseif r <= 32 then expr = pow_mod_case(a, ea, shape, fields)
  elseif r <= 44 then expr = where_case(shape, fields)
  elseif r <= 58 then expr = matmul_case(fields)
  elseif r <= 70 then expr = join_case(fields)
  elseif r <= 82 then expr = view_case(a, ea, shape, fields)
  elseif r <= 94 then expr = reduce_dims_case(a, ea, shape, fields)
  else expr = creation_case(fields) end
  return expr, fields, a
end

describe("NumPy's other everyday functions against NumPy", function()
  numpy_it(("agree on %d seeded random cases: values, shapes and dtypes"):format(MORE_CASES), function()
    check_against_numpy(SEED + 1, MORE_CASES, random_more_case, "more.jsonl")
  end)
end)
