-- The tuning record (spk.tuning), backend "auto" and `spk tune`: the key and
-- what changes it, records written and read back, corrupt and stale records
-- ignored with one warning, the nearest-batch lookup on a hand-written
-- record, the documented default; without a GPU, auto on the cpu backend and
-- spk tune's refusal; on a GPU, a record made by spk tune that auto then uses.
local spk = require "spk"
local tuning = require "spk.tuning"
local report = require "spk.report"

local function files_in(dir)
  local p = io.popen("ls -A " .. shell_quote(dir))
  local names = {}
  for line in p:lines() do names[#names + 1] = line end
  p:close()
  table.sort(names)
  return names
end

local function sample_fields()
  return { device = "NVIDIA H200", cc = "9.0", sms = 132, driver = 13000, runtime = 13000, cudnn = 91400,
           kernels = { ["lstm_cell.cuh"] = string.rep("a", 64), ["lstm_cluster.cu"] = string.rep("b", 64) } }
end

local function entry(batch, backend, options, ms, extra)
  local e = { hidden = 128, input = 60, layers = 4, batch = batch, steps = 589, steps_class = 1024,
              winner = { backend = backend, options = options, variant = backend .. " at " .. batch, median_ms = ms },
              candidates = { { backend = backend, options = options, median_ms = ms, eligible = true } } }
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

-- Captures tuning.warn while fn runs; returns the messages.
local function warnings_during(fn)
  local saved, got = tuning.warn, {}
  tuning.warn = function(message) got[#got + 1] = message end
  local ok, err = pcall(fn)
  tuning.warn = saved
  assert(ok, err)
  return got
end

describe("spk.tuning key", function()
  it("hashes with SHA-256 (the FIPS 180-2 test vectors)", function()
    assert.are.equal("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", spk.cuda.sha256("abc"))
    assert.are.equal("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", spk.cuda.sha256(""))
  end)

  it("is the same for the same fields and changes with each field and each kernel hash", function()
    local base = tuning.key(sample_fields())
    assert.matches("^%x+$", base)
    assert.are.equal(64, #base)
    assert.are.equal(base, tuning.key(sample_fields()))
    local changes = { device = "NVIDIA H100 80GB HBM3", cc = "9.1", sms = 114, driver = 12080, runtime = 12080,
                      cudnn = "none" }
    local seen = { [base] = "base" }
    for _, name in ipairs(tuning.key_fields) do
      local f = sample_fields()
      assert.is_not_nil(changes[name], name)
      f[name] = changes[name]
      local k = tuning.key(f)
      assert.is_nil(seen[k], name .. " gives a key already seen (" .. tostring(seen[k]) .. ")")
      seen[k] = name
    end
    local f = sample_fields()
    f.kernels["lstm_cell.cuh"] = string.rep("c", 64)
    assert.are_not.equal(base, tuning.key(f))
    f = sample_fields()
    f.kernels["extra.cuh"] = string.rep("d", 64)
    assert.are_not.equal(base, tuning.key(f))
    f = sample_fields()
    f.kernels["lstm_cluster.cu"] = nil
    assert.are_not.equal(base, tuning.key(f))
  end)

  it("refuses fields without a key field", function()
    local f = sample_fields()
    f.driver = nil
    assert.has_error(function() tuning.key(f) end, "tuning.key: field 'driver' is missing")
  end)

  it("hashes every .cu and .cuh of the kernel folder by content, and nothing else", function()
    local dir = spec_tmpdir()
    write_file(dir .. "/a.cu", "extern \"C\" __global__ void a() {}\n")
    write_file(dir .. "/b.cuh", "#pragma once\n")
    write_file(dir .. "/notes.txt", "not a kernel\n")
    write_file(dir .. "/c.cu.orig", "not a kernel either\n")
    assert.are.same({ "a.cu", "b.cuh" }, spk.cuda.kernel_files(dir))
    local h = tuning.kernel_hashes(dir)
    -- the system's sha256sum as the independent truth
    local p = io.popen("sha256sum " .. shell_quote(dir .. "/a.cu"))
    local expected = p:read("l"):match("^(%x+)")
    p:close()
    assert.are.equal(expected, h["a.cu"])
    assert.is_nil(h["notes.txt"])
    local f = sample_fields()
    f.kernels = h
    local before = tuning.key(f)
    write_file(dir .. "/a.cu", "extern \"C\" __global__ void a() { }\n") -- one space more
    f.kernels = tuning.kernel_hashes(dir)
    assert.are_not.equal(h["a.cu"], f.kernels["a.cu"])
    assert.are.equal(h["b.cuh"], f.kernels["b.cuh"])
    assert.are_not.equal(before, tuning.key(f))
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("hashes the project's own kernel sources", function()
    local h = tuning.kernel_hashes()
    assert.matches("^%x+$", h["lstm_recurrence.cu"] or "")
    assert.matches("^%x+$", h["lstm_cluster.cu"] or "")
    assert.matches("^%x+$", h["lstm_cell.cuh"] or "")
  end)

  it("finds the record folder from the environment", function()
    local print_dir = { "-e", "require('spk'); print(require('spk.tuning').dir())" }
    local out = run_spk(print_dir, { env = { SPK_TUNE_DIR = "/tmp/tune-here" } })
    assert.are.equal("/tmp/tune-here\n", out)
    out = run_spk(print_dir, { env = { SPK_TUNE_DIR = false, XDG_CACHE_HOME = "/tmp/xdg" } })
    assert.are.equal("/tmp/xdg/spk/tune\n", out)
    out = run_spk(print_dir, { env = { SPK_TUNE_DIR = false, XDG_CACHE_HOME = false, HOME = "/tmp/home" } })
    assert.are.equal("/tmp/home/.cache/spk/tune\n", out)
  end)
end)

describe("spk.tuning records", function()
  local dir
  before_each(function() dir = spec_tmpdir() end)
  after_each(function() os.execute("rm -rf " .. shell_quote(dir)) end)

  it("round-trips through the file named by its key, leaving no temporary file", function()
    local fields = sample_fields()
    local record = tuning.new_record(fields, "spk tune --batches 1,8")
    tuning.merge(record, { entry(8, "cluster", { kernel = { tile_rows = 2 } }, 3.08),
                           entry(1, "persistent", { kernel = { units = 4 } }, 2.69) })
    local path = tuning.save(record, dir .. "/sub")
    assert.are.equal(dir .. "/sub/" .. tuning.key(fields) .. ".json", path)
    assert.are.same({ tuning.key(fields) .. ".json" }, files_in(dir .. "/sub"))
    local back = assert(tuning.load(path, fields))
    assert.are.equal("spk tune --batches 1,8", back.command)
    assert.are.same(fields, back.fields)
    assert.are.equal(2, #back.entries)
    assert.are.equal(1, back.entries[1].batch) -- merge sorts by batch
    assert.are.same({ kernel = { units = 4 } }, back.entries[1].winner.options)
    assert.are.same({ kernel = { tile_rows = 2 } }, back.entries[2].winner.options)
    assert.are.equal(3.08, back.entries[2].winner.median_ms)
    local found, found_path = tuning.find(fields, dir .. "/sub")
    assert.are.equal(path, found_path)
    assert.are.same(back.entries, found.entries)
  end)

  it("merge replaces the entry of the same shape and batch and keeps the others", function()
    local record = tuning.new_record(sample_fields())
    tuning.merge(record, { entry(1, "persistent", {}, 3.0), entry(8, "persistent", {}, 5.0) })
    tuning.merge(record, { entry(8, "cluster", {}, 3.1), entry(8, "cluster", {}, 9.9, { hidden = 64 }) })
    assert.are.equal(3, #record.entries)
    local at8
    for _, e in ipairs(record.entries) do
      if e.batch == 8 and e.hidden == 128 then at8 = e end
    end
    assert.are.equal("cluster", at8.winner.backend)
  end)

  it("ignores a corrupt record with one warning", function()
    local fields = sample_fields()
    local path = tuning.path(tuning.key(fields), dir)
    write_file(path, "{\"format\": 1, \"entries\": [")
    local results = {}
    local got = warnings_during(function()
      results[1] = { tuning.find(fields, dir) }
      results[2] = { tuning.find(fields, dir) }
    end)
    assert.is_nil(results[1][1])
    assert.matches("ignored: not valid JSON", results[1][2])
    assert.is_nil(results[2][1])
    assert.are.equal(1, #got)
    assert.matches("ignoring the tuning record " .. path:gsub("%p", "%%%0") .. ": not valid JSON", got[1])
    -- and auto's choice falls back to the default, saying why
    local choice
    got = warnings_during(function()
      choice = tuning.choose({ hidden = 128, input = 60, layers = 4, batch = 8, steps = 589 },
        { facts = fields, dir = dir })
    end)
    assert.are.equal(0, #got) -- already warned about this file
    assert.are.equal("default", choice.source)
    assert.matches("ignored", choice.reason)
  end)

  it("ignores a stale record (key fields differ) with one warning naming the difference", function()
    local fields = sample_fields()
    local other = sample_fields()
    other.driver = 12080
    local record = tuning.new_record(other, "spk tune")
    tuning.merge(record, { entry(8, "cluster", {}, 3.1) })
    local old = tuning.save(record, dir)
    -- the file of the current key holding the other fields' record
    local path = tuning.path(tuning.key(fields), dir)
    assert(os.rename(old, path))
    local found, why
    local got = warnings_during(function() found, why = tuning.find(fields, dir) end)
    assert.is_nil(found)
    assert.matches("stale", why)
    assert.are.equal(1, #got)
    assert.matches("driver 12080 vs 13000", got[1])
    -- with its own fields it loads
    assert.is_not_nil(tuning.load(path, other))
  end)

  it("rejects files that are JSON but no record, or whose key does not match its fields", function()
    local path = dir .. "/x.json"
    write_file(path, "[1, 2]")
    local r, why = tuning.load(path)
    assert.is_nil(r)
    assert.matches("not a tuning record", why)
    local record = tuning.new_record(sample_fields())
    record.key = string.rep("0", 64)
    write_file(path, report.json_encode(record))
    r, why = tuning.load(path)
    assert.is_nil(r)
    assert.matches("key does not match", why)
  end)

  it("fails to save where the folder cannot be made", function()
    write_file(dir .. "/file", "x")
    assert.has_error(function() tuning.save(tuning.new_record(sample_fields()), dir .. "/file/sub") end)
  end)
end)

describe("spk.tuning lookup", function()
  local record = { entries = {
    entry(1, "persistent", { kernel = { units = 4 } }, 2.7),
    entry(8, "cluster", { kernel = { tile_rows = 2 } }, 3.1),
    entry(16, "cluster", {}, 4.0, { winner = false }), -- no eligible candidate: never chosen
    entry(64, "cluster", { kernel = { tile_rows = 8 } }, 9.3),
    entry(32, "persistent", {}, 1.0, { hidden = 64 }),
    entry(32, "persistent", {}, 1.0, { steps = 100, steps_class = 128 }),
  } }
  local function at(batch, steps, hidden)
    return tuning.lookup(record, { hidden = hidden or 128, input = 60, layers = 4, batch = batch, steps = steps or 589 })
  end

  it("classes steps by the smallest power of two at or above them", function()
    assert.are.equal(1, tuning.steps_class(1))
    assert.are.equal(1024, tuning.steps_class(589))
    assert.are.equal(1024, tuning.steps_class(1024))
    assert.are.equal(2048, tuning.steps_class(1025))
  end)

  it("takes the nearest tuned batch at or above the requested one, else the largest", function()
    local expected = { [1] = 1, [2] = 8, [5] = 8, [8] = 8, [9] = 64, [16] = 64, [64] = 64, [65] = 64, [1000] = 64 }
    for batch, tuned in pairs(expected) do
      local e, rule = at(batch)
      assert.are.equal(tuned, e.batch, "batch " .. batch)
      if batch > 64 then
        assert.matches("largest tuned batch", rule)
      elseif batch ~= tuned then
        assert.matches("nearest tuned batch >= " .. batch, rule)
      end
    end
    assert.are.equal(64, at(9, 600).batch) -- same steps class as 589
  end)

  it("finds nothing for another shape or steps class", function()
    local e, why = at(8, 589, 256)
    assert.is_nil(e)
    assert.matches("no entry for hidden 256", why)
    assert.is_nil((at(8, 2000)))
    assert.are.equal(32, at(8, 100).batch) -- the class-128 entry
  end)
end)

describe("spk.tuning choice", function()
  local shape = { hidden = 128, input = 60, layers = 4, batch = 8, steps = 589 }

  it("follows the documented default where no record applies", function()
    local dir = spec_tmpdir()
    local hopper = sample_fields()
    local c = tuning.choose(shape, { facts = hopper, dir = dir })
    assert.are.equal("default", c.source)
    assert.are.equal("cluster", c.backend)
    assert.is_nil(c.record)
    assert.matches("no tuning record", c.reason)
    local big = tuning.choose({ hidden = 128, input = 60, layers = 4, batch = 256, steps = 589 },
      { facts = hopper, dir = dir })
    assert.are.equal("tensor_core", big.backend)
    assert.are.same({}, big.options) -- the tensor-core plan's own per-batch table
    assert.matches("fastest on the H200 at batch 256", big.reason)
    local edge = tuning.choose({ hidden = 128, input = 60, layers = 4, batch = 128, steps = 589 },
      { facts = hopper, dir = dir })
    assert.are.equal("cluster", edge.backend)
    assert.matches("fastest on the H200 at batch 1..128", edge.reason)
    local huge = tuning.choose({ hidden = 128, input = 60, layers = 4, batch = 257, steps = 589 },
      { facts = hopper, dir = dir })
    assert.are.equal("persistent", huge.backend)
    assert.matches("above batch 256", huge.reason)
    local mid = tuning.choose({ hidden = 128, input = 60, layers = 4, batch = 64, steps = 589 },
      { facts = hopper, dir = dir })
    assert.are.equal("cluster", mid.backend)
    local ampere = sample_fields()
    ampere.cc = "8.0"
    c = tuning.choose(shape, { facts = ampere, dir = dir })
    assert.are.equal("persistent", c.backend)
    assert.matches("compute capability 8.0", c.reason)
    c = tuning.choose(shape, { facts = false, why = "spk.cuda: no CUDA device (none here)" })
    assert.are.equal("cpu", c.backend)
    assert.are.equal("default", c.source)
    assert.matches("no CUDA device", c.reason)
    assert.matches("none here", c.reason)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("takes the record's winner for its device, with the rule in the reason", function()
    local dir = spec_tmpdir()
    local fields = sample_fields()
    local record = tuning.new_record(fields, "spk tune")
    tuning.merge(record, { entry(1, "persistent", { kernel = { units = 4 } }, 2.69),
                           entry(32, "persistent", { kernel = { units = 16 } }, 6.5) })
    local path = tuning.save(record, dir)
    local c = tuning.choose(shape, { facts = fields, dir = dir })
    assert.are.equal("record", c.source)
    assert.are.equal(path, c.record)
    assert.are.equal("persistent", c.backend)
    assert.are.same({ kernel = { units = 16 } }, c.options)
    assert.are.equal(32, c.tuned_batch)
    assert.matches("nearest tuned batch >= 8", c.reason)
    -- another driver: another key, so no record
    fields.driver = 12080
    c = tuning.choose(shape, { facts = fields, dir = dir })
    assert.are.equal("default", c.source)
    -- a shape the record lacks: the default, saying so
    fields.driver = 13000
    c = tuning.choose({ hidden = 64, input = 60, layers = 4, batch = 8, steps = 589 }, { facts = fields, dir = dir })
    assert.are.equal("default", c.source)
    assert.matches("no entry for hidden 64", c.reason)
    os.execute("rm -rf " .. shell_quote(dir))
  end)
end)

describe("backend auto", function()
  local layers = spk.lstm.random { layers = 2, input = 3, hidden = 4, seed = 7 }

  it("is registered and checks its options", function()
    assert.is_function(spk.lstm.backends.auto)
    assert.has_error(function() spk.lstm.stack { backend = "auto", layers = layers, batch = 1, steps = 2, units = 4 } end,
      "spk.lstm.stack (auto): unknown option 'units'")
    assert.has_error(function() spk.lstm.stack { backend = "auto", layers = layers, batch = 0, steps = 2 } end,
      "spk.lstm.stack (auto): batch must be a positive integer, got 0")
    assert.has_error(function() spk.lstm.auto_choice { layers = {}, batch = 1, steps = 2 } end,
      "spk.lstm.stack (auto): layers must be a non-empty list of {W =, R =, B =}")
  end)

  do
    nogpu_it("picks the cpu backend without a GPU, says so, and computes what the cpu backend computes", function()
      local plan = spk.lstm.stack { backend = "auto", layers = layers, batch = 2, steps = 5 }
      assert.are.equal("cpu", plan.backend)
      assert.are.same("cpu", plan.auto.backend)
      assert.are.equal("default", plan.auto.source)
      assert.is_nil(plan.auto.record)
      assert.matches("no CUDA device", plan.auto.reason)
      local x = spk.randn({ 2, 5, 3 }, { seed = 3 })
      local cpu = spk.lstm.stack { backend = "cpu", layers = layers, batch = 2, steps = 5 }
      local c = spk.compare(plan:forward(x), cpu:forward(x))
      assert.are.equal(0, c.max_abs)
      local choice = spk.lstm.auto_choice { layers = layers, batch = 2, steps = 5 }
      assert.are.equal("cpu", choice.backend)
      plan:close()
      assert.is_true(plan:is_closed())
    end)
  end

  gpu_it("builds the documented default where no record exists, and names it", function()
    local dir = spec_tmpdir()
    local big = spk.lstm.random { layers = 1, input = 60, hidden = 128, seed = 1 }
    local plan = spk.lstm.stack { backend = "auto", layers = big, batch = 4, steps = 16, tune_dir = dir }
    local facts = assert(tuning.facts())
    local expected = tuning.default_choice(facts, 4).backend
    assert.are.equal("default", plan.auto.source)
    assert.are.equal(expected, plan.auto.backend)
    assert.are.equal(expected, plan.backend)
    local x = spk.randn({ 4, 16, 60 }, { seed = 1 })
    local ref = spk.lstm.reference(big, x, { precision = "f64" })
    assert.is_true(spk.compare(plan:forward(x), ref).rel_l2 < 1e-5)
    plan:close()
    os.execute("rm -rf " .. shell_quote(dir))
  end)
end)

describe("spk tune", function()
  it("prints its usage with --help and exits 0", function()
    local out, _, code = run_spk { "tune", "--help" }
    assert.are.equal(0, code)
    assert.matches("usage: spk tune", out)
    assert.matches("%-%-candidates", out)
  end)

  it("exits 2 on bad arguments", function()
    local _, err, code = run_spk { "tune", "--batches", "0" }
    assert.are.equal(2, code)
    assert.matches("%-%-batches: '0' is not an integer >= 1", err)
    _, err, code = run_spk { "tune", "--candidates", "persistent,magic" }
    assert.are.equal(2, code)
    assert.matches("unknown candidate 'magic'", err)
    _, err, code = run_spk { "tune", "--frobnicate" }
    assert.are.equal(2, code)
    assert.matches("unknown argument '%-%-frobnicate'", err)
  end)

  it("lists the candidates per batch with --dry-run and measures nothing", function()
    local dir = spec_tmpdir()
    local out, _, code = run_spk { "tune", "--dry-run", "--batches", "1,8", "--math", "fp32", "--dir", dir }
    assert.are.equal(0, code)
    -- 4 cuDNN, persistent default and units 4/8/16, cluster default and tile 1 five ways, tensor_core's
    -- default (FP16x3, mma.sync, the reference cell at batch 1) and the split, product and cell
    -- forms it does not take
    assert.matches("batch 1: 19 variants", out)
    assert.matches("tensor_core %(defaults%); tensor_core %(split tf32%); tensor_core %(mma wgmma%); "
      .. "tensor_core %(cell trimmed%); tensor_core %(cell fused%)", out)
    assert.is_nil(out:match("tensor_core %(mma sync%)"))
    assert.is_nil(out:match("tensor_core %(cell reference%)"))
    assert.matches("cluster %(tile_rows 1%); cluster %(tile_rows 1, push scalar%)", out)
    assert.matches("cluster %(tile_rows 1, push direct, cluster 8, threads 128, gate_block 1, gates_ahead 1, "
      .. "row_phases 1%)", out)
    assert.matches("cluster %(tile_rows 1, push direct, cluster 4, threads 128, gate_block 4, gates_ahead 3, "
      .. "row_phases 1%)", out)
    assert.matches("cluster %(tile_rows 1, push direct, cluster 2, threads 256, gate_block 4, gates_ahead 3, "
      .. "row_phases 1%)", out)
    assert.matches("persistent %(defaults%)", out)
    assert.matches("persistent %(units 16%)", out)
    assert.matches("cluster %(tile_rows 8, push direct, cluster 2, threads 256, gate_block 4, gates_ahead 3, "
      .. "row_phases 2%)", out)
    assert.is_nil(out:match("tile_rows [12], push direct, cluster 2, threads 256, gate_block 4, gates_ahead 3, "
      .. "row_phases 2"))
    assert.matches("batch 8: 36 variants: .*cluster %(tile_rows 8%); cluster %(tile_rows 8, push scalar%)", out)
    assert.is_nil(out:match("tile_rows 16"))
    assert.are.same({}, files_in(dir))
    -- by default every kernel variant also with split-TF32 projections; cuDNN in FP32 alone
    out, _, code = run_spk { "tune", "--dry-run", "--batches", "1", "--dir", dir }
    assert.are.equal(0, code)
    assert.matches("kernel maths: fp32, 3xtf32", out)
    assert.matches("batch 1: 34 variants", out)
    assert.matches("persistent %(units 16, 3xtf32 projections%)", out)
    assert.matches("cluster %(tile_rows 1, push scalar, 3xtf32 projections%)", out)
    assert.is_nil(out:match("cudnn %(algo [%w_]+, 3xtf32"))
    local _, err
    _, err, code = run_spk { "tune", "--dry-run", "--math", "fp32,tf32" }
    assert.are.equal(2, code)
    assert.matches("%-%-math: unknown math 'tf32' %(known: 3xtf32, fp32%)", err)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("records the faster FP32-accuracy math with the winner (made-up measurements)", function()
    local benchmark = require "spk.benchmark"
    local dir = spec_tmpdir()
    local saved_run, saved_facts = benchmark.run, tuning.facts
    local maths_seen = {}
    benchmark.run = function(opts)
      local rows = {}
      for _, b in ipairs(opts.backends) do
        for i, v in ipairs(opts.variants[b]) do
          local row = { batch = opts.batches[1], steps = opts.steps, backend = b, algo = v.algo, math = v.math,
                        variant = b .. " " .. i, bound_ok = true, rel_l2 = 1e-7 }
          maths_seen[v.math or "fp32"] = true
          -- split-TF32 projections 10 % faster than FP32's, cuDNN slowest
          row.median_ms = b == "cudnn" and 20 or (v.math == "3xtf32" and 9 or 10) + i / 100
          rows[#rows + 1] = row
        end
      end
      return rows, {}
    end
    tuning.facts = function() return sample_fields() end
    local written = {}
    local ok, code = pcall(require "spk.cli.tune", { "--batches", "64", "--rounds", "1", "--dir", dir,
                                                     "--candidates", "cluster,cudnn" },
      { write = function(s) written[#written + 1] = s end, progress = function() end })
    benchmark.run, tuning.facts = saved_run, saved_facts
    assert(ok, code)
    assert.are.equal(0, code)
    assert.are.same({ fp32 = true, ["3xtf32"] = true }, maths_seen)
    local path = table.concat(written):match("record: (%S+)")
    local record = assert(tuning.load(path, sample_fields()))
    local w = record.entries[1].winner
    assert.are.equal("cluster", w.backend)
    assert.are.equal("3xtf32", w.math)
    assert.is_nil(w.options.math) -- the math beside the options, never in them
    assert.matches("3xtf32 projections", table.concat(written))
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("records the fastest FP32-strict candidate within its bound (made-up measurements)", function()
    local benchmark = require "spk.benchmark"
    local dir = spec_tmpdir()
    -- per variant: median ms, whether it passed its bound, math, error
    local made_up = {
      cudnn = { 10.0, 9.0, 12.0, 11.0 },
      persistent = { { 6.0, true }, { 5.0, true }, { 4.0, false }, { nil, nil, nil, "too little device capacity" } },
      cluster = { { 6.0, true }, { 3.0, true, "tf32" }, { 5.5, true }, { 7.0, true }, { 7.5, true }, { 8.0, true },
                  { 9.0, true }, { 9.5, true }, { 9.8, true }, { 9.9, true }, { 9.95, true } },
      -- default; tile 1 plain, lanes, direct, gate blocks at cluster 4 and 2; tile 2 the same
      -- default; split tf32; mma wgmma; cell trimmed; cell fused
      tensor_core = { { 8.0, true }, { 3.5, false }, { 8.6, true }, { 8.1, true }, { 8.2, true } },
    }
    local seen_bounds, batches_run
    local saved_run, saved_facts = benchmark.run, tuning.facts
    benchmark.run = function(opts)
      seen_bounds, batches_run = opts.bounds, (batches_run or 0) + 1
      local rows = {}
      for _, b in ipairs(opts.backends) do
        for i, v in ipairs(opts.variants[b]) do
          local m = made_up[b][i]
          local row = { batch = opts.batches[1], steps = opts.steps, backend = b, algo = v.algo,
                        variant = b .. " " .. i }
          if b == "cudnn" then
            row.median_ms, row.bound_ok, row.rel_l2 = m, true, 4e-6
          else
            row.median_ms, row.bound_ok, row.math, row.error, row.rel_l2 = m[1], m[2], m[3], m[4], 1e-7
          end
          rows[#rows + 1] = row
        end
      end
      local speedups = benchmark.speedups(rows)
      for i, r in ipairs(rows) do r.speedup = speedups[i] end
      return rows, {}
    end
    tuning.facts = function() return sample_fields() end
    local written = {}
    local ok, code = pcall(require "spk.cli.tune", { "--batches", "2", "--rounds", "1", "--dir", dir, "--math", "fp32" },
      { write = function(s) written[#written + 1] = s end, progress = function() end })
    benchmark.run, tuning.facts = saved_run, saved_facts
    assert(ok, code)
    assert.are.equal(0, code)
    assert.are.equal(1, batches_run)
    assert.are.equal(benchmark.bounds.persistent, seen_bounds.cluster) -- cluster held to the persistent bound
    local out = table.concat(written)
    local path = out:match("record: (%S+)")
    assert.are.equal(tuning.path(tuning.key(sample_fields()), dir), path)
    assert.matches("persistent +units 4 +5%.000 +9%.000", out)
    local record = assert(tuning.load(path, sample_fields()))
    local e = record.entries[1]
    assert.are.equal(2, e.batch)
    -- 4 ms failed its bound, 3 ms is tf32, cuDNN is no candidate by default: persistent u4 at 5 ms wins
    -- (over the persistent default at 6 ms)
    assert.are.equal("persistent", e.winner.backend)
    assert.are.same({ kernel = { units = 4 } }, e.winner.options)
    assert.are.equal(5.0, e.winner.median_ms)
    assert.are.equal(9.0, e.cudnn_best.median_ms)
    assert.are.equal(1.8, e.winner.speedup)
    assert.are.equal(4 + 4 + 11 + 5, #e.candidates)
    local eligible = 0
    for _, c in ipairs(e.candidates) do if c.eligible then eligible = eligible + 1 end end
    -- the persistent default, u4, every cluster row but the tf32 one, and tensor_core's four within their bound
    assert.are.equal(16, eligible)
    assert.are.equal("too little device capacity", e.candidates[8].error)
    -- where the record came from: the build, the command, the machine and the run, above the table too
    assert.matches("^spk [^\n]+, commit " .. spk.version.commit, out)
    local f = assert(io.open(path))
    local record_text = f:read("a")
    f:close()
    local p = assert_provenance(record_text, "the tuning record", { seeds = { weights = 1, input = 1 },
      dtype = "f32", math = { "fp32" }, candidates = { "persistent", "cluster", "tensor_core" } })
    assert.are.same({ "cudnn", "persistent", "cluster", "tensor_core" }, p.run.backends)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  do
    nogpu_it("exits 3 (no GPU) without a GPU, saying why, and writes nothing", function()
      local dir = spec_tmpdir()
      local out, err, code = run_spk({ "tune", "--batches", "1" }, { env = { SPK_TUNE_DIR = dir } })
      assert.are.equal(3, code)
      assert.are.equal("", out)
      assert.matches("no CUDA device", err)
      assert.matches("needs a CUDA GPU", err)
      assert.matches("Nothing was run", err)
      assert.are.same({}, files_in(dir))
      os.execute("rm -rf " .. shell_quote(dir))
    end)
  end

  gpu_it("--batches 1 --rounds 2 writes a record that backend auto then uses", function()
    local dir = spec_tmpdir()
    local out, err, code = run_spk({ "tune", "--batches", "1", "--rounds", "2" }, { env = { SPK_TUNE_DIR = dir } })
    assert.are.equal(0, code, err)
    local path = out:match("record: (%S+)")
    assert.is_not_nil(path, out)
    local facts = assert(tuning.facts())
    assert.are.equal(tuning.path(tuning.key(facts), dir), path)
    local record = assert(tuning.load(path, facts))
    assert.are.equal("spk tune --batches 1 --rounds 2", record.command)
    assert.are.equal(1, #record.entries)
    local e = record.entries[1]
    assert.are.equal(1, e.batch)
    assert.are.equal(1024, e.steps_class)
    assert.is_table(e.winner, "no candidate passed its bound")
    assert.is_true(e.winner.backend == "persistent" or e.winner.backend == "cluster")
    -- the winner is the fastest eligible candidate, and it passed its bound
    for _, c in ipairs(e.candidates) do
      if c.eligible then
        assert.is_true(c.bound_ok)
        assert.is_true(e.winner.median_ms <= c.median_ms)
      end
    end
    local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
    local plan = spk.lstm.stack { backend = "auto", layers = layers, batch = 1, steps = 589, tune_dir = dir }
    assert.are.equal("record", plan.auto.source)
    assert.are.equal(path, plan.auto.record)
    assert.are.equal(e.winner.backend, plan.auto.backend)
    assert.are.equal(e.winner.backend, plan.backend)
    assert.are.equal(1, plan.auto.tuned_batch)
    local x = spk.randn({ 1, 589, 60 }, { seed = 1 })
    local ref = spk.lstm.reference(layers, x, { precision = "f64" })
    assert.is_true(spk.compare(plan:forward(x), ref).rel_l2 < 1e-5)
    plan:close()
    os.execute("rm -rf " .. shell_quote(dir))
  end)
end)
