-- The CPU path from Lua: what spk.lstm.cpu_info says, the reference's vector,
-- team_threads and profile options (the bits the same on every unit and
-- split), their refusals, and spk bench's CPU section, with ONNX Runtime
-- stood in for by a stub Python (and the real one where it is installed).
local spk = require "spk"
local cpu_bench = require "spk.cpu_bench"

local function layers(hidden) return spk.lstm.random { layers = 2, input = 5, hidden = hidden or 24, seed = 4 } end

describe("spk.lstm.cpu_info", function()
  it("names the widest unit this CPU has among those it lists, and the default thread count", function()
    local info = spk.lstm.cpu_info()
    assert.are.equal("portable", info.vectors[1])
    assert.are.equal(info.vectors[#info.vectors], info.vector)
    assert.are.equal(({ portable = 16, avx2 = 32, avx512 = 64 })[info.vector], info.vector_bytes)
    assert.is_true(info.cpus >= 1)
    if os.getenv("SPK_THREADS") == nil then
      assert.are.same({ info.cpus, "cpus" }, { info.threads, info.threads_from })
    end
  end)
end)

describe("spk.lstm.reference on the CPU's units and splits", function()
  local L = layers(40)
  local x = spk.randn({ 3, 7, 5 }, { seed = 5 })

  it("gives the same bits on every vector unit, thread count and team size, f64 and f32", function()
    for _, precision in ipairs { "f64", "f32" } do
      local base = spk.lstm.reference(L, x, { precision = precision, threads = 1 })
      for _, unit in ipairs(spk.lstm.cpu_info().vectors) do
        for _, split in ipairs { { threads = 1 }, { threads = 4 }, { threads = 6, team_threads = 3 },
                                 { threads = 2, team_threads = 2 } } do
          local y = spk.lstm.reference(L, x, { precision = precision, vector = unit, threads = split.threads,
                                               team_threads = split.team_threads })
          assert.bits_equal(base, y)
        end
      end
    end
  end)

  it("reports how it ran with profile = true", function()
    local _, info = spk.lstm.reference(L, x, { threads = 6, team_threads = 3, profile = true })
    local p = info.profile
    assert.are.same({ 6, 2, 3 }, { p.threads, p.teams, p.team_threads }) -- batch 3 fills one row group
    assert.are.equal(spk.lstm.cpu_info().vector, p.vector)
    assert.is_true(p.slab_steps >= 1 and p.slab_steps <= 7)
    assert.is_true(p.wall_ms > 0 and p.project_ms > 0 and p.step_ms > 0 and p.wait_ms >= 0)
    -- 2 layers, both directions, 4 gates of 40 units, 3 rows x 7 steps: x·Wᵀ over 5 then 80 inputs, h·Rᵀ over 40
    local rows = 3 * 7 * 2 * 4 * 40
    assert.are.equal(2 * rows * (5 + 80), p.project_flops)
    assert.are.equal(2 * rows * (40 + 40), p.step_flops)
    local _, plain = spk.lstm.reference(L, x)
    assert.is_nil(plain.profile)
  end)

  it("refuses a unit this CPU lacks, an unknown unit and bad thread counts, naming them", function()
    local has = {}
    for _, u in ipairs(spk.lstm.cpu_info().vectors) do has[u] = true end
    if not has.avx512 then
      local ok, err = pcall(spk.lstm.reference, L, x, { vector = "avx512" })
      assert.is_false(ok)
      assert.matches("vector unit avx512 is not available on this CPU %(it has: portable", err)
    end
    for _, bad in ipairs { { vector = "sse" }, { vector = 2 } } do
      local ok, err = pcall(spk.lstm.reference, L, x, bad)
      assert.is_false(ok)
      assert.matches("option 'vector' must be \"auto\", \"portable\", \"avx2\" or \"avx512\"", err, 1, true)
    end
    for _, key in ipairs { "threads", "team_threads" } do
      for _, bad in ipairs { 0, 1.5, "two" } do
        local ok, err = pcall(spk.lstm.reference, L, x, { [key] = bad })
        assert.is_false(ok)
        assert.matches(("option '%s' must be a positive integer"):format(key), err, 1, true)
      end
    end
  end)

  it("is what the cpu backend runs, on the unit it is given", function()
    for _, unit in ipairs(spk.lstm.cpu_info().vectors) do
      local plan = spk.lstm.stack { layers = L, batch = 3, steps = 7, backend = "cpu", vector = unit, threads = 3 }
      assert.are.equal("f32 reference, 3 threads, " .. unit, plan.variant)
      assert.bits_equal(spk.lstm.reference(L, x, { precision = "f32" }), plan:forward(x))
    end
  end)
end)

describe("spk bench's CPU section", function()
  -- A stand-in for Python with onnxruntime: answers the version probe and
  -- prints what tools/onnx_ort_check.py --time prints, recording its arguments.
  local function stub_python(dir)
    local path = dir .. "/python"
    local f = assert(io.open(path, "w"))
    f:write([[#!/bin/sh
if [ "$1" = "-c" ]; then echo 1.99.0; exit 0; fi
echo "$@" >>"$(dirname "$0")/args.txt"
for file in "$2" "$3" "$4"; do [ -s "$file" ] || echo "missing $file"; done
echo "CPUExecutionProvider: rel_l2 1.250e-07, max_abs 3.000e-08 against the f64 reference: within the bound"
echo "ort time: median_ms 2.500 min_ms 2.000 max_ms 3.000 rounds 2 threads 1"
echo "ort check: ok"
]])
    f:close()
    assert(os.execute("chmod +x " .. shell_quote(path)))
    return path
  end

  it("times spk f32 and the f64 reference per thread count beside ONNX Runtime, and prints the section", function()
    local dir = spec_tmpdir()
    local python = stub_python(dir)
    local rows, info = cpu_bench.run { layers = layers(16), batches = { 1, 2 }, steps = 3, threads = { 1, 2 },
                                       rounds = 2, warmup = 0, python = python }
    assert.are.equal("1.99.0", info.ort_version)
    assert.are.equal(4, #rows)
    local args = {}
    for line in io.lines(dir .. "/args.txt") do args[#args + 1] = line end
    assert.are.equal(4, #args)
    assert.matches("onnx_ort_check%.py .*model%.onnx .*x%.npy .*y64%.npy %-%-max%-rel%-l2 1e%-4 %-%-time 2 %-%-warmup 0 "
      .. "%-%-threads 2$", args[2])
    for i, r in ipairs(rows) do
      assert.are.same({ i <= 2 and 1 or 2, (i - 1) % 2 + 1 }, { r.batch, r.threads })
      assert.is_nil(r.error)
      assert.is_true(r.f32_ms > 0 and r.f64_ms > 0 and r.f32_gflops > 0 and r.f64_gflops > 0)
      assert.is_true(r.rel_l2 > 0 and r.rel_l2 < 1e-4)
      assert.are.same({ 2.5, 1.25e-7 }, { r.ort_ms, r.ort_rel_l2 })
      assert.are.equal(2.5 / r.f32_ms, r.vs_ort)
      if r.threads == 2 then assert.is_true(r.bits_same) else assert.is_nil(r.bits_same) end
    end
    -- flops: 2 layers, 3 steps, 4 gates of 16 units, both directions; inputs 5 then 32, h 16
    assert.are.equal(2 * 2 * 3 * 2 * 4 * 16 * ((5 + 16) + (32 + 16)), cpu_bench.flops({ input = 5, hidden = 16 }, 2, 2, 3))
    local text = cpu_bench.text(rows, info)
    assert.matches("^CPU section: " .. spk.lstm.cpu_info().vector .. " vectors", text)
    assert.matches("\n    2        2 +[%d.]+ +2%.500 +[%d.]+x ", text)
    assert.matches(" same\n", text)
    assert.matches("ONNX Runtime 1%.99%.0 %(CPU provider%)%.", text)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("says why ONNX Runtime did not run, and runs the rest", function()
    local rows, info = cpu_bench.run { layers = layers(8), batches = { 1 }, steps = 2, rounds = 1, warmup = 0,
                                       python = "/nonexistent/python3" }
    assert.is_nil(info.ort_version)
    assert.matches("/nonexistent/python3 cannot import onnxruntime", info.ort_missing)
    assert.is_true(rows[1].f32_ms > 0 and rows[1].ort_ms == nil)
    assert.matches("ONNX Runtime: not run %(/nonexistent/python3 cannot import", cpu_bench.text(rows, info))
    local none = cpu_bench.run { layers = layers(8), batches = { 1 }, steps = 2, rounds = 1, warmup = 0, ort = false }
    assert.is_nil(none[1].ort_ms)
  end)

  -- Where this machine's Python has onnxruntime: the tool itself, timed.
  local has_ort = os.execute((os.getenv("SPK_PYTHON") or "python3")
    .. " -c 'import onnxruntime, numpy' >/dev/null 2>&1") == true
  local ort_it = has_ort and it or function(name) pending(name .. " [needs python3 with onnxruntime]") end
  ort_it("runs ONNX Runtime's CPU provider on the same stack: close to the f64 reference, timed", function()
    local rows = cpu_bench.run { layers = layers(16), batches = { 2 }, steps = 5, threads = { 1 }, rounds = 2,
                                 warmup = 1 }
    assert.is_nil(rows[1].error)
    assert.is_true(rows[1].ort_ms > 0)
    assert.is_true(rows[1].ort_rel_l2 < 1e-5)
  end)
end)
