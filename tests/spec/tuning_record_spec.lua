-- The tuning record cannot change the computation: records are checked
-- against one schema (lua/spk/tuning.lua: types, ranges, the backends
-- spk.lstm.tunables knows and the options each lets a record choose, checked
-- by the backend's own option checks), a record never sets what the script
-- gave, and an invalid record gives one warning and the documented default.
-- The committed fuzz corpus (tests/fuzz/corpus/tuning_record, for the device
-- of sample_fields below) holds a valid and an invalid file of each kind; the
-- fuzz target replays it here too.
local spk = require "spk"
local tuning = require "spk.tuning"
local report = require "spk.report"

local CORPUS = "tests/fuzz/corpus/tuning_record"

local function sample_fields()
  return { device = "NVIDIA H200", cc = "9.0", sms = 132, driver = 13000, runtime = 13000, cudnn = 91400,
           kernels = { ["lstm_cell.cuh"] = string.rep("a", 64), ["lstm_cluster.cu"] = string.rep("b", 64) } }
end

local function corpus_files()
  local p = io.popen("ls " .. CORPUS)
  local out = {}
  for name in p:lines() do out[#out + 1] = name end
  p:close()
  table.sort(out)
  return out
end

local function warnings_during(fn)
  local saved, got = tuning.warn, {}
  tuning.warn = function(message) got[#got + 1] = message end
  local ok, err = pcall(fn)
  tuning.warn = saved
  assert(ok, err)
  return got
end

local function record_with(winner, extra)
  local r = tuning.new_record(sample_fields(), "spk tune")
  local e = { hidden = 128, input = 60, layers = 4, batch = 8, steps = 589, steps_class = 1024, winner = winner }
  for k, v in pairs(extra or {}) do e[k] = v end
  r.entries = { e }
  return r
end

local SHAPE = { hidden = 128, input = 60, layers = 4, batch = 8, steps = 589 }

describe("the tuning record's schema", function()
  it("the corpus: every valid file decodes, every invalid one is refused naming its problem", function()
    local expected = {
      bad_array = "not a tuning record of format 1", bad_backend_auto = 'winner.backend must be one of .*"auto"',
      bad_backend_path = 'winner.backend must be one of cluster, cpu, cudnn, persistent, tensor_core, got "%.%./%.%./etc"',
      bad_batch_negative = "batch must be an integer in 1 .. %d+, got %-8",
      bad_cudnn_algo = "backend cudnn takes: algo must be one of", bad_entry_field = 'has no field "layers_out"',
      bad_format = "format must be 1, got 2", bad_kernel_huge = "kernel.threads must be an integer in 1 .. 1048576",
      bad_kernel_range = "kernel.tile_rows must be 0 .. 32 %(.-%), got 99",
      bad_kernel_type = 'kernel.tile_rows must be an integer in 1 .. 1048576, got "2"',
      bad_kernel_unknown = 'kernel has no option "unroll"', bad_key = "key does not match",
      bad_median_string = 'winner.median_ms must be a positive number, got "abc"', bad_not_json = "not valid JSON",
      bad_options_math = 'options has no field "math"', bad_options_override_shape = 'options has no field "',
      bad_steps_class = "steps_class must be 1024",
      bad_winner_math = "winner.math must be a math of FP32's accuracy %(3xtf32, fp32%), got \"tf32\"",
      bad_winner_math_backend = 'winner.math: backend cudnn has no math "3xtf32"',
    }
    local valid, invalid = 0, 0
    for _, name in ipairs(corpus_files()) do
      local base = name:match("^(.-)%.json$")
      local record, why = tuning.decode(read_file(CORPUS .. "/" .. name))
      if base:match("^valid_") then
        assert(record, name .. ": " .. tostring(why))
        valid = valid + 1
      else
        assert.is_nil(record, name)
        assert(expected[base], "no expected reason for " .. name .. " (" .. tostring(why) .. ")")
        assert.matches(expected[base], why, 1)
        invalid = invalid + 1
      end
    end
    assert.are.equal(5, valid)
    assert.are.equal(19, invalid)
    -- a record from before tile_rows was split is valid, and says it was migrated
    local migrated = tuning.decode(read_file(CORPUS .. "/valid_migrated_tile_rows.json"))
    assert.matches("^entries%[1%]%.winner%.options%.kernel%.tile_rows read as max_tile_rows", migrated.migrated[1])
    assert.are.equal(4, migrated.entries[1].winner.options.kernel.max_tile_rows)
  end)

  it("an invalid record gives one warning naming the file and the problem, and the documented default", function()
    local empty = spec_tmpdir()
    local default = tuning.choose(SHAPE, { facts = sample_fields(), dir = empty })
    os.execute("rm -rf " .. shell_quote(empty))
    for _, name in ipairs(corpus_files()) do
      if name:match("^bad_") then
        local dir = spec_tmpdir()
        local path = tuning.path(tuning.key(sample_fields()), dir)
        write_file(path, read_file(CORPUS .. "/" .. name))
        local choices = {}
        local got = warnings_during(function()
          for i = 1, 3 do choices[i] = tuning.choose(SHAPE, { facts = sample_fields(), dir = dir }) end
        end)
        assert.are.equal(1, #got, name)
        assert.matches("ignoring the tuning record " .. path:gsub("%p", "%%%0"), got[1])
        for _, c in ipairs(choices) do
          assert.are.equal("default", c.source, name)
          assert.are.equal(default.backend, c.backend, name)
          assert.are.same(default.options, c.options, name)
          assert.matches("ignored", c.reason)
        end
        os.execute("rm -rf " .. shell_quote(dir))
      end
    end
  end)

  it("a record never sets the shape, the math or the backend's other options", function()
    for _, options in ipairs { { layers = 1 }, { batch = 2 }, { steps = 3 }, { math = "tf32" }, { backend = "cpu" },
                               { tune_dir = "/" }, { kernel = { units = 4 }, timeout_ms = 1 }, { threads = 4 } } do
      local ok, why = tuning.check_record(record_with({ backend = "persistent", options = options, median_ms = 1 }))
      assert.is_nil(ok)
      assert.matches("options", why)
    end
    -- per backend: a persistent kernel table, a cluster kernel table, cuDNN's algo and layout
    assert.is_true(tuning.check_record(record_with({ backend = "persistent", options = { kernel = { units = 8 } },
                                                     median_ms = 1 })))
    assert.is_true(tuning.check_record(record_with({ backend = "cluster", options = { kernel = { tile_rows = 2 } },
                                                     median_ms = 1 })))
    assert.is_true(tuning.check_record(record_with({ backend = "cudnn", options = { algo = "standard",
                                                                                    layout = "seq_major" },
                                                     median_ms = 1 })))
    local ok, why = tuning.check_record(record_with({ backend = "cudnn", options = { kernel = { units = 8 } },
                                                     median_ms = 1 }))
    assert.is_nil(ok)
    assert.matches("not an option a record chooses for backend cudnn", why)
    ok, why = tuning.check_record(record_with({ backend = "persistent", options = { algo = "standard" },
                                                median_ms = 1 }))
    assert.is_nil(ok)
    assert.matches("not an option a record chooses for backend persistent", why)
  end)

  it("a winner may carry a math of FP32's accuracy that its backend has, beside its options", function()
    for _, m in ipairs { "fp32", "3xtf32" } do
      assert.is_true(tuning.check_record(record_with({ backend = "cluster", options = {}, math = m, median_ms = 1 })))
    end
    assert.are.same({ "3xtf32", "fp32" }, tuning.fp32_maths())
    local ok, why = tuning.check_record(record_with({ backend = "cluster", options = {}, math = "tf32", median_ms = 1 }))
    assert.is_nil(ok)
    assert.matches("winner.math must be a math of FP32's accuracy %(3xtf32, fp32%)", why)
    ok, why = tuning.check_record(record_with({ backend = "cudnn", options = { algo = "standard" }, math = "3xtf32",
                                               median_ms = 1 }))
    assert.is_nil(ok)
    assert.matches('winner.math: backend cudnn has no math "3xtf32"', why)
    ok, why = tuning.check_record(record_with({ backend = "cluster", options = {}, math = 3, median_ms = 1 }))
    assert.is_nil(ok)
  end)

  it("reads a record written before max_tile_rows: the persistent tile_rows migrated, with a note", function()
    local r = record_with({ backend = "persistent", options = { kernel = { units = 8, tile_rows = 16 } }, median_ms = 1 },
      { candidates = { { backend = "persistent", options = { kernel = { units = 4, tile_rows = 8 } }, median_ms = 2 },
                       { backend = "cluster", options = { kernel = { tile_rows = 2 } }, median_ms = 3 } } })
    local decoded, why = tuning.decode(report.json_encode(r))
    assert.is_table(decoded, why)
    local e = decoded.entries[1]
    assert.are.same({ units = 8, max_tile_rows = 16 }, e.winner.options.kernel)
    assert.are.same({ units = 4, max_tile_rows = 8 }, e.candidates[1].options.kernel)
    assert.are.same({ tile_rows = 2 }, e.candidates[2].options.kernel) -- the cluster's tile_rows kept its meaning
    assert.are.equal(2, #decoded.migrated)
    assert.matches("entries%[1%]%.winner%.options%.kernel%.tile_rows read as max_tile_rows", decoded.migrated[1])
    -- tuning.find says so once, naming the file
    local dir = spec_tmpdir()
    local path = tuning.path(tuning.key(sample_fields()), dir)
    write_file(path, report.json_encode(r))
    local got = warnings_during(function()
      for _ = 1, 2 do assert.is_table(tuning.find(sample_fields(), dir)) end
    end)
    assert.are.equal(1, #got)
    assert.matches("was migrated on reading", got[1])
    os.execute("rm -rf " .. shell_quote(dir))
    -- a record of this tree has nothing to migrate
    assert.is_nil(tuning.decode(report.json_encode(record_with({ backend = "persistent",
      options = { kernel = { units = 8, max_tile_rows = 16 } }, median_ms = 1 }))).migrated)
  end)

  it("checks the kernel options the way the backend checks them, with types and ranges", function()
    local function persistent(kernel) return tuning.check_record(record_with({ backend = "persistent",
                                                                   options = { kernel = kernel }, median_ms = 1 })) end
    local function cluster(kernel) return tuning.check_record(record_with({ backend = "cluster",
                                                                options = { kernel = kernel }, median_ms = 1 })) end
    assert.is_true(persistent { units = 4, gate_block = 4 })
    assert.is_nil(persistent { units = 3 })                       -- refused by the variant check
    assert.is_nil(persistent { units = "4" })                     -- a string
    assert.is_nil(persistent { units = 4.5 })
    assert.is_nil(persistent { units = (1 << 32) + 4 })           -- would be 4 as an int
    assert.is_nil(persistent { gate_block = true })
    assert.is_nil(persistent { acq_rel = true })                  -- an option the kernel no longer has
    assert.is_true(cluster { cluster = 8, push = "direct", threads = 128, tile_rows = 1 })
    assert.is_nil(cluster { cluster = 8, cell = "lanes", push = "direct" })
    assert.is_nil(cluster { cluster = 3 })
    assert.is_nil(cluster { push = "sideways" })
    assert.is_nil(cluster { math = "tf32" })
    assert.is_nil(cluster { tile_rows = 0 })
  end)

  it("checks every field's type and range, and the steps class", function()
    local function bad(patch)
      local r = record_with({ backend = "persistent", median_ms = 1, rel_l2 = 1e-7, speedup = 2, variant = "v" },
        { rounds = 5, date = "d" })
      patch(r, r.entries[1])
      local ok, why = tuning.check_record(r)
      assert.is_nil(ok)
      return why
    end
    assert.matches("median_ms must be a positive number", bad(function(_, e) e.winner.median_ms = 0 end))
    assert.matches("median_ms must be a positive number", bad(function(_, e) e.winner.median_ms = math.huge end))
    assert.matches("rel_l2 must be a number >= 0", bad(function(_, e) e.winner.rel_l2 = -1 end))
    assert.matches("variant must be a string", bad(function(_, e) e.winner.variant = 3 end))
    assert.matches("layers must be an integer in 1 .. 64", bad(function(_, e) e.layers = 65 end))
    assert.matches("hidden must be an integer", bad(function(_, e) e.hidden = 1.5 end))
    assert.matches("needs the field median_ms", bad(function(_, e) e.winner.median_ms = nil end))
    assert.matches("steps_class must be a power of two", bad(function(_, e) e.steps, e.steps_class = nil, 1000 end))
    assert.matches("fields.sms must be an integer", bad(function(r) r.fields.sms = -1 end))
    assert.matches("fields.cc must be a compute capability", bad(function(r) r.fields.cc = "nine" end))
    assert.matches("kernels has a name that is no kernel source", bad(function(r) r.fields.kernels["../x"] = "a" end))
    assert.matches("entries must be a list", bad(function(r) r.entries = { x = 1 } end))
    assert.matches("has no field \"extra\"", bad(function(r) r.extra = 1 end))
    assert.matches("candidates%[1%].bound_ok must be true or false",
      bad(function(_, e) e.candidates = { { backend = "cudnn", bound_ok = "yes" } } end))
    -- what spk tune writes passes
    assert.is_true(tuning.check_record(record_with({ backend = "persistent", median_ms = 1 })))
    local r = record_with(false)
    assert.is_true(tuning.check_record(r)) -- no candidate passed: no winner
  end)

  it("reads at most MAX_RECORD_BYTES of a file", function()
    local dir = spec_tmpdir()
    local path = dir .. "/big.json"
    local f = assert(io.open(path, "wb"))
    f:write(string.rep(" ", tuning.MAX_RECORD_BYTES + 1))
    f:close()
    local r, why = tuning.load(path)
    assert.is_nil(r)
    assert.matches("larger than the " .. tuning.MAX_RECORD_BYTES // (1024 * 1024) .. " MiB limit", why)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("the fuzz target's corpus replays with its property holding", function()
    local out, err, code = run_spk({ "run", "tests/fuzz/fuzz_tuning_record.lua", "--seconds", "0", CORPUS })
    assert.are.equal(0, code, err)
    assert.matches(("fuzz_tuning_record: %d replayed, 0 mutated .* 0 failures"):format(#corpus_files()), out)
    -- and it mutates from whatever it is given
    local dir = spec_tmpdir()
    write_file(dir .. "/x.json", "{")
    out, err, code = run_spk({ "run", "tests/fuzz/fuzz_tuning_record.lua", "--seconds", "1", "--seed", "7", dir })
    assert.are.equal(0, code, err)
    assert.matches("[1-9]%d* mutated", out)
    os.execute("rm -rf " .. shell_quote(dir))
  end)
end)

describe("backend auto and a record", function()
  local layers = spk.lstm.random { layers = 1, input = 3, hidden = 2, seed = 7 }

  -- auto asks tuning.facts(); here a made-up device whose record says "cpu"
  local function with_facts(fn)
    local saved = tuning.facts
    tuning.facts = function() return sample_fields() end
    local ok, err = pcall(fn)
    tuning.facts = saved
    assert(ok, err)
  end

  it("builds the record's winner with the script's layers, batch, steps and math", function()
    with_facts(function()
      local dir = spec_tmpdir()
      local r = tuning.new_record(sample_fields(), "spk tune")
      r.entries = { { hidden = 2, input = 3, layers = 1, batch = 4, steps = 5, steps_class = 8,
                      winner = { backend = "cpu", options = {}, median_ms = 1.5 } } }
      tuning.save(r, dir)
      local plan = spk.lstm.stack { backend = "auto", layers = layers, batch = 3, steps = 5, tune_dir = dir }
      assert.are.equal("record", plan.auto.source)
      assert.are.equal("cpu", plan.backend)
      assert.are.equal(3, plan.batch)
      assert.are.equal(5, plan.steps)
      assert.are.equal(4, plan.auto.tuned_batch)
      local x = spk.rand({ 3, 5, 3 }, { seed = 1 })
      assert.is_true(spk.allclose(plan:forward(x), (spk.lstm.reference(layers, x, { precision = "f32" }))))
      os.execute("rm -rf " .. shell_quote(dir))
    end)
  end)

  it("builds the record's math where the script gives none, the script's where it does", function()
    with_facts(function()
      local dir = spec_tmpdir()
      local built = {}
      spk.lstm.tunables.fake = function() return true end
      spk.lstm.backends.fake = function(o)
        built[#built + 1] = o.math or "fp32"
        return { backend = "fake", batch = o.batch, steps = o.steps, close = function() end }
      end
      local ok, err = pcall(function()
        local r = tuning.new_record(sample_fields(), "spk tune")
        r.entries = { { hidden = 2, input = 3, layers = 1, batch = 4, steps = 5, steps_class = 8,
                        winner = { backend = "fake", options = {}, math = "3xtf32", median_ms = 1.5 } } }
        tuning.save(r, dir)
        local c = spk.lstm.auto_choice { layers = layers, batch = 3, steps = 5, tune_dir = dir }
        assert.are.equal("3xtf32", c.math)
        assert.matches("math 3xtf32", c.reason)
        spk.lstm.stack { backend = "auto", layers = layers, batch = 3, steps = 5, tune_dir = dir }
        spk.lstm.stack { backend = "auto", layers = layers, batch = 3, steps = 5, tune_dir = dir, math = "fp32" }
        spk.lstm.stack { backend = "auto", layers = layers, batch = 3, steps = 5, tune_dir = dir, math = "tf32" }
      end)
      spk.lstm.tunables.fake, spk.lstm.backends.fake = nil, nil
      os.execute("rm -rf " .. shell_quote(dir))
      assert(ok, err)
      assert.are.same({ "3xtf32", "fp32", "tf32" }, built)
    end)
  end)

  it("a record of the wrong types falls back with one warning instead of raising", function()
    with_facts(function()
      local dir = spec_tmpdir()
      local r = tuning.new_record(sample_fields(), "spk tune")
      r.entries = { { hidden = 2, input = 3, layers = 1, batch = 4, steps = 5, steps_class = 8,
                      winner = { backend = "cpu", options = {}, median_ms = "abc" } } }
      local path = tuning.path(tuning.key(sample_fields()), dir)
      write_file(path, report.json_encode(r))
      local got = warnings_during(function()
        local c = spk.lstm.auto_choice { layers = layers, batch = 3, steps = 5, tune_dir = dir }
        assert.are.equal("default", c.source)
        assert.are.equal("cluster", c.backend) -- the default for compute capability 9.0
        assert.matches('median_ms must be a positive number, got "abc"', c.reason)
      end)
      assert.are.equal(1, #got)
      os.execute("rm -rf " .. shell_quote(dir))
    end)
  end)
end)
