-- The shape of the source, on every run of the suite: no function over 120
-- lines (counted from the signature) and no C or CUDA file over 1,500 in
-- src/, kernels/ and lua/ (tools/code_shape.lua); no binding that writes an
-- extra-argument check by hand (the checked registration of src/lua/bind.h
-- does it); spk's argument library (src/lua/bind.c) calling no other file of
-- src/lua, and the files of src/lua calling each other without a circle; no
-- error level threaded through spk's Lua functions (spk.errors places
-- errors at the script's line).
local BUILD = os.getenv("BUILD") or "build"

-- Files left out of the limits while they are cut along their seams, each
-- with what is past a limit. A file here that no longer needs it fails the
-- spec, so the table only shrinks.
local EXCEPTIONS = {}

local function shape(args)
  local argv = { "run", "tools/code_shape.lua", "--check" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return run_spk(argv)
end

local function lines_of(cmd)
  local p = io.popen(cmd)
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

describe("the shape of the source", function()
  it("has no function over 120 lines and no C file over 1500 in src, kernels and lua", function()
    local args = {}
    for file in pairs(EXCEPTIONS) do args[#args + 1] = "--except"; args[#args + 1] = file end
    local out, _, code = shape(args)
    assert.are.equal(0, code, out)
    assert.matches("0 functions over 120 lines, 0 C files over 1500 lines", out)
    for file, why in pairs(EXCEPTIONS) do
      assert.is_truthy(out:find(file .. "[^\n]*%(excepted%)"),
        ("%s no longer needs its exception (%s): remove it from EXCEPTIONS"):format(file, why))
    end
  end)

  it("is measured by a check that can fail: a function of 121 lines, in C and in Lua, or a C file of 1501", function()
    local dir = spec_tmpdir()
    finally(function() os.execute("rm -rf " .. shell_quote(dir)) end)
    local function body(n, line) local t = {} for i = 1, n do t[i] = line:format(i) end return table.concat(t, "\n") end
    local cases = {
      ["long.c"] = "static int f(int x,\n          int y)\n{\n" .. body(117, "    x += %d;") .. "\n}\n",
      ["long.lua"] = "local function f(x)\n" .. body(119, "  x = x + %d") .. "\nend\nreturn f\n",
      ["big.c"] = body(1501, "int v%d;") .. "\n",
    }
    for name, text in pairs(cases) do
      write_file(dir .. "/" .. name, text)
      local out, _, code = shape { dir .. "/" .. name }
      assert.are.equal(1, code, name .. ":\n" .. out)
    end
    -- one line shorter passes; the module an area file returns is the file, not a unit
    write_file(dir .. "/fits.c", "static int f(int x,\n          int y)\n{\n" .. body(116, "    x += %d;") .. "\n}\n")
    write_file(dir .. "/area.lua", "return function(spk, core)\n" .. body(200, "  spk.x%d = 1") .. "\nend\n")
    local out, _, code = shape { dir .. "/fits.c", dir .. "/area.lua" }
    assert.are.equal(0, code, out)
    assert.matches("longest function: 120 lines, f", out)
  end)

  it("is the measure tools/kernel_metrics.lua reports: the same longest function of every kernel file", function()
    -- a file where a measure that loses its place shows: braces and quotes in character literals, a
    -- macro continued over lines before the signature, an initializer and a one-line function
    local dir = spec_tmpdir()
    finally(function() os.execute("rm -rf " .. shell_quote(dir)) end)
    local function body(n)
      local t = {}
      for i = 1, n do t[i] = ("    n += %d;"):format(i) end
      return table.concat(t, "\n")
    end
    write_file(dir .. "/tricky.cu", table.concat({
      "#define EXTRA_PARAMS \\", "    , int extra", "",
      "__device__ int depth_of(const char *s, int n)", "{", "    int depth = 0;",
      "    for (int i = 0; i < n; i++) {", "        if (s[i] == '{') depth++;", "        if (s[i] == '\"') depth--;",
      "    }", body(20), "    return depth;", "}",
      "static const int sizes[] = {SIZE(1), SIZE(2)};",
      "__device__ int twice(int x) { return add(x, x); }",
      "__device__ int after(int n)", "{", body(10), "    return n;", "}" }, "\n") .. "\n")
    local files = lines_of("ls kernels/*.cu kernels/*.cuh")
    files[#files + 1] = dir .. "/tricky.cu"
    local shape_out = shape { "--top", "100000", table.unpack(files) }
    local metrics_out, _, metrics_code = run_spk { "run", "tools/kernel_metrics.lua", table.unpack(files) }
    assert.are.equal(0, metrics_code, metrics_out)
    local longest = {} -- per file, code_shape's longest length and the names of that length
    for lines, file, name in shape_out:match("the longest functions.-\nlongest function:"):gmatch(
        "\n%s+(%d+)  ([^\n:]+):%d+  ([%w_]+)") do
      local l = longest[file]
      lines = tonumber(lines)
      if not l or lines > l.lines then longest[file] = { lines = lines, names = { [name] = true } }
      elseif lines == l.lines then l.names[name] = true end
    end
    for _, file in ipairs(files) do
      local name, lines = metrics_out:match(file:gsub("%p", "%%%0") .. " +%d+ branches in function bodies; "
        .. "longest function ([%w_-]+) %((%d+) lines%)")
      assert.is_truthy(name, file .. ":\n" .. metrics_out)
      local l = longest[file] or { lines = 0, names = { ["-"] = true } }
      assert.are.equal(l.lines, tonumber(lines), file)
      assert.is_true(l.names[name], ("%s: kernel_metrics names %s"):format(file, name))
    end
    -- and the tricky file's functions are the right ones
    assert.matches("\n +29  [^\n]*/tricky%.cu:4  depth_of\n", shape_out)
    assert.matches("\n +1  [^\n]*/tricky%.cu:34  twice\n", shape_out)
    assert.matches("\n +14  [^\n]*/tricky%.cu:35  after\n", shape_out)
    assert.is_falsy(shape_out:find("tricky.cu:33", 1, true), "an initializer is no function")
  end)
end)

describe("the bindings", function()
  it("write no extra-argument check by hand: each registration declares its parameters", function()
    local hand = lines_of("grep -rn 'spk_lua_noextra\\|spk_lua_setfuncs(' src")
    assert.are.same({}, hand)
    -- functions that take a list ("...") check its end themselves: a few
    local ends = lines_of("grep -rn 'spk_lua_check_end(' src --include=*.c | grep -v 'src/lua/bind.c'")
    assert.is_true(#ends <= 10, table.concat(ends, "\n"))
    -- luaL_setfuncs only for metamethods (which every call reaches with its own arguments)
    for _, line in ipairs(lines_of("grep -rn 'luaL_setfuncs(' src/lua src/cli")) do
      assert.matches("metamethods", line)
    end
  end)

  it("build on one argument library that calls no other file of src/lua, and call each other in no circle", function()
    local objects = {} -- the objects of today's sources (a build folder may hold older ones)
    for _, o in ipairs(lines_of(("ls %s/obj/src/lua/*.o"):format(BUILD))) do
      local f = io.open("src/lua/" .. o:match("([%w_]+)%.o$") .. ".c", "r")
      if f then f:close(); objects[#objects + 1] = o end
    end
    assert.is_true(#objects > 10, "build first: no objects in " .. BUILD .. "/obj/src/lua")
    local defined_in, needs = {}, {}
    for _, o in ipairs(objects) do
      local name = o:match("([%w_]+)%.o$")
      needs[name] = {}
      for _, line in ipairs(lines_of("nm --defined-only " .. o)) do
        local sym = line:match("^%x+ [TDRBC] (.+)$")
        if sym then defined_in[sym] = name end
      end
    end
    for _, o in ipairs(objects) do
      local name = o:match("([%w_]+)%.o$")
      for _, line in ipairs(lines_of("nm -u " .. o)) do
        local sym = line:match("U (.+)$")
        local other = sym and defined_in[sym]
        if other and other ~= name then needs[name][other] = sym end
      end
    end
    assert.are.same({}, needs.bind, "bind.c calls into other files of src/lua")
    -- no circle: a depth-first walk never meets a file it is still inside
    local state = {}
    local function walk(name, path)
      if state[name] == "done" then return end
      assert(state[name] ~= "open", "a circle: " .. table.concat(path, " -> ") .. " -> " .. name)
      state[name] = "open"
      path[#path + 1] = name
      for other in pairs(needs[name] or {}) do walk(other, path) end
      path[#path] = nil
      state[name] = "done"
    end
    for name in pairs(needs) do walk(name, {}) end
  end)
end)

describe("the rooms of src", function()
  -- docs/design.md, "Architecture": each room includes only itself and the
  -- rooms below it; only lua and cli know Lua; the kernels' headers (kernels/)
  -- are shared with any room that runs them.
  local BELOW = {
    core = { core = true },
    cuda = { core = true, cuda = true },
    lstm = { core = true, cuda = true, lstm = true },
    lua = { core = true, cuda = true, lstm = true, lua = true },
    cli = { core = true, cuda = true, lstm = true, lua = true, cli = true },
  }
  -- the lines of `lines` (grep -Hn output of room's files) that break the rule
  local function breaches(room, lines)
    local wrong = {}
    for _, line in ipairs(lines) do
      local other = line:match('#include "(%w+)/')
      local knows_lua = line:match("#include <lua") or line:match("#include <lauxlib")
      if (other and not BELOW[room][other]) or (knows_lua and room ~= "lua" and room ~= "cli") then
        wrong[#wrong + 1] = line
      end
    end
    return wrong
  end

  it("include only the rooms below them, and only lua and cli include Lua", function()
    local wrong = {}
    for room in pairs(BELOW) do
      local lines = lines_of(("grep -Hn '^#include' src/%s/*.c src/%s/*.h"):format(room, room))
      assert.is_true(#lines > 5, room)
      for _, line in ipairs(breaches(room, lines)) do wrong[#wrong + 1] = line end
    end
    assert.are.same({}, wrong)
  end)

  it("are checked by a rule that can fail", function()
    local bad = { 'src/core/x.c:3:#include "lstm/family.h"', "src/lstm/y.c:4:#include <lauxlib.h>",
                  'src/cuda/z.c:5:#include "lua/bind.h"' }
    assert.are.same({ bad[1] }, breaches("core", { bad[1], 'src/core/x.c:4:#include "core/error.h"' }))
    assert.are.same({ bad[2] }, breaches("lstm", { bad[2], 'src/lstm/y.c:5:#include "cuda/runtime.h"' }))
    assert.are.same({ bad[3] }, breaches("cuda", { bad[3] }))
    assert.are.same({}, breaches("cli", { 'src/cli/m.c:1:#include "lua/bind.h"', "src/cli/m.c:2:#include <lua.h>" }))
  end)
end)

describe("spk's Lua functions", function()
  it("raise at the caller's line without threading an error level through each other", function()
    -- a level passed on, error(message, level + 1) or f(..., level + 1): every error is placed by spk.errors
    assert.are.same({}, lines_of("grep -rn 'level *+ *1)' lua"))
  end)
end)
