-- The per-batch defaults give the bits they gave before the kernel options
-- became a table and the kernels named stages: every record of every fixture
-- file in tests/fixtures/defaults/ (defaults.json, made on the H200 at
-- 8a53c77 by tools/capture_defaults.lua, then the tensor-core kernel's and
-- the 3xtf32 stacks' at a2f6bcd; the README there says how and what each
-- holds) is run again: the plan's default kernel (no kernel options) at
-- the record's backend, math and batch, its output saved by spk.save and that
-- file's SHA-256 compared with the record's. Each spec is named by its file
-- and record and says where the file was made, so a record from another file
-- is never mistaken for one of these.
--
-- Without a GPU two things are still checked: the fixtures agree with
-- themselves (y_b1.npy is the batch-1 FP32 output whose digest the SIMT
-- kernels' records carry), and the variant this tree picks for each record's batch is the one
-- the record says ran (its plan.variant then; the cluster kernel's cell and pushes by
-- its bits, the early gates not at all: options_of), so a default table that
-- lost a row, or took a cell of other bits, fails here too. GPU specs are skipped without a device, never passed.
local spk = require "spk"
local report = require "spk.report"

local DIR = "tests/fixtures/defaults"
-- The batch-1 FP32 output (both SIMT backends gave these bits at 8a53c77;
-- the tensor-core kernel sums in another order and gives its own).
local Y_B1 = DIR .. "/y_b1.npy"
local Y_B1_BACKENDS = { cluster = true, persistent = true }

local function read(path)
  return spk.files.read(path, 1 << 31) -- an output at batch 256 is 154 MB
end

-- Every fixture file: {name =, environment =, records = {...}}.
local function fixture_files()
  local files = {}
  for _, name in ipairs(spk.files.list(DIR)) do
    if name:match("%.json$") then
      local data = report.json_decode(read(DIR .. "/" .. name))
      files[#files + 1] = { name = name, environment = data.environment or {}, records = data.records or {} }
    end
  end
  return files
end

local function where(file)
  local e = file.environment
  return ("%s, %s"):format(tostring(e.device or "a device not recorded"), tostring(e.date or "a date not recorded"))
end

local function record_name(file, r)
  return ("%s: %s %s batch %d"):format(file.name, r.backend, r.math, r.batch)
end

-- The options a record's plan.variant names (the words of that tree's
-- describe functions), as this tree's option names. The cluster kernel's
-- cell is compared by its bits: "trimmed" gives the reference cell's for
-- every input (a record names no cell form, or "trimmed cell"), "fused" its
-- own; the early gates change no bit and are not compared.
local function cell_bits(cell) return cell == "fused" and "fused" or "reference" end
-- The pushes by their exchange: the direct and the warp pushes carry the same
-- values into the same places (the same bits), the scalar ones are the baseline.
local function exchange_of(push) return push == "scalar" and "barrier" or "st.async" end
local function options_of(r)
  local v = r.variant
  if r.backend == "cluster" then
    local cluster, threads, tile = v:match("^cluster (%d+), (%d+) threads, tile (%d+),")
    return { cluster = tonumber(cluster), threads = tonumber(threads), tile_rows = tonumber(tile),
             gate_block = tonumber(v:match("gate block (%d+)") or "1"),
             gates_ahead = tonumber(v:match("gates (%d+) steps ahead") or "1"),
             row_phases = v:find("2 row phases", 1, true) and 2 or 1,
             exchange = exchange_of(v:match("(%a+) push") or "scalar"),
             cell_bits = cell_bits(v:match("(%a+) cell,") or v:match("(%a+) cell$")) }
  end
  if r.backend == "tensor_core" then
    local split, mma, cluster, threads, tile = v:match("^(%w+) (%a+), cluster (%d+), (%d+) threads, tile (%d+),")
    return { split = split == "FP16x3" and "f16" or "tf32", mma = mma, cluster = tonumber(cluster),
             threads = tonumber(threads), tile_rows = tonumber(tile),
             gates_ahead = tonumber(v:match("gates (%d+) steps ahead") or "1"),
             slice_steps = tonumber(v:match("slice (%d+)") or "1"),
             row_phases = v:find("2 row phases", 1, true) and 2 or 1,
             fetch_early = v:find("fetch early", 1, true) and 1 or 0,
             cell_bits = cell_bits(v:match("(%a+) cell,") or v:match("(%a+) cell$")) }
  end
  local units, threads = v:match("^units (%d+), (%d+) threads")
  local gate_block, row_group = v:match("gate block (%d+), row group (%d+)")
  return { units = tonumber(units), threads = tonumber(threads), gate_block = tonumber(gate_block or "1"),
           row_group = tonumber(row_group or "1") }
end

local files = fixture_files()

describe("the fixtures of the per-batch defaults", function()
  it("hold records of both kernel backends in both maths, an odd batch among them", function()
    assert.is_true(#files > 0, "no fixture file in " .. DIR)
    local seen, odd = {}, false
    for _, file in ipairs(files) do
      assert.is_true(#file.records > 0, file.name .. " has no records")
      for _, r in ipairs(file.records) do
        for _, key in ipairs { "backend", "math", "batch", "steps", "seed", "sha256", "variant" } do
          assert.is_not_nil(r[key], ("%s: a record without %s"):format(file.name, key))
        end
        assert.is_nil(r.error, record_name(file, r) .. ": " .. tostring(r.error))
        assert.matches("^%x+$", r.sha256)
        assert.are.equal(64, #r.sha256)
        seen[r.backend .. " " .. r.math] = true
        odd = odd or r.batch % 2 == 1 and r.batch > 1
      end
    end
    for _, key in ipairs { "cluster fp32", "cluster tf32", "persistent fp32", "persistent tf32" } do
      assert.is_true(seen[key], "no record of " .. key)
    end
    assert.is_true(odd, "no odd batch above 1")
  end)

  it("agree with themselves: y_b1.npy is the batch-1 FP32 output the SIMT records' digest names", function()
    local digest = spk.cuda.sha256(read(Y_B1))
    local found = 0
    for _, file in ipairs(files) do
      for _, r in ipairs(file.records) do
        if r.batch == 1 and r.math == "fp32" and Y_B1_BACKENDS[r.backend] then
          assert.are.equal(digest, r.sha256, record_name(file, r))
          found = found + 1
        end
      end
    end
    assert.is_true(found >= 2, "no batch-1 FP32 record of both backends")
    local y = spk.load(Y_B1)
    assert.are.same({ 1, 589, 256 }, y:shape())
  end)

  it("name the variants this tree picks at their batches (no device needed)", function()
    for _, file in ipairs(files) do
      for _, r in ipairs(file.records) do
        local want = options_of(r)
        local v = spk.lstm.kernel_variant { backend = r.backend, batch = r.batch, hidden = 128 }
        for key, value in pairs(want) do
          local got = v[key]
          if key == "cell_bits" then got = cell_bits(v.cell) end
          if key == "exchange" then got = exchange_of(v.push) end
          assert.are.equal(value, got, ("%s (%s): %s"):format(record_name(file, r), r.variant, key))
        end
      end
    end
  end)
end)

describe("the per-batch defaults keep their bits", function()
  local weights, inputs = {}, {}
  local function layers(seed)
    weights[seed] = weights[seed] or spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = seed }
    return weights[seed]
  end
  local function input(batch, steps, seed)
    local key = ("%d/%d/%d"):format(batch, steps, seed)
    inputs[key] = inputs[key] or spk.randn({ batch, steps, 60 }, { seed = seed })
    return inputs[key]
  end

  -- A file whose environment names the form of the 3xtf32 projections it was
  -- made with ($SPK_GEMM_3XTF32, a choice per process) is run again in a
  -- child process with that form, by the tool that made it.
  local child_digests = {}
  local function digest_in_child(file, r)
    if not child_digests[file.name] then
      local sets = { batches = {}, backends = {}, maths = {} }
      local function add(list, v)
        for _, x in ipairs(list) do if x == v then return end end
        list[#list + 1] = v
      end
      for _, rec in ipairs(file.records) do
        add(sets.batches, tostring(rec.batch))
        add(sets.backends, rec.backend)
        add(sets.maths, rec.math)
      end
      local dir = spec_tmpdir()
      local out = dir .. "/defaults.json"
      local cmd = ("SPK_GEMM_3XTF32=%s %s run tools/capture_defaults.lua %s %s %s %s 2>&1"):format(
        shell_quote(file.environment.gemm_3xtf32), shell_quote(SPK), shell_quote(out),
        table.concat(sets.batches, ","), table.concat(sets.backends, ","), table.concat(sets.maths, ","))
      local p = io.popen(cmd)
      local log = p:read("a")
      p:close()
      local ok, data = pcall(function() return report.json_decode(read(out)) end)
      os.execute("rm -rf " .. shell_quote(dir))
      assert(ok, "capture_defaults in a child failed: " .. log)
      local digests = {}
      for _, rec in ipairs(data.records or {}) do
        digests[("%s %s %d"):format(rec.backend, rec.math, rec.batch)] = rec.sha256 or rec.error
      end
      child_digests[file.name] = digests
    end
    return child_digests[file.name][("%s %s %d"):format(r.backend, r.math, r.batch)]
  end

  for _, file in ipairs(files) do
    for _, r in ipairs(file.records) do
      if file.environment.gemm_3xtf32 then
        gpu_it(("%s, made on %s with SPK_GEMM_3XTF32=%s"):format(record_name(file, r), where(file),
          file.environment.gemm_3xtf32), function()
          assert.are.equal(r.sha256, digest_in_child(file, r), record_name(file, r) .. ": other bits")
        end)
      else
      gpu_it(("%s, made on %s"):format(record_name(file, r), where(file)), function()
        local plan = spk.lstm.stack { layers = layers(r.seed), batch = r.batch, steps = r.steps, backend = r.backend,
                                      math = r.math }
        finally(function() plan:close() end)
        local y = plan:forward(input(r.batch, r.steps, r.seed))
        local dir = spec_tmpdir()
        local path = dir .. "/y.npy"
        spk.save(path, y)
        local digest = spk.cuda.sha256(read(path))
        os.execute("rm -rf '" .. dir .. "'")
        if digest ~= r.sha256 and r.batch == 1 and r.math == "fp32" and Y_B1_BACKENDS[r.backend] then
          local at = spk.debug.first_divergence(spk.load(Y_B1), y)
          error(("%s: other bits (%s now, %s then); first divergence from y_b1.npy: %s"):format(
            record_name(file, r), plan.variant, r.variant, tostring(at)))
        end
        assert.are.equal(r.sha256, digest, ("%s: other bits (%s now, %s then)"):format(record_name(file, r),
          plan.variant, r.variant))
      end)
      end
    end
  end
end)
