-- An argument a function does not take is an error that names it: every
-- function and method outside the tensor area (whose functions follow that
-- area's rule), found by walking spk's tables and the objects' metatables
-- (tests/spec/calls.lua), and the option-taking functions of the Lua library
-- modules. An extra positional argument is "bad argument #n to 'f'
-- (unexpected argument (string "x"): f takes (a, b))"; an unknown option key
-- is "<where>: unknown option '<key>' (known: ...)". The C bindings (their
-- checked registration and spk_lua_checkkeys in src/lua/bind.c) and the Lua
-- functions (spk.options.takes, check_keys) give the same messages.
local spk = require "spk"
local calls = require "calls"

local METHOD_TABLES = { "spk.schedule.Schedule.", "spk.cudnn.methods." }
local EXTRA = "extra-argument"

local function in_method_table(name)
  for _, prefix in ipairs(METHOD_TABLES) do
    if name:sub(1, #prefix) == prefix then return true end
  end
  return false
end

-- The arguments of a recipe, or none where they cannot be made here (a GPU
-- recipe without a device): the extra argument is checked first anyway.
local function build(recipe, m)
  local made = table.pack(pcall(recipe.args, m))
  if not made[1] then return { n = 0 }, false end
  return table.pack(table.unpack(made, 2, made.n)), true
end

local function call_with_extra(fn, args, n)
  local a = table.pack(table.unpack(args, 1, args.n))
  for i = a.n + 1, n do a[i] = nil end
  a[n + 1] = EXTRA
  return pcall(fn, table.unpack(a, 1, n + 1))
end

local function all_recipes()
  local functions, names = calls.functions(spk)
  local out, missing = {}, {}
  for _, f in ipairs(functions) do
    local name, fn = f[1], f[2]
    if not in_method_table(name) then
      local recipe = calls.recipe(names, fn)
      if not recipe then
        missing[#missing + 1] = name
      elseif recipe.area ~= "tensor" then
        out[#out + 1] = { name, fn, recipe }
      end
    end
  end
  for name, recipe in pairs(calls.modules) do
    local module, field = name:match("^(%w+)%.([%w_]+)$")
    local fn = require("spk." .. module)[field]
    out[#out + 1] = { name, fn, recipe }
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out, missing
end

describe("an argument a function does not take is an error that names it", function()
  local dir, cwd
  setup(function()
    dir = spec_tmpdir()
    local p = io.popen("pwd")
    cwd = p:read("l")
    p:close()
  end)
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("every function outside the tensor area has a recipe in calls.lua", function()
    local _, missing = all_recipes()
    assert(#missing == 0, "no recipe (tests/spec/calls.lua) for: " .. table.concat(missing, ", "))
  end)

  it("an extra positional argument, for every function: the error names its position", function()
    local checked, failures = 0, {}
    for _, entry in ipairs(all_recipes()) do
      local name, fn, recipe = entry[1], entry[2], entry[3]
      local m = calls.maker(spk)
      local args = build(recipe, m)
      local ok, err = call_with_extra(fn, args, recipe.n)
      m.close_all()
      checked = checked + 1
      local want = ("bad argument #%d to '"):format(recipe.n + 1)
      if ok then
        failures[#failures + 1] = name .. ": accepted an extra argument"
      elseif not (tostring(err):find(want, 1, true) and tostring(err):find('unexpected argument (string "' .. EXTRA .. '")', 1, true)) then
        failures[#failures + 1] = ("%s: %s"):format(name, tostring(err))
      end
    end
    assert(#failures == 0, table.concat(failures, "\n"))
    assert.is_true(checked >= 100, tostring(checked))
  end)

  it("an unknown option key, for every function that takes options: the error names the key", function()
    local checked, failures = 0, {}
    local saved = os.getenv("PWD")
    for _, entry in ipairs(all_recipes()) do
      local name, fn, recipe = entry[1], entry[2], entry[3]
      if recipe.opts then
        local m = calls.maker(spk)
        local args = build(recipe, m)
        local opts = args[recipe.opts]
        if type(opts) ~= "table" then opts = {} end
        opts.bogus_option = 1
        args[recipe.opts] = opts
        args.n = math.max(args.n, recipe.opts)
        local ok, err = pcall(fn, table.unpack(args, 1, args.n))
        m.close_all()
        checked = checked + 1
        if ok then
          failures[#failures + 1] = name .. ": accepted the option bogus_option"
        elseif not tostring(err):find("unknown option 'bogus_option'", 1, true) then
          failures[#failures + 1] = ("%s: %s"):format(name, tostring(err))
        end
      end
    end
    assert(#failures == 0, table.concat(failures, "\n"))
    assert.is_true(checked >= 30, tostring(checked))
    assert.are.equal(saved, os.getenv("PWD"))
  end)

  -- Methods: self plus the method's arguments; a method counts self, and its
  -- message numbers the arguments without it, as Lua's own do.
  local function check_methods(want_gpu)
    local checked, failures = 0, {}
    for _, kind in ipairs(calls.objects) do
      if kind.area ~= "tensor" and (kind.gpu == true) == want_gpu then
        local m = calls.maker(spk)
        local sample = kind.make(m)
        for _, method in ipairs(calls.methods_of(sample)) do
          local mname, fn = method[1], method[2]
          if not mname:match("^__") then
            local n = (kind.arity or {})[mname]
            if not n then
              failures[#failures + 1] = ("%s:%s has no arity in calls.lua"):format(kind.kind, mname)
            else
              local self = kind.make(m)
              local args = table.pack(self, table.unpack(calls.method_args(m, kind.methods[mname])))
              -- called as a method, so the message counts as Lua's own do
              local a = table.pack(table.unpack(args, 1, args.n))
              for i = a.n + 1, n do a[i] = nil end
              a[n + 1] = EXTRA
              local ok, err = pcall(function() return self[mname](table.unpack(a, 1, n + 1)) end)
              checked = checked + 1
              if ok then
                failures[#failures + 1] = ("%s:%s accepted an extra argument"):format(kind.kind, mname)
              elseif not tostring(err):find('unexpected argument (string "' .. EXTRA .. '")', 1, true) then
                failures[#failures + 1] = ("%s:%s: %s"):format(kind.kind, mname, tostring(err))
              end
              local o = (kind.opts or {})[mname]
              if o then
                local b = table.pack(table.unpack(args, 1, args.n))
                b[o] = type(b[o]) == "table" and b[o] or {}
                b[o].bogus_option = 1
                b.n = math.max(b.n, o)
                local okk, errk = pcall(function() return self[mname](table.unpack(b, 1, b.n)) end)
                checked = checked + 1
                if okk or not tostring(errk):find("unknown option 'bogus_option'", 1, true) then
                  failures[#failures + 1] = ("%s:%s took the option bogus_option: %s"):format(kind.kind, mname,
                    tostring(errk))
                end
              end
            end
          end
        end
        m.close_all()
      end
    end
    assert(#failures == 0, table.concat(failures, "\n"))
    return checked
  end

  it("every method of the objects made without a GPU (cpu plans, schedules, modules)", function()
    assert.is_true(check_methods(false) >= 8)
  end)

  gpu_it("every method of the GPU objects (streams, events, graphs, kernels, plans)", function()
    assert.is_true(check_methods(true) >= 30)
  end)

  it("a trailing nil is no argument; a non-nil one after it is named by its position", function()
    local t = spk.tensor { 1, 2 }
    assert.is_table(spk.compare(t, t, nil, nil))
    local ok, err = pcall(spk.compare, t, t, nil, 7)
    assert.is_false(ok)
    assert.matches("bad argument #4 to '.-' %(unexpected argument %(number 7%): spk%.compare takes %(actual, expected%)%)", err)
    assert.is_true(spk.lstm.check_math("fp32", nil, nil) == "fp32")
    ok, err = pcall(spk.lstm.check_math, "fp32", "cpu", nil, true)
    assert.is_false(ok)
    assert.are.equal("bad argument #4 to 'spk.lstm.check_math' (unexpected argument (boolean true): "
      .. "spk.lstm.check_math takes (value, backend))",
      err:gsub("^[^:]+:%d+: ", ""))
  end)

  it("C and Lua functions say it the same way, and point at the caller's line", function()
    local t = spk.tensor { 1, 2 }
    local _, c_err = pcall(spk.compare, t, t, "x")
    local lua_ok, lua_err = pcall(function() spk.lstm.random({}, "x") end)
    assert.is_false(lua_ok)
    assert.matches('unexpected argument %(string "x"%): spk%.compare takes %(actual, expected%)%)$', c_err)
    assert.matches("^.-arguments_spec%.lua:%d+: bad argument #2 to 'spk.lstm.random' %(unexpected argument "
      .. '%(string "x"%): spk%.lstm%.random takes %(opts%)%)$', lua_err)
    -- options: the same words from C (spk.cuda.compile) and Lua (spk.lstm.save)
    local _, c_opt = pcall(spk.cuda.compile, { source = "", nope = 1 })
    assert.matches("compile: unknown option 'nope' %(known: source, file, defines, options, arch, cache%)", c_opt)
    local _, l_opt = pcall(spk.lstm.save, dir .. "/w", spk.lstm.random { layers = 1, input = 2, hidden = 2 },
      { nope = 1 })
    assert.matches("arguments_spec%.lua:%d+: lstm.save: unknown option 'nope' %(known: format%)", l_opt)
    -- a key that is no string is named by its type
    local _, n_opt = pcall(spk.lstm.random, { [1] = 4 })
    assert.matches("unknown option 1 %(a number key; known: dtype, hidden, input, layers, scale, seed%)", n_opt)
    -- a method's message counts its arguments without self
    local s = spk.schedule.new { batch = 8, capacity = 16, groups = 2, heights = { 8 } }
    local _, m_err = pcall(function() local r = s:launches(5) return r end) -- not a tail call: named as a method
    assert.matches("bad argument #1 to 'launches' %(unexpected argument %(number 5%): launches takes no arguments%)",
      m_err)
    local module = spk.cuda.compile { source = 'extern "C" __global__ void k() {}', arch = "sm_90" }
    local _, k_err = pcall(function() local r = module:code(1) return r end)
    assert.matches("bad argument #1 to 'code' %(unexpected argument %(number 1%): module:code takes no arguments%)",
      k_err)
    module:close()
  end)

  it("a userdata is named by its type, never 'userdata'", function()
    local t = spk.tensor { 1 }
    local _, err = pcall(spk.compare, t, t, t)
    assert.matches("unexpected argument %(tensor%)", err)
    local _, lerr = pcall(spk.lstm.validate, spk.lstm.random { layers = 1, input = 2, hidden = 2 }, t)
    assert.matches("unexpected argument %(tensor%)", lerr)
    assert.is_falsy(tostring(err):find("userdata", 1, true))
    assert.is_falsy(cwd == nil)
  end)
end)
