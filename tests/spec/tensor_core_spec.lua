-- The tensor-core recurrence (kernels/lstm_tc.cu) through the kernel stack
-- (lua/spk/tensor_core.lua, experiments/kernels/tensor_core*.lua). Without a
-- GPU: the per-batch defaults and their launches, every refusal of a variant
-- that cannot be built, the launch rule's shared memory against the kernel's
-- own formula (a compile-time check), NVRTC compiles of both splits and the
-- wgmma form for sm_90a at odd shapes, the timeline's stage list. On a GPU
-- (gpu_it): all three against the f64 reference at small and odd shapes, bit for bit across
-- forwards, traced like the reference. (The layout itself is emulated on the
-- CPU by tests/c/test_tc_layout.c; tools/tc_sweep.lua times the variants.)
local spk = require "spk"
local tc = require "spk.tensor_core"

local EXPERIMENTS = spk.find_dir("experiments")

local function refuses(fn, pattern)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert.matches(pattern, tostring(err))
end

local function copy(t, extra)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  for k, v in pairs(extra or {}) do out[k] = v end
  return out
end

describe("spk.tensor_core", function()
  it("keeps every batch's launch to one wave of the H200's clusters, one block an SM", function()
    -- the clusters of each size the H200 holds at once with a block an SM (docs/kernels.md)
    local h200_clusters = { [2] = 66, [4] = 30, [8] = 14 }
    for _, batch in ipairs { 1, 32, 56, 57, 120, 121, 128, 129, 256, 257, 512 } do
      local shape = { batch = batch, hidden = 128 }
      local v = tc.variant(shape)
      local l = tc.launch(v)
      local clusters = l.grid[1] * l.grid[2] * l.grid[3] // v.cluster
      assert.is_true(clusters <= h200_clusters[v.cluster], ("batch %d: %d clusters of %d"):format(batch, clusters,
        v.cluster))
      assert.are.same({ v.cluster, 1, 1 }, l.cluster)
      assert.are.equal(tc.sizes(v).threads, l.block)
    end
    for _, batch in ipairs { 128, 256 } do -- the large batches fill 128 SMs
      local l = tc.launch(tc.variant { batch = batch, hidden = 128 })
      assert.are.equal(128, l.grid[1] * l.grid[2] * l.grid[3], "batch " .. batch)
    end
    assert.are.equal("f16 c2 t8 mt1 p1 a2 s4 wgmma", tc.label(tc.variant { batch = 256, hidden = 128 }))
    assert.are.equal("f16 c8 t8 mt1 p1 a2 s1", tc.label(tc.variant { batch = 32, hidden = 128 }))
    assert.are.equal("f16 c2 t4 mt1 p1 a2 s1", tc.label(tc.variant({ batch = 64, hidden = 128 }, { mma = "sync" })))
    assert.are.equal("f16 c8 t8 mt1 p1 a2 s1 wgmma", tc.label(tc.variant({ batch = 32, hidden = 128 }, { mma = "wgmma" })))
    assert.are.equal("tf32 c4 t8 mt1 p1 a2 s1", tc.label(tc.variant({ batch = 64, hidden = 128 }, { split = "tf32" })))
    assert.are.equal("tf32 c4 t16 mt1 p2 a2 s1", tc.label(tc.variant({ batch = 256, hidden = 128 }, { split = "tf32" })))
    assert.are.equal("f16 c8 t8 mt1 p1 a2 s1 late", tc.label(tc.variant({ batch = 32, hidden = 128 }, { fetch_early = 0 })))
    -- a default that breaks a rule with an option given gives way: the fetch after the wait for one
    -- step ahead, tiles of 16 for two row phases, wgmma for its long slices
    assert.are.equal("f16 c2 t4 mt1 p1 a1 s4 wgmma late", tc.label(tc.variant({ batch = 64, hidden = 128 }, { gates_ahead = 1 })))
    assert.are.equal("f16 c2 t16 mt1 p2 a2 s4 wgmma", tc.label(tc.variant({ batch = 64, hidden = 128 }, { row_phases = 2 })))
    assert.are.equal("f16 c8 t8 mt1 p1 a2 s4 wgmma", tc.label(tc.variant({ batch = 32, hidden = 128 }, { slice_steps = 4 })))
    -- and the rows' wgmma gives way where the options given leave it no warpgroups or too many n-tiles
    assert.are.equal("f16 c16 t8 mt1 p1 a2 s1", tc.label(tc.variant({ batch = 256, hidden = 128 }, { cluster = 16 })))
    assert.are.equal("f16 c2 t32 mt1 p1 a2 s1", tc.label(tc.variant({ batch = 256, hidden = 128 }, { tile_rows = 32 })))
    -- no two blocks on one SM: more than half an SM's 228 KiB of shared memory, unless asked otherwise
    local v = tc.variant { batch = 64, hidden = 128 }
    assert.is_true(2 * tc.launch(v).smem > 228 * 1024)
    local shared = tc.variant({ batch = 64, hidden = 128 }, { exclusive_sm = 0 })
    assert.are.equal(tc.sizes(shared).smem, tc.launch(shared).smem)
  end)

  it("is the tensor_core family's variant, option for option (src/lstm/tensor_core.c)", function()
    for _, batch in ipairs { 1, 64, 256 } do
      for _, opts in ipairs { {}, { mma = "wgmma" }, { split = "tf32" } } do
        local v = tc.variant({ batch = batch, hidden = 128 }, opts)
        local family = spk.lstm.kernel_variant { backend = "tensor_core", batch = batch, hidden = 128, kernel = opts }
        assert.are.same(family, v)
        assert.are.same(spk.lstm.tensor_core_variant(opts, batch, 128), v)
      end
    end
  end)

  it("refuses variants the kernel cannot build, naming the option and the value", function()
    local shape = { batch = 64, hidden = 128 }
    refuses(function() tc.variant(shape, { split = "bf16" }) end, 'kernel.split must be "tf32" or "f16" %(.*%), got "bf16"')
    refuses(function() tc.variant(shape, { cluster = 3 }) end, "kernel.cluster must be 2, 4, 8 or 16 %(.*%), got 3")
    refuses(function() tc.variant(shape, { tile_rows = 33 }) end, "kernel.tile_rows must be 1 .. 32 %(.*%), got 33")
    refuses(function() tc.variant(shape, { split = "tf32", warp_mt = 2 }) end,
      "a thread would hold 256 registers of R")
    refuses(function() tc.variant(shape, { tile_rows = 8, row_phases = 2 }) end, "row_phases 2 needs two n%-tiles")
    refuses(function() tc.variant({ batch = 4, hidden = 48 }, {}) end, "hidden 48 does not split")
    refuses(function() tc.variant({ batch = 4, hidden = 256 }, { cluster = 2, tile_rows = 32, gates_ahead = 4 }) end,
      "shared memory")
    refuses(function() tc.variant(shape, { mma = "wgmma", split = "tf32" }) end, 'mma "wgmma" needs kernel.split "f16"')
    refuses(function() tc.variant(shape, { mma = "wgmma", cluster = 16 }) end, "gives 2 warps")
    refuses(function() tc.variant(shape, { mma = "wgmma", warp_mt = 2 }) end, 'mma "wgmma" needs kernel.warp_mt 1')
    refuses(function() tc.variant(shape, { mma = "mma" }) end, 'kernel.mma must be "sync" or "wgmma" %(.*%), got "mma"')
    refuses(function() tc.variant(shape, { slice_steps = 4, mma = "sync" }) end, 'slice_steps 4 or 8 needs kernel.mma "wgmma"')
    refuses(function() tc.variant(shape, { gates_ahead = 1, fetch_early = 1 }) end,
      "fetch_early 1 needs kernel.gates_ahead 2 .. 4")
    refuses(function() tc.variant(shape, { threads = 128 }) end, "unknown option 'threads'")
    refuses(function() tc.spec { unit = 4 } end, "unknown option 'unit'")
    refuses(function() spk.lstm.tensor_core_variant({ cluster = 3 }, 8, 128) end, "kernel.cluster must be 2, 4, 8 or 16")
  end)

  it("lists the stages its timeline build stamps, from the kernel's own list", function()
    local shape = { batch = 256, hidden = 128 }
    assert.are.same({ "gates", "fetch", "wait", "products", "cell", "publish" }, tc.stages(tc.variant(shape)))
    assert.are.same({ "gates", "wait", "products", "cell", "publish", "fetch" },
      tc.stages(tc.variant(shape, { fetch_early = 0 })))
    local phased = { cluster = 4, tile_rows = 16, row_phases = 2 }
    assert.are.same({ "gates", "fetch", "wait", "products", "cell", "publish", "wait_2", "products_2", "cell_2",
                      "publish_2" }, tc.stages(tc.variant(shape, phased)))
    phased.fetch_early = 0
    assert.are.same({ "gates", "wait", "products", "cell", "publish", "wait_2", "products_2", "cell_2", "publish_2",
                      "fetch" }, tc.stages(tc.variant(shape, phased)))
  end)

  it("compiles both splits and the wgmma form for sm_90a at odd shapes and keeps the contract (no device)", function()
    local files = { ["tensor_core.lua"] = { split = "f16" }, ["tensor_core_tf32.lua"] = { split = "tf32" },
                    ["tensor_core_wgmma.lua"] = { mma = "wgmma" } }
    for file, opts in pairs(files) do
      local spec = spk.lstm.kernel_file(EXPERIMENTS .. "/kernels/" .. file)
      for _, shape in ipairs { { batch = 37, steps = 5, hidden = 128 }, { batch = 200, steps = 2, hidden = 128 },
                              { batch = 3, steps = 2, hidden = 64 } } do
        if opts.mma == "wgmma" and shape.hidden == 64 then -- clusters of 8 at hidden 64: two warps, no warpgroup
          refuses(function() spk.lstm.kernel_check(spec, shape) end, "whole warpgroups")
        else
          local report = spk.lstm.kernel_check(spec, shape)
          assert.are.equal(11, #report.params)
          assert.are.equal(1, #report.launches)
          assert.are.equal("both", report.launches[1].direction)
          assert.are.equal("sm_90a", report.arch)
          assert.truthy(report.cubin_bytes > 0)
          local v = tc.variant(shape, opts)
          assert.are.equal(v.launch_smem, report.launches[1].smem)
          assert.are.equal(tostring(v.smem_bytes), tostring(report.defines.TC_EXPECTED_SMEM))
          assert.are.equal(v.defines.TC_MMA, tostring(report.defines.TC_MMA))
        end
      end
    end
  end)

  it("takes the cell's three forms (kernel.cell), the reference's by default, and compiles each (no device)", function()
    local shape = { batch = 256, hidden = 128 }
    assert.are.equal("reference", tc.variant(shape).cell)
    assert.are.equal("0", tc.defines(tc.variant(shape)).TC_CELL)
    for form, value in pairs { reference = "0", trimmed = "1", fused = "2" } do
      for _, opts in ipairs { { cell = form }, { cell = form, mma = "sync" }, { cell = form, split = "tf32" } } do
        local v = tc.variant(shape, opts)
        assert.are.equal(value, tc.defines(v).TC_CELL)
        if form == "reference" then
          assert.is_nil(tc.label(v):find("reference", 1, true))
        else
          assert.matches(" " .. form .. "$", tc.label(v))
        end
        local report = spk.lstm.kernel_check(tc.spec(opts), { batch = 37, steps = 5, hidden = 128 })
        assert.are.equal(value, tostring(report.defines.TC_CELL))
        assert.truthy(report.cubin_bytes > 0)
      end
    end
    -- clusters of 16, above the portable size, which the plan opts into, pass the check as they run
    local sixteen = spk.lstm.kernel_check(tc.spec { cluster = 16 }, { batch = 8, steps = 3, hidden = 128 })
    assert.are.same({ 16, 1, 1 }, sixteen.launches[1].cluster)
    refuses(function() tc.variant(shape, { cell = "fast" }) end,
      'kernel.cell must be "reference", "trimmed" or "fused" %(.*%), got "fast"')
  end)

  it("sizes shared memory as the kernel does: a launch rule that disagrees does not compile", function()
    for _, opts in ipairs { {}, { mma = "wgmma" }, { cluster = 4, tile_rows = 16, row_phases = 2 } } do
      local v = tc.variant({ batch = 256, hidden = 128 }, opts)
      local d = {}
      for k, x in pairs(tc.defines(v)) do d[k] = tostring(x) end
      local ptx = spk.cuda.compile { file = tc.kernel_dir() .. "/lstm_tc.cu", defines = d, arch = "compute_90a" }
      ptx:close()
      d.TC_EXPECTED_SMEM = tostring(tc.sizes(v).smem + 16)
      refuses(function() spk.cuda.compile { file = tc.kernel_dir() .. "/lstm_tc.cu", defines = d, arch = "compute_90a" } end,
        "sizes shared memory unlike SMEM_BYTES")
    end
  end)

  it("refuses the wgmma form for a target without sm_90a's instructions", function()
    local d = {}
    for k, x in pairs(tc.defines(tc.variant({ batch = 64, hidden = 128 }, { mma = "wgmma" }))) do d[k] = tostring(x) end
    refuses(function() spk.cuda.compile { file = tc.kernel_dir() .. "/lstm_tc.cu", defines = d, arch = "sm_90" } end,
      "needs the arch%-specific target sm_90a")
  end)

  nogpu_it("checks the contract, then says that running it needs a GPU", function()
    local layers = spk.lstm.random { layers = 1, input = 4, hidden = 128, seed = 1 }
    local spec = spk.lstm.kernel_file(EXPERIMENTS .. "/kernels/tensor_core.lua")
    refuses(function() spk.lstm.kernel_stack(copy(spec, { layers = layers, batch = 2, steps = 3 })) end,
      "kernel tensor_core: running it needs a GPU")
  end)

  gpu_it("both splits and wgmma: within the f64 reference at odd shapes, the same bits every forward, traced like it", function()
    for _, file in ipairs { "tensor_core.lua", "tensor_core_tf32.lua", "tensor_core_wgmma.lua" } do
      local spec = spk.lstm.kernel_file(EXPERIMENTS .. "/kernels/" .. file)
      for _, case in ipairs { { batch = 1, steps = 7, hidden = 128 }, { batch = 37, steps = 19, hidden = 128 },
                              { batch = 130, steps = 5, hidden = 128 }, { batch = 5, steps = 9, hidden = 64 } } do
        if file == "tensor_core_wgmma.lua" and case.hidden == 64 then goto next end
        local layers = spk.lstm.random { layers = 2, input = 6, hidden = case.hidden, seed = 1 }
        local x = spk.randn({ case.batch, case.steps, 6 }, { seed = case.batch })
        local plan <close> = spk.lstm.kernel_stack(copy(spec, { layers = layers, batch = case.batch,
                                                                steps = case.steps }))
        local y = plan:forward(x)
        assert.within_reference(y, layers, x, { rel_l2 = 5e-7, max_abs = 2e-6 })
        assert.bits_equal(y, plan:forward(x), "a second forward")
        local trace = { layer = 1, direction = "reverse", steps = { 1, case.steps } }
        local traced, info = plan:forward(x, { trace = trace })
        assert.bits_equal(y, traced, "a traced forward")
        local _, ref = spk.lstm.reference(layers, x, { precision = "f64", trace = trace })
        assert.is_nil(spk.debug.first_divergence(info.trace, ref.trace, { tol = 1e-5 }))
        ::next::
      end
    end
  end)

  gpu_it("runs clusters of 16, above the portable size, as a family plan and as a kernel of its own", function()
    local layers = spk.lstm.random { layers = 2, input = 6, hidden = 128, seed = 1 }
    local x = spk.randn({ 9, 7, 6 }, { seed = 9 })
    local plan <close> = spk.lstm.stack { backend = "tensor_core", layers = layers, batch = 9, steps = 7,
                                          kernel = { cluster = 16 } }
    local own <close> = spk.lstm.kernel_stack(copy(tc.spec { cluster = 16 }, { layers = layers, batch = 9, steps = 7 }))
    local y = plan:forward(x)
    assert.matches("cluster 16", plan.variant, 1, true)
    assert.bits_equal(y, own:forward(x), "the kernel of its own")
    assert.within_reference(y, layers, x, { rel_l2 = 5e-7, max_abs = 2e-6 })
  end)

  gpu_it("the cell's forms: trimmed gives the reference's bits, fused stays within the f64 reference", function()
    for _, case in ipairs { { batch = 37, steps = 19, hidden = 128 }, { batch = 130, steps = 5, hidden = 128 },
                            { batch = 5, steps = 9, hidden = 64 } } do
      for _, opts in ipairs { {}, { mma = "wgmma" }, { split = "tf32" } } do
        if opts.mma == "wgmma" and case.hidden == 64 then goto next end
        local layers = spk.lstm.random { layers = 2, input = 6, hidden = case.hidden, seed = 1 }
        local x = spk.randn({ case.batch, case.steps, 6 }, { seed = case.batch })
        local function forward(cell)
          local kernel = copy(opts, { cell = cell })
          local plan <close> = spk.lstm.stack { backend = "tensor_core", layers = layers, batch = case.batch,
                                                steps = case.steps, kernel = kernel }
          if cell == "reference" then
            assert.is_nil(plan.variant:find("cell", 1, true), plan.variant)
          else
            assert.matches(", " .. cell .. " cell", plan.variant, 1, true)
          end
          return plan:forward(x)
        end
        local reference = forward("reference")
        assert.bits_equal(reference, forward("trimmed"), "the trimmed cell")
        assert.within_reference(forward("fused"), layers, x, { rel_l2 = 5e-7, max_abs = 2e-6 })
        ::next::
      end
    end
  end)

  gpu_it("the tensor_core backend: the kernel of its own's bits, traced, its timeline, 3xtf32 projections", function()
    for _, case in ipairs { { batch = 1, steps = 7, hidden = 128 }, { batch = 37, steps = 19, hidden = 128 },
                            { batch = 130, steps = 5, hidden = 128 }, { batch = 5, steps = 9, hidden = 64 } } do
      for _, opts in ipairs { {}, { mma = "wgmma" }, { split = "tf32" } } do
        if opts.mma == "wgmma" and case.hidden == 64 then goto next end
        local layers = spk.lstm.random { layers = 2, input = 6, hidden = case.hidden, seed = 1 }
        local x = spk.randn({ case.batch, case.steps, 6 }, { seed = case.batch })
        local plan <close> = spk.lstm.stack { backend = "tensor_core", layers = layers, batch = case.batch,
                                              steps = case.steps, kernel = opts }
        local own <close> = spk.lstm.kernel_stack(copy(tc.spec(opts), { layers = layers, batch = case.batch,
                                                                       steps = case.steps }))
        local y = plan:forward(x)
        assert.bits_equal(y, own:forward(x), "the kernel of its own")
        assert.within_reference(y, layers, x, { rel_l2 = 5e-7, max_abs = 2e-6 })
        local trace = { layer = 2, direction = "forward", steps = { 1, case.steps } }
        local traced, info = plan:forward(x, { trace = trace })
        assert.bits_equal(y, traced, "a traced forward")
        local _, ref = spk.lstm.reference(layers, x, { precision = "f64", trace = trace })
        assert.is_nil(spk.debug.first_divergence(info.trace, ref.trace, { tol = 1e-5 }))
        local stamped, stamps = plan:forward(x, { timeline = { step_range = { 1, case.steps } } })
        assert.bits_equal(y, stamped, "the timeline build")
        assert.are.same(tc.stages(tc.variant(case, opts)), stamps.timeline.stages)
        assert.matches(tc.variant(case, opts).split == "f16" and "^FP16x3" or "^3xTF32", plan.variant)
        local split <close> = spk.lstm.stack { backend = "tensor_core", layers = layers, batch = case.batch,
                                               steps = case.steps, kernel = opts, math = "3xtf32" }
        assert.within_reference(split:forward(x), layers, x, { rel_l2 = 5e-7, max_abs = 2e-6 })
        ::next::
      end
    end
  end)
end)
