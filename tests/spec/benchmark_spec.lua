-- spk.lstm.backends, spk.benchmark and `spk bench`: the registry, the pure
-- speed-up and bound computations on made-up rows, a whole run on the cpu
-- backend, failures as rows, the command end to end on a tiny case; on a GPU,
-- `spk bench --batches 1,32 --rounds 3` with every cuDNN algorithm in bounds.
local spk = require "spk"
local benchmark = require "spk.benchmark"
local report = require "spk.report"

-- RFC 4180 CSV into a list of rows keyed by the header (a small reader for the test).
local function parse_csv(text)
  local records, fields, field, i, quoted = {}, {}, {}, 1, false
  while i <= #text do
    local c = text:sub(i, i)
    if quoted then
      if c == '"' and text:sub(i + 1, i + 1) == '"' then
        field[#field + 1] = '"'
        i = i + 1
      elseif c == '"' then
        quoted = false
      else
        field[#field + 1] = c
      end
    elseif c == '"' then
      quoted = true
    elseif c == "," then
      fields[#fields + 1] = table.concat(field)
      field = {}
    elseif c == "\n" then
      fields[#fields + 1] = table.concat(field)
      records[#records + 1] = fields
      fields, field = {}, {}
    else
      field[#field + 1] = c
    end
    i = i + 1
  end
  -- the provenance line comes first (report.csv), as a comment line
  assert.matches("^# provenance {", records[1][1], nil, "the CSV's first line is its provenance")
  while records[1] and records[1][1]:match("^#") do table.remove(records, 1) end
  local header = table.remove(records, 1)
  local rows = {}
  for r, rec in ipairs(records) do
    assert.are.equal(#header, #rec, "CSV record " .. r .. " has a different field count")
    rows[r] = {}
    for j, name in ipairs(header) do rows[r][name] = rec[j] end
  end
  return rows, header
end

-- The registered backend names, sorted and comma separated (other areas add their own).
local function registered()
  local names = {}
  for name in pairs(spk.lstm.backends) do names[#names + 1] = name end
  table.sort(names)
  return table.concat(names, ", ")
end

local tiny = function()
  return spk.lstm.random { layers = 2, input = 5, hidden = 16, seed = 3 }
end

describe("spk.lstm.backends", function()
  it("holds cpu, persistent and cudnn constructors; an unknown name lists them", function()
    for _, name in ipairs { "cpu", "persistent", "cudnn" } do
      assert.are.equal("function", type(spk.lstm.backends[name]))
    end
    assert.are.equal(spk.lstm.cudnn_stack, spk.lstm.backends.cudnn)
    local ok, err = pcall(spk.lstm.stack, { layers = tiny(), batch = 1, steps = 2, backend = "tpu" })
    assert.is_false(ok)
    local where, message = err:match("^(tests/spec/benchmark_spec%.lua:%d+): (.*)$")
    assert.truthy(where, "not at the caller's line: " .. err)
    assert.are.equal("spk.lstm.stack: unknown backend 'tpu' (registered: " .. registered() .. ")", message)
    assert.matches("cpu, cudnn, persistent", registered()) -- sorted, whatever else is registered
  end)

  it("dispatches to a registered constructor with the options unchanged", function()
    local seen
    spk.lstm.backends.fake = function(opts)
      seen = opts
      return { variant = "made up" }
    end
    local opts = { backend = "fake", layers = 1, anything = true }
    local ok, plan = pcall(spk.lstm.stack, opts)
    spk.lstm.backends.fake = nil
    assert.is_true(ok, tostring(plan))
    assert.are.equal(opts, seen)
    assert.are.equal("made up", plan.variant)
    assert.has_error(function() spk.lstm.stack { backend = "fake" } end)
  end)

  it("times the cpu backend with spk.bench's keys and refuses bad time options", function()
    local plan = spk.lstm.stack { layers = tiny(), batch = 2, steps = 3, backend = "cpu", threads = 2 }
    assert.are.equal("f32 reference, 2 threads", plan.variant)
    local t = plan:time { rounds = 4, warmup = 1 }
    assert.are.equal(4, #t.samples)
    assert.is_true(t.min_ms > 0 and t.min_ms <= t.median_ms and t.median_ms <= t.max_ms)
    assert.are.equal((t.max_ms - t.min_ms) / t.median_ms, t.spread)
    assert.is_nil(t.median) -- the old name is gone
    assert.has_error(function() plan:time { round = 3 } end, "time: unknown option 'round' (known: rounds, timeline, warmup, x)")
    assert.has_error(function() plan:time { rounds = 0 } end, "time: rounds must be an integer >= 1, got 0")
    assert.has_error(function() plan:time { x = spk.zeros({ 2, 4, 5 }, "f32") } end)
    assert.has_error(function() spk.lstm.stack { layers = tiny(), batch = 2, steps = 3, backend = "cpu",
                                                 kernel = {} } end,
      "spk.lstm.stack (cpu): unknown option 'kernel' (known: backend, batch, layers, math, steps, threads, vector)")
    assert.has_error(function() spk.lstm.stack { layers = tiny(), batch = 2, steps = 3, backend = "cpu",
                                                 vector = "avx3" } end,
      ("spk.lstm.stack (cpu): vector must be \"auto\" or a unit this CPU has (%s), got 'avx3'"):format(
        table.concat(spk.lstm.cpu_info().vectors, ", ")))
    local portable = spk.lstm.stack { layers = tiny(), batch = 2, steps = 3, backend = "cpu", vector = "portable" }
    assert.are.equal("f32 reference, portable", portable.variant)
    local x = spk.randn({ 2, 3, 5 }, { seed = 3 })
    assert.bits_equal(plan:forward(x), portable:forward(x))
  end)
end)

describe("benchmark.speedups", function()
  it("divides the fastest cuDNN median at each batch by each row's median", function()
    local rows = {
      { batch = 1, backend = "cudnn", variant = "standard", median_ms = 10 },
      { batch = 1, backend = "cudnn", variant = "persist_static", median_ms = 4 },
      { batch = 1, backend = "cudnn", variant = "persist_dynamic", error = "refused" },
      { batch = 1, backend = "persistent", variant = "u4", median_ms = 2 },
      { batch = 8, backend = "persistent", variant = "u4", median_ms = 5 },
      { batch = 8, backend = "cudnn", variant = "standard", median_ms = 20 },
      { batch = 8, backend = "cudnn", variant = "small_h", median_ms = 8 },
      { batch = 32, backend = "persistent", variant = "u4", median_ms = 5 },
      { batch = 8, backend = "persistent", variant = "u8", error = "capacity" },
    }
    local s, fastest = benchmark.speedups(rows)
    assert.are.equal(0.4, s[1])
    assert.are.equal(1, s[2])
    assert.is_nil(s[3])
    assert.are.equal(2, s[4])
    assert.are.equal(8 / 5, s[5])
    assert.are.equal(0.4, s[6])
    assert.are.equal(1, s[7])
    assert.is_nil(s[8]) -- no cuDNN row at batch 32
    assert.is_nil(s[9])
    assert.are.same({ median_ms = 4, variant = "persist_static" }, fastest[1])
    assert.are.same({ median_ms = 8, variant = "small_h" }, fastest[8])
    assert.is_nil(rows[1].speedup) -- pure: the rows are not touched
  end)
end)

describe("benchmark.judge", function()
  it("applies 1e-4 to cuDNN and 1.1x / 2x cuDNN standard's error to persistent", function()
    local rows = {
      { batch = 1, backend = "cudnn", algo = "standard", rel_l2 = 4e-6, max_abs = 1e-6 },
      { batch = 1, backend = "cudnn", algo = "persist_static", rel_l2 = 2e-4, max_abs = 1e-5 },
      { batch = 1, backend = "persistent", rel_l2 = 4.3e-6, max_abs = 1.9e-6 },
      { batch = 1, backend = "persistent", rel_l2 = 4.5e-6, max_abs = 1e-7 },
      { batch = 1, backend = "persistent", rel_l2 = 1e-7, max_abs = 2.1e-6 },
      { batch = 8, backend = "persistent", rel_l2 = 1e-7, max_abs = 1e-7 }, -- no cuDNN standard at 8
      { batch = 1, backend = "cudnn", algo = "persist_dynamic", error = "refused" },
      { batch = 1, backend = "cudnn", algo = "standard", rel_l2 = 0 / 0, max_abs = 0 / 0 },
      { batch = 1, backend = "cluster", rel_l2 = 5e-5 },
      { batch = 1, backend = "other", rel_l2 = 5e-5 },
    }
    local v = benchmark.judge(rows)
    assert.are.same({ bound = 1e-4, bound_ok = true }, v[1])
    assert.are.same({ bound = 1e-4, bound_ok = false }, v[2])
    assert.are.equal(1.1 * 4e-6, v[3].bound)
    assert.are.equal(2e-6, v[3].bound_max_abs)
    assert.is_true(v[3].bound_ok)
    assert.is_false(v[4].bound_ok) -- rel L2 beyond 1.1x
    assert.is_false(v[5].bound_ok) -- max abs beyond 2x
    assert.are.same({}, v[6])
    assert.are.same({}, v[7])
    assert.is_false(v[8].bound_ok) -- NaN fails
    assert.is_false(v[9].bound_ok) -- cluster: the persistent kernel's bound
    assert.are.equal(1.1 * 4e-6, v[9].bound)
    assert.are.same({}, v[10]) -- no rule for this backend
    local custom = benchmark.judge(rows, { other = function(row) return row.rel_l2 * 2 end })
    assert.are.same({ bound = 1e-4, bound_ok = true }, custom[10])
    assert.is_nil(rows[1].bound_ok)
  end)
end)

describe("benchmark.run", function()
  it("times and checks the cpu backend on one input set per batch", function()
    local messages = {}
    local layers = tiny()
    local rows, info = benchmark.run { batches = { 1, 3 }, steps = 4, backends = { "cpu" }, layers = layers,
                                       rounds = 3, warmup = 1, seed = 7,
                                       progress = function(m) messages[#messages + 1] = m end }
    assert.are.equal(2, #rows)
    for i, batch in ipairs { 1, 3 } do
      local r = rows[i]
      assert.are.equal(batch, r.batch)
      assert.are.equal(4, r.steps)
      assert.are.equal("cpu", r.backend)
      assert.are.equal("f32 reference", r.variant)
      assert.is_nil(r.error)
      assert.are.equal(3, #r.samples)
      assert.is_true(r.min_ms > 0 and r.min_ms <= r.median_ms and r.median_ms <= r.max_ms)
      assert.is_true(r.spread >= 0)
      -- the f32 reference against the f64 one: small but not zero
      assert.is_true(r.rel_l2 > 0 and r.rel_l2 < 1e-5, tostring(r.rel_l2))
      assert.is_true(r.max_abs > 0 and r.max_abs < 1e-5)
      assert.are.equal(1e-4, r.bound)
      assert.is_true(r.bound_ok)
      assert.is_nil(r.speedup) -- no cuDNN row
    end
    -- the check is the same one a script makes by hand on the same input
    local x = spk.randn({ 3, 4, 5 }, { seed = 7 })
    local c = spk.compare(spk.lstm.reference(layers, x, { precision = "f32" }),
      (spk.lstm.reference(layers, x, { precision = "f64" })))
    assert.are.equal(c.rel_l2, rows[2].rel_l2)
    assert.are.same({ "batch 1: f64 reference ...", "batch 1: cpu (1/1) ...",
                      "batch 3: f64 reference ...", "batch 3: cpu (1/1) ..." }, messages)
    assert.are.equal(4, info.steps)
    assert.are.equal(16, info.hidden)
    -- without the check: timing only
    local unchecked = benchmark.run { batches = { 2 }, steps = 2, backends = { "cpu" }, layers = layers,
                                      rounds = 1, warmup = 0, check = false }
    assert.is_nil(unchecked[1].rel_l2)
    assert.is_nil(unchecked[1].bound_ok)
    assert.is_true(unchecked[1].median_ms > 0)
  end)

  it("turns a failing backend or variant into a row with its error and goes on", function()
    local calls = 0
    spk.lstm.backends.broken = function(opts)
      calls = calls + 1
      if opts.algo == "bad" then error("algorithm bad refused for batch " .. opts.batch) end
      return spk.lstm.backends.cpu { layers = opts.layers, batch = opts.batch, steps = opts.steps, backend = "cpu" }
    end
    local ok, rows = pcall(benchmark.run, {
      batches = { 2 }, steps = 3, backends = { "broken", "cpu" }, layers = tiny(), rounds = 2, warmup = 0,
      variants = { broken = { { algo = "bad", label = "bad one" }, { label = "good one" } } } })
    spk.lstm.backends.broken = nil
    assert.is_true(ok, tostring(rows))
    assert.are.equal(2, calls)
    assert.are.equal(3, #rows)
    assert.are.equal("bad one", rows[1].variant)
    assert.are.equal("algorithm bad refused for batch 2", rows[1].error)
    assert.is_nil(rows[1].median_ms)
    assert.is_nil(rows[1].bound_ok)
    assert.are.equal("good one", rows[2].variant)
    assert.is_nil(rows[2].error)
    assert.is_true(rows[2].median_ms > 0)
    assert.is_nil(rows[3].error)
  end)

  it("checks its options", function()
    local ok, err = pcall(benchmark.run, { batch = { 1 } })
    assert.is_false(ok)
    assert.matches("benchmark: unknown option 'batch' %(known: algos, backends, batches, ", err)
    assert.has_error(function() benchmark.run { backends = { "tpu" } } end)
    assert.has_error(function() benchmark.run { batches = {} } end, "benchmark: batches must be a non-empty list")
    assert.has_error(function() benchmark.run { rounds = 0, backends = { "cpu" } } end,
      "benchmark: rounds must be an integer >= 1, got 0")
  end)

  it("describes the environment in words", function()
    local env = benchmark.environment()
    for _, key in ipairs { "device", "driver", "runtime", "cudnn", "date" } do
      assert.are.equal("string", type(env[key]), key)
    end
    assert.matches("^%d%d%d%d%-%d%d%-%d%d %d%d:%d%d UTC$", env.date)
  end)
end)

describe("spk bench", function()
  it("prints its usage with --help", function()
    local out, _, code = run_spk { "bench", "--help" }
    assert.are.equal(0, code)
    assert.matches("usage: spk bench", out)
    assert.matches("%-%-no%-check", out)
  end)

  describe("--dry-run", function()
    -- spk bench in a scratch folder with no GPU visible; what it left there too
    local function dry(args)
      local dir = spec_tmpdir()
      local all = { "bench", "--dry-run" }
      for _, a in ipairs(args) do all[#all + 1] = a end
      local out, err, code = run_spk(all, { env = { CUDA_VISIBLE_DEVICES = "" }, cwd = dir })
      local left = remove_scratch(dir)
      assert.are.equal(0, code, err)
      assert.are.equal("", err)
      assert.are.equal("", left)
      local batches = {}
      for batch, rows in out:gmatch("\nbatch (%d+): %d+ rows?: ([^\n]*)") do
        local list = {}
        for row in rows:gmatch("[^;]+") do list[#list + 1] = (row:gsub("^ ", "")) end
        batches[#batches + 1] = { batch = tonumber(batch), rows = list }
      end
      return out, batches
    end

    it("lists the default run without a device, timing nothing and writing nothing", function()
      local out, batches = dry {}
      assert.matches("^spk bench %(dry run%): 4%-layer bidirectional LSTM, hidden 128, input 60, 589 steps, seed 1; "
        .. "7 timed rounds after 2 warm%-ups; f64 reference check on\n", out)
      assert.matches("\nbackends: persistent, cudnn; maths: fp32; cuDNN algorithms: " ..
        table.concat(benchmark.cudnn_algorithms, ", "):gsub("%p", "%%%0") .. "\n", out)
      local expected = { "persistent (math fp32)" }
      for _, a in ipairs(benchmark.cudnn_algorithms) do expected[#expected + 1] = "cudnn (algo " .. a .. ", math fp32)" end
      assert.are.equal(#benchmark.defaults.batches, #batches)
      for i, b in ipairs(batches) do
        assert.are.equal(benchmark.defaults.batches[i], b.batch)
        assert.are.same(expected, b.rows)
      end
      assert.matches(("\n%d rows in all\n"):format(#expected * #batches), out)
      assert.matches("\nCPU section: none", out)
      assert.matches("\nneeds a CUDA GPU for: persistent, cudnn\n", out)
    end)

    it("follows the options: batches, maths, units, algorithms, rounds, the CPU section's threads", function()
      -- --quick first: later options override it
      local out, batches = dry { "--quick", "--backends", "cpu,persistent,cudnn", "--batches", "1,2", "--math",
                                 "fp32,tf32,3xtf32", "--units", "4,8", "--algos", "standard", "--threads", "1,2",
                                 "--rounds", "4", "--no-check" }
      assert.matches("4 timed rounds after 1 warm%-up; f64 reference check off", out)
      assert.matches("cuDNN algorithms: standard\n", out)
      local expected = { "cpu (f32 reference)" }
      for _, m in ipairs { "fp32", "tf32", "3xtf32" } do
        for _, u in ipairs { 4, 8 } do expected[#expected + 1] = ("persistent (math %s, units %d)"):format(m, u) end
      end
      -- cuDNN has no 3xtf32: those rows are timed against its FP32 ones
      expected[#expected + 1] = "cudnn (algo standard, math fp32)"
      expected[#expected + 1] = "cudnn (algo standard, math tf32)"
      assert.are.equal(2, #batches)
      assert.are.same({ 1, 2 }, { batches[1].batch, batches[2].batch })
      assert.are.same(expected, batches[1].rows)
      assert.are.same(expected, batches[2].rows)
      assert.matches("\nCPU section: batches 1,2 at 1,2 threads", out)
    end)

    it("lists the rows a real run of the cpu backend then makes", function()
      local args = { "--backends", "cpu", "--batches", "1,3", "--steps", "2", "--hidden", "8", "--layers", "1",
                     "--input", "3", "--rounds", "1", "--warmup", "0", "--threads", "1" }
      local out, batches = dry(args)
      assert.matches("\nCPU section: batches 1,3 at 1 thread:", out)
      assert.is_nil(out:find("needs a CUDA GPU", 1, true), out)
      local dir = spec_tmpdir()
      local run = { "bench", "--json", dir .. "/rows.json" }
      for _, a in ipairs(args) do run[#run + 1] = a end
      local _, err, code = run_spk(run)
      assert.are.equal(0, code, err)
      local doc = report.json_decode(read_file(dir .. "/rows.json"))
      os.execute("rm -rf " .. shell_quote(dir))
      local listed = {}
      for _, b in ipairs(batches) do
        for _, row in ipairs(b.rows) do listed[#listed + 1] = b.batch .. " " .. row:match("^(%S+)") end
      end
      local ran = {}
      for _, r in ipairs(doc.rows) do ran[#ran + 1] = r.batch .. " " .. r.backend end
      assert.are.same(ran, listed)
      assert.are.equal(2, #doc.cpu.rows)
    end)
  end)

  it("exits 2 with a message on bad options", function()
    for _, case in ipairs {
      { { "--rounds", "0" }, "--rounds: '0' is not an integer >= 1" },
      { { "--batches", "1,x" }, "--batches: 'x' is not an integer >= 1" },
      { { "--steps" }, "--steps needs a value" },
      { { "--frobnicate" }, "unknown argument '--frobnicate'" },
      { { "--backends", "cpu,tpu" }, "unknown backend 'tpu' (registered: " .. registered() .. ")" },
      { { "--algos", "fast" }, "unknown algorithm 'fast'" },
    } do
      local args = { "bench" }
      for _, a in ipairs(case[1]) do args[#args + 1] = a end
      local out, err, code = run_spk(args)
      assert.are.equal(2, code, table.concat(args, " "))
      assert.are.equal("", out)
      assert.is_truthy(err:find(case[2], 1, true), err)
    end
  end)

  it("runs the cpu backend on a tiny case: a table on stdout, progress on stderr, JSON and CSV files", function()
    local dir = spec_tmpdir()
    local json, csv = dir .. "/rows.json", dir .. "/rows.csv"
    local out, err, code = run_spk { "bench", "--backends", "cpu", "--batches", "1,2", "--steps", "4", "--hidden", "16",
                                     "--layers", "2", "--input", "5", "--rounds", "2", "--warmup", "1",
                                     "--json", json, "--csv", csv }
    assert.are.equal(0, code, err)
    assert.matches("batch 2: cpu %(1/1%) %.%.%.", err)
    assert.matches("2%-layer bidirectional LSTM, hidden 16, input 5, 4 steps", out)
    assert.matches("cuDNN ", out)
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
    local header_at
    for i, line in ipairs(lines) do
      if line:match("^batch%s+backend%s+variant%s+median ms") then header_at = i end
    end
    assert.is_truthy(header_at, out)
    assert.matches("^%-%-%-%-%-  ", lines[header_at + 1])
    assert.matches("^    1  cpu      f32 reference +[%d.]+ .* ok$", lines[header_at + 2])
    assert.matches("^    2  cpu      f32 reference +[%d.]+ .* ok$", lines[header_at + 3])

    -- the CPU section: both batches at the default thread count, checked against the f64 reference
    assert.matches("\nCPU section: %w+ vectors, %d+ CPUs? this process may use", out)
    local doc = report.json_decode(read_file(json))
    assert.are.equal(2, #doc.cpu.rows)
    for i, r in ipairs(doc.cpu.rows) do
      assert.are.equal(i, r.batch)
      assert.is_true(r.f32_ms > 0 and r.f64_ms > 0 and r.rel_l2 > 0 and r.rel_l2 < 1e-4)
    end
    assert.are.equal(2, #doc.rows)
    assert.are.equal(4, doc.settings.steps)
    assert.are.equal("string", type(doc.environment.date))
    for i, r in ipairs(doc.rows) do
      assert.are.equal(i, r.batch)
      assert.are.equal("cpu", r.backend)
      assert.are.equal(2, #r.samples)
      assert.is_true(r.median_ms > 0 and r.rel_l2 > 0 and r.rel_l2 < 1e-4)
      assert.is_true(r.bound_ok)
    end

    local rows, header = parse_csv(read_file(csv))
    assert.are.equal("batch", header[1])
    assert.are.equal(2, #rows)
    for i, r in ipairs(rows) do
      assert.are.equal(tostring(i), r.batch)
      assert.are.equal("f32 reference", r.variant)
      assert.are.equal(doc.rows[i].median_ms, tonumber(r.median_ms))
      assert.are.equal(doc.rows[i].rel_l2, tonumber(r.rel_l2))
      assert.are.equal("true", r.bound_ok)
      assert.are.equal("", r.error)
    end
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("exits 1 naming the cause when the JSON file cannot be written", function()
    local _, err, code = run_spk { "bench", "--backends", "cpu", "--batches", "1", "--steps", "2", "--hidden", "8",
                                   "--layers", "1", "--input", "3", "--rounds", "1", "--warmup", "0",
                                   "--json", "/nonexistent-dir/x.json" }
    assert.are.equal(1, code)
    assert.matches("report.json: /nonexistent-dir/x.json: cannot create: No such file or directory", err, 1, true)
  end)

  do
    nogpu_it("exits 3 (no GPU) unless only the cpu backend is asked for", function()
      local out, err, code = run_spk { "bench", "--batches", "1", "--steps", "2" }
      assert.are.equal(3, code)
      assert.are.equal("", out)
      assert.matches("spk bench: backends persistent, cudnn need a CUDA GPU: .*no CUDA device.*Nothing was run", err)
    end)
  end

  it("--kernel FILE runs a kernel of one's own as a backend; a bad kernel file is a usage error", function()
    local _, err, code = run_spk { "bench", "--kernel", "tests/fixtures/kernels/none.lua", "--backends", "cpu" }
    assert.are.equal(2, code)
    assert.matches("spk bench: %-%-kernel: .*none%.lua", err)
    if spk.cuda.available() then return end
    local out
    out, err, code = run_spk { "bench", "--kernel", "experiments/kernels/row_block.lua", "--backends", "cpu",
                               "--batches", "1", "--steps", "2" }
    assert.are.equal(3, code)
    assert.are.equal("", out)
    assert.matches("backend row_block needs a CUDA GPU: .*no CUDA device", err)
  end)

  gpu_it("--kernel: the kernel's rows beside cuDNN's, in bounds, in the table", function()
    local dir = spec_tmpdir()
    local json = dir .. "/rows.json"
    local out, err, code = run_spk { "bench", "--kernel", "experiments/kernels/row_block.lua", "--backends", "cudnn",
                                     "--algos", "standard", "--batches", "1,3", "--steps", "40", "--rounds", "2",
                                     "--json", json }
    assert.are.equal(0, code, err)
    assert.matches("row_block", out)
    assert.matches("kernels of one's own", out)
    local doc = report.json_decode(read_file(json))
    local seen = 0
    for _, r in ipairs(doc.rows) do
      if r.backend == "row_block" then
        seen = seen + 1
        assert.is_nil(r.error, r.error)
        assert.is_true(r.bound_ok, ("batch %d: rel_l2 %s, bound %s"):format(r.batch, r.rel_l2, r.bound))
      end
    end
    assert.are.equal(2, seen)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  gpu_it("runs --batches 1,32 --rounds 3 end to end with every cuDNN algorithm within 1e-4", function()
    local dir = spec_tmpdir()
    local json = dir .. "/rows.json"
    local out, err, code = run_spk { "bench", "--batches", "1,32", "--rounds", "3", "--json", json }
    assert.are.equal(0, code, err)
    assert.matches("NVIDIA", out)
    local doc = report.json_decode(read_file(json))
    local cudnn_ok, persistent_ok = 0, 0
    for _, r in ipairs(doc.rows) do
      if r.backend == "cudnn" and not r.error then
        cudnn_ok = cudnn_ok + 1
        assert.is_true(r.rel_l2 <= 1e-4, ("cuDNN %s at batch %d: rel_l2 %s"):format(r.variant, r.batch, r.rel_l2))
        assert.is_true(r.bound_ok)
        assert.is_true(r.median_ms > 0 and r.speedup > 0)
      elseif r.backend == "persistent" then
        assert.is_nil(r.error, r.error)
        persistent_ok = persistent_ok + 1
        assert.is_true(r.median_ms > 0 and r.speedup > 0)
      end
    end
    assert.is_true(cudnn_ok >= 2, "at least cuDNN standard at both batches")
    assert.are.equal(2, persistent_ok)
    os.execute("rm -rf " .. shell_quote(dir))
  end)
end)
