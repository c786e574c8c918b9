-- The input projections' GEMM in each math, alone: accuracy against an f64
-- product and time, on the stack's shapes (gates[d] = x · W[d]ᵀ for both
-- directions in one batched call, x [batch*589, in], W [2, 512, in]).
--
--   build/spk run tools/gemm_3xtf32_check.lua [batches, default 1,32,256] [rounds, default 5]
--
-- Per batch and input width (60: layer 1, 256: layers 2-4) and math (fp32 and
-- tf32: cuBLAS; 3xtf32: kernels/gemm_3xtf32.cu): rel_l2 and max_abs against
-- the f64 product on 32 sampled rows (both directions, every column),
-- rel_l2 against cuBLAS FP32 on the whole output, and ms per call (CUDA
-- graph replays, median). Then layouts the stack does not use (a transposed
-- a, an unaligned k, beta) against cuBLAS FP32. GPU only.
local spk = require "spk"
require("spk.options").script { gpu = "required", usage = "spk run tools/gemm_3xtf32_check.lua [BATCHES] [ROUNDS]" }
local batches = {}
for b in (arg[1] or "1,32,256"):gmatch("[^,]+") do batches[#batches + 1] = math.tointeger(tonumber(b)) end
local rounds = math.tointeger(tonumber(arg[2] or "5")) or 5
local steps, gates = 589, 512
local maths = { "fp32", "tf32", "3xtf32" }

-- f64 a[r] · w[d][j] over sampled rows: rel_l2, max_abs of c (host [2, rows, 512]).
local function against_f64(a_host, w_host, c_host, rows)
  local w = w_host:tolist()
  local num, den, max_abs = 0, 0, 0
  for _, r in ipairs(rows) do
    local ar = a_host:select(1, r):tolist()
    for d = 1, 2 do
      local cr = c_host:select(1, d):select(1, r):tolist()
      for j = 1, gates do
        local wj, s = w[d][j], 0
        for p = 1, #ar do s = s + ar[p] * wj[p] end
        local e = cr[j] - s
        num, den = num + e * e, den + s * s
        if math.abs(e) > max_abs then max_abs = math.abs(e) end
      end
    end
  end
  return math.sqrt(num / den), max_abs
end

print(("%6s %4s %7s %11s %10s %12s %9s"):format("batch", "in", "math", "rel_l2 f64", "max_abs", "vs cuBLAS", "ms"))
for _, batch in ipairs(batches) do
  local m = batch * steps
  for _, input in ipairs { 60, 256 } do
    local a_host = spk.randn({ m, input }, { seed = input })
    local bound = 1 / math.sqrt(128)
    local w_host = spk.rand({ 2, gates, input }, { low = -bound, high = bound, seed = 7 + input })
    local a, w = a_host:cuda(), w_host:cuda()
    local rows = {}
    for i = 1, 32 do rows[i] = 1 + ((i * 7919) % m) end
    local out = {}
    for _, mode in ipairs(maths) do
      local c = spk.cuda.zeros({ 2, m, gates })
      spk.blas.gemm { a = a, b = w, c = c, transb = true, math = mode }
      out[mode] = c:cpu()
      local t = spk.bench(function(stream)
        spk.blas.gemm { a = a, b = w, c = c, transb = true, math = mode, stream = stream }
      end, { rounds = rounds, graph = true })
      local rel, max_abs = against_f64(a_host, w_host, out[mode], rows)
      local vs = spk.compare(out[mode], out.fp32).rel_l2
      print(("%6d %4d %7s %11.3e %10.3e %12.3e %9.4f"):format(batch, input, mode, rel, max_abs, vs, t.median_ms))
    end
  end
end

-- Other layouts: 3xtf32 against cuBLAS FP32 (rel_l2 should be near the fp32 rows' rel_l2 above).
local function case(name, m, n, k, transa, beta)
  local a = (transa and spk.randn({ k, m }, { seed = 1 }) or spk.randn({ m, k }, { seed = 1 })):cuda()
  local b = spk.randn({ n, k }, { seed = 2 }):cuda()
  local c0 = spk.randn({ m, n }, { seed = 3 })
  local r = {}
  for _, mode in ipairs { "fp32", "3xtf32" } do
    local c = c0:cuda()
    spk.blas.gemm { a = a, b = b, c = c, transa = transa, transb = true, beta = beta, alpha = 0.5, math = mode }
    r[mode] = c:cpu()
  end
  print(("layout %-28s 3xtf32 vs cuBLAS fp32 rel_l2 %.3e"):format(name, spk.compare(r["3xtf32"], r.fp32).rel_l2))
end
case("k 61 (unaligned)", 300, 200, 61, false, 0)
case("a transposed", 257, 130, 96, true, 0)
case("beta 1, m 129, n 9", 129, 9, 40, false, 1)

-- Variants of the kernel itself (its macros: warps along m and n, mma tiles
-- a warp along m and n, k-tile stages, blocks an SM, k-steps a slice), on the
-- largest batch of the run, against the f64 product and timed. The first
-- line is the configuration src/cuda/gemm_3xtf32.c compiles; pass others as
-- "wm,wn,WM,WN,stages,blocks,slice;..." in $SPK_GEMM_VARIANTS, and the wgmma
-- form (kernels/gemm_3xtf32_wgmma.cu) as "wg,slice,overlap[,lbo,sbo]".
do
  local batch = batches[#batches]
  local path = (os.getenv("SPK_KERNEL_DIR") or "kernels") .. "/gemm_3xtf32.cu"
  local variants = {}
  for v in (os.getenv("SPK_GEMM_VARIANTS") or "2,2,4,4,3,2,2"):gmatch("[^;]+") do
    local f = {}
    for x in v:gmatch("[^,]+") do
      if x == "wg" then f.wgmma = true else f[#f + 1] = math.tointeger(tonumber(x)) end
    end
    variants[#variants + 1] = f
  end
  for _, input in ipairs { 60, 256 } do
    local m = batch * steps
    local a_host = spk.randn({ m, input }, { seed = input })
    local bound = 1 / math.sqrt(128)
    local w_host = spk.rand({ 2, gates, input }, { low = -bound, high = bound, seed = 7 + input })
    local a, w = a_host:cuda(), w_host:cuda()
    local rows = {}
    for i = 1, 32 do rows[i] = 1 + ((i * 7919) % m) end
    local vec = input % 4 == 0 and 1 or 0
    for _, f in ipairs(variants) do
      if f.wgmma then -- "wg,slice,overlap[,lbo,sbo]": the wgmma form
        local slice = f[1]
        local ok, err = pcall(function()
          local smem = (2 * 256 * 36 + 8 * 128 * 32) * 4
          local mod = spk.cuda.compile { file = path:gsub("%.cu$", "_wgmma.cu"), arch = "sm_90a",
            defines = { SPK_WG_SLICE_STEPS = tostring(slice), SPK_WG_OVERLAP = tostring(f[2] or 0),
              SPK_WG_LBO = f[3] and tostring(f[3]) or nil, SPK_WG_SBO = f[4] and tostring(f[4]) or nil } }
          local k = mod:kernel("spk_gemm_3xtf32_wgmma")
          k:set_max_dynamic_smem(smem)
          local c = spk.cuda.zeros({ 2, m, gates })
          local cfg = { grid = { (gates + 127) // 128, (m + 127) // 128, 2 }, block = { 256 }, smem = smem,
            args = { spk.i32(m), spk.i32(gates), spk.i32(input), a, spk.i64(input), spk.i64(0), w, spk.i64(input),
              spk.i64(gates * input), c, spk.i64(gates), spk.i64(1), spk.i64(m * gates), spk.f32(1), spk.f32(0) } }
          k:launch(cfg)
          local host = c:cpu()
          local t = spk.bench(function(stream) cfg.stream = stream; k:launch(cfg) end, { rounds = rounds, graph = true })
          local rel, max_abs = against_f64(a_host, w_host, host, rows)
          local at = k:attributes()
          print(("variant wgmma slice %d overlap %d %s in %3d: rel_l2 f64 %.3e max_abs %.3e, %.4f ms, %d regs, %d B local"):format(
            slice, f[2] or 0, f[3] and (f[3] .. "/" .. f[4]) or "", input, rel, max_abs, t.median_ms, at.registers, at.local_bytes))
        end)
        if not ok then print(("variant wgmma %s in %3d: %s"):format(table.concat(f, ","), input, tostring(err))) end
        goto continue
      end
      local names = { "SPK_GEMM_WARPS_M", "SPK_GEMM_WARPS_N", "SPK_GEMM_WM", "SPK_GEMM_WN", "SPK_GEMM_STAGES",
        "SPK_GEMM_MIN_BLOCKS", "SPK_GEMM_SLICE_STEPS" }
      local defines = {}
      for i, name in ipairs(names) do defines[name] = tostring(f[i]) end
      local threads, bm, bn = 32 * f[1] * f[2], f[1] * f[3] * 16, f[2] * f[4] * 8
      local smem = f[5] * (bm + bn) * 36 * 4
      local ok, err = pcall(function()
        local mod = spk.cuda.compile { file = path, defines = defines }
        local k = mod:kernel("spk_gemm_3xtf32")
        k:set_max_dynamic_smem(smem)
        local c = spk.cuda.zeros({ 2, m, gates })
        local args = { spk.i32(m), spk.i32(gates), spk.i32(input), a, spk.i64(input), spk.i64(1), spk.i64(0),
          spk.i32(vec), w, spk.i64(input), spk.i64(1), spk.i64(gates * input), spk.i32(vec), c, spk.i64(gates),
          spk.i64(1), spk.i64(m * gates), spk.f32(1), spk.f32(0) }
        local cfg = { grid = { (gates + bn - 1) // bn, (m + bm - 1) // bm, 2 }, block = { threads }, smem = smem,
          args = args }
        k:launch(cfg)
        local host = c:cpu()
        local t = spk.bench(function(stream) cfg.stream = stream; k:launch(cfg) end, { rounds = rounds, graph = true })
        local rel, max_abs = against_f64(a_host, w_host, host, rows)
        local at = k:attributes()
        print(("variant %-16s in %3d: rel_l2 f64 %.3e max_abs %.3e, %.4f ms, %d regs, %d B local, %d B smem"):format(
          table.concat(f, ","), input, rel, max_abs, t.median_ms, at.registers, at.local_bytes, smem))
      end)
      if not ok then print(("variant %-16s in %3d: %s"):format(table.concat(f, ","), input, tostring(err))) end
      ::continue::
    end
  end
end
