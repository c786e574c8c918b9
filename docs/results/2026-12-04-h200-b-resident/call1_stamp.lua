-- stamp.lua FORM M K [once]: runs the GEMM, prints the stamps its stamped kernel writes into C's padding columns
local spk = require "spk"
local form, m, k, once = arg[1], math.tointeger(tonumber(arg[2])), math.tointeger(tonumber(arg[3])), arg[4] == "once"
local a = spk.randn({ m, k }, { seed = 1 }):cuda()
local bw = 1 / math.sqrt(128)
local w = spk.rand({ 2, 512, k }, { low = -bw, high = bw, seed = 2 }):cuda()
local cfull = spk.cuda.zeros({ 2, m, 512 + 32 })
local c = cfull:narrow(3, 1, 512)
local run
if form == "f16" then
  local hi, lo, e = spk.blas.split_f16(w)
  local b16 = { hi = hi, lo = lo, exponent = e }
  local ae = spk.blas.f16_scale_exponent(8.0)
  run = function(stream) spk.blas.gemm { a = a, b = w, b16 = b16, a_exponent = ae, c = c, transb = true, math = "3xtf32", stream = stream } end
else
  local hi, lo = spk.blas.split_tf32(w)
  run = function(stream) spk.blas.gemm { a = a, b = hi, b_lo = lo, c = c, transb = true, math = "3xtf32", stream = stream } end
end
run(nil)
if once then return end
local t = spk.bench(run, { rounds = 5, graph = true })
print(("%s M %d K %d: %.4f ms"):format(form, m, k, t.median_ms))
run(nil)
local pad = cfull:select(1, 1):narrow(1, 1, 16):cpu():narrow(2, 513, 32):tolist()
local clk = spk.cuda.device().clock_khz * 1e3
for r = 1, 16 do
  local b, role = (r - 1) // 4, (r - 1) % 4
  local v = pad[r]
  if role < 2 then
    local per = v[1] > 0 and 1 / v[1] or 0
    local s = ("b%d C%d tiles %d total %d | per tile: wait %.0f work %.0f epi %.0f gap %.0f | tile20:"):format(b, role, v[1], v[2],
      v[3] * per, v[4] * per, v[5] * per, v[6] * per)
    for i = 0, 7 do s = s .. (" %d/%d"):format(v[7 + 2 * i], v[8 + 2 * i]) end
    print(s .. (" epi %d-%d"):format(v[23], v[24]))
  elseif role == 2 then
    local s = ("b%d P  tiles %d total %d | empty wait per tile %.0f | tile20 issue:"):format(b, v[1], v[2], v[1] > 0 and v[3] / v[1] or 0)
    for i = 0, 7 do s = s .. (" %d"):format(v[4 + i]) end
    print(s)
  end
end
print(("clock %.0f MHz"):format(clk / 1e6))
