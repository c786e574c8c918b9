-- The input projections' GEMM in each form, alone, in one run: per shape the
-- split-TF32 kernels (the TMA form with B split beforehand, its FP16 parts'
-- form with B's FP16 parts and A scaled by the power of two its largest
-- magnitude asks, the classic form spk.blas.gemm runs for math "3xtf32"
-- without b_lo), cuBLAS FP32 and cuBLAS TF32, each timed, its throughput and pipe use, its error against an f64
-- product, and a verdict. GPU only.
--
--   build/spk run tools/gemm_3xtf32_check.lua [--shapes targets,batches,odd,layouts] [--rounds 5]
--                                             [--forms tma,f16,classic,fp32,tf32]
--                                             [--tma-define NAME=VALUE,...]
--
-- Shapes (gates[d] = x · W[d]ᵀ for both directions in one batched call, x
-- [M, K] ~ N(0, 1), W [2, 512, K] ~ U(±1/sqrt(128)); c [2, M, 512]):
--   targets  M = 150,784 (batch 256 x 589 steps), K = 60 and 256
--   batches  M = 589 x batch for batch 1, 8, 32, 64, 128, K = 60 and 256
--   odd      M = 1 .. 999 (odd), K = 60 and 256, N = 2 x 512, and N = 200,
--            72 (one matrix), K = 4, 12, 36, 100; a batched a; alpha, beta
--   layouts  the classic form's layouts (a transposed, k = 61 unaligned),
--            which the TMA form refuses with a message
-- Per row: ms (CUDA-graph replays, median), TFLOP/s of the FP32 product
-- (2 M N K / time), pipe % (tensor-core kernels: their TF32 products, three
-- a term for 3xtf32, against the dense TF32 peak of SMs x 1024 multiply-adds
-- a clock at the reported clock, the FP16 form's three at twice that rate; cuBLAS FP32: its FMAs against SMs x 128 a
-- clock), rel_l2 and max_abs against an f64 product on sampled rows (tile
-- edges included) and every column, rel_l2 against cuBLAS FP32 on the whole
-- output, and a verdict: "ok" when every sampled element is within its
-- bound ((K + 8) 2^-24 sum |a||w| for the FP32-class forms, 2^-9 sum |a||w|
-- for TF32) and the whole output is within 1e-6 relative L2 of cuBLAS FP32
-- (the FP32-class forms); else "FAIL" and the first element out of bound,
-- or the whole output's worst one. The TMA form's variant (its slice, order,
-- stages, how C is stored) is read from the kernel folder in use
-- ($SPK_KERNEL_DIR); --tma-define runs a variant: the tool copies that
-- folder to a temporary one with the tunables of kernels/gemm_3xtf32_tma.cuh
-- set as given (SPK_TMA_SLICE_STEPS, SPK_TMA_SMALL_FIRST, SPK_TMA_STAGES,
-- SPK_TMA_STORE_C; e.g. SPK_TMA_STORE_C=1,SPK_TMA_STAGES=3) and compiles
-- from it; with --write-variant DIR it writes that folder to DIR and exits
-- (no device needed), for other commands to use as $SPK_KERNEL_DIR.
-- The last line: "gemm check: N rows, N ok, N FAIL".
local spk = require "spk"

-- The usage line (the man page's) and what each flag takes, which a usage error prints.
local USAGE = [==[
spk run tools/gemm_3xtf32_check.lua [--shapes LIST] [--rounds N] [--forms LIST] [--tma-define NAME=VALUE,... [--write-variant DIR]] [--dry-run]
  --shapes         targets, batches, odd, layouts (default all four)
  --rounds         timed CUDA-graph replays a row (default 5)
  --forms          tma, f16, classic, fp32, tf32 (default all five)
  --tma-define     the TMA form's variant: tunables of gemm_3xtf32_tma.cuh set
                   in a copy of the kernel folder (SPK_TMA_SLICE_STEPS,
                   SPK_TMA_SMALL_FIRST, SPK_TMA_STAGES, SPK_TMA_STORE_C)
  --write-variant  write that kernel folder to DIR (a new folder) and exit
  --dry-run        list the rows it would time and exit (no device needed)]==]

local TUNABLES = { SPK_TMA_SLICE_STEPS = true, SPK_TMA_SMALL_FIRST = true, SPK_TMA_STAGES = true,
                   SPK_TMA_STORE_C = true }

-- --help from the header comment; the device is looked for below, after --write-variant
local options = require "spk.options"
local script = options.script { dry_run = true, usage = USAGE }

local opts = { shapes = { targets = true, batches = true, odd = true, layouts = true }, rounds = 5,
               forms = { "tma", "f16", "classic", "fp32", "tf32" }, defines = {} }
do
  local i = 1
  local args = script.args
  while i <= #args do
    local a, v = args[i], args[i + 1]
    if a == "--shapes" and v then
      opts.shapes = {}
      for _, s in ipairs(script:value(v, "shapes", options.choices, "shape",
        { targets = true, batches = true, odd = true, layouts = true })) do opts.shapes[s] = true end
      i = i + 1
    elseif a == "--rounds" and v then opts.rounds = script:value(v, "rounds", options.positive); i = i + 1
    elseif a == "--forms" and v then
      opts.forms = script:value(v, "forms", options.choices, "form", { tma = true, f16 = true, classic = true, fp32 = true, tf32 = true })
      i = i + 1
    elseif a == "--tma-define" and v then
      for item in v:gmatch("[^,]+") do
        local name, value = item:match("^([%w_]+)=(%d+)$")
        if not name then script:usage_error(("--tma-define: '%s' is not NAME=INTEGER"):format(item)) end
        if not TUNABLES[name] then script:usage_error(("--tma-define: '%s' is no tunable of gemm_3xtf32_tma.cuh"):format(name)) end
        opts.defines[#opts.defines + 1] = { name = name, value = value }
      end
      i = i + 1
    elseif a == "--write-variant" and v then opts.write_variant = v; i = i + 1
    else script:usage_error(("unknown argument '%s'"):format(a)) end
    i = i + 1
  end
end

local function defines_text()
  local t = {}
  for _, d in ipairs(opts.defines) do t[#t + 1] = d.name .. "=" .. d.value end
  return table.concat(t, ",")
end

-- A variant: the kernel folder copied to `dir` with the header's tunables
-- set as --tma-define gives them.
local function write_variant(dir)
  local src = spk.cuda.kernel_dir()
  for _, name in ipairs(spk.cuda.kernel_files(src)) do
    local f = assert(io.open(src .. "/" .. name, "rb"))
    local text = f:read("a")
    f:close()
    if name == "gemm_3xtf32_tma.cuh" then
      for _, d in ipairs(opts.defines) do
        local n
        text, n = text:gsub("\n#define " .. d.name .. " [^\n]*", "\n#define " .. d.name .. " " .. d.value)
        if n ~= 1 then
          io.stderr:write(("gemm_3xtf32_check: %s/%s defines %s %d times, not once\n"):format(src, name, d.name, n))
          os.exit(2)
        end
      end
    end
    local ok, err = pcall(spk.files.write, dir .. "/" .. name, text)
    if not ok then
      io.stderr:write("gemm_3xtf32_check: ", tostring(err), "\n")
      os.exit(2)
    end
  end
end

if opts.write_variant then
  if #opts.defines == 0 then script:usage_error("--write-variant needs --tma-define") end
  local ok, err, made = pcall(spk.files.make_folder, opts.write_variant)
  if not ok or not made then
    io.stderr:write(("gemm_3xtf32_check: %s\n"):format(ok and opts.write_variant .. ": the folder is there already "
      .. "(--write-variant makes a new one)" or tostring(err)))
    os.exit(2)
  end
  write_variant(opts.write_variant)
  print(("gemm_3xtf32_check: wrote %s: the kernel folder with %s"):format(opts.write_variant, defines_text()))
  os.exit(0)
end

local function label(c)
  return ("M %d N %sx%d K %d%s"):format(c.m, c.count == 1 and "1" or tostring(c.count or 2), c.n, c.k, c.tag or "")
end

local cases = {}
local function add(c)
  c.label = label(c)
  cases[#cases + 1] = c
end
if opts.shapes.targets then
  add { m = 150784, n = 512, k = 256, target = 0.85 }
  add { m = 150784, n = 512, k = 60, target = 0.30 }
end
if opts.shapes.batches then
  for _, b in ipairs { 1, 8, 32, 64, 128 } do
    add { m = 589 * b, n = 512, k = 60, tag = (" (batch %d)"):format(b) }
    add { m = 589 * b, n = 512, k = 256, tag = (" (batch %d)"):format(b) }
  end
end
if opts.shapes.odd then
  for _, m in ipairs { 1, 3, 37, 127, 129, 255, 257, 601, 999 } do
    add { m = m, n = 512, k = 60 }
    add { m = m, n = 512, k = 256 }
  end
  add { m = 333, n = 200, k = 60, count = 1 }
  add { m = 129, n = 72, k = 256, count = 1 }
  for _, k in ipairs { 4, 12, 36, 100 } do add { m = 301, n = 136, k = k } end
  add { m = 515, n = 128, k = 64, a_batched = true, tag = ", a batched" }
  add { m = 257, n = 160, k = 60, alpha = 0.5, beta = 1, tag = ", alpha 0.5 beta 1" }
end
-- the work, listed (--dry-run prints it)
local work = {}
for _, c in ipairs(cases) do
  for _, form in ipairs(opts.forms) do work[#work + 1] = ("%s: %s"):format(c.label, form) end
end
if opts.shapes.layouts then
  work[#work + 1] = "layout a transposed: the TMA form's refusal, the classic form against cuBLAS FP32"
  work[#work + 1] = "layout k 61 (unaligned rows): the TMA form's refusal, the classic form against cuBLAS FP32"
end
local status = script:plan(work)

if not spk.cuda.available() then os.exit(options.no_gpu("gemm_3xtf32_check")) end

-- The variant of this run: in a temporary folder, used for every compile
-- (removed at the end).
local variant_dir
if #opts.defines > 0 then
  local p = assert(io.popen("mktemp -d \"${TMPDIR:-/tmp}/spk-gemm-variant-XXXXXX\""))
  variant_dir = p:read("l")
  p:close()
  assert(variant_dir and variant_dir ~= "", "gemm_3xtf32_check: mktemp -d failed")
  write_variant(variant_dir)
  assert(spk.cuda.set_kernel_dir(variant_dir), "gemm_3xtf32_check: cannot use " .. variant_dir)
end

local dev = spk.cuda.device()
local sms, clock_hz = dev.sms, dev.clock_khz * 1e3
local tensor_peak = sms * 1024 * 2 * clock_hz -- dense TF32 FLOP/s
local fma_peak = sms * 128 * 2 * clock_hz

-- The TMA form's variant: the defaults of the kernel folder's header.
local function tma_variant()
  local dir = spk.cuda.kernel_dir()
  local f = io.open(dir .. "/gemm_3xtf32_tma.cuh")
  local text = f and f:read("a") or ""
  if f then f:close() end
  local function value(name) return text:match("#define " .. name .. " (%d+)") or "?" end
  return ("slice %s, small first %s, stages %s, C by TMA's store %s (%s)"):format(value("SPK_TMA_SLICE_STEPS"),
    value("SPK_TMA_SMALL_FIRST"), value("SPK_TMA_STAGES"), value("SPK_TMA_STORE_C"),
    variant_dir and "kernels copied with " .. defines_text() or dir)
end
print(("gemm_3xtf32_check: %s, %d SMs at %.0f MHz; TMA form: %s"):format(dev.name, sms, clock_hz / 1e6,
  tma_variant()))

-- ---- the forms ----------------------------------------------------------------

-- Each form runs c = alpha a · bᵀ + beta c for the operands of a case.
local forms = {
  tma = { math = "3xtf32", products = 3, class = "fp32",
          run = function(o, stream)
            spk.blas.gemm { a = o.a, b = o.b_hi, b_lo = o.b_lo, c = o.c, transa = o.transa, transb = true,
                            alpha = o.alpha, beta = o.beta, math = "3xtf32", stream = stream }
          end },
  f16 = { math = "3xtf32", products = 1.5, class = "fp32",
          run = function(o, stream)
            if not o.b16 then error(o.b16_error, 0) end -- (without b16 the call would run the classic form)
            spk.blas.gemm { a = o.a, b = o.b, b16 = o.b16, a_exponent = o.a_exponent, c = o.c, transa = o.transa,
                            transb = true, alpha = o.alpha, beta = o.beta, math = "3xtf32", stream = stream }
          end },
  classic = { math = "3xtf32", products = 3, class = "fp32",
              run = function(o, stream)
                spk.blas.gemm { a = o.a, b = o.b, c = o.c, transa = o.transa, transb = true, alpha = o.alpha,
                                beta = o.beta, math = "3xtf32", stream = stream }
              end },
  fp32 = { math = "fp32", products = 0, class = "fp32",
           run = function(o, stream)
             spk.blas.gemm { a = o.a, b = o.b, c = o.c, transa = o.transa, transb = true, alpha = o.alpha,
                             beta = o.beta, math = "fp32", stream = stream }
           end },
  tf32 = { math = "tf32", products = 1, class = "tf32",
           run = function(o, stream)
             spk.blas.gemm { a = o.a, b = o.b, c = o.c, transa = o.transa, transb = true, alpha = o.alpha,
                             beta = o.beta, math = "tf32", stream = stream }
           end },
}

-- ---- the f64 product on sampled rows -------------------------------------------

-- Rows to check: tile edges (0, 63, 64, 127, 128, the last ones) and a spread.
local function sample_rows(m)
  local rows, seen = {}, {}
  local function add(r) if r >= 1 and r <= m and not seen[r] then seen[r] = true; rows[#rows + 1] = r end end
  if m <= 48 then
    for r = 1, m do add(r) end
  else
    for _, r in ipairs { 1, 2, 64, 65, 128, 129, 130, m, m - 1, m - 127, m - 128 } do add(r) end
    for i = 1, 24 do add(1 + (i * 7919) % m) end
  end
  table.sort(rows)
  return rows
end

-- c0 + alpha a[r] · w[z][j] in f64, and alpha sum |a||w| + |beta c0| (the
-- scale of its rounding), per sampled row r, matrix z, column j.
local function reference(case)
  local w = case.w_host:tolist() -- [count][n][k] or [n][k]
  local count = case.count
  local ref = {}
  for _, r in ipairs(case.rows) do
    ref[r] = {}
    for z = 1, count do
      local ar = case.a_batched and case.a_host:select(1, z):select(1, r):tolist() or case.a_rows[r]
      local wz = case.b_batched and w[z] or w
      local c0 = case.beta ~= 0 and (case.count_c and case.c0_host:select(1, z) or case.c0_host):select(1, r):tolist()
      local out, scale = {}, {}
      for j = 1, case.n do
        local wj, s, sa = wz[j], 0, 0
        for p = 1, case.k do
          local t = ar[p] * wj[p]
          s, sa = s + t, sa + math.abs(t)
        end
        s, sa = case.alpha * s, math.abs(case.alpha) * sa
        if c0 then s, sa = s + case.beta * c0[j], sa + math.abs(case.beta * c0[j]) end
        out[j], scale[j] = s, sa
      end
      ref[r][z] = { value = out, scale = scale }
    end
  end
  return ref
end

-- Error of an output (host [count, m, n] or [m, n]) on the sampled rows:
-- rel_l2, max_abs, and the first element beyond bound(k, scale).
local function against_f64(case, host, ref, bound)
  local num, den, max_abs, first = 0, 0, 0, nil
  for _, r in ipairs(case.rows) do
    for z = 1, case.count do
      local got = (case.count_c and host:select(1, z) or host):select(1, r):tolist()
      local want = ref[r][z]
      for j = 1, case.n do
        local e = got[j] - want.value[j]
        num, den = num + e * e, den + want.value[j] * want.value[j]
        if math.abs(e) > max_abs or e ~= e then max_abs = math.abs(e) end
        if not first and not (math.abs(e) <= bound(case.k, want.scale[j])) then
          first = ("matrix %d row %d column %d: %.9g, f64 %.9g (|error| %.3g, bound %.3g)"):format(z, r, j, got[j],
            want.value[j], math.abs(e), bound(case.k, want.scale[j]))
        end
      end
    end
  end
  return math.sqrt(num / math.max(den, 1e-300)), max_abs, first
end

local bounds = {
  fp32 = function(k, scale) return (k + 8) * 2 ^ -24 * scale + 1e-30 end,
  tf32 = function(_, scale) return 2 ^ -9 * scale + 1e-30 end,
}

-- ---- one case: every form on the same operands -------------------------------

local tally = { rows = 0, ok = 0, fail = 0 }
local targets = {}

local function header()
  print(("%-34s %-8s %9s %8s %7s %11s %10s %11s  %s"):format("shape", "form", "ms", "TFLOP/s", "pipe %",
    "rel_l2 f64", "max_abs", "vs fp32", "verdict"))
end

local function run_case(c)
  c.alpha, c.beta = c.alpha or 1, c.beta or 0
  c.count = c.count or 2
  c.b_batched = c.count > 1
  local m, n, k = c.m, c.n, c.k
  c.a_host = c.a_batched and spk.randn({ c.count, m, k }, { seed = k + m }) or spk.randn({ m, k }, { seed = k + m })
  local bound_w = 1 / math.sqrt(128)
  c.w_host = c.count > 1 and spk.rand({ c.count, n, k }, { low = -bound_w, high = bound_w, seed = 7 + k })
    or spk.rand({ n, k }, { low = -bound_w, high = bound_w, seed = 7 + k })
  c.count_c = c.count > 1
  local cshape = c.count_c and { c.count, m, n } or { m, n }
  c.c0_host = c.beta ~= 0 and spk.randn(cshape, { seed = 3 }) or nil
  c.rows = sample_rows(m)
  c.a_rows = {}
  if not c.a_batched then
    for _, r in ipairs(c.rows) do c.a_rows[r] = c.a_host:select(1, r):tolist() end
  end
  local ref = reference(c)
  local o = { a = c.a_host:cuda(), b = c.w_host:cuda(), alpha = c.alpha, beta = c.beta }
  o.b_hi, o.b_lo = spk.blas.split_tf32(o.b)
  local split_ok, hi, lo, e = pcall(spk.blas.split_f16, o.b)
  if split_ok then
    o.b16 = { hi = hi, lo = lo, exponent = e }
    o.a_exponent = spk.blas.f16_scale_exponent(math.max(c.a_host:max(), -c.a_host:min()))
  else
    o.b16_error = tostring(hi)
  end
  if k % 8 ~= 0 then -- FP16 rows of k halves are not 16 bytes apart (or k is odd): the form refuses them
    c.refused = c.refused or {}
    c.refused.f16 = k % 2 == 0 and "multiple of 8 halves" or "even last dimension"
  end
  local outs, lines = {}, {}
  local flops = 2 * c.count * m * n * k
  for _, name in ipairs(opts.forms) do
    local f = forms[name]
    local line = { form = name }
    local ok, err = pcall(function()
      o.c = c.c0_host and c.c0_host:cuda() or spk.cuda.zeros(cshape)
      f.run(o, nil)
      local host = o.c:cpu()
      outs[name] = host
      line.rel, line.max_abs, line.first = against_f64(c, host, ref, bounds[f.class])
      if c.beta ~= 0 then o.c = spk.cuda.zeros(cshape) end -- timed replays need not accumulate into c0
      local t = spk.bench(function(stream) f.run(o, stream) end, { rounds = opts.rounds, graph = true })
      line.ms = t.median_ms
      line.tflops = flops / (t.median_ms * 1e-3) / 1e12
      line.pipe = f.products > 0 and 100 * f.products * flops / (t.median_ms * 1e-3) / tensor_peak
        or 100 * flops / (t.median_ms * 1e-3) / fma_peak
    end)
    if not ok then line.error = tostring(err):gsub("^[^\n]-%.lua:%d+: ", "") end
    lines[#lines + 1] = line
  end
  for _, line in ipairs(lines) do
    local f = forms[line.form]
    tally.rows = tally.rows + 1
    local verdict
    if line.error then
      verdict = c.refused and c.refused[line.form] and line.error:find(c.refused[line.form], 1, true)
        and "ok (refused: " .. line.error .. ")" or "FAIL: " .. line.error
    else
      local vs = outs.fp32 and spk.compare(outs[line.form], outs.fp32) or nil
      line.vs = vs and vs.rel_l2
      if line.first then
        verdict = "FAIL: first element out of bound: " .. line.first
      elseif f.class == "fp32" and vs and not (vs.rel_l2 <= 1e-6) then
        verdict = ("FAIL: %.3g from cuBLAS FP32 over the whole output; worst at %s: %.9g against %.9g"):format(
          vs.rel_l2, table.concat(vs.worst or {}, ","), vs.a_worst or 0 / 0, vs.b_worst or 0 / 0)
      else
        verdict = "ok"
      end
    end
    if verdict:match("^ok") then tally.ok = tally.ok + 1 else tally.fail = tally.fail + 1 end
    local function num(fmt, v) return v and fmt:format(v) or "-" end
    print(("%-34s %-8s %9s %8s %7s %11s %10s %11s  %s"):format(c.label, line.form, num("%.4f", line.ms),
      num("%.1f", line.tflops), num("%.0f", line.pipe), num("%.3e", line.rel), num("%.3e", line.max_abs),
      num("%.3e", line.vs), verdict))
    if c.target and line.ms then targets[#targets + 1] = { case = c, line = line } end
  end
  -- the split-TF32 forms against cuBLAS FP32's own error on these operands
  -- (where enough rows are sampled for the comparison to mean something)
  if not (c.target or m >= 4096) then
    collectgarbage()
    return
  end
  local fp32 = nil
  for _, line in ipairs(lines) do if line.form == "fp32" then fp32 = line end end
  for _, line in ipairs(lines) do
    if fp32 and fp32.rel and line.rel and forms[line.form].math == "3xtf32" then
      print(("%-34s %-8s error %.3e against cuBLAS FP32's %.3e: %s"):format(c.label, line.form, line.rel, fp32.rel,
        line.rel <= fp32.rel and "no worse" or "WORSE"))
    end
  end
  collectgarbage()
end

header()
for _, c in ipairs(cases) do
  status:step(c.label)
  run_case(c)
end

if opts.shapes.layouts then
  -- what the TMA form cannot read: it refuses with a message, the classic form runs it
  local function layout(name, m, n, k, transa, why)
    local a = (transa and spk.randn({ k, m }, { seed = 1 }) or spk.randn({ m, k }, { seed = 1 })):cuda()
    local b = spk.randn({ n, k }, { seed = 2 }):cuda()
    local hi, lo = spk.blas.split_tf32(b)
    local c1, c2, c3 = spk.cuda.zeros({ m, n }), spk.cuda.zeros({ m, n }), spk.cuda.zeros({ m, n })
    local ok, err = pcall(spk.blas.gemm, { a = a, b = hi, b_lo = lo, c = c1, transa = transa, transb = true,
                                          math = "3xtf32" })
    spk.blas.gemm { a = a, b = b, c = c2, transa = transa, transb = true, math = "3xtf32" }
    spk.blas.gemm { a = a, b = b, c = c3, transa = transa, transb = true, math = "fp32" }
    local vs = spk.compare(c2:cpu(), c3:cpu()).rel_l2
    local refused = not ok and tostring(err):find(why, 1, true)
    tally.rows = tally.rows + 1
    local good = refused and vs <= 1e-6
    if good then tally.ok = tally.ok + 1 else tally.fail = tally.fail + 1 end
    print(("layout %-22s TMA form: %s; classic form vs cuBLAS FP32 rel_l2 %.3e: %s"):format(name,
      ok and "ran (expected a refusal)" or tostring(err):gsub("^[^\n]-%.lua:%d+: ", ""), vs, good and "ok" or "FAIL"))
  end
  layout("a transposed", 257, 130, 96, true, "a must run along k with unit stride")
  layout("k 61 (unaligned rows)", 300, 200, 61, false, "rows must be a multiple of 4 floats apart")
end

for _, t in ipairs(targets) do
  if t.line.form == "tma" or t.line.form == "f16" or t.line.form == "classic" then
    print(("target %s: %s %.4f ms against %.2f: %s"):format(t.case.label, t.line.form, t.line.ms, t.case.target,
      t.line.ms <= t.case.target and "met" or "missed"))
  end
end
print(("gemm check: %d rows, %d ok, %d FAIL"):format(tally.rows, tally.ok, tally.fail))
if variant_dir then os.execute("rm -rf '" .. variant_dir .. "'") end
