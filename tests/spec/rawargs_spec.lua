-- Argument tables are read raw: no binding runs Lua code (a metamethod, or a
-- finalizer it could have avoided) while it holds a pointer into a Lua object.
--
-- * The C sources of src/lua and src/cli call none of the functions that run
--   metamethods (lua_getfield, lua_geti, luaL_len, luaL_tolstring, ...): the
--   raw readers of src/lua/bind.h instead. Only src/cli may run one where a
--   comment on the line, or the line above, says "metamethods wanted:" and
--   why (printing a value as print() shows it): nothing is held there.
--   Setters (lua_setfield, lua_seti) stay: the bindings only write tables they
--   make (and the program its globals).
-- * Every function spk exports and every method of the objects it hands out
--   (calls.lua finds them by walking the module tables and the metatables,
--   so a new one is covered without being listed), called with its tables
--   behind metatables whose __index, __len, __newindex, __pairs, __tostring,
--   __eq, __lt, __le, __concat and __call close every tensor, plan, kernel
--   and stream the call was given, and with such a table in each position: a
--   C function runs none of them and gives the same result as with plain
--   tables; a Lua function may run them and then fail, but only with a Lua
--   error.
-- * The same calls while the __gc of a dropped object closes what the call
--   was given, run at the 1st, 2nd, ... 6th collection step inside the call
--   (rawargs_child.lua says how): only Lua errors. Under `make check-asan` a
--   use after free is a report.
-- Each group runs in its own spk child process in a scratch folder.
local BUILD = os.getenv("BUILD") or "build"

local function abspath(path)
  if path:sub(1, 1) == "/" then return path end
  local p = io.popen("pwd")
  local cwd = p:read("l")
  p:close()
  return cwd .. "/" .. path
end

local BANNED = { "lua_getfield", "lua_geti", "lua_gettable", "lua_getglobal", "luaL_len", "lua_len",
                 "luaL_tolstring", "luaL_callmeta", "lua_compare", "lua_equal", "lua_lessthan", "lua_concat",
                 "lua_arith", "luaL_getsubtable" }

local function sources()
  local p = io.popen("ls src/lua/*.c src/lua/*.h src/cli/*.c src/cli/*.h 2>/dev/null")
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

-- The code of each line with comments and string literals blanked, and the
-- comment text of each line.
local function code_lines(text)
  local code, comments = {}, {}
  local in_comment = false
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local c, note, i = {}, {}, 1
    while i <= #line do
      local two = line:sub(i, i + 1)
      local ch = line:sub(i, i)
      if in_comment then
        if two == "*/" then in_comment = false; i = i + 2 else note[#note + 1] = ch; i = i + 1 end
      elseif two == "/*" then in_comment = true; i = i + 2
      elseif two == "//" then note[#note + 1] = line:sub(i + 2); break
      elseif ch == '"' or ch == "'" then
        local j = i + 1
        while j <= #line and line:sub(j, j) ~= ch do
          if line:sub(j, j) == "\\" then j = j + 1 end
          j = j + 1
        end
        c[#c + 1] = ch .. ch
        i = j + 1
      else
        c[#c + 1] = ch
        i = i + 1
      end
    end
    code[n], comments[n] = table.concat(c), table.concat(note)
  end
  return code, comments
end

describe("argument tables are read raw", function()
  it("no C source of src/lua or src/cli calls a function that runs metamethods", function()
    local found, allowed, scanned = {}, 0, 0
    for _, path in ipairs(sources()) do
      scanned = scanned + 1
      local code, comments = code_lines(read_file(path))
      for i, line in ipairs(code) do
        for _, name in ipairs(BANNED) do
          if line:find("%f[%w_]" .. name .. "%s*%(") then
            local note = (comments[i] or "") .. " " .. (comments[i - 1] or "")
            if path:match("^src/cli/") and note:find("metamethods wanted: %S") then
              allowed = allowed + 1
            else
              found[#found + 1] = ("%s:%d: %s (read raw: spk_lua_rawfield, lua_rawgeti, lua_rawlen; see "
                .. "src/lua/bind.h)"):format(path, i, name)
            end
          end
        end
      end
    end
    assert.is_true(scanned >= 15, "only " .. scanned .. " files scanned")
    assert(#found == 0, table.concat(found, "\n"))
    assert.is_true(allowed <= 2, allowed .. " calls marked 'metamethods wanted' in src/cli") -- error text, REPL print
  end)

  it("the scan sees a banned call, and not one in a comment or a string", function()
    local code = code_lines('x = lua_getfield (L, 1, "k"); /* lua_geti(L, 1, 2) */\ny = "luaL_len(L, 1)";\n')
    assert.truthy(code[1]:find("%f[%w_]lua_getfield%s*%("))
    assert.falsy(code[1]:find("lua_geti%s*%("))
    assert.falsy(code[2]:find("luaL_len"))
  end)

  local dir, program, child
  setup(function()
    dir = spec_tmpdir()
    program = abspath(BUILD .. "/spk")
    child = abspath("tests/spec/rawargs_child.lua")
  end)
  teardown(function()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  local function run_group(group)
    local work = dir .. "/" .. group
    os.execute("mkdir -p '" .. work .. "'")
    local out = work .. ".out"
    local ok, how, code = os.execute(("cd '%s' && SPK_CACHE_DIR='%s/cache' timeout 600 '%s' run '%s' %s '%s' >'%s' 2>&1")
      :format(work, work, program, child, group, abspath("tests/spec"), out))
    return read_file(out), ok, how, code
  end

  local function check(group, output, ok, how, code)
    assert(ok and how == "exit" and code == 0,
      ("child %s %s %s; last lines:\n%s"):format(tostring(ok), tostring(how), tostring(code), output:sub(-2000)))
    local last = output:match("([^\n]*)\n?$")
    local calls, functions = last:match("^rawargs: " .. group .. ": (%d+) calls, (%d+) functions")
    assert(calls, output:sub(-2000))
    assert.is_true(tonumber(functions) >= 130, last) -- every function and method, GPU-only ones aside
    for _, what in ipairs { "METAMETHOD", "DIFFERS", "NO RECIPE", "NO SAMPLE", "NO KIND" } do
      local at = output:find("\n" .. what .. " ", 1, true) or (output:sub(1, #what) == what and 1)
      assert(not at, output:sub(at or 1, (at or 1) + 1500))
    end
    assert.is_falsy(output:find("ERROR: AddressSanitizer", 1, true))
    assert.is_falsy(output:find("runtime error:", 1, true))
    return tonumber(calls)
  end

  it("every function and method: C runs no metamethod of an argument table and gives the same result", function()
    local calls = check("traps", run_group("traps"))
    assert.is_true(calls >= 600, tostring(calls))
  end)

  it("every function and method survives a finalizer that closes its arguments during the call", function()
    local output, ok, how, code = run_group("finalizers")
    local calls = check("finalizers", output, ok, how, code)
    assert.is_true(calls >= 800, tostring(calls))
    -- the finalizers did run inside the calls (not only around them)
    local inside = tonumber(output:match("(%d+) finalizers ran inside a call"))
    assert.is_true(inside >= calls // 3, output:sub(-300))
  end)
end)

describe("a binding holds what it uses", function()
  local spk = require "spk"

  it("view and reshape read their shape raw: a __len that closes the tensor changes nothing", function()
    for _, method in ipairs { "view", "reshape" } do
      local t = spk.arange(6)
      local shape = setmetatable({ 2, 3 }, { __len = function() t:close() return 2 end,
                                             __index = function() t:close() end })
      local v = t[method](t, shape)
      assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 } }, v:tolist())
      assert.is_false(t:is_closed())
    end
  end)

  it("a shape table's metatable is not consulted: only its own entries count", function()
    local t = spk.arange(6)
    local shape = setmetatable({}, { __index = function(_, i) return ({ 2, 3 })[i] end, __len = function() return 2 end })
    -- the table holds no entry of its own: a 0-d view of 6 elements, which is an error
    assert.has_error(function() t:view(shape) end)
  end)

  it("options are read raw: a __index default is not an option", function()
    local a, b = spk.tensor { 1, 2 }, spk.tensor { 1, 2.001 }
    local opts = setmetatable({}, { __index = function(_, k) if k == "atol" then return 1 end end })
    assert.is_false(spk.allclose(a, b, opts))
    assert.is_true(spk.allclose(a, b, { atol = 1 }))
  end)

  it("tolist holds its tensor while its tables are made (a finalizer closing it meanwhile)", function()
    for round = 1, 30 do
      collectgarbage(round % 2 == 0 and "generational" or "incremental")
      local t = spk.arange(64):view { 8, 8 }
      do setmetatable({}, { __gc = function() t:close() end }) end
      local ok, list = pcall(t.tolist, t)
      if ok then
        assert.are.equal(63, list[8][8])
      else
        assert.matches("closed", tostring(list))
      end
    end
    collectgarbage("incremental")
  end)

  it("a closed tensor is said to be closed wherever a binding meets it", function()
    local layers = spk.lstm.random { layers = 1, input = 3, hidden = 2, seed = 1 }
    local x = spk.rand({ 1, 2, 3 }, { seed = 1 })
    -- the options' __index is never run, so nothing is closed mid-call
    local opts = setmetatable({ precision = "f64" }, { __index = function() x:close() end })
    local y = spk.lstm.reference(layers, x, opts)
    assert.are.same({ 1, 2, 4 }, y:shape())
    assert.is_false(x:is_closed())
    x:close()
    local ok, err = pcall(spk.lstm.reference, layers, x, opts)
    assert.is_false(ok)
    assert.matches("closed", err)
  end)
end)
