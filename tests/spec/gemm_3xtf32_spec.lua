-- math = "3xtf32" for spk.blas.gemm: split-TF32 products on the tensor cores
-- (kernels/gemm_3xtf32.cu), held to FP32's accuracy against an f64 product
-- computed here, in every layout spk.blas.gemm takes.
local spk = require "spk"

-- f64 product of host tensors, row-major op(a) [m, k] · op(b) [k, n] (small shapes).
local function product_f64(a, b, transa, transb)
  local A, B = a:tolist(), b:tolist()
  local m = transa and #A[1] or #A
  local k = transa and #A or #A[1]
  local n = transb and #B or #B[1]
  local out = {}
  for i = 1, m do
    local row = {}
    for j = 1, n do
      local s = 0
      for p = 1, k do
        local x = transa and A[p][i] or A[i][p]
        local y = transb and B[j][p] or B[p][j]
        s = s + x * y
      end
      row[j] = s
    end
    out[i] = row
  end
  return spk.tensor(out, "f64")
end

local function rel_err(c, truth) return spk.compare(c:to("f64"), truth).rel_l2 end

describe("gemm math 3xtf32", function()
  it("is named in the error for an unknown math", function()
    local a, b = spk.zeros({ 4, 3 }), spk.zeros({ 3, 2 })
    local c = spk.zeros({ 4, 2 })
    local ok, err = pcall(spk.blas.gemm, { a = a, b = b, c = c, math = "4xtf32" })
    assert.is_false(ok)
    assert.matches('"3xtf32"', err)
  end)

  gpu_it("matches an f64 product to FP32's accuracy in every layout, where TF32 does not", function()
    local cases = {
      { m = 37, n = 29, k = 61 }, -- k not a multiple of 4: element-wise tile loads
      { m = 130, n = 140, k = 64, transa = true },
      { m = 5, n = 257, k = 256, transb = true },
      { m = 129, n = 9, k = 40, beta = 0.5, alpha = 2 },
    }
    for i, cs in ipairs(cases) do
      local a = cs.transa and spk.randn({ cs.k, cs.m }, { seed = i }) or spk.randn({ cs.m, cs.k }, { seed = i })
      local b = cs.transb and spk.randn({ cs.n, cs.k }, { seed = 10 + i }) or spk.randn({ cs.k, cs.n }, { seed = 10 + i })
      local c0 = spk.randn({ cs.m, cs.n }, { seed = 20 + i })
      local truth = product_f64(a, b, cs.transa, cs.transb)
      if cs.alpha then truth = truth * cs.alpha + c0:to("f64") * cs.beta end
      local err = {}
      for _, mode in ipairs { "fp32", "tf32", "3xtf32" } do
        local c = c0:cuda()
        spk.blas.gemm { a = a:cuda(), b = b:cuda(), c = c, transa = cs.transa, transb = cs.transb,
          alpha = cs.alpha or 1, beta = cs.beta or 0, math = mode }
        err[mode] = rel_err(c:cpu(), truth)
      end
      local what = ("case %d: fp32 %.3g, tf32 %.3g, 3xtf32 %.3g"):format(i, err.fp32, err.tf32, err["3xtf32"])
      assert.is_true(err["3xtf32"] <= 2 * err.fp32 + 1e-8, what)
      assert.is_true(err.tf32 > 100 * err["3xtf32"], what) -- the check can tell TF32 from FP32
    end
  end)

  gpu_it("computes a batch in one call, with a matrix shared by the batch", function()
    local a = spk.randn({ 200, 48 }, { seed = 1 })
    local w = spk.randn({ 2, 33, 48 }, { seed = 2 })
    local c = spk.cuda.zeros({ 2, 200, 33 })
    spk.blas.gemm { a = a:cuda(), b = w:cuda(), c = c, transb = true, math = "3xtf32" }
    local host = c:cpu()
    for d = 1, 2 do
      local truth = product_f64(a, w:select(1, d):contiguous(), false, true)
      assert.is_true(rel_err(host:select(1, d):contiguous(), truth) < 1e-6)
    end
  end)
end)
