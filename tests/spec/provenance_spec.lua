-- Where results come from (lua/spk/provenance.lua): the build's version,
-- commit and dirty flag (scripts/build_info.sh, in a checkout and in a
-- tarball), spk.version, the record, and the writers that carry it (JSON,
-- CSV, SVG, spk bench's output and files, bench_plot). The experiments'
-- files are checked where they run (experiments_spec), spk tune's record in
-- tuning_spec.
local spk = require "spk"
local report = require "spk.report"
local plot = require "spk.plot"
local provenance = require "spk.provenance"
local xml = require "xml_check"

local function sh(command)
  local p = io.popen(command .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

local function git(args) return sh("git " .. args) end

describe("the build's commit", function()
  local in_git = git("rev-parse --verify -q HEAD") == 0

  it("spk.version is this tree's version, its commit and whether tracked files differed", function()
    local v = spk.version
    assert.are.equal(read_file("src/core/version.h"):match('SPK_VERSION "([^"]+)"'), v.version)
    if not in_git then return require("spk.busted").skip("not a git checkout") end
    local _, head = git("rev-parse HEAD")
    assert.are.equal((head:gsub("%s+$", "")), v.commit)
    assert.is_boolean(v.dirty)
    assert.are.equal(("%s (%s, %s)"):format(v.version, v.commit:sub(1, 7), v.dirty and "dirty" or "clean"),
      tostring(v))
  end)

  it("comes from git in a checkout, rewritten only when it changes", function()
    if not in_git then return require("spk.busted").skip("not a git checkout") end
    local dir = spec_tmpdir()
    local header = dir .. "/build_info.h"
    assert.are.equal(0, (sh("scripts/build_info.sh " .. shell_quote(header))))
    local text = read_file(header)
    local _, head = git("rev-parse HEAD")
    local _, changes = git("status --porcelain --untracked-files=no")
    assert.matches('#define SPK_COMMIT "' .. head:gsub("%s+$", "") .. '"', text, 1, true)
    assert.matches("#define SPK_DIRTY " .. (changes == "" and "0" or "1"), text, 1, true)
    -- unchanged: the file is left as it was (so nothing recompiles)
    assert.are.equal(0, (sh("touch -d '2000-01-01' " .. shell_quote(header))))
    sh("scripts/build_info.sh " .. shell_quote(header))
    local _, stamp = sh("date -r " .. shell_quote(header) .. " +%Y")
    assert.are.equal("2000\n", stamp)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("outside git: the hash git archive wrote, else unknown, and the dirty flag unknown", function()
    local dir = spec_tmpdir()
    assert.are.equal(0, (sh("mkdir -p " .. shell_quote(dir .. "/tree/scripts") .. " && cp scripts/build_info.sh "
      .. shell_quote(dir .. "/tree/scripts/"))))
    local function made(content)
      if content then
        local f = assert(io.open(dir .. "/tree/scripts/archive-commit.txt", "w"))
        f:write(content)
        f:close()
      end
      local code, out = sh(shell_quote(dir .. "/tree/scripts/build_info.sh") .. " " .. shell_quote(dir .. "/h.h"))
      assert.are.equal(0, code, out)
      return read_file(dir .. "/h.h")
    end
    local plain = made(nil)
    assert.matches('SPK_COMMIT "unknown"', plain, 1, true)
    assert.matches("SPK_DIRTY %-1", plain)
    assert.matches('SPK_COMMIT "unknown"', made("$Format:%H$\n"), 1, true)
    local archived = made("0123456789abcdef0123456789abcdef01234567\n")
    assert.matches('SPK_COMMIT "0123456789abcdef0123456789abcdef01234567"', archived, 1, true)
    assert.matches("SPK_DIRTY %-1", archived)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("git archive writes the commit into the tarball's scripts/archive-commit.txt", function()
    if not in_git then return require("spk.busted").skip("not a git checkout") end
    local code, text = git("archive HEAD scripts/archive-commit.txt | tar -xO")
    assert.are.equal(0, code, text)
    local _, head = git("rev-parse HEAD")
    assert.are.equal(head, text)
  end)
end)

describe("provenance.record", function()
  it("holds the build, the command, the machine and the run", function()
    local r = provenance.record { seeds = { input = 3 }, shape = { steps = 9 }, dtype = "f32", math = { "fp32" },
                                  backends = { "cpu" }, variants = { "f32 reference" } }
    assert.are.same({}, provenance.missing(r))
    assert.are.equal(spk.version.commit, r.spk.commit)
    assert.are.equal(3, r.run.seeds.input)
    assert.is_string(r.command)
    assert.is_true(#r.argv >= 1)
    assert.is_string(r.host)
    assert.are.equal(spk.initial_seed(), r.rng.seed)
    local env = spk.core.system_environment()
    assert.are.equal(provenance.cudnn_version(env.cudnn_version) or "none", r.cudnn)
    assert.are.equal(provenance.cuda_version(env.runtime_version) or "none", r.runtime)
    assert.are.equal(r, provenance.record(r))
    assert.has_error(function() provenance.record(42) end, "provenance.record: run must be a table, got number")
  end)

  it("records the process-wide generator's seed", function()
    local before = spk.initial_seed()
    spk.seed(42)
    assert.are.equal(42, provenance.record().rng.seed)
    spk.seed(before)
  end)

  it("names what rows ran where the run does not say", function()
    local run = provenance.from_rows({ { backend = "cpu", variant = "f32 reference", batch = 8 },
                                       { backend = "cudnn", variant = "standard", batch = 1, math = "tf32" },
                                       { backend = "cpu", variant = "f32 reference", batch = 1 } },
                                     { seeds = { input = 1 }, backends = { "given" } })
    assert.are.same({ "given" }, run.backends)
    assert.are.same({ "f32 reference", "standard" }, run.variants)
    assert.are.same({ "tf32" }, run.math)
    assert.are.same({ 1, 8 }, run.batches)
    assert.are.same({ input = 1 }, run.seeds)
    assert.are.same({ "fp32" }, provenance.from_rows({}).math)
  end)

  it("reads as three lines: build, date and host; command; device, versions and seed", function()
    local lines = provenance.lines(provenance.record())
    assert.are.equal(3, #lines)
    assert.matches("^spk " .. spk.version.version:gsub("%p", "%%%0") .. ", commit " .. spk.version.commit, lines[1])
    assert.matches("^command: ", lines[2])
    assert.matches("^device: .*; driver .*; CUDA runtime .*; cuDNN .*; seed %d+$", lines[3])
    assert.are.equal(2, #provenance.lines(provenance.record(), { device = false }))
  end)
end)

describe("the writers", function()
  local dir
  before_each(function() dir = spec_tmpdir() end)
  after_each(function() os.execute("rm -rf " .. shell_quote(dir)) end)

  local run = { seeds = { weights = 1 }, shape = { layers = 1 }, dtype = "f32", math = { "fp32" }, backends = { "x" },
                variants = { "y" } }

  it("report.json adds the record to an object, none to an array or with provenance = false", function()
    report.json(dir .. "/a.json", { rows = { 1, 2 } }, { provenance = run })
    local back = report.json_decode(read_file(dir .. "/a.json"))
    assert.are.same({ 1, 2 }, back.rows)
    assert_provenance(read_file(dir .. "/a.json"), "a.json", run)
    report.json(dir .. "/b.json", { 1, 2 })
    assert.are.equal("[1,2]\n", read_file(dir .. "/b.json"))
    report.json(dir .. "/c.json", { a = 1 }, { provenance = false })
    assert.are.equal('{"a":1}\n', read_file(dir .. "/c.json"))
    -- the default: the environment's record, the run empty
    report.json(dir .. "/d.json", { a = 1 })
    local d = report.json_decode(read_file(dir .. "/d.json"))
    assert.are.equal(spk.version.commit, d.provenance.spk.commit)
    -- a value's own provenance is kept
    report.json(dir .. "/e.json", { provenance = "mine" })
    assert.are.equal("mine", report.json_decode(read_file(dir .. "/e.json")).provenance)
    assert.has_error(function() report.json(dir .. "/f.json", { a = 1 }, { provenance = "x" }) end,
      "report.json: provenance must be a table (the run) or false, got string")
  end)

  it("report.csv puts it on the first line, a comment, the rows unchanged below", function()
    report.csv(dir .. "/a.csv", { { v = 1 }, { v = 2 } }, { "v" }, { provenance = run })
    local text = read_file(dir .. "/a.csv")
    assert.matches("^# provenance {[^\n]+}\nv\n1\n2\n$", text)
    assert_provenance(text, "a.csv", run)
    report.csv(dir .. "/b.csv", { { v = 1 } }, { "v" }, { provenance = false })
    assert.are.equal("v\n1\n", read_file(dir .. "/b.csv"))
  end)

  it("plot.save puts it in the SVG's metadata, and the SVG stays well-formed", function()
    local svg = plot.line { title = "a <b> & c", series = { { name = "s", points = { { 1, 2 }, { 2, 3 } } } } }
    plot.save(dir .. "/a.svg", svg, { provenance = { seeds = { x = "<&>" }, shape = {}, dtype = "f32", math = {},
                                                    backends = {}, variants = {} } })
    local text = read_file(dir .. "/a.svg")
    assert.is_true(xml.check(text))
    assert.matches('^<svg [^>]*>\n<metadata id="spk%-provenance">', text)
    local record = assert_provenance(text, "a.svg")
    assert.are.equal("<&>", record.run.seeds.x)
    plot.save(dir .. "/b.svg", svg, { provenance = false })
    assert.are.equal(svg, read_file(dir .. "/b.svg"))
  end)

  it("an experiment's text file gets it as # lines", function()
    local experiment = require "spk.experiment"
    local saved = _G.print
    _G.print = function() end -- "t: results in ..."
    local ok_start, ex = pcall(experiment.start, { name = "t", gpu = "optional", batches = { 1 },
                                                   arg = { "--out", dir .. "/o" } })
    _G.print = saved
    assert(ok_start, ex)
    ex:describe(run)
    ex:text("notes.txt", "hello\n")
    local text = read_file(dir .. "/o/notes.txt")
    assert.matches("^# spk [^\n]+\n# command: [^\n]+\n# device: [^\n]+\nhello\n$", text)
    local ok, program = pcall(require, "spk.program") -- under the spk program: the failure hook it set
    if ok then program.on_failure = nil end
  end)
end)

describe("spk bench", function()
  it("heads its table with the build and command, and records the run in its JSON and CSV", function()
    local dir = spec_tmpdir()
    local json, csv = dir .. "/b.json", dir .. "/b.csv"
    local out, err, code = run_spk { "bench", "--backends", "cpu", "--batches", "1,2", "--steps", "3", "--hidden", "8",
                                     "--layers", "1", "--input", "4", "--rounds", "2", "--warmup", "0", "--seed", "7",
                                     "--json", json, "--csv", csv }
    assert.are.equal(0, code, err)
    assert.matches("^spk [^\n]+, commit " .. spk.version.commit .. "[^\n]*\ncommand: [^\n]*spk bench %-%-backends cpu",
      out)
    local want = { seeds = { weights = 1, input = 7 }, dtype = "f32", math = { "fp32" }, backends = { "cpu" },
                   variants = { "f32 reference" }, batches = { 1, 2 },
                   shape = { layers = 1, input = 4, hidden = 8, steps = 3, batches = { 1, 2 } } }
    assert_provenance(read_file(json), "bench JSON", want)
    assert_provenance(read_file(csv), "bench CSV", want)

    -- and bench_plot draws it (CPU rows only), each point's spread as a whisker, with both records
    local svg_path = dir .. "/b.svg"
    local pout, perr, pcode = run_spk { "run", "tools/bench_plot.lua", json, svg_path }
    assert.are.equal(0, pcode, perr)
    assert.matches("1 series", pout)
    local svg = read_file(svg_path)
    assert.is_true(xml.check(svg))
    assert.truthy(svg:find('data-name="spk cpu"', 1, true))
    local whiskers = 0
    for _ in svg:gmatch('class="whisker"') do whiskers = whiskers + 1 end
    assert.are.equal(2, whiskers)
    local record = assert_provenance(svg, "bench_plot SVG", { seeds = want.seeds, backends = { "cpu" } })
    assert.are.equal(json, record.run.source.file)
    assert.are.equal(7, record.run.source.provenance.run.seeds.input)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("bench_plot refuses a file without timed rows, naming it", function()
    local dir = spec_tmpdir()
    local path = dir .. "/empty.json"
    report.json(path, { rows = { { backend = "cpu", batch = 1, error = "x" } } })
    local _, err, code = run_spk { "run", "tools/bench_plot.lua", path, dir .. "/x.svg" }
    assert.are.equal(1, code)
    assert.matches("empty%.json has no timed rows", err)
    os.execute("rm -rf " .. shell_quote(dir))
  end)
end)
