-- Where an error points: every public function and method of spk, called with
-- bad arguments from a script, raises an error whose location is the script's
-- line (or none), never one of spk's own Lua files (lua/spk/...), however
-- deep in spk the problem was found (spk.errors).
--
-- The calls run in a child spk process in a scratch folder (functions that
-- write files write there); the child is the "script": each message must
-- start with its own file name, or carry no location at all.
local BUILD = os.getenv("BUILD") or "build"

local CHILD = [==[
local spk = require "spk"
local script = ...
io.stdout:setvbuf("line")
os.exit = function() error("os.exit called", 2) end -- commands' exits are errors here

local bad = { { "nil", nil }, { "1.5", 1.5 }, { '"x"', "x" }, { "{}", {} }, { "true", true }, { "-1", -1 } }
local t23 = spk.arange(6):view { 2, 3 }
local layers = spk.lstm.random { layers = 1, input = 3, hidden = 2, seed = 1 }
local x = spk.rand({ 1, 2, 3 }, { seed = 2 })
local samples = {
  ["spk.lstm.reference"] = { layers, x }, ["spk.lstm.save"] = { "w", layers }, ["spk.lstm.load"] = { "w" },
  ["spk.lstm.stack"] = { { layers = layers, batch = 1, steps = 2, backend = "cpu" } },
  ["spk.schedule.new"] = { { batch = 8, capacity = 16, groups = 2, heights = { 8 } } },
  ["spk.check_near"] = { t23, t23, { rel_l2 = 1 } },
  ["spk.debug.first_divergence"] = { t23, t23 },
}

local calls, offenders = 0, 0
-- A location in the message: "<where>:<line>: ...".
local function location(message)
  return message:match("^([^\n]-):%d+: ")
end

local function check(name, what, ok, err)
  calls = calls + 1
  if ok or type(err) ~= "string" then return end
  local where = location(err)
  if where and where ~= script then
    offenders = offenders + 1
    print(("OFFENDER %s(%s): %s"):format(name, what, (err:gsub("\n.*", ""))))
  end
end

local function hammer(name, fn, base)
  base = base or samples[name] or { t23, t23 }
  local n = #base
  check(name, "no arguments", pcall(function() return fn() end))
  for i = 1, math.max(n, 2) do
    for _, b in ipairs(bad) do
      local args = { table.unpack(base, 1, n) }
      args[i] = b[2]
      local m = math.max(n, i)
      check(name, ("argument %d = %s"):format(i, b[1]), pcall(function() return fn(table.unpack(args, 1, m)) end))
    end
  end
end

local function functions_of(tbl, prefix, out, seen)
  if seen[tbl] then return out end
  seen[tbl] = true
  local keys = {}
  for k in pairs(tbl) do if type(k) == "string" and k ~= "core" then keys[#keys + 1] = k end end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = tbl[k]
    if type(v) == "function" then out[#out + 1] = { prefix .. k, v }
    elseif type(v) == "table" then functions_of(v, prefix .. k .. ".", out, seen) end
  end
  return out
end

-- Not called: the ones that change this process's folders, and the
-- benchmark, which with no options runs in full.
local skip = { ["spk.cuda.set_cache_dir"] = true, ["spk.cuda.set_kernel_dir"] = true, ["spk.benchmark.run"] = true }

local list = functions_of(spk, "spk.", {}, {})
for _, mod in ipairs { "report", "plot", "benchmark", "experiment", "tuning", "bench" } do
  functions_of(require("spk." .. mod), "spk." .. mod .. ".", list, {})
end
for _, f in ipairs(list) do
  if not skip[f[1]] then hammer(f[1], f[2]) end
end

-- Methods of the objects spk hands out, with a bad self and bad arguments.
local objects = {
  { "tensor", t23 }, { "generator", spk.generator(3) }, { "comparison", spk.compare(t23, t23) },
  { "schedule", spk.schedule.new { batch = 8, capacity = 16, groups = 2, heights = { 8 } } },
  { "cpu plan", spk.lstm.stack { layers = layers, batch = 1, steps = 2, backend = "cpu" } },
  { "cuda module", spk.cuda.compile { source = "extern \"C\" __global__ void k() {}", arch = "sm_90", cache = false } },
  { "ulp histogram", spk.debug.ulp_histogram(t23, t23) }, { "summary", spk.debug.summary(t23) },
}
for _, o in ipairs(objects) do
  local obj = o[2]
  local mt = getmetatable(obj)
  local index = mt and mt.__index
  if type(index) == "function" then index = select(2, debug.getupvalue(index, 1)) or mt.methods end
  if type(index) ~= "table" then index = type(obj) == "table" and obj or {} end
  local keys = {}
  for k, v in pairs(index) do if type(k) == "string" and type(v) == "function" then keys[#keys + 1] = k end end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local method = index[k]
    hammer(o[1] .. ":" .. k, function(...) return method(obj, ...) end, { t23 })
    check(o[1] .. ":" .. k, "self = 1.5", pcall(function() return method(1.5) end))
  end
end
print(("error locations: %d calls, %d outside the script"):format(calls, offenders))
]==]

describe("error locations", function()
  it("point at the script's line, never at spk's own Lua files", function()
    local dir = spec_tmpdir()
    local child = dir .. "/script.lua"
    write_file(child, CHILD)
    local p = io.popen(("cd %s && %s/spk script.lua script.lua 2>&1"):format(shell_quote(dir),
      shell_quote(BUILD:sub(1, 1) == "/" and BUILD or (os.getenv("PWD") .. "/" .. BUILD))))
    local out = p:read("a")
    p:close()
    os.execute("rm -rf " .. shell_quote(dir))
    local calls, offenders = out:match("error locations: (%d+) calls, (%d+) outside the script")
    assert.truthy(calls, "the child did not finish:\n" .. out)
    assert.is_true(tonumber(calls) > 2000, "only " .. calls .. " calls")
    assert.are.equal(0, tonumber(offenders), out)
  end)
end)
