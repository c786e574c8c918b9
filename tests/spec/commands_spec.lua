-- Every command, experiment and tool the tree has (found, not listed here,
-- so a new one is covered; the shell and Python tools and scripts/*.sh
-- too): --help prints its usage and exits 0 with no
-- device looked for (CUDA_VISIBLE_DEVICES= hides any GPU) and nothing
-- written; `spk help X` prints the same; the sweeps' --dry-run lists their
-- work without a device; without a GPU, work that needs one exits 3 (the one
-- status for it) saying so; and the man page is what tools/man_page.lua makes
-- of those help texts today.
local spk = require "spk"

local NO_GPU = { CUDA_VISIBLE_DEVICES = "" }

local function files(kind, pattern)
  local out = {}
  for _, name in ipairs(spk.files.list(assert(spk.find_dir(kind)))) do
    if name:match(pattern) then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

local commands = { "run", "repl", "help" }
for _, name in ipairs(spk.files.list(assert(spk.find_dir("lua")) .. "/spk/cli")) do
  local command = name:match("^([%w_-]+)%.lua$")
  if command then commands[#commands + 1] = command end
end

local scripts = {}
for _, name in ipairs(files("experiments", "%.lua$")) do scripts[#scripts + 1] = "experiments/" .. name end
for _, name in ipairs(files("tools", "%.lua$")) do scripts[#scripts + 1] = "tools/" .. name end

-- run_spk in a scratch folder; what it left there is returned too
local function run_in_scratch(args)
  local dir = spec_tmpdir()
  local out, err, code = run_spk(args, { env = NO_GPU, cwd = dir })
  return out, err, code, remove_scratch(dir)
end

describe("--help", function()
  it("finds the commands, experiments and tools", function()
    assert.is_true(#commands >= 7, table.concat(commands, " "))
    assert.is_true(#scripts >= 20, table.concat(scripts, " "))
  end)

  for _, command in ipairs(commands) do
    it(("spk %s --help: its usage on stdout, exit 0, no device, nothing written; spk help %s the same")
      :format(command, command), function()
      local out, err, code, left = run_in_scratch { command, "--help" }
      assert.are.equal(0, code, err)
      assert.are.equal("", err)
      assert.are.equal("", left)
      assert.matches("usage: spk", out)
      local again, err2, code2 = run_in_scratch { "help", command }
      assert.are.equal(0, code2, err2)
      assert.are.equal(out, again)
    end)
  end

  for _, path in ipairs(scripts) do
    it(("spk run %s --help: its usage on stdout, exit 0, no device, nothing written"):format(path), function()
      local out, err, code, left = run_in_scratch { "run", path, "--help" }
      assert.are.equal(0, code, err)
      assert.are.equal("", err)
      assert.are.equal("", left)
      assert.matches("usage: spk run " .. path:gsub("%p", "%%%0"), out)
      assert.is_true(#out > 80, out)
      local again = run_in_scratch { "help", path }
      assert.are.equal(out, again)
    end)
  end

  -- the shell and Python tools (and the scripts/ a user runs): each prints
  -- its header comment, which names it in a usage line, and does nothing else
  local root = io.popen("pwd"):read("l")
  local has_python = os.execute("command -v python3 >/dev/null 2>&1") == true
  local programs = {}
  for _, name in ipairs(files("tools", "%.[sp][hy]$")) do programs[#programs + 1] = "tools/" .. name end
  local script_names = spk.files.list(root .. "/scripts")
  table.sort(script_names)
  for _, name in ipairs(script_names) do
    if name:match("%.sh$") then programs[#programs + 1] = "scripts/" .. name end
  end
  local function tree_state()
    local p = io.popen("git -C " .. shell_quote(root) .. " status --porcelain --untracked-files=all 2>&1")
    local text = p:read("a")
    p:close()
    return text
  end

  it("finds the shell and Python tools", function()
    local sh, py = 0, 0
    for _, path in ipairs(programs) do
      if path:match("^tools/.*%.sh$") then sh = sh + 1 elseif path:match("%.py$") then py = py + 1 end
    end
    assert.is_true(sh >= 5 and py >= 5, table.concat(programs, " "))
  end)

  for _, path in ipairs(programs) do
    local python = path:match("%.py$")
    local case = python and not has_python and function(name) pending(name .. " [needs python3]") end or it
    case(("%s --help: its header as usage on stdout, exit 0, no device, nothing written"):format(path), function()
      local before = tree_state()
      local dir = spec_tmpdir()
      local err_file = dir .. ".err"
      local p = io.popen(("cd %s && CUDA_VISIBLE_DEVICES= %s %s --help 2>%s"):format(shell_quote(dir),
        python and "python3" or "bash", shell_quote(root .. "/" .. path), shell_quote(err_file)))
      local out = p:read("a")
      local _, _, code = p:close()
      local err = read_file(err_file)
      os.remove(err_file)
      local left = remove_scratch(dir)
      assert.are.equal(0, code, err)
      assert.are.equal("", err)
      assert.are.equal("", left)
      assert.are.equal(before, tree_state(), "the tree changed")
      assert.matches("usage", out:lower())
      assert.matches(path:gsub("%p", "%%%0"), out)
      assert.is_true(#out > 60, out)
    end)
  end

  it("spk help with an unknown command is a usage error", function()
    local out, err, code = run_spk({ "help", "frobnicate" })
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("unknown command 'frobnicate'", err, 1, true)
  end)
end)

describe("--dry-run", function()
  local sweeps = {}
  for _, path in ipairs(scripts) do
    local f = assert(io.open(assert(spk.find_dir(path:match("^(%a+)/"))) .. "/" .. path:match("/(.*)$")))
    local text = f:read("a")
    f:close()
    -- an experiment (experiment.start) or a tool that plans its work (script:plan)
    if text:find("ex:plan(", 1, true) or text:find("script:plan(", 1, true) then sweeps[#sweeps + 1] = path end
  end

  it("is taken by every experiment and by the sweep tools", function()
    local experiments = #files("experiments", "%.lua$")
    local planned = 0
    for _, p in ipairs(sweeps) do if p:match("^experiments/") then planned = planned + 1 end end
    assert.are.equal(experiments, planned, "every experiment lists its work: " .. table.concat(sweeps, " "))
    local tools = {}
    for _, p in ipairs(sweeps) do tools[p] = true end
    for _, sweep in ipairs { "persistent_sweep", "cluster_sweep", "tc_sweep", "step_ab" } do
      assert.is_true(tools["tools/" .. sweep .. ".lua"], sweep)
    end
  end)

  for _, command in ipairs { "tune", "bench" } do
    it(("spk %s --dry-run lists the work, exit 0, no device, nothing written"):format(command), function()
      local out, err, code, left = run_in_scratch { command, "--dry-run" }
      assert.are.equal(0, code, err)
      assert.are.equal("", left)
      assert.matches("^spk " .. command .. " %(dry run%): ", out)
      assert.matches("\nbatch 1: %d+ ", out)
    end)
  end

  for _, path in ipairs(sweeps) do
    -- with --quick where the script takes it (every experiment does)
    local f = assert(io.open(assert(spk.find_dir(path:match("^(%a+)/"))) .. "/" .. path:match("/(.*)$")))
    local quick = path:match("^experiments/") or f:read("a"):find("--quick", 1, true)
    f:close()
    local args = quick and { "run", path, "--quick", "--dry-run" } or { "run", path, "--dry-run" }
    it(("spk %s lists the work, exit 0, no device, nothing written"):format(table.concat(args, " ", 2)), function()
      local out, err, code, left = run_in_scratch(args)
      assert.are.equal(0, code, err)
      assert.are.equal("", left)
      assert.matches("%(dry run%): %d+ steps", out)
      assert.matches("\n  1%. ", out)
      local n = tonumber(out:match("%(dry run%): (%d+) steps"))
      local items = 0
      for _ in out:gmatch("\n  %d+%. ") do items = items + 1 end
      assert.are.equal(n, items)
    end)
  end
end)

describe("a numeric flag's bad value", function()
  -- every sweep (a tool or experiment that plans its work) and every numeric flag its --help names:
  -- "--FLAG x" is a usage error naming the flag (exit 2), never a default or a dropped item
  local numeric = { "batches", "rounds", "steps", "passes", "forwards", "ranges", "budget", "wide", "at", "tiles",
                    "groups" }
  for _, path in ipairs(scripts) do
    local f = assert(io.open(assert(spk.find_dir(path:match("^(%a+)/"))) .. "/" .. path:match("/(.*)$")))
    local text = f:read("a")
    f:close()
    if text:find("ex:plan(", 1, true) or text:find("script:plan(", 1, true) then
      it(("spk run %s: each numeric flag's bad value is a usage error naming it"):format(path), function()
        local help = run_spk { "run", path, "--help" }
        local checked = 0
        for _, flag in ipairs(numeric) do
          if help:find("%-%-" .. flag .. "[%s%]]") then
            local out, err, code = run_in_scratch { "run", path, "--" .. flag, "1,x", "--dry-run" }
            assert.are.equal(2, code, ("--%s 1,x: %s%s"):format(flag, out, err))
            assert.matches("%-%-" .. flag .. ": '", err)
            checked = checked + 1
          end
        end
        -- the tools that take their numbers as positional arguments: a bad batch among them
        local positional = { ["tools/capture_defaults.lua"] = { "DIR/out.json", "1,x" },
                             ["tools/projection_gemm.lua"] = { "1,x" } }
        if positional[path] then
          local dir = spec_tmpdir()
          local args = { "run", path }
          for _, a in ipairs(positional[path]) do args[#args + 1] = (a:gsub("DIR", dir)) end
          args[#args + 1] = "--dry-run"
          local out, err, code = run_spk(args)
          remove_scratch(dir)
          assert.are.equal(2, code, out .. err)
          assert.matches("'x'", err)
          checked = checked + 1
        end
        assert.is_true(checked > 0, path .. " names none of the numeric flags")
      end)
    end
  end
end)

describe("no GPU", function()
  -- work that needs a device, with the least arguments that reach it
  local cases = {
    { "bench", "--batches", "1", "--steps", "2" },
    { "tune", "--batches", "1", "--steps", "2", "--dir", "DIR" },
    { "run", "experiments/tile_sweep.lua", "--quick" },
    { "run", "experiments/batch_sweep.lua", "--quick" },
    { "run", "experiments/step_timeline.lua", "--quick" },
    { "run", "tools/persistent_sweep.lua", "--quick" },
    { "run", "tools/cluster_sweep.lua", "--quick" },
    { "run", "tools/projection_gemm.lua" },
    { "run", "tools/gemm_3xtf32_check.lua" },
    { "run", "tools/profile_forward.lua" },
    { "run", "tools/capture_defaults.lua", "DIR/out.json" },
    { "run", "tools/tc_sweep.lua", "--part", "sweep" },
    { "run", "tools/step_ab.lua" },
  }
  for _, case in ipairs(cases) do
    it(("spk %s exits 3, says it needs a CUDA GPU and that nothing was run"):format(table.concat(case, " ")), function()
      local dir = spec_tmpdir()
      local args = {}
      for i, a in ipairs(case) do args[i] = (a:gsub("DIR", dir)) end
      local out, err, code = run_spk(args, { env = NO_GPU })
      local left = remove_scratch(dir)
      assert.are.equal(3, code, out .. err)
      assert.matches("needs? a CUDA GPU: .*Nothing was run%.", err)
      assert.are.equal("", left)
    end)
  end

  it("a usage error comes before the missing GPU (exit 2, the bad value named)", function()
    for _, case in ipairs { { "run", "tools/step_ab.lua", "--batches", "x" },
                            { "run", "tools/cluster_sweep.lua", "--rounds", "0" },
                            { "run", "tools/profile_forward.lua", "cluster", "x" },
                            { "run", "experiments/tile_sweep.lua", "--batches", "x" } } do
      local out, err, code = run_spk(case, { env = NO_GPU })
      assert.are.equal(2, code, table.concat(case, " ") .. ": " .. out .. err)
      assert.is_nil(err:find("Nothing was run", 1, true), err)
    end
  end)
end)

describe("the man page", function()
  it("is what tools/man_page.lua writes from today's help texts", function()
    local f = assert(io.open("man/spk.1"))
    local committed = f:read("a")
    f:close()
    local out, err, code = run_spk({ "run", "tools/man_page.lua" })
    assert.are.equal(0, code, err)
    assert.are.equal(committed, out, "man/spk.1 is stale: build/spk run tools/man_page.lua man/spk.1")
    for _, section in ipairs { "NAME", "SYNOPSIS", "COMMANDS", "EXPERIMENTS", "TOOLS", "EXIT STATUS", "ENVIRONMENT" } do
      assert.matches("\n%.SH " .. section .. "\n", committed)
    end
    for _, command in ipairs(commands) do assert.matches("\n%.SS " .. command .. "\n", committed) end
  end)

  it("formats without a warning", function()
    if not os.execute("command -v groff >/dev/null 2>&1") then
      return require("spk.busted").skip("groff is not installed (make setup installs groff-base)")
    end
    local p = io.popen("groff -man -Tutf8 -ww -z man/spk.1 2>&1")
    local warnings = p:read("a")
    p:close()
    assert.are.equal("", warnings)
  end)
end)
