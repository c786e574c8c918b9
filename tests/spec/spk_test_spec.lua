-- `spk test`, driven from outside as a researcher runs it: a folder of specs
-- outside the repository, run from another folder, with no .busted; its
-- summary line (the same as scripts/test.sh's for the same folder) and exit
-- status; a .busted honoured; busted's options passed through; --init's
-- template suite; stored baselines with --update-baseline and --baselines.
-- CUDA_VISIBLE_DEVICES="" hides any GPU from the runs, so the counts are the
-- same on every machine (the GPU runs of the template are gpu_it specs).
local NO_GPU = { CUDA_VISIBLE_DEVICES = "" }

local function last_line(text)
  local last
  for line in (text or ""):gmatch("[^\n]+") do last = line end
  return last
end

-- A folder holding files {name = text}; removed after the spec.
local folders = {}
local function folder(files)
  local dir = spec_tmpdir()
  folders[#folders + 1] = dir
  for name, text in pairs(files or {}) do
    local sub = name:match("^(.*)/[^/]*$")
    if sub then os.execute("mkdir -p " .. shell_quote(dir .. "/" .. sub)) end
    write_file(dir .. "/" .. name, text)
  end
  return dir
end

local function env(extra)
  local e = {}
  for k, v in pairs(NO_GPU) do e[k] = v end
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

local PASSING = [[
local spk = require "spk"
describe("passing", function()
  it("adds", function() assert.are.equal(3, 1 + 2) end)
  it("is near", function()
    assert.tensor_near(spk.tensor { 1, 2.0000001 }, spk.tensor({ 1, 2 }, "f64"), { rel_l2 = 1e-6 })
  end)
end)
]]

local FAILING = [[
local spk = require "spk"
describe("failing", function()
  it("is not near", function()
    assert.tensor_near(spk.tensor { 1, 2.5 }, spk.tensor({ 1, 2 }, "f64"), { rel_l2 = 1e-6 })
  end)
end)
]]

local SKIPPING = [[
describe("skipping", function()
  gpu_it("needs a GPU", function() error("ran without a GPU") end)
  nogpu_it("runs without a GPU", function() assert.is_true(true) end)
  pending("not written yet")
end)
]]

-- Failures outside specs: a describe block that raises, a before_each that
-- fails. (A file that does not load is one failure too, but busted's TAP
-- handler itself fails on it, so scripts/test.sh then counts "busted did not
-- finish" instead: see the spec below.)
local BROKEN = {
  ["describe_spec.lua"] = 'describe("raising", function() error("boom") end)\n',
  ["setup_spec.lua"] = 'describe("setup", function()\n  before_each(function() assert.is_true(false) end)\n'
    .. '  it("never runs", function() end)\nend)\n',
}

describe("spk test", function()
  after_each(function()
    for _, dir in ipairs(folders) do os.execute("rm -rf " .. shell_quote(dir)) end
    folders = {}
  end)

  it("runs a folder of specs outside the repository, from another folder, with no .busted", function()
    local specs = folder { ["pass_spec.lua"] = PASSING, ["fail_spec.lua"] = FAILING, ["skip_spec.lua"] = SKIPPING,
                           ["notes.lua"] = "error('not a spec file')" }
    local elsewhere = folder()
    local out, err, code = run_spk({ "test", specs }, { cwd = elsewhere, env = env() })
    assert.are.equal("3 passed, 1 failed, 2 skipped", last_line(out), out .. err)
    assert.are.equal(1, code)
    assert.matches("Expected tensors to be near:\nrel_l2 0%.2", out)
    assert.matches("needs a GPU %[GPU: no CUDA device%]", out)
    assert.matches("fail_spec%.lua", out) -- the failure names its file
  end)

  it("exits 0 when every spec passes or is skipped", function()
    local specs = folder { ["pass_spec.lua"] = PASSING, ["skip_spec.lua"] = SKIPPING }
    local out, err, code = run_spk({ "test" }, { cwd = specs, env = env() }) -- no PATH: the current folder
    assert.are.equal("3 passed, 0 failed, 2 skipped", last_line(out), out .. err)
    assert.are.equal(0, code)
    out, err, code = run_spk({ "test", specs .. "/pass_spec.lua" }, { env = env() })
    assert.are.equal("2 passed, 0 failed", last_line(out), out .. err)
    assert.are.equal(0, code)
  end)

  it("ends with the line scripts/test.sh gives for the same folder, failures outside specs included", function()
    local files = { ["pass_spec.lua"] = PASSING, ["fail_spec.lua"] = FAILING, ["skip_spec.lua"] = SKIPPING }
    for name, text in pairs(BROKEN) do files[name] = text end
    local specs = folder(files)
    local out, err, code = run_spk({ "test", specs, "-o", "TAP" }, { env = env() })
    assert.are.equal(1, code)
    local p = io.popen(("env -u SPK_TAP_FILE CUDA_VISIBLE_DEVICES= SPK_SKIP_C_TESTS=1 BUILD=%s scripts/test.sh %s 2>&1")
      :format(shell_quote(os.getenv("BUILD") or "build"), shell_quote(specs)))
    local script = p:read("a")
    p:close()
    assert.are.equal("3 passed, 3 failed, 2 skipped", last_line(script), script)
    assert.are.equal(last_line(script), last_line(out), out .. err)
    -- the TAP lines come first, the summary last
    assert.matches("\n1%.%.8\n3 passed, 3 failed, 2 skipped\n$", out)
  end)

  it("counts a spec file that does not load as a failure, and one busted output that breaks", function()
    local specs = folder { ["pass_spec.lua"] = PASSING, ["syntax_spec.lua"] = "describe(\n" }
    local out, err, code = run_spk({ "test", specs }, { env = env() })
    assert.are.equal("2 passed, 1 failed", last_line(out), out .. err)
    assert.matches("syntax_spec%.lua", out)
    assert.are.equal(1, code)
    -- busted's TAP handler raises on it: busted stops, which is one more failure (as scripts/test.sh counts)
    out, err, code = run_spk({ "test", specs, "-o", "TAP" }, { env = env() })
    assert.matches("spk test: busted stopped: ", err)
    assert.matches("failed", last_line(out))
    assert.is_nil(last_line(out):match(" 0 failed"), out)
    assert.are.equal(1, code)
  end)

  it("honours a .busted in the folder it runs in", function()
    local dir = folder {
      [".busted"] = 'return { default = { ROOT = { "checks" }, pattern = "_check" } }\n',
      ["checks/one_check.lua"] = PASSING,
      ["checks/ignored_spec.lua"] = FAILING,
    }
    local out, err, code = run_spk({ "test" }, { cwd = dir, env = env() })
    assert.are.equal("2 passed, 0 failed", last_line(out), out .. err)
    assert.are.equal(0, code)
  end)

  it("passes busted's options through", function()
    local specs = folder { ["pass_spec.lua"] = PASSING, ["fail_spec.lua"] = FAILING }
    local out, err, code = run_spk({ "test", specs, "--filter=adds", "-o", "TAP" }, { env = env() })
    assert.are.equal("ok 1 - passing adds\n1..1\n1 passed, 0 failed\n", out, err)
    assert.are.equal(0, code)
    out, err, code = run_spk({ "test", "--list", specs }, { env = env() })
    assert.matches("passing adds", out)
    assert.is_nil(out:match("passed,"), out)
    assert.are.equal(0, code)
  end)

  it("fails, and says so, when nothing runs or busted cannot start", function()
    local empty = folder { ["notes.lua"] = "return 1" }
    local out, err, code = run_spk({ "test", empty }, { env = env() })
    assert.are.equal("0 passed, 1 failed", last_line(out), out .. err)
    assert.matches("No test files found matching Lua pattern: _spec", out)
    assert.are.equal(1, code)

    local specs = folder { ["pass_spec.lua"] = PASSING }
    out, err, code = run_spk({ "test", specs, "--filter=nothing matches this" }, { env = env() })
    assert.are.equal("0 passed, 1 failed", last_line(out), out .. err)
    assert.matches("spk test: no specs ran", err)
    assert.are.equal(1, code)

    out, err, code = run_spk({ "test", empty .. "/missing" }, { env = env() })
    assert.matches("^0 passed, [1-9]%d* failed$", last_line(out), out .. err)
    assert.matches("Cannot find file or directory: .*/missing", out)
    assert.are.equal(1, code)

    out, err, code = run_spk({ "test", "--no-such-option" }, { env = env() })
    assert.are.equal("0 passed, 1 failed", last_line(out), out .. err)
    assert.matches("no%-such%-option", err)
    assert.are.equal(1, code)

    local no_busted = { LUA_PATH = "/nonexistent/?.lua", LUA_CPATH = "/nonexistent/?.so", LUA_PATH_5_4 = false,
                        LUA_CPATH_5_4 = false }
    out, err, code = run_spk({ "test", empty }, { env = env(no_busted) })
    assert.matches("spk test: busted is not installed where Lua finds it", err)
    assert.are.equal(1, code)
  end)

  it("walks a folder the file system cannot turn against it: each spec once, no link out, odd files failures",
    function()
    local counted = 'describe("counted", function() it("runs", function() io.stderr:write("RAN " .. "%s\\n") end) end)\n'
    local dir = folder { ["specs/a_spec.lua"] = counted:format("a"), ["outside/o_spec.lua"] = counted:format("outside") }
    local specs = dir .. "/specs"
    for _, cmd in ipairs {
      "ln -s . specs/self", "ln -s .. specs/up", "mkdir specs/sub && ln -s .. specs/sub/back",
      "ln -s a_spec.lua specs/b_spec.lua", "ln -s ../outside/o_spec.lua specs/o_spec.lua",
      "mkfifo specs/x_spec.lua", "ln -s nowhere_spec.lua specs/y_spec.lua",
    } do
      assert(os.execute(("cd %s && %s"):format(shell_quote(dir), cmd)))
    end
    local p = io.popen(("CUDA_VISIBLE_DEVICES= timeout 60 %s test %s 2>&1 | head -c 100000"):format(
      shell_quote(absolute(SPK)), shell_quote(specs)))
    local out = p:read("a")
    p:close()
    local runs = select(2, out:gsub("RAN a", ""))
    assert.are.equal(1, runs, out) -- a_spec.lua once, through neither self, sub/back nor b_spec.lua
    assert.is_nil(out:find("RAN outside", 1, true), out)
    assert.matches("o_spec.lua links out of " .. specs, out, 1, true)
    assert.matches(specs .. "/x_spec.lua: not a regular file (a FIFO); a spec file must be one", out, 1, true)
    assert.matches(specs .. "/y_spec.lua: a symbolic link to nothing", out, 1, true)
    assert.matches("\n1 passed, 2 failed\n", out, 1, true)
    assert.is_true(#out < 4000, "the output grew to " .. #out .. " bytes")
    -- a FIFO named on the command line is refused too, at once
    local _, _, code = run_spk({ "test", specs .. "/x_spec.lua" }, { env = env() })
    assert.are.equal(1, code)
  end)

  it("writes skipped specs (gpu_it, nogpu_it, pending, spk.busted.skip) in every output format, counted", function()
    local specs = folder { ["mixed_spec.lua"] = [[
local spk = require "spk"
describe("mixed", function()
  gpu_it("needs a GPU", function() end)
  it("passes", function() assert.are.equal(2, 1 + 1) end)
  pending("not written yet")
  it("skips itself", function() require("spk.busted").skip("nothing to run here") end)
  nogpu_it("runs without a GPU", function() end)
end)
]] }
    local xml = require "xml_check"
    local report = require "spk.report"
    for _, format in ipairs { "plainTerminal", "utfTerminal", "TAP", "json", "junit", "gtest" } do
      local out, err, code = run_spk({ "test", specs, "-o", format }, { env = env() })
      assert.are.equal("2 passed, 0 failed, 3 skipped", last_line(out), format .. ":\n" .. out .. err)
      assert.are.equal(0, code, format)
      local body = out:gsub("[^\n]*\n?$", "") -- what the handler printed, before the summary line
      if format == "json" then
        local ok, doc = pcall(report.json_decode, body)
        assert(ok, "json: not JSON: " .. tostring(doc) .. "\n" .. body)
        assert.are.equal(3, #doc.pendings)
        assert.are.equal(2, #doc.successes)
      elseif format == "junit" then
        assert(xml.check(body))
        assert.matches("skip='3'", body, 1, true)
      elseif format == "TAP" then
        assert.are.equal(3, select(2, body:gsub("\nok %d+ %- # SKIP", "")) + (body:match("^ok %d+ %- # SKIP") and 1 or 0))
      elseif format == "gtest" then
        assert.matches("3 SKIPPED TESTS", body, 1, true)
      else
        assert.matches("2 success[es]* / 0 failures / 0 errors / 3 pending", body)
      end
    end
  end)

  it("has help, and refuses its own bad arguments with exit 2", function()
    local out, _, code = run_spk { "test", "--help" }
    assert.are.equal(0, code)
    assert.matches("usage: spk test %[PATH%.%.%.%]", out)
    assert.matches("%-%-update%-baseline", out)
    assert.matches("%-%-init DIR", out)
    local _, err, c2 = run_spk { "test", "--init" }
    assert.are.equal(2, c2)
    assert.matches("spk test: %-%-init needs a value", err)
    _, err, c2 = run_spk { "test", "--force" }
    assert.are.equal(2, c2)
    assert.matches("%-%-force goes with %-%-init DIR", err)
    local listed = run_spk { "--help" }
    assert.matches("test +run busted specs with spk's test helpers", listed)
  end)

  it("--init writes a variant suite that runs, and never overwrites one without --force", function()
    local dir = folder() .. "/variant"
    local out, err, code = run_spk { "test", "--init", dir }
    assert.are.equal(0, code, err)
    assert.matches("wrote " .. dir:gsub("%p", "%%%0") .. "/variant_spec%.lua", out)
    local text = read_file(dir .. "/variant_spec.lua")
    assert.are.equal(read_file("lua/spk/templates/variant_spec.lua"), text)
    for _, what in ipairs { "assert.within_reference", "assert.bits_equal", "assert.no_slower", "TILE_HEIGHTS" } do
      assert.matches(what, text, 1, true)
    end

    out, err, code = run_spk({ "test", dir, "-o", "TAP" }, { cwd = folder(), env = env() })
    assert.are.equal("1 passed, 0 failed, 4 skipped", last_line(out), out .. err)
    assert.are.equal(0, code)
    local skips = 0
    for _ in out:gmatch("# SKIP [^\n]*%[GPU: no CUDA device%]") do skips = skips + 1 end
    assert.are.equal(4, skips, out)

    write_file(dir .. "/variant_spec.lua", "-- mine\n")
    _, err, code = run_spk { "test", "--init", dir }
    assert.are.equal(1, code)
    assert.matches("variant_spec%.lua exists; %-%-force overwrites it", err)
    assert.are.equal("-- mine\n", read_file(dir .. "/variant_spec.lua"))
    _, _, code = run_spk { "test", "--init", dir, "--force" }
    assert.are.equal(0, code)
    assert.are.equal(text, read_file(dir .. "/variant_spec.lua"))
  end)

  it("records a baseline on the first run, compares after, and records anew with --update-baseline", function()
    -- scripted plans: the spec's plan takes $SLOWER times the yardstick's time, in halves
    local spec = [[
local function scripted(name, ms)
  return { backend = "cpu", variant = name, batch = 1, steps = 1, input = 1, hidden = 1, layers = 1,
           time = function() return { median_ms = ms } end }
end
describe("speed", function()
  it("is not slower than accepted", function()
    local factor = tonumber(os.getenv("SLOWER") or "1")
    assert.no_slower(scripted("variant", 0.5 * factor), { against = "accepted", yardstick = scripted("yard", 1) })
  end)
end)
]]
    local specs = folder { ["speed_spec.lua"] = spec }
    local store = folder()
    local function run(args, extra)
      local a = { "test", specs, "--baselines", store }
      for _, v in ipairs(args or {}) do a[#a + 1] = v end
      return run_spk(a, { env = env(extra) })
    end
    local out, err, code = run()
    assert.are.equal("0 passed, 0 failed, 1 skipped", last_line(out), out .. err)
    assert.are.equal(0, code)
    assert.matches("recorded: no baseline for this device yet", out)
    assert.is_string(read_file(store .. "/accepted.json"))
    assert.is_nil(read_file(specs .. "/baselines/accepted.json"))

    out, err, code = run()
    assert.are.equal("1 passed, 0 failed", last_line(out), out .. err)
    assert.are.equal(0, code)
    assert.matches("no_slower: cpu variant against the baseline 'accepted' .* is within the tolerance", err)

    out, err, code = run({}, { SLOWER = "1.2" })
    assert.are.equal("0 passed, 1 failed", last_line(out), out .. err)
    assert.are.equal(1, code)
    assert.matches("a slowdown of 20%.0%% exceeds the tolerance 3%.0%%", out)

    out, err, code = run({ "--update-baseline" }, { SLOWER = "1.2" })
    assert.are.equal("0 passed, 0 failed, 1 skipped", last_line(out), out .. err)
    assert.matches("updated %(%-%-update%-baseline%)", out)
    out, err, code = run({}, { SLOWER = "1.2" })
    assert.are.equal("1 passed, 0 failed", last_line(out), out .. err)
    assert.are.equal(0, code)

    -- without --baselines: baselines/ beside the spec file
    out, err = run_spk({ "test", specs }, { env = env() })
    assert.are.equal("0 passed, 0 failed, 1 skipped", last_line(out), out .. err)
    assert.is_string(read_file(specs .. "/baselines/accepted.json"))
  end)

  gpu_it("runs the template suite on a GPU: the first run records the baseline, the second passes it", function()
    local dir = folder() .. "/variant"
    assert.are.equal(0, select(3, run_spk { "test", "--init", dir }))
    local out, err, code = run_spk { "test", dir }
    assert.are.equal("4 passed, 0 failed, 1 skipped", last_line(out), out .. err)
    assert.are.equal(0, code)
    assert.is_string(read_file(dir .. "/baselines/variant_b8.json"))
    out, err, code = run_spk { "test", dir }
    assert.are.equal("5 passed, 0 failed", last_line(out), out .. err)
    assert.are.equal(0, code)
    assert.matches("no_slower: cluster .* against the baseline 'variant_b8'", err)
  end)
end)

-- scripts/test.sh's jobs: C test binaries and spec files side by side give the
-- same counts as one at a time, each failure named, wherever it happens.
describe("scripts/test.sh", function()
  after_each(function()
    for _, dir in ipairs(folders) do os.execute("rm -rf " .. shell_quote(dir)) end
    folders = {}
  end)

  local function suite(extra_specs)
    local files = { ["specs/pass_spec.lua"] = PASSING, ["specs/fail_spec.lua"] = FAILING,
                    ["specs/skip_spec.lua"] = SKIPPING,
                    ["build/tests/test_ok"] = '#!/bin/sh\necho "ok - one"\necho "c/ok: 2 passed, 0 failed"\n',
                    ["build/tests/test_fail"] = '#!/bin/sh\necho "not ok - two"\necho "c/fail: 1 passed, 1 failed"\nexit 1\n',
                    ["build/tests/test_crash"] = "#!/bin/sh\necho partial\nkill -SEGV $$\n" }
    for name, text in pairs(BROKEN) do files["specs/" .. name] = text end
    for name, text in pairs(extra_specs or {}) do files["specs/" .. name] = text end
    local dir = folder(files)
    local build = absolute(os.getenv("BUILD") or "build")
    os.execute(("chmod +x %s/build/tests/* && ln -s %s/spk.so %s/spk %s/build/"):format(shell_quote(dir),
      shell_quote(build), shell_quote(build), shell_quote(dir)))
    return dir
  end

  local function run(dir, jobs, tap)
    local p = io.popen(("env -u SPK_TAP_FILE -u SPK_SKIP_C_TESTS %s CUDA_VISIBLE_DEVICES= SPK_TEST_JOBS=%d BUILD=%s SPK_SPEC_DIR=%s "
      .. "scripts/test.sh 2>&1; echo \"exit $?\""):format(tap and ("SPK_TAP_FILE=" .. shell_quote(tap)) or "", jobs,
      shell_quote(dir .. "/build"), shell_quote(dir .. "/specs")))
    local out = p:read("a")
    p:close()
    local text, code = out:match("^(.*)\nexit (%d+)\n$")
    return text, tonumber(code)
  end

  it("counts the same with one job at a time and with several, naming each failure", function()
    local dir = suite()
    local one, one_code = run(dir, 1)
    local many, many_code = run(dir, 3)
    -- C: 2 + 1 passed, a failed check and a crash; specs: as spk test counts them
    assert.are.equal("6 passed, 5 failed, 2 skipped", last_line(one), one)
    assert.are.equal(last_line(one), last_line(many), many)
    assert.are.equal(1, one_code)
    assert.are.equal(1, many_code)
    for _, text in ipairs { one, many } do
      assert.matches("test_crash: crashed or printed no summary %(exit 139%)", text)
      assert.matches("not ok %- two", text)
      assert.matches("Expected tensors to be near", text)
      assert.matches("specs: 3 passed, 3 failed, 2 skipped", text, 1, true)
    end
  end)

  it("keeps every spec file's TAP in SPK_TAP_FILE, and names a spec file that stops its process", function()
    local dir = suite { ["stop_spec.lua"] = 'describe("stop", function() it("exits", function() os.exit(0) end) end)\n' }
    local tap = dir .. "/specs.tap"
    local out, code = run(dir, 2, tap)
    assert.are.equal("6 passed, 6 failed, 2 skipped", last_line(out), out)
    assert.matches("stop_spec%.lua: busted did not finish %(exit 0%)", out)
    assert.are.equal(1, code)
    local plans = 0
    for _ in read_file(tap):gmatch("\n?1%.%.%d+\n") do plans = plans + 1 end
    assert.are.equal(5, plans, "a plan line for each spec file that finished")
  end)

  it("refuses a job count that is not a positive whole number", function()
    local out, code = run(suite(), 0)
    assert.matches("SPK_TEST_JOBS is the number of jobs at a time %(1 or more%), got '0'", out)
    assert.are.equal("0 passed, 1 failed", last_line(out))
    assert.are.equal(2, code)
  end)
end)
