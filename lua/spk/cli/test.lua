-- run busted specs with spk's test helpers (--init DIR writes a variant's suite)
--
-- spk test [PATH...] [busted options]: runs busted, inside this program, on
-- the spec files under each PATH (files whose names match busted's pattern,
-- _spec by default), with spk on the module path and spk.busted loaded
-- (gpu_it, nogpu_it, assert.tensor_near, assert.bits_equal,
-- assert.within_reference, assert.no_slower). No .busted file is needed; one
-- in the current folder (or -C DIR, -f FILE) is honoured as busted honours it.
-- Whatever busted prints comes first; the last line is the summary the
-- project's own suite ends with, "N passed, N failed[, N skipped]"
-- (spk.busted.counter and summary_line), counting as busted's TAP output
-- does.
--
-- Exit status: 0 when every spec passed or was skipped, 1 on any failure or
-- error (and when no spec ran at all, or busted is not installed), 2 for bad
-- arguments of spk test's own.

local USAGE = [[
usage: spk test [PATH...] [--update-baseline] [--baselines DIR] [busted options]
       spk test --init DIR [--force]

Runs the busted specs under each PATH (default: the ROOT of a .busted file in
the current folder, else the current folder) with spk and its test helpers
loaded: gpu_it / nogpu_it, assert.tensor_near, assert.bits_equal,
assert.within_reference and assert.no_slower (require "spk.busted"; see
docs/testing.md). The last line reads "N passed, N failed[, N skipped]"; the
exit status is 1 on any failure.

  --update-baseline  assert.no_slower against a stored baseline records a new
                     one (this device's entry of <name>.json) instead of
                     comparing; those specs are reported as skipped
  --baselines DIR    where stored baselines live (default $SPK_BASELINE_DIR,
                     else baselines/ beside each spec file)
  --init DIR         write DIR/variant_spec.lua, a suite for one kernel
                     variant: its options, the f64 reference bound,
                     determinism across repeats and tile heights, and not
                     slower than its stored baseline; --force overwrites

Every other argument goes to busted, for example:
  -o, --output=NAME   output handler (utfTerminal on a terminal, else plainTerminal; TAP, json, ...)
  --filter=PATTERN    only specs whose names match; -t, --tags=TAGS
  -p, --pattern=PAT   spec file names (default _spec)
  -C, --directory=DIR change to DIR first; -f, --config-file=FILE a .busted file
  -v, --verbose       tracebacks with failures; --list  list the specs, run none
  --shuffle, --seed=N, --repeat=N, -m, --lpath=PATH, --helper=FILE ...]]

local options = require "spk.options"
local fail = options.fail

-- busted's options that take a value (busted 2.x); the other words that do
-- not start with "-" are PATHs.
local BUSTED_VALUE_OPTIONS = {
  ["-p"] = true, ["--pattern"] = true, ["--exclude-pattern"] = true, ["-e"] = true, ["-o"] = true,
  ["--output"] = true, ["-C"] = true, ["--directory"] = true, ["-f"] = true, ["--config-file"] = true,
  ["--coverage-config-file"] = true, ["-t"] = true, ["--tags"] = true, ["--exclude-tags"] = true,
  ["--filter"] = true, ["--filter-out"] = true, ["-m"] = true, ["--lpath"] = true, ["--cpath"] = true,
  ["-r"] = true, ["--run"] = true, ["--repeat"] = true, ["--seed"] = true, ["--lang"] = true,
  ["--loaders"] = true, ["--helper"] = true, ["--lua"] = true, ["-Xoutput"] = true, ["-Xhelper"] = true,
}

local function parse(args)
  local o = { busted = {}, paths = 0 }
  local i = 1
  local function value(name)
    i = i + 1
    if args[i] == nil then fail(("--%s needs a value"):format(name)) end
    return args[i]
  end
  while i <= #args do
    local a = args[i]
    if a == "--help" or a == "-h" then o.help = true
    elseif a == "--init" then o.init = value("init")
    elseif a == "--force" then o.force = true
    elseif a == "--update-baseline" then o.update_baseline = true
    elseif a == "--baselines" then o.baselines = value("baselines")
    else
      local b = o.busted
      b[#b + 1] = a
      local name = a:match("^(%-[^=]+)=") or a
      if a == "-l" or a == "--list" then o.list = true end
      if a == "-C" or a:match("^%-%-directory") then o.directory = a:match("=(.*)$") or args[i + 1] end
      if a == "-f" or a:match("^%-%-config%-file") then o.config = true end
      if BUSTED_VALUE_OPTIONS[name] and not a:find("=", 1, true) then
        i = i + 1
        if args[i] == nil then fail(("%s needs a value"):format(a)) end
        b[#b + 1] = args[i]
      elseif a:sub(1, 1) ~= "-" then
        o.paths = o.paths + 1
      end
    end
    i = i + 1
  end
  if o.force and not o.init then fail("--force goes with --init DIR") end
  if o.init and (#o.busted > 0 or o.update_baseline or o.baselines) then
    fail("--init DIR takes no other arguments (but --force)")
  end
  return o
end

-- Whether something is at path (never opened: a FIFO there would block an open).
local function file_exists(path)
  return require("spk.core").files.kind(path) ~= nil
end

-- --init DIR: the template from the module path (lua/spk/templates/), written once.
local TEMPLATES = { "variant_spec.lua" }

local function init(dir, force)
  local sources = {}
  for _, name in ipairs(TEMPLATES) do
    local path = package.searchpath("spk.templates." .. name:gsub("%.lua$", ""), package.path)
    local f = path and io.open(path, "rb")
    if not f then
      io.stderr:write("spk test: cannot find the template spk/templates/", name, " on the module path\n")
      return 1
    end
    sources[name] = f:read("a")
    f:close()
    if not force and file_exists(dir .. "/" .. name) then
      io.stderr:write(("spk test: %s/%s exists; --force overwrites it\n"):format(dir, name))
      return 1
    end
  end
  local ok, err = pcall(require("spk.core").files.make_folder, dir)
  if not ok then
    io.stderr:write("spk test: ", tostring(err), "\n")
    return 1
  end
  for _, name in ipairs(TEMPLATES) do
    local path = dir .. "/" .. name
    local ok, err = pcall(require("spk.core").files.write, path, sources[name])
    if not ok then
      io.stderr:write("spk test: cannot write ", tostring(err), "\n")
      return 1
    end
    io.stdout:write("wrote ", path, "\n")
  end
  io.stdout:write(("run it with: spk test %s\n"):format(dir),
    "(on a GPU the first run records the speed baseline in ", dir, "/baselines/ and reports that spec as skipped;\n",
    " edit the variant at the top of the file, and see docs/testing.md)\n")
  return 0
end

-- ---------------------------------------------------------------- the walk

-- The spec files under each PATH, as busted's own loader finds them (its
-- patterns, exclusions and hidden-file rule, --no-recursive), walked so that
-- the file system cannot turn it against the run: a file is run once however
-- many links reach it (by its real path), a link that leads out of PATH is
-- not followed (a spec file reached that way is named on stderr, not run), a
-- folder is entered once (so `self -> .` or `up -> ..` end), and a name that
-- matches the pattern but is not a regular file (a FIFO, a socket, a device,
-- a dangling link) is never opened: it is a failure naming it.
local KIND_WORDS = { fifo = "a FIFO", socket = "a socket", ["character device"] = "a character device",
                     ["block device"] = "a block device", other = "not a file" }

local function walk_root(root, patterns, options, found, problems)
  local files = require("spk.core").files
  local real_root = files.real_path(root)
  if not real_root then
    problems[#problems + 1] = files.is_link(root) and ("%s: a symbolic link to nothing"):format(root)
      or require("say")("output.file_not_found"):format(root)
    return
  end
  local function matches(name)
    for _, patt in ipairs(options.excludes or {}) do
      if patt ~= "" and name:find(patt) then return false end
    end
    for _, patt in ipairs(patterns) do
      if name:find(patt) then return true end
    end
    return #patterns == 0
  end
  local function inside(real)
    return real == real_root or real_root == "/" or real:sub(1, #real_root + 1) == real_root .. "/"
  end
  local function consider(path, name)
    local kind = files.kind(path)
    local real = files.real_path(path)
    if kind == nil or real == nil then
      if matches(name) then problems[#problems + 1] = ("%s: a symbolic link to nothing"):format(path) end
    elseif not inside(real) then
      if kind == "file" and matches(name) then
        io.stderr:write(("spk test: %s links out of %s (to %s); not run\n"):format(path, root, real))
      end
    elseif kind == "folder" then
      return "folder", real
    elseif matches(name) then
      if kind ~= "file" then
        problems[#problems + 1] = ("%s: not a regular file (%s); a spec file must be one"):format(path, KIND_WORDS[kind] or kind)
      elseif not found.seen[real] then
        found.seen[real] = true
        found[#found + 1] = path
      end
    end
  end
  local kind = files.kind(root)
  if kind ~= "folder" then -- a file named on the command line runs whatever its name
    if kind ~= "file" then
      problems[#problems + 1] = ("%s: not a regular file (%s); a spec file must be one"):format(root, KIND_WORDS[kind] or kind)
    elseif not found.seen[real_root] then
      found.seen[real_root] = true
      found[#found + 1] = root
    end
    return
  end
  local entered = {}
  local function walk(dir, real)
    if entered[real] then return end
    entered[real] = true
    for _, name in ipairs(files.list(dir)) do
      local path = dir .. "/" .. name
      local kind, sub = consider(path, name)
      if kind == "folder" and options.recursive ~= false then walk(path, sub) end
    end
  end
  walk(root, real_root)
end

-- busted's test file loader with that walk in place of its own.
local function walking_loader(real_loader)
  return function(busted, loaders)
    local _, loadTestFile = real_loader(busted, loaders) -- its file walk is replaced
    local function getAllTestFiles(rootFiles, patterns, options)
      local found, problems = { seen = {} }, {}
      for _, root in ipairs(rootFiles) do
        local before = #found
        walk_root(root, patterns, options, found, problems)
        local mine = {}
        for i = before + 1, #found do
          -- busted's rule: nothing below a hidden name (".git/...", ".x.lua")
          if not found[i]:find("/%.%w+.%w+", #root) then mine[#mine + 1] = found[i] end
          found[i] = nil
        end
        table.sort(mine)
        table.move(mine, 1, #mine, before + 1, found)
      end
      for _, message in ipairs(problems) do busted.publish({ "error" }, {}, nil, message, {}) end
      found.seen = nil
      return found
    end
    local function load_all(rootFiles, patterns, options)
      local fileList = getAllTestFiles(rootFiles, patterns, options)
      for _, fileName in ipairs(fileList) do
        local testFile, getTrace, rewriteMessage = loadTestFile(busted, fileName)
        if testFile then
          local file = setmetatable({ getTrace = getTrace, rewriteMessage = rewriteMessage }, { __call = testFile })
          busted.executors.file(fileName, file)
        end
      end
      if #fileList == 0 then
        local pattern = #patterns > 1 and "\n\t" .. table.concat(patterns, "\n\t") or patterns[1]
        busted.publish({ "error" }, {}, nil, require("say")("output.no_test_files_match"):format(pattern), {})
      end
      return fileList
    end
    return load_all, loadTestFile, getAllTestFiles
  end
end

-- A busted exit raised as an error, so that the summary line comes after it.
local Exit = { __tostring = function(e) return ("os.exit(%s) called while the specs ran"):format(tostring(e.code)) end }
Exit.__index = Exit

local function run_busted(o)
  local found, runner = pcall(require, "busted.runner")
  if not found then
    io.stderr:write("spk test: busted is not installed where Lua finds it (Debian: apt-get install lua-busted; ",
      "or put it on LUA_PATH / LUA_CPATH): ", tostring(runner):match("^[^\n]*"), "\n")
    return 1
  end
  local helpers = require "spk.busted"
  helpers.config.update_baseline = o.update_baseline or nil
  helpers.config.baseline_dir = o.baselines
  helpers.config.report = true

  local args = {}
  for i, a in ipairs(o.busted) do args[i] = a end
  local dir = o.directory or "."
  if o.paths == 0 and not o.config and not file_exists(dir .. "/.busted") then args[#args + 1] = "." end
  args[0] = "spk test"

  -- The counter joins busted's events after its output handler, so the summary follows what the handler prints.
  local counts
  local files_loader_name = "busted.modules.test_file_loader"
  local real_files_loader = require(files_loader_name)
  package.loaded[files_loader_name] = walking_loader(real_files_loader)
  local loader_name = "busted.modules.output_handler_loader"
  local real_loader = require(loader_name)
  package.loaded[loader_name] = function()
    local load = real_loader()
    return function(busted, output, handler_options)
      load(busted, output, handler_options)
      counts = helpers.counter(busted)
      helpers.plain_pendings(busted)
    end
  end
  local saved_arg, saved_exit = _G.arg, os.exit
  _G.arg = args
  os.exit = function(code)
    error(setmetatable({ code = code == true and 0 or code == false and 1 or tonumber(code) or 0 }, Exit), 0)
  end
  local chunk = assert(load("local runner = ...; runner({ standalone = false }); return 0", "@spk test"))
  local ok, result = pcall(chunk, runner)
  os.exit, _G.arg = saved_exit, saved_arg
  package.loaded[loader_name] = real_loader
  package.loaded[files_loader_name] = real_files_loader
  io.stdout:flush()

  local code, stopped = 0, false
  if ok then
    code = result
  elseif getmetatable(result) == Exit then
    code = result.code
  else
    io.stderr:write("spk test: busted stopped: ", tostring(result), "\n")
    code, stopped = 1, true
  end
  if counts == nil then
    -- busted stopped before any spec (its usage error, --help, --version, a helper that failed)
    if code ~= 0 then io.stdout:write(helpers.summary_line { passed = 0, failed = 1, skipped = 0 }, "\n") end
    return code ~= 0 and 1 or 0
  end
  if o.list then return code ~= 0 and 1 or 0 end
  if stopped then
    counts.failed = counts.failed + 1 -- what had not run yet is lost: one more failure, as scripts/test.sh counts
  elseif counts.passed + counts.failed + counts.skipped == 0 then
    io.stderr:write("spk test: no specs ran (no file matching busted's pattern, _spec by default, or every spec ",
      "filtered out)\n")
    counts.failed = 1
  elseif code ~= 0 and counts.failed == 0 then
    io.stderr:write(("spk test: busted reported a failure outside the specs (exit %d)\n"):format(code))
    counts.failed = 1
  end
  io.stdout:write(helpers.summary_line(counts), "\n")
  return counts.failed > 0 and 1 or 0
end

return function(args, io_override)
  local o, code = options.start("test", parse, args, io_override, USAGE)
  if not o then return code end
  if o.init then return init(o.init, o.force) end
  return run_busted(o)
end
