-- The child of rawargs_spec.lua: runs one group of calls in its own spk
-- process (in a scratch folder), so that a crash is seen as the child dying.
--   traps       every function and method, called with its recipe's tables
--               (and a table in each position) behind metatables whose
--               __index, __len, __newindex, __pairs, __tostring, __eq, __lt,
--               __le, __concat and __call close every object the call was
--               given. Prints "METAMETHOD <name> ..." for a C function that
--               ran one, "DIFFERS <name> ..." for one whose result changed.
--   finalizers  every function and method, called with its recipe while a
--               dropped object's __gc closes every object the call was given,
--               run at the 1st, 2nd, ... 6th collection step inside the call.
-- Last line: "rawargs: <group>: N calls, M functions, K metamethods run by C, ..."
-- An optional third argument runs only the function or method of that name
-- (as the output names them), to find every failing one of an old build.
local group, calls_dir, only = ...
package.path = calls_dir .. "/?.lua;" .. package.path
io.stdout:setvbuf("line")
local spk = require "spk"
local calls = require "calls"
calls.setup_files(spk)
local has_gpu = spk.cuda.available()

-- Methods of objects are reached through the objects, not through these tables.
local METHOD_TABLES = { "spk.schedule.Schedule.", "spk.cudnn.methods." }

local function is_c(fn) return debug.getinfo(fn, "S").what == "C" end

local fired, current = 0, nil
local function trip()
  fired = fired + 1
  if current then current.close_all() end
end
local trap_mt = {
  __index = function() trip() end,
  __newindex = function(t, k, v) trip(); rawset(t, k, v) end,
  __len = function(t) trip(); return rawlen(t) end,
  __pairs = function(t) trip(); return next, t, nil end,
  __tostring = function() trip(); return "trap" end,
  __eq = function() trip(); return false end,
  __lt = function() trip(); return false end,
  __le = function() trip(); return false end,
  __concat = function() trip(); return "trap" end,
  __call = function() trip() end,
}

-- Sets trap_mt on every plain table reachable from v (not through objects).
local function arm(v, seen)
  seen = seen or {}
  if type(v) ~= "table" or seen[v] or getmetatable(v) ~= nil then return v end
  seen[v] = true
  for k, x in pairs(v) do arm(k, seen); arm(x, seen) end
  return setmetatable(v, trap_mt)
end

local stats = { calls = 0, functions = 0, c_fired = 0, differs = 0, lua_fired = 0, skipped = 0, inside = 0 }

-- Calls fn with the arguments build(m) returns; arms them when `armed`.
local function call(fn, build, armed, replace)
  local m = calls.maker(spk)
  local made = table.pack(pcall(build, m))
  if not made[1] then
    m.close_all()
    return nil, "no arguments: " .. tostring(made[2])
  end
  local args = table.pack(table.unpack(made, 2, made.n))
  if replace then
    args[replace] = { 1, 2, x = 1 }
    args.n = math.max(args.n, replace)
  end
  if armed then
    for i = 1, args.n do arm(args[i]) end
  end
  fired, current = 0, armed and m or nil
  stats.calls = stats.calls + 1
  local ok, err = pcall(fn, table.unpack(args, 1, args.n))
  current = nil
  local f = fired
  m.close_all()
  -- an error is a message (a string, or an object that prints), never a crash
  assert(ok or type(tostring(err)) == "string")
  return ok, err, f
end

local function trap_test(name, fn, build, n)
  stats.functions = stats.functions + 1
  io.write(name, "\n")
  local plain_ok = call(fn, build, false)
  local ok, err, f = call(fn, build, true)
  local c = is_c(fn)
  if c and f > 0 then
    stats.c_fired = stats.c_fired + 1
    io.write(("METAMETHOD %s: the C function ran %d metamethod(s) of its argument tables\n"):format(name, f))
  elseif f > 0 then
    stats.lua_fired = stats.lua_fired + 1
  end
  if c and plain_ok and not ok then
    stats.differs = stats.differs + 1
    io.write(("DIFFERS %s: works with plain tables, fails with metatables: %s\n"):format(name, tostring(err)))
  end
  -- a table (behind the trap) in each position
  for i = 1, math.max(n or 0, 1) + 1 do
    local _, _, fi = call(fn, build, true, i)
    if c and fi > 0 then
      stats.c_fired = stats.c_fired + 1
      io.write(("METAMETHOD %s: a table as argument %d ran %d metamethod(s)\n"):format(name, i, fi))
    end
  end
end

-- A finalizer that runs at the k-th collection step inside the call: the
-- collector is stopped, the bomb (whose __gc closes what the call was given)
-- is dropped and then 10 * k probes, and it is stepped by hand until the
-- probes have run (finalizers run newest first, 10 a step), so the bomb is
-- next; restarted with the smallest step size, the collector takes a step at
-- every allocation, and the k-th one inside the call runs the bomb.
local STEPS = 6
local function bombed_call(k, fn, m, args)
  collectgarbage("incremental", 100, 100, 1)
  collectgarbage("stop")
  local in_call = false
  do
    setmetatable({}, { __gc = function()
      if in_call then stats.inside = stats.inside + 1 end
      m.close_all()
    end })
  end
  local ran, want = 0, 10 * (k - 1)
  for _ = 1, want do setmetatable({}, { __gc = function() ran = ran + 1 end }) end
  local guard = 0
  while ran < want and guard < 1000000 do
    collectgarbage("step", 0)
    guard = guard + 1
  end
  collectgarbage("restart")
  stats.calls = stats.calls + 1
  in_call = true
  local ok, err = pcall(fn, table.unpack(args, 1, args.n))
  in_call = false
  collectgarbage("incremental", 200, 100, 13)
  assert(ok or type(tostring(err)) == "string")
end

local function finalizer_test(name, fn, build)
  stats.functions = stats.functions + 1
  io.write(name, "\n")
  for k = 1, STEPS do
    local m = calls.maker(spk)
    local made = table.pack(pcall(build, m))
    if made[1] then
      bombed_call(k, fn, m, table.pack(table.unpack(made, 2, made.n)))
    end
    m.close_all()
  end
end

local run_group = group == "traps" and trap_test or finalizer_test
local function run(name, ...)
  if only == nil or only == name then return run_group(name, ...) end
end

-- functions
local functions, names = calls.functions(spk)
for _, f in ipairs(functions) do
  local name, fn = f[1], f[2]
  local skip = false
  for _, prefix in ipairs(METHOD_TABLES) do skip = skip or name:sub(1, #prefix) == prefix end
  if not skip then
    local recipe = calls.recipe(names, fn)
    if not recipe then
      io.write(("NO RECIPE %s\n"):format(name))
      recipe = { n = 2, args = function(m) return m.t23(), { 1, 2 } end }
    end
    if recipe.gpu and not has_gpu then
      stats.skipped = stats.skipped + 1
    else
      run(name, fn, recipe.args, recipe.n)
    end
  end
end

-- methods, on a fresh object each call
local covered = {}
for _, kind in ipairs(calls.objects) do
  if kind.metatable then covered[kind.metatable] = true end
  if kind.gpu and not has_gpu then
    stats.skipped = stats.skipped + 1
  else
    local okm, sample = pcall(kind.make, calls.maker(spk))
    if not okm then
      io.write(("NO SAMPLE %s: %s\n"):format(kind.kind, tostring(sample)))
    else
      for _, method in ipairs(calls.methods_of(sample)) do
        local mname, fn = method[1], method[2]
        local spec = kind.methods[mname]
        local build = function(m)
          local self = kind.make(m)
          return self, table.unpack(calls.method_args(m, spec))
        end
        run(kind.kind .. ":" .. mname, fn, build, (kind.arity or {})[mname] or (spec and #spec + 1) or 1)
      end
    end
  end
end
-- every spk.* metatable in the registry is one of the kinds above
for key, value in pairs(debug.getregistry()) do
  if type(key) == "string" and key:match("^spk%.") and type(value) == "table" and rawget(value, "__name") == key
      and not covered[key] then
    io.write(("NO KIND %s: a userdata type without a sample object in calls.lua\n"):format(key))
  end
end

collectgarbage()
io.write(("rawargs: %s: %d calls, %d functions, %d metamethods run by C, %d differ, %d Lua functions ran one, "
  .. "%d GPU-only skipped, %d finalizers ran inside a call\n"):format(group, stats.calls, stats.functions, stats.c_fired,
  stats.differs, stats.lua_fired, stats.skipped, stats.inside))
