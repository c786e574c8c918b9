-- math = "3xtf32" for spk.blas.gemm: split-TF32 products on the tensor cores
-- (kernels/gemm_3xtf32.cu), held to FP32's accuracy against an f64 product
-- computed here, in every layout spk.blas.gemm takes; and its TMA form
-- (kernels/gemm_3xtf32_tma.cu), B given split (spk.blas.split_tf32, b_lo).
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

-- x rounded to TF32 (10 explicit mantissa bits, to nearest, ties away from
-- zero) on its bits, here in Lua: an implementation independent of spk's
-- split and of cuBLAS.
local function tf32(x)
  local u = string.unpack("<I4", string.pack("<f", x))
  if u & 0x7f800000 == 0x7f800000 then return x end
  return (string.unpack("<f", string.pack("<I4", ((u + 0x1000) & 0xffffe000) & 0xffffffff)))
end

local function tf32_tensor(t)
  local function round(v)
    if type(v) == "table" then
      local out = {}
      for i, e in ipairs(v) do out[i] = round(e) end
      return out
    end
    return tf32(v)
  end
  return spk.tensor(round(t:tolist()), "f32")
end

-- A model of one plain TF32 product: both operands rounded to TF32, the
-- products and sums in f64 (no rounding of the sum at all: the most a TF32
-- GEMM can be). Its error against f64 is TF32's class (2^-11 a rounding,
-- about 3e-4 relative L2 on these operands) whatever algorithm cuBLAS picks
-- for math "tf32" (which may compute in FP32 at small k: the math allows
-- TF32, it does not promise it).
local function tf32_model(a, b, transa, transb) return product_f64(tf32_tensor(a), tf32_tensor(b), transa, transb) end

-- The classes, against f64: FP32's (no worse than twice cuBLAS FP32's own
-- error on the operands), and a plain TF32 product's (the model's error at
-- least 100 times the split form's, so the check can tell a TF32 product
-- from an FP32-class one without asking cuBLAS for one).
local function assert_fp32_class(e, fp32, model, what)
  assert.is_true(e <= 2 * fp32 + 1e-8, what)
  assert.is_true(model > 100 * e, what)
end

-- A split form of spk.blas.gemm (math 3xtf32) on each case against cuBLAS FP32
-- and an f64 product, matrix by matrix (FP32's class: assert_fp32_class), and
-- its bits on a second run. form(w, a) is given the device w and the host a
-- of a case and returns a function that sets the form's fields (b, b_lo, b16,
-- ...) in the gemm's options.
local function check_split_form(cases, name, form)
  for i, cs in ipairs(cases) do
    local a = cs.a_batched and spk.randn({ cs.count, cs.m, cs.k }, { seed = i }) or spk.randn({ cs.m, cs.k }, { seed = i })
    local w = cs.count > 1 and spk.randn({ cs.count, cs.n, cs.k }, { seed = 10 + i })
      or spk.randn({ cs.n, cs.k }, { seed = 10 + i })
    local cshape = cs.count > 1 and { cs.count, cs.m, cs.n } or { cs.m, cs.n }
    local c0 = spk.randn(cshape, { seed = 20 + i })
    local dw = w:cuda()
    local set = form(dw, a)
    local function run(math_mode, split)
      local g = { a = a:cuda(), b = dw, c = c0:cuda(), transb = true, alpha = cs.alpha or 1, beta = cs.beta or 0,
                  math = math_mode }
      if split then set(g) end
      spk.blas.gemm(g)
      return g.c:cpu()
    end
    local out, fp32 = run("3xtf32", true), run("fp32", false)
    for z = 1, cs.count do
      local function pick(t) return cs.count > 1 and t:select(1, z):contiguous() or t end
      local az = cs.a_batched and a:select(1, z):contiguous() or a
      local truth = product_f64(az, pick(w), false, true)
      local model = tf32_model(az, pick(w), false, true)
      if cs.alpha then
        truth = truth * cs.alpha + pick(c0):to("f64") * cs.beta
        model = model * cs.alpha + pick(c0):to("f64") * cs.beta
      end
      local e, ef, em = rel_err(pick(out), truth), rel_err(pick(fp32), truth), spk.compare(model, truth).rel_l2
      local what = ("case %d matrix %d: fp32 %.3g, %s %.3g, one TF32 product (host model) %.3g"):format(i, z, ef,
        name, e, em)
      assert_fp32_class(e, ef, em, what)
    end
    assert.bits_equal(out, run("3xtf32", true)) -- the same bits on a second run
  end
end

describe("gemm math 3xtf32", function()
  it("is named in the error for an unknown math", function()
    local a, b = spk.zeros({ 4, 3 }), spk.zeros({ 3, 2 })
    local c = spk.zeros({ 4, 2 })
    local ok, err = pcall(spk.blas.gemm, { a = a, b = b, c = c, math = "4xtf32" })
    assert.is_false(ok)
    assert.matches('"3xtf32"', err)
  end)

  gpu_it("matches an f64 product to FP32's accuracy in every layout, where one TF32 product does not", function()
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
      local model = tf32_model(a, b, cs.transa, cs.transb)
      if cs.alpha then
        truth = truth * cs.alpha + c0:to("f64") * cs.beta
        model = model * cs.alpha + c0:to("f64") * cs.beta
      end
      local err = { model = spk.compare(model, truth).rel_l2 }
      for _, mode in ipairs { "fp32", "tf32", "3xtf32" } do
        local c = c0:cuda()
        spk.blas.gemm { a = a:cuda(), b = b:cuda(), c = c, transa = cs.transa, transb = cs.transb,
          alpha = cs.alpha or 1, beta = cs.beta or 0, math = mode }
        err[mode] = rel_err(c:cpu(), truth)
      end
      local what = ("case %d: fp32 %.3g, tf32 %.3g, 3xtf32 %.3g, one TF32 product (host model) %.3g"):format(i,
        err.fp32, err.tf32, err["3xtf32"], err.model)
      assert_fp32_class(err["3xtf32"], err.fp32, err.model, what)
      -- math "tf32" within TF32's class (TF32 or better: cuBLAS may pick an FP32 algorithm)
      assert.is_true(err.tf32 <= 4 * err.model, what)
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

  -- ---- B split beforehand: spk.blas.split_tf32 and the TMA form ----------------

  local function u32(x) return (string.unpack("<I4", string.pack("<f", x))) end

  it("splits x into two TF32 parts that sum to x, on the host", function()
    local x = spk.randn({ 7, 33 }, { seed = 5 }) * 1e3
    local hi, lo = spk.blas.split_tf32(x)
    assert.are.same({ 7, 33 }, hi:shape())
    local xs, hs, ls = x:tolist(), hi:tolist(), lo:tolist()
    for i = 1, 7 do
      for j = 1, 33 do
        assert.are.equal(0, u32(hs[i][j]) & 0x1fff, "hi is TF32")
        assert.are.equal(0, u32(ls[i][j]) & 0x1fff, "lo is TF32")
        assert.is_true(math.abs(hs[i][j] + ls[i][j] - xs[i][j]) <= 2 ^ -22 * math.abs(xs[i][j]))
        assert.is_true(math.abs(hs[i][j] - xs[i][j]) <= 2 ^ -11 * math.abs(xs[i][j]))
      end
    end
    local odd = spk.tensor({ 1 / 0, -1 / 0, 0 / 0, 0 }, "f32")
    local h, l = spk.blas.split_tf32(odd)
    local hv, lv = h:tolist(), l:tolist()
    assert.are.same({ 1 / 0, -1 / 0, 0, 0 }, { hv[1], hv[2], lv[1], lv[3] })
    assert.is_true(hv[3] ~= hv[3], "a NaN stays in hi")
    assert.has_error(function() spk.blas.split_tf32(x:to("f64")) end, "tf32 split: x must be an f32 tensor")
    assert.has_error(function() spk.blas.split_tf32(x:transpose(1, 2)) end,
      "tf32 split: x must be contiguous (use :contiguous())")
  end)

  it("checks b_lo against b without a GPU", function()
    local a, b, c = spk.zeros({ 4, 8 }), spk.zeros({ 5, 8 }), spk.zeros({ 4, 5 })
    local ok, err = pcall(spk.blas.gemm_check, { a = a, b = b, b_lo = spk.zeros({ 5, 4 }), c = c, transb = true })
    assert.is_false(ok)
    assert.matches("b_lo must have b's shape and strides", err)
    ok, err = pcall(spk.blas.gemm_check, { a = a, b = b, b_lo = spk.zeros({ 5, 8 }, "f64"), c = c, transb = true })
    assert.matches("b_lo must be f32 of b's rank", err)
    ok, err = pcall(spk.blas.gemm_check, { a = a, b = b, b_lo = 3, c = c, transb = true })
    assert.matches("gemm: b_lo must be a tensor, got number", err)
  end)

  gpu_it("splits on the device to the host's bits", function()
    local x = spk.randn({ 3, 1000 }, { seed = 9 }) * 7
    local hh, hl = spk.blas.split_tf32(x)
    local dh, dl = spk.blas.split_tf32(x:cuda())
    assert.bits_equal(hh, dh:cpu())
    assert.bits_equal(hl, dl:cpu())
  end)

  gpu_it("runs B split beforehand (TMA form) to FP32's accuracy: edges of m, n and k, batches, alpha and beta", function()
    local cases = {
      { m = 37, n = 512, k = 60, count = 2 },         -- one row tile, k = 60: two k-tiles, the second past the end
      { m = 300, n = 200, k = 256, count = 1 },       -- edge tiles in m and n
      { m = 129, n = 136, k = 12, count = 2 },        -- k shorter than a k-step pair
      { m = 515, n = 64, k = 36, count = 2, a_batched = true },
      { m = 257, n = 160, k = 60, count = 2, alpha = 0.5, beta = 1 },
    }
    check_split_form(cases, "tma", function(w)
      local hi, lo = spk.blas.split_tf32(w)
      return function(g) g.b, g.b_lo = hi, lo end
    end)
  end)

  -- An FP16 value from its 16 bits, decoded here in Lua (independent of spk's split).
  local function half_value(h)
    local sign = (h & 0x8000) ~= 0 and -1 or 1
    local e, m = (h >> 10) & 31, h & 1023
    if e == 31 then return m == 0 and sign * math.huge or 0 / 0 end
    if e == 0 then return sign * m * 2.0 ^ -24 end
    return sign * (1 + m / 1024) * 2.0 ^ (e - 15)
  end
  -- The halves of an i32 container tensor, in x's order.
  local function halves(t)
    local out = {}
    for _, row in ipairs(t:reshape({ t:numel() }):tolist()) do
      local u = row & 0xffffffff
      out[#out + 1], out[#out + 2] = u & 0xffff, u >> 16
    end
    return out
  end

  it("splits x into two scaled FP16 parts that sum to x 2^exponent, on the host", function()
    local x = spk.randn({ 4, 256 }, { seed = 12 }) * 0.05
    local hi, lo, e = spk.blas.split_f16(x)
    assert.are.same({ 4, 128 }, hi:shape())
    assert.are.equal("i32", hi:dtype())
    local xs, hs, ls = x:reshape({ x:numel() }):tolist(), halves(hi), halves(lo)
    local max_abs = 0
    for _, v in ipairs(xs) do max_abs = math.max(max_abs, math.abs(v)) end
    assert.is_true(max_abs * 2.0 ^ e >= 2 ^ 14 and max_abs * 2.0 ^ e < 2 ^ 15, "exponent " .. e)
    assert.are.equal(e, spk.blas.f16_scale_exponent(max_abs))
    for i, v in ipairs(xs) do
      local scaled, h, l = v * 2.0 ^ e, half_value(hs[i]), half_value(ls[i])
      assert.is_true(math.abs(h - scaled) <= math.abs(scaled) * 2 ^ -11, ("hi of %a: %a"):format(v, h))
      assert.is_true(math.abs(h + l - scaled) <= math.abs(scaled) * 2 ^ -22 + 2 ^ -25, ("hi + lo of %a"):format(v))
    end
    assert.has_error(function() spk.blas.split_f16(spk.randn({ 3, 5 })) end,
      "f16 split: x must be contiguous with an even last dimension")
  end)

  it("names what is wrong with b16 before any device is needed", function()
    local a, b, c = spk.randn({ 4, 8 }), spk.randn({ 6, 8 }), spk.zeros({ 4, 6 })
    local hi, lo, e = spk.blas.split_f16(b)
    local function call(b16) return function() spk.blas.gemm { a = a, b = b, c = c, transb = true, b16 = b16, math = "3xtf32" } end end
    assert.has_error(call(3), "gemm: b16 must be a table {hi =, lo =, exponent =}, got number")
    assert.has_error(call({ hi = hi, lo = lo, exponent = 1.5 }), "gemm: b16.exponent must be an integer, got number")
    assert.has_error(call({ hi = hi, lo = 2, exponent = e }), "gemm: lo must be a tensor, got number")
    local ok, err = pcall(call({ hi = hi, lo = lo, exponent = e, scale = 1 }))
    assert.is_false(ok)
    assert.matches("scale", tostring(err))
    -- a_exponent means something only beside b16: refused, not ignored
    assert.has_error(function()
      spk.blas.gemm { a = a, b = b, c = c, transb = true, a_exponent = 14, math = "3xtf32" }
    end, "gemm: a_exponent scales a for b16's FP16 parts; give b16 too, or leave a_exponent out")
  end)

  gpu_it("splits on the device to the host's bits (FP16 parts)", function()
    local x = spk.randn({ 6, 128 }, { seed = 13 })
    local hh, hl, he = spk.blas.split_f16(x)
    local dh, dl, de = spk.blas.split_f16(x:cuda())
    assert.are.equal(he, de)
    assert.bits_equal(hh, dh:cpu())
    assert.bits_equal(hl, dl:cpu())
  end)

  gpu_it("runs B's FP16 parts (the TMA kernel's FP16 form) to FP32's accuracy: edges of m, n and k, batches, alpha and beta", function()
    local cases = {
      { m = 37, n = 512, k = 256, count = 2 },        -- one row tile, eight k-tiles
      { m = 300, n = 200, k = 128, count = 1 },       -- edge tiles in m and n
      { m = 129, n = 136, k = 8, count = 2 },         -- k shorter than a k-tile
      { m = 515, n = 64, k = 40, count = 2, a_batched = true }, -- a k-tile past the end
      { m = 257, n = 160, k = 64, count = 2, alpha = 0.5, beta = 1 },
    }
    check_split_form(cases, "FP16 parts", function(w, a)
      local hi, lo, e = spk.blas.split_f16(w)
      local a_exponent = spk.blas.f16_scale_exponent(math.max(a:max(), -a:min()))
      return function(g) g.b16, g.a_exponent = { hi = hi, lo = lo, exponent = e }, a_exponent end
    end)
    -- what the form cannot read, refused with the reason
    local w = spk.randn({ 2, 64, 60 }):cuda()
    local hi, lo, e = spk.blas.split_f16(w)
    assert.has_error(function()
      spk.blas.gemm { a = spk.randn({ 8, 60 }):cuda(), b = w, b16 = { hi = hi, lo = lo, exponent = e },
        c = spk.cuda.zeros({ 2, 8, 64 }), transb = true, math = "3xtf32" }
    end, "gemm 3xtf32 (TMA form): b's rows must be a multiple of 8 halves apart (60)")
    assert.has_error(function()
      spk.blas.gemm { a = spk.randn({ 8, 64 }):cuda(), b = spk.randn({ 2, 64, 64 }):cuda(),
        b16 = { hi = hi, lo = lo, exponent = e }, c = spk.cuda.zeros({ 2, 8, 64 }), transb = true, math = "fp32" }
    end)
    assert.has_error(function()
      spk.blas.gemm { a = spk.randn({ 8, 64 }):cuda(), b = w, b_lo = w, b16 = { hi = hi, lo = lo, exponent = e },
        c = spk.cuda.zeros({ 2, 8, 64 }), transb = true, math = "3xtf32" }
    end)
    local w64 = spk.randn({ 2, 64, 64 }):cuda()
    local h64, l64, e64 = spk.blas.split_f16(w64)
    assert.has_error(function()
      spk.blas.gemm { a = spk.randn({ 8, 64 }):cuda(), b = w64, b16 = { hi = h64, lo = l64, exponent = e64 },
        a_exponent = 127 - e64, c = spk.cuda.zeros({ 2, 8, 64 }), transb = true, math = "3xtf32" }
    end)
  end)

  it("check tool: writes a variant's kernel folder (the header's tunables set, every other file as it is)", function()
    local top = spec_tmpdir()
    finally(function() os.execute("rm -rf " .. shell_quote(top)) end)
    local dir = top .. "/own_stores"
    local tool = "tools/gemm_3xtf32_check.lua"
    local out, err, code = run_spk { "run", tool, "--tma-define", "SPK_TMA_STORE_C=0,SPK_TMA_STAGES=4",
                                     "--write-variant", dir }
    assert.are.equal(0, code, err)
    assert.matches("wrote .*SPK_TMA_STORE_C=0,SPK_TMA_STAGES=4", out)
    local kernels = spk.cuda.kernel_dir()
    for _, name in ipairs(spk.cuda.kernel_files(kernels)) do
      local mine, theirs = read_file(dir .. "/" .. name), read_file(kernels .. "/" .. name)
      if name == "gemm_3xtf32_tma.cuh" then
        assert.matches("\n#define SPK_TMA_STORE_C 0\n", mine)
        assert.matches("\n#define SPK_TMA_STAGES 4\n", mine)
        -- the default: C through TMA's store, beside 3 stages
        assert.matches("\n#define SPK_TMA_STORE_C 1\n", theirs)
        assert.matches("\n#define SPK_TMA_STAGES 3\n", theirs)
        local rest = mine:gsub("\n#define SPK_TMA_STORE_C 0\n", "\n#define SPK_TMA_STORE_C 1\n")
          :gsub("\n#define SPK_TMA_STAGES 4\n", "\n#define SPK_TMA_STAGES 3\n")
        assert.are.equal(theirs, rest)
      else
        assert.are.equal(theirs, mine, name)
      end
    end
    out, err, code = run_spk { "run", tool, "--tma-define", "SPK_TMA_STORE_C=0", "--write-variant", dir }
    assert.are.equal(2, code)
    assert.matches("own_stores: the folder is there already %(%-%-write%-variant makes a new one%)", err)
    out, err, code = run_spk { "run", tool, "--tma-define", "SPK_TMA_BK=64", "--write-variant", dir .. "2" }
    assert.are.equal(2, code)
    assert.matches("'SPK_TMA_BK' is no tunable of gemm_3xtf32_tma.cuh", err)
    out, err, code = run_spk { "run", tool, "--write-variant", dir .. "3" }
    assert.are.equal(2, code)
    assert.matches("%-%-write%-variant needs %-%-tma%-define", err)
  end)

  gpu_it("refuses, naming why, what the TMA form cannot read", function()
    local w = spk.randn({ 8, 96 }, { seed = 2 }):cuda()
    local hi, lo = spk.blas.split_tf32(w)
    local function err(g)
      local ok, e = pcall(spk.blas.gemm, g)
      assert.is_false(ok)
      return tostring(e)
    end
    local c = spk.cuda.zeros({ 16, 8 })
    assert.matches("a must run along k with unit stride",
      err { a = spk.randn({ 96, 16 }, { seed = 1 }):cuda(), transa = true, b = hi, b_lo = lo, c = c, transb = true,
            math = "3xtf32" })
    assert.matches('b_lo %(the small part of a split b%) needs math "3xtf32", got "fp32"',
      err { a = spk.randn({ 16, 96 }, { seed = 1 }):cuda(), b = hi, b_lo = lo, c = c, transb = true })
    local a61 = spk.randn({ 16, 61 }, { seed = 1 }):cuda()
    local h61, l61 = spk.blas.split_tf32(spk.randn({ 8, 61 }, { seed = 3 }):cuda())
    assert.matches("rows must be a multiple of 4 floats apart %(61%)",
      err { a = a61, b = h61, b_lo = l61, c = c, transb = true, math = "3xtf32" })
  end)
end)
