-- Installing spk: make install into a staging folder, the rockspec through
-- LuaRocks, and the one rule by which spk finds its own folders at run time
-- (src/core/paths.h). An installed spk must work from any folder with the
-- source tree out of the picture: as the program, under lua5.4 and under
-- busted; make uninstall and luarocks remove must leave nothing behind.
--
-- Every run here starts from `env -i` (no SPK_*, LUA_PATH or BUILD) in a
-- folder outside the tree. The installed copies are linked without the
-- compiled-in source path, and the specs check that nothing they load names
-- the tree; a dev build placed in an install layout shows that an installed
-- root never falls back to the tree.
local BUILD = os.getenv("BUILD") or "build"

local function first_line(cmd)
  local p = assert(io.popen(cmd))
  local line = p:read("l")
  p:close()
  return line
end

local ROOT = first_line("pwd -P") -- as spk sees paths: symbolic links resolved

-- (cmd) -> exit status, everything it printed
local function sh(cmd)
  local p = assert(io.popen("(" .. cmd .. ") 2>&1; echo \"exit=$?\""))
  local out = p:read("a")
  p:close()
  local code = tonumber(out:match("exit=(%d+)%s*$"))
  return code, (out:gsub("exit=%d+%s*$", ""))
end

local function q(s) return shell_quote(s) end

-- spec_tmpdir() with symbolic links resolved.
local function tmpdir()
  return first_line("cd " .. q(spec_tmpdir()) .. " && pwd -P")
end

-- A command run in `dir` with a clean environment plus `vars` ({NAME = value}).
local function clean(dir, vars, cmd)
  local words = { "cd", q(dir), "&&", "env", "-i", "PATH=/usr/bin:/bin", "HOME=" .. q(dir) }
  local names = {}
  for name in pairs(vars or {}) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do words[#words + 1] = name .. "=" .. q(vars[name]) end
  return table.concat(words, " ") .. " " .. cmd
end

-- make in the tree, outside the make that may be running this suite.
local function make(args)
  return sh("cd " .. q(ROOT) .. " && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory BUILD="
    .. q(BUILD) .. " " .. args)
end

-- Lua paths that reach spk only through `prefix` (then Lua's defaults, for busted).
local function lua_paths(prefix)
  return {
    LUA_PATH = prefix .. "/share/lua/5.4/?.lua;" .. prefix .. "/share/lua/5.4/?/init.lua;;",
    LUA_CPATH = prefix .. "/lib/lua/5.4/?.so;;",
  }
end

-- Lua that prints "kind=folder" for each of spk's folders and where every
-- loaded spk.* module came from.
local REPORT = [[
local spk = require "spk"
for kind, dir in pairs(spk.find_dir()) do print(kind .. "=" .. tostring(dir)) end
print("kernel_dir=" .. spk.cuda.kernel_dir())
for name in pairs(package.loaded) do
  if name:match("^spk%.") and name ~= "spk.core" and name ~= "spk.program" then
    print("module=" .. tostring(package.searchpath(name, package.path)))
  end
end
print("sum=" .. spk.ones{3}:sum())
]]

-- Checks REPORT's output: every folder and module below `prefix`, four
-- kinds found, and the tensor sum.
local function assert_all_below(prefix, out)
  local kinds, modules = 0, 0
  for key, value in out:gmatch("([%w_]+)=([^\n]*)") do
    if key == "sum" then
      assert.are.equal("3.0", value, out)
    else
      assert.are.equal(prefix .. "/", value:sub(1, #prefix + 1), key .. " is outside " .. prefix .. ":\n" .. out)
      if key == "module" then modules = modules + 1 elseif key ~= "kernel_dir" then kinds = kinds + 1 end
    end
  end
  assert.are.equal(4, kinds, out)
  assert.is_true(modules >= 5, out)
  assert.matches("sum=3.0", out, 1, true)
end

-- Whether `file`, as it is loaded (its debug sections stripped), names `text`.
local function loaded_bytes_name(file, text, scratch)
  local stripped = scratch .. "/stripped"
  local code, out = sh("strip -o " .. q(stripped) .. " " .. q(file))
  assert.are.equal(0, code, out)
  local named = read_file(stripped):find(text, 1, true) ~= nil
  os.remove(stripped)
  return named
end

-- Installing needs this machine's build tools (the GPU machine has a build
-- folder but no Lua headers or library); the sanitizer build is not installed.
local can_build = io.open("/usr/include/lua5.4/lua.h") ~= nil and os.getenv("SPK_ASAN") == nil
local it_builds = can_build and it or function(name)
  pending(name .. " [needs the build machine (liblua5.4-dev), not the sanitizer build]")
end

describe("make", function()
  local tmp
  setup(function() tmp = tmpdir() end)
  teardown(function() os.execute("rm -rf " .. q(tmp)) end)

  it_builds("prints one short line per file, and the command with V=1", function()
    local target = tmp .. "/b/obj/src/core/rng.o"
    local code, out = make("BUILD=" .. q(tmp .. "/b") .. " " .. q(target))
    assert.are.equal(0, code, out)
    -- one short line per file: the object, after the generated ONNX reader's header that every
    -- object may include (made once, before the first compile in a build folder)
    assert.matches("  CC      src/core/rng.c\n$", out)
    for line in out:gmatch("[^\n]+") do assert.matches("^  %u+ +%S+$", line) end
    os.remove(target)
    code, out = make("V=1 BUILD=" .. q(tmp .. "/b") .. " " .. q(target))
    assert.are.equal(0, code, out)
    assert.matches("-c src/core/rng.c -o " .. target, out, 1, true)
    assert.is_nil(out:find("  CC ", 1, true), out)
  end)

  it_builds("lists every target it declares in make help", function()
    local code, help = make("help")
    assert.are.equal(0, code, help)
    local makefile = read_file(ROOT .. "/Makefile")
    local phony = makefile:match("%.PHONY:(.-[^\\])\n")
    assert.is_not_nil(phony, "no .PHONY line")
    local count = 0
    for target in phony:gsub("\\\n", " "):gmatch("%S+") do
      count = count + 1
      local listed = target == "all" and "make" or "make " .. target -- plain make builds all
      assert.matches("\n" .. listed:gsub("%p", "%%%0") .. "%f[%s]", "\n" .. help, nil, false,
        "make help does not list " .. target)
      assert.matches("\n" .. target:gsub("%p", "%%%0") .. ":", makefile, nil, false, target .. " has no rule")
    end
    assert.is_true(count >= 10, phony)
  end)
end)

describe("the folders of a build", function()
  local tmp
  setup(function() tmp = tmpdir() end)
  teardown(function() os.execute("rm -rf " .. q(tmp)) end)

  it("are the source tree's, from any folder", function()
    local code, out = sh(clean(tmp, nil, q(ROOT .. "/" .. BUILD .. "/spk") .. " -e " .. q(REPORT)))
    assert.are.equal(0, code, out)
    assert_all_below(ROOT, out)
  end)

  it("are each kind's environment variable where it is set, and a missing folder is named", function()
    local spk = require "spk"
    local kernels = tmp .. "/my kernels"
    assert(os.execute("mkdir -p " .. q(kernels)))
    local code, out = sh(clean(tmp, { SPK_KERNEL_DIR = kernels, SPK_EXPERIMENT_DIR = tmp },
      q(ROOT .. "/" .. BUILD .. "/spk") .. " -l spk -e " .. q([[
        print(spk.find_dir("kernels")) print(spk.find_dir("experiments")) print(spk.cuda.kernel_dir())]])))
    assert.are.equal(0, code, out)
    assert.are.equal(kernels .. "\n" .. tmp .. "\n" .. kernels .. "\n", out)
    code, out = sh(clean(tmp, { SPK_KERNEL_DIR = tmp .. "/gone" },
      q(ROOT .. "/" .. BUILD .. "/spk") .. " -l spk -e " .. q([[
        print(spk.find_dir("kernels")) print(pcall(spk.cuda.kernel_dir))]])))
    assert.are.equal(0, code, out)
    assert.matches('nil\tSPK_KERNEL_DIR is "' .. tmp .. '/gone", which is not a folder\n', out, 1, true)
    assert.matches("false\tspk.cuda.kernel_dir: SPK_KERNEL_DIR is", out, 1, true)
    assert.has_error(function() spk.find_dir("fixtures") end,
      'bad argument #1 to \'find_dir\' (unknown kind of folder "fixtures" (one of lua, kernels, experiments, tools))')
  end)

  it_builds("are the copied tree's for a build copied with its tree (as scripts/gpu-test.sh runs one)", function()
    local copy = tmp .. "/copy"
    local code, out = sh("mkdir -p " .. q(copy .. "/" .. BUILD) .. " && cp " .. q(ROOT .. "/" .. BUILD .. "/spk")
      .. " " .. q(copy .. "/" .. BUILD .. "/") .. " && cd " .. q(ROOT) .. " && cp -r lua kernels experiments tools "
      .. q(copy))
    assert.are.equal(0, code, out)
    code, out = sh(clean(tmp, nil, q(copy .. "/" .. BUILD .. "/spk") .. " -e " .. q(REPORT)))
    assert.are.equal(0, code, out)
    assert_all_below(copy, out)
  end)
end)

describe("make install", function()
  local tmp, stage, prefix, elsewhere
  setup(function()
    tmp = tmpdir()
    stage = tmp .. "/stage"
    prefix = stage .. "/usr/local"
    elsewhere = tmp .. "/elsewhere"
    os.execute("mkdir -p " .. q(elsewhere))
  end)
  teardown(function() os.execute("rm -rf " .. q(tmp)) end)

  it_builds("installs the program, the module, the Lua files, the kernels, experiments, tools and docs", function()
    local code, out = make("install PREFIX=/usr/local DESTDIR=" .. q(stage))
    assert.are.equal(0, code, out)
    for _, file in ipairs { "bin/spk", "lib/lua/5.4/spk.so", "share/lua/5.4/spk/init.lua",
      "share/lua/5.4/spk/cli/info.lua", "share/spk/kernels/lstm_recurrence.cu", "share/spk/kernels/lstm_cell.cuh",
      "share/spk/experiments/quickstart.lua", "share/spk/experiments/kernels/row_block.lua",
      "share/spk/experiments/kernels/lstm_row_block.cu", "share/spk/tools/bench_plot.lua", "share/doc/spk/README.md",
      "share/doc/spk/docs/tuning.md", "share/man/man1/spk.1" } do
      assert.is_not_nil(read_file(prefix .. "/" .. file), "not installed: " .. file .. "\n" .. out)
    end
    -- the man page, as the tree has it, and one man(1) formats
    assert.are.equal(read_file(ROOT .. "/man/spk.1"), read_file(prefix .. "/share/man/man1/spk.1"))
    if os.execute("command -v man >/dev/null 2>&1") then
      local mcode, page = sh("MANWIDTH=100 man -l " .. q(prefix .. "/share/man/man1/spk.1") .. " 2>&1")
      assert.are.equal(0, mcode, page)
      assert.matches("spk help", page, 1, true)
      assert.matches("EXIT STATUS", page, 1, true)
    end
    -- every Lua file and kernel of the tree, with the tree's content
    local _, listing = sh("cd " .. q(ROOT) .. " && find lua/spk kernels -type f \\( -name '*.lua' -o -name '*.cu*' \\)")
    local count = 0
    for file in listing:gmatch("[^\n]+") do
      local installed = file:gsub("^lua/", "share/lua/5.4/"):gsub("^kernels/", "share/spk/kernels/")
      assert.are.equal(read_file(ROOT .. "/" .. file), read_file(prefix .. "/" .. installed), installed)
      count = count + 1
    end
    assert.is_true(count > 20, listing)
    -- one short line per destination
    for line in out:gmatch("[^\n]+") do
      assert.matches("^  [A-Z]+ +%S", line)
    end
  end)

  it_builds("leaves the source tree's path out of what the program and module load", function()
    for _, file in ipairs { "bin/spk", "lib/lua/5.4/spk.so" } do
      assert.is_false(loaded_bytes_name(prefix .. "/" .. file, ROOT, tmp), file .. " names " .. ROOT)
    end
    -- the control: the dev build does name it (SPK_SOURCE_DIR)
    assert.is_true(loaded_bytes_name(ROOT .. "/" .. BUILD .. "/spk", ROOT, tmp))
    local _, hits = sh("grep -rlF " .. q(ROOT) .. " " .. q(prefix .. "/share/lua") .. " " .. q(prefix .. "/share/spk"))
    assert.are.equal("", hits)
  end)

  it_builds("runs as spk from another folder, its folders all in the prefix", function()
    local code, out = sh(clean(elsewhere, nil, q(prefix .. "/bin/spk") .. " -e " .. q(REPORT)))
    assert.are.equal(0, code, out)
    assert_all_below(prefix, out)
    code, out = sh(clean(elsewhere, nil, q(prefix .. "/bin/spk") .. " --help"))
    assert.are.equal(0, code, out)
    assert.matches("\n  bench ", out, 1, true)
    assert.matches("\n  info ", out, 1, true)
    code, out = sh(clean(elsewhere, nil, q(prefix .. "/bin/spk") .. " info"))
    assert.are.equal(0, code, out)
    assert.matches("kernels folder: " .. prefix .. "/share/spk/kernels\n", out, 1, true)
  end)

  it_builds("compiles the installed kernels with NVRTC (no GPU needed) and lists them as the tree has them", function()
    local code, out = sh(clean(elsewhere, { SPK_CACHE_DIR = tmp .. "/cache" }, q(prefix .. "/bin/spk")
      .. " -l spk -e " .. q([[
        local m = spk.cuda.compile { file = spk.cuda.kernel_dir() .. "/lstm_cell_check.cu", arch = "sm_80" }
        print(#m:code() > 0, table.concat(spk.cuda.kernel_files(), " "))]])))
    assert.are.equal(0, code, out)
    local _, listing = sh("cd " .. q(ROOT .. "/kernels") .. " && ls *.cu *.cuh | LC_ALL=C sort | tr '\\n' ' '")
    assert.are.equal("true\t" .. listing:gsub(" $", "") .. "\n", out)
  end)

  it_builds("runs the experiments and tools it ships by their tree paths, from any folder", function()
    local code, out = sh(clean(elsewhere, nil, q(prefix .. "/bin/spk") .. " run experiments/gate_order.lua --help"))
    assert.are.equal(0, code, out)
    assert.matches("^usage: spk run experiments/gate_order.lua", out)
    code, out = sh(clean(elsewhere, nil, q(prefix .. "/bin/spk") .. " run tools/bench_plot.lua"))
    assert.matches("usage: spk run tools/bench_plot.lua", out, 1, true)
    -- the example kernel of one's own ships beside its experiment, and is found there
    code, out = sh(clean(elsewhere, nil, q(prefix .. "/bin/spk") .. " run experiments/custom_kernel.lua --help"))
    assert.are.equal(0, code, out)
    assert.matches("(default " .. prefix .. "/share/spk/experiments/kernels/row_block.lua)", out, 1, true)
    code, out = sh(clean(elsewhere, nil, q(prefix .. "/bin/spk") .. " run experiments/no_such.lua"))
    assert.are.equal(1, code, out)
    assert.matches("cannot open experiments/no_such.lua", out, 1, true)
  end)

  it_builds("loads under lua5.4 from another folder", function()
    local code, out = sh(clean(elsewhere, lua_paths(prefix), "lua5.4 -e " .. q(REPORT)))
    assert.are.equal(0, code, out)
    assert_all_below(prefix, out)
  end)

  it_builds("loads under busted from another folder", function()
    write_file(elsewhere .. "/busted.lua", 'require "busted.runner" ({ standalone = false })\n')
    write_file(elsewhere .. "/installed_spec.lua", [[
      describe("the installed spk", function()
        it("reads every file from its prefix", function()
          local spk = require "spk"
          local prefix = os.getenv("PREFIX_UNDER_TEST")
          for kind, dir in pairs(spk.find_dir()) do
            assert.are.equal(prefix .. "/", dir:sub(1, #prefix + 1), kind)
          end
          assert.are.equal(3, spk.ones{3}:sum())
        end)
      end)]])
    local vars = lua_paths(prefix)
    vars.PREFIX_UNDER_TEST = prefix
    local code, out = sh(clean(elsewhere, vars, "lua5.4 busted.lua -o TAP installed_spec.lua"))
    assert.are.equal(0, code, out)
    assert.matches("ok 1 - the installed spk reads every file from its prefix", out, 1, true)
  end)

  it_builds("works moved elsewhere as a whole, and never completes itself from the tree", function()
    local moved = tmp .. "/moved"
    local code, out = sh("cp -a " .. q(prefix) .. " " .. q(moved))
    assert.are.equal(0, code, out)
    code, out = sh(clean(elsewhere, nil, q(moved .. "/bin/spk") .. " -e " .. q(REPORT)))
    assert.are.equal(0, code, out)
    assert_all_below(moved, out)
    -- a dev build (which knows the tree) in an install layout whose kernels
    -- are gone: an error naming the prefix, not the tree's kernels
    assert(os.execute("rm -r " .. q(moved .. "/share/spk/kernels") .. " && cp " .. q(ROOT .. "/" .. BUILD .. "/spk")
      .. " " .. q(moved .. "/bin/spk")))
    code, out = sh(clean(elsewhere, nil, q(moved .. "/bin/spk") .. " -l spk -e " .. q([[
      print(spk.find_dir("lua")) print(spk.find_dir("kernels"))]])))
    assert.are.equal(0, code, out)
    assert.are.equal(moved .. "/share/lua/5.4\nnil\tthe installed spk at " .. moved .. " has no kernels folder "
      .. "(share/spk/kernels or share/lua/5.4/spk/kernels); set SPK_KERNEL_DIR to the folder holding them\n", out)
  end)

  it_builds("says where it looked when it finds no Lua files", function()
    local loose = tmp .. "/loose"
    assert(os.execute("mkdir -p " .. q(loose) .. " && cp " .. q(prefix .. "/bin/spk") .. " " .. q(loose)))
    local code, out = sh(clean(elsewhere, nil, q(loose .. "/spk") .. " -l spk -e 'print(1)'"))
    assert.are.equal(1, code, out)
    assert.matches("spk: cannot load spk: cannot find spk's lua folder: " .. loose .. "/spk is neither installed",
      out, 1, true)
    assert.matches("set SPK_LUA_DIR", out, 1, true)
  end)

  it_builds("make uninstall removes every file it installed, and finds nothing to do the second time", function()
    local code, out = make("uninstall PREFIX=/usr/local DESTDIR=" .. q(stage))
    assert.are.equal(0, code, out)
    local _, left = sh("find " .. q(stage) .. " -type f -o -name '*spk*'")
    assert.are.equal("", left)
    code, out = make("uninstall PREFIX=/usr/local DESTDIR=" .. q(stage))
    assert.are.equal(0, code, "a second make uninstall: " .. out)
  end)
end)

describe("the rockspec", function()
  local tmp
  setup(function() tmp = tmpdir() end)
  teardown(function() os.execute("rm -rf " .. q(tmp)) end)

  it_builds("builds and installs with luarocks make; luarocks remove leaves only the manifest", function()
    assert.are.equal(0, (sh("command -v luarocks")), "luarocks is missing: make setup installs it")
    local tree = tmp .. "/rocks"
    local code, out = sh("cd " .. q(ROOT) .. " && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL HOME=" .. q(tmp)
      .. " BUILD=" .. q(BUILD) .. " luarocks --lua-version 5.4 make --tree " .. q(tree) .. " spk-dev-1.rockspec")
    assert.are.equal(0, code, out)
    code, out = sh(clean(tmp, lua_paths(tree), "lua5.4 -e " .. q(REPORT)))
    assert.are.equal(0, code, out)
    assert_all_below(tree, out)
    assert.matches("kernel_dir=" .. tree .. "/share/lua/5.4/spk/kernels\n", out, 1, true)
    code, out = sh(clean(tmp, nil, q(tree .. "/bin/spk") .. " -e " .. q(REPORT)))
    assert.are.equal(0, code, out)
    assert_all_below(tree, out)
    code, out = sh("HOME=" .. q(tmp) .. " luarocks --lua-version 5.4 remove --tree " .. q(tree) .. " spk")
    assert.are.equal(0, code, out)
    local _, left = sh("cd " .. q(tree) .. " && find . -type f")
    assert.are.equal("./lib/luarocks/rocks-5.4/manifest\n", left)
  end)
end)
