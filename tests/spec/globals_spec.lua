-- No Lua file of the tree reads a global that nothing defines: every name a
-- chunk reads from _ENV (luac5.4's listing, GETTABUP _ENV "name") is Lua's
-- own, or in a spec busted's or one that tests/spec/helper.lua or
-- lua/spk/busted.lua sets on _G, or one the file sets itself. A script that
-- writes `require "spk"` and then uses `spk.` reads a nil global and fails
-- only when that line runs; this finds it in every file at once.
local LUA = { "_G", "_VERSION", "assert", "collectgarbage", "coroutine", "debug", "dofile", "error", "getmetatable",
              "io", "ipairs", "load", "loadfile", "math", "next", "os", "package", "pairs", "pcall", "print",
              "rawequal", "rawget", "rawlen", "rawset", "require", "select", "setmetatable", "string", "table",
              "tonumber", "tostring", "type", "utf8", "warn", "xpcall", "arg" }
local BUSTED = { "describe", "it", "pending", "before_each", "after_each", "setup", "teardown", "lazy_setup",
                 "lazy_teardown", "strict_setup", "strict_teardown", "finally", "insulate", "expose", "spy", "stub",
                 "mock", "context", "spec", "test" }
local HELPERS = { "tests/spec/helper.lua", "lua/spk/busted.lua" }

local function set_of(list)
  local s = {}
  for _, name in ipairs(list) do s[name] = true end
  return s
end

-- The command's lines of output, and whether it exited 0.
local function lines_of(command)
  local p = assert(io.popen(command))
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  return out, p:close() == true
end

-- Lua 5.4's compiler on PATH (the listing's format is its), or nil.
local LUAC = (function()
  for _, name in ipairs { "luac5.4", "luac" } do
    local out = lines_of("command -v " .. name .. " 2>/dev/null")
    if out[1] and (lines_of(out[1] .. " -v 2>&1")[1] or ""):match("Lua 5%.4") then return out[1] end
  end
end)()

-- {reads = {name = true}, sets = {name = true}} of one file, from luac's listing.
local function globals_of(path)
  assert(LUAC, "luac5.4 is not on PATH (make setup installs lua5.4, which has it)")
  local listing, ok = lines_of(("%s -p -l -l %s 2>&1"):format(LUAC, shell_quote(path)))
  assert(ok, ("luac5.4 cannot list %s: %s"):format(path, table.concat(listing, "\n")))
  local reads, sets = {}, {}
  for _, line in ipairs(listing) do
    local op, name = line:match("([GS])ETTABUP.-_ENV \"([%w_]+)\"")
    if op == "G" then reads[name] = true elseif op == "S" then sets[name] = true end
  end
  return { reads = reads, sets = sets }
end

local function helper_globals()
  local names = {}
  for _, path in ipairs(HELPERS) do
    local text = read_file(path)
    for name in text:gmatch("_G%.([%w_]+)%s*=") do names[name] = true end
    for name in text:gmatch("function%s+_G%.([%w_]+)") do names[name] = true end
  end
  return names
end

describe("the tree's Lua files", function()
  it("read no global that nothing defines (luac5.4's listing of every file)", function()
    local files, found = lines_of("find lua tools experiments tests -name '*.lua'")
    assert.is_true(found and #files > 100, "found " .. #files .. " Lua files")
    local lua, busted, helpers = set_of(LUA), set_of(BUSTED), helper_globals()
    assert.truthy(helpers.gpu_it and helpers.run_spk, "the helpers' globals are found")
    local wrong = {}
    for _, path in ipairs(files) do
      local g = globals_of(path)
      local spec = path:match("_spec%.lua$") or path:match("^tests/spec/")
      for name in pairs(g.reads) do
        if not (lua[name] or g.sets[name] or (spec and (busted[name] or helpers[name]))) then
          wrong[#wrong + 1] = ("%s reads the global %q, which nothing defines"):format(path, name)
        end
      end
    end
    table.sort(wrong)
    assert.are.same({}, wrong)
  end)

  it("would name a file that reads an undefined global", function()
    local dir = spec_tmpdir()
    local path = dir .. "/script.lua"
    write_file(path, 'require "spk"\nlocal n = #spk.files.list(".")\nprint(n)\n')
    local g = globals_of(path)
    assert.is_true(g.reads.spk)
    assert.is_nil(g.sets.spk)
    remove_scratch(dir)
  end)
end)
