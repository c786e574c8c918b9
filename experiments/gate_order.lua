-- gate_order: the weight layout experiment: the 24 gate orders, on the CPU
-- and through a kernel that takes each of them.
--
-- The built-in kernels take their weights packed in one layout: each hidden
-- unit's four gate rows adjacent (interleaved, packed row u*4 + p) in gate
-- order i, f, c, o ("ifco"). A kernel of one's own takes any order in either
-- layout (docs/kernels.md): the plan packs W, R and the bias as its spec says
-- and tells the kernel where each gate sits (SPK_GATE_I, _F, _C, _O and
-- SPK_PACK_ROWS). For each of the 24 orders of the gates i, o, f, c:
--   * exactness: packing ONNX weights W, R (and the summed bias) into that
--     order, interleaved, and unpacking them again gives the original bits;
--     packed row u*4 + p holds ONNX row g*H + u of the gate at position p;
--     reordering the gate blocks (blocked layout) there and back also gives
--     the original bits, and the f32 reference on the round-tripped stack
--     gives bitwise the same output as on the original;
--   * the CPU cost of the two layouts: milliseconds to pack (interleaved,
--     spk.lstm.pack_directions) and to reorder blocks (spk.lstm.reorder_gates)
--     one layer's W and R, median over rounds;
--   * the kernel (--kernel, default experiments/kernels/row_block.lua), in that
--     order and in both layouts ("units" interleaved, "rows" blocked):
--     compiled with NVRTC and its contract checked (no GPU needed); on a GPU
--     run through the stack at --batch, checked against the f64 reference,
--     compared bit for bit with its "ifco" interleaved run (the same
--     arithmetic on other addresses: the same bits are expected) and timed
--     (CUDA-graph replays): what each order costs on the GPU.
--
-- GPU: optional. Without one the packing part and the kernel's compiles run
-- (exit 0); the GPU columns stay empty.
-- Run: build/spk run experiments/gate_order.lua [--quick] [--rounds N] [--kernel FILE] [--out DIR]
-- Writes: gate_order.csv, gate_order.json, pack_ms.svg (bars per order: the median,
-- min-max of the rounds as whiskers), and on a GPU kernel_ms.svg (ms per forward per
-- order and layout, the same way).
local spk = require "spk"
local experiment = require "spk.experiment"
local plot = require "spk.plot"

local default_kernel = (spk.find_dir("experiments") or "experiments") .. "/kernels/row_block.lua"
local ex = experiment.start {
  name = "gate_order", gpu = "optional",
  about = "The 24 gate orders: packing round trips and CPU cost, and a kernel taking each order, checked and timed.",
  batches = { 2 }, quick_batches = { 1 },
  options = { { "rounds", 9, quick = 3, help = "timed rounds per order (packing and kernel)" },
              { "steps", 589, quick = 40, help = "time steps of the reference checks" },
              { "kernel", default_kernel, help = "the kernel file run in each order" },
              { "layouts", { "units", "rows" }, quick = { "units" }, help = "the kernel's layouts" } },
}
local rounds, steps = ex.opts.rounds, ex.opts.steps

-- The 24 orders of "iofc".
local orders = {}
local function permute(prefix, rest)
  if #rest == 0 then orders[#orders + 1] = prefix return end
  for i = 1, #rest do permute(prefix .. rest:sub(i, i), rest:sub(1, i - 1) .. rest:sub(i + 1)) end
end
permute("", "iofc")

local spec = spk.lstm.kernel_file(ex.opts.kernel)
ex:describe { seeds = { weights = 1, input = 1 }, dtype = "f32", math = { "fp32" },
              shape = { layers = 4, input = 60, hidden = 128, steps = steps, batches = ex.batches },
              backends = { "cpu", spec.name }, variants = orders, kernel = ex.opts.kernel }
local work = { "f32 reference on the original stack" }
for _, order in ipairs(orders) do work[#work + 1] = ("order %s: round trips, reference, packing time"):format(order) end
if ex.gpu then work[#work + 1] = "f64 reference" end
for _, layout in ipairs(ex.opts.layouts) do
  for _, order in ipairs(orders) do
    work[#work + 1] = ("kernel %s, %s %s: compile and check%s"):format(spec.name, order, layout,
      ex.gpu and ", run and time" or "")
  end
end
ex:plan(work)

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local H = 128
local x = spk.randn({ ex.batches[1], steps, 60 }, { seed = 1 })
ex:progress("f32 reference on the original stack (batch %d, %d steps) ...", ex.batches[1], steps)
ex:step("f32 reference on the original stack")
local y0 = spk.lstm.reference(layers, x, { precision = "f32" })

local function bitwise_equal(a, b)
  local c = spk.compare(a, b)
  return c.max_ulp == 0 and c.nan_mismatch == 0
end

-- Packed row u*4 + p must hold ONNX row g*H + u, g the gate at position p.
local function rows_in_place(W, P, order)
  for _, u in ipairs { 1, 37, H } do
    for p = 1, 4 do
      local g = ("iofc"):find(order:sub(p, p), 1, true)
      for _, d in ipairs { 1, 2 } do
        if P:get(d, (u - 1) * 4 + p, 1) ~= W:get(d, (g - 1) * H + u, 1) then return false end
      end
    end
  end
  return true
end

local rows = {}
for n, order in ipairs(orders) do
  ex:progress("order %s (%d/%d) ...", order, n, #orders)
  ex:step(("order %s"):format(order))
  local l1 = layers[1]
  local row = { order = order }
  local PW = spk.lstm.pack_directions(l1.W, { to = order })
  local PR = spk.lstm.pack_directions(l1.R, { to = order })
  row.interleaved_round_trip = bitwise_equal(spk.lstm.unpack_directions(PW, { to = order }), l1.W)
    and bitwise_equal(spk.lstm.unpack_directions(PR, { to = order }), l1.R)
  row.rows_in_place = rows_in_place(l1.W, PW, order)
  local PB = spk.lstm.pack_bias(l1.B, { to = order })
  local sum = l1.B:narrow(2, 1, 4 * H) + l1.B:narrow(2, 4 * H + 1, 4 * H)
  row.bias_summed = bitwise_equal(spk.lstm.unpack_directions(PB:view { 2, 4 * H, 1 }, { to = order }),
    sum:view { 2, 4 * H, 1 })
  -- Blocked layout: gate blocks reordered there and back, for every layer,
  -- then the reference on the round-tripped stack.
  local back = {}
  for k, l in ipairs(layers) do
    local function rt(t, dim) return spk.lstm.reorder_gates(spk.lstm.reorder_gates(t, dim, "iofc", order), dim, order, "iofc") end
    -- B [2, 8H] is Wb then Rb: as [2, 2, 4H] its gate blocks lie along dim 3
    local Bb = rt(l.B:view { 2, 2, 4 * H }, 3):view { 2, 8 * H }
    back[k] = { W = rt(l.W, 2), R = rt(l.R, 2), B = Bb }
  end
  local y = spk.lstm.reference(back, x, { precision = "f32" })
  row.reference_bitwise = bitwise_equal(y, y0)
  local samples
  row.interleaved_ms, samples = experiment.time_cpu(function()
    spk.lstm.pack_directions(l1.W, { to = order })
    spk.lstm.pack_directions(l1.R, { to = order })
  end, rounds, 1)
  row.interleaved_min_ms, row.interleaved_max_ms = math.min(table.unpack(samples)), math.max(table.unpack(samples))
  row.blocked_ms, samples = experiment.time_cpu(function()
    spk.lstm.reorder_gates(l1.W, 2, "iofc", order)
    spk.lstm.reorder_gates(l1.R, 2, "iofc", order)
  end, rounds, 1)
  row.blocked_min_ms, row.blocked_max_ms = math.min(table.unpack(samples)), math.max(table.unpack(samples))
  row.ok = row.interleaved_round_trip and row.rows_in_place and row.bias_summed and row.reference_bitwise
  rows[#rows + 1] = row
  collectgarbage()
end

-- The kernel in each order and layout: compiled and checked everywhere, run on a GPU.
local x_gpu, ref64 = x, nil
if ex.gpu then
  ex:progress("f64 reference (batch %d, %d steps) ...", ex.batches[1], steps)
  ex:step("f64 reference")
  ref64 = spk.lstm.reference(layers, x, { precision = "f64" })
end
local baseline -- the "ifco" interleaved output, the bits every order is compared with
local kernel_rows = {}
for _, layout in ipairs(ex.opts.layouts) do
  for _, order in ipairs(orders) do
    local o = {}
    for k, v in pairs(spec) do o[k] = v end
    o.packing = { order = order, layout = layout }
    local krow = { order = order, layout = layout }
    ex:step(("kernel %s %s"):format(order, layout))
    local ok, err = pcall(function()
      spk.lstm.kernel_check(o, { batch = ex.batches[1], steps = steps })
      krow.contract = true
      if not ex.gpu then return end
      o.layers, o.batch, o.steps = layers, ex.batches[1], steps
      local plan <close> = spk.lstm.kernel_stack(o)
      local y = plan:forward(x_gpu)
      local c = spk.compare(y, ref64)
      krow.rel_l2, krow.max_abs = c.rel_l2, c.max_abs
      if order == "ifco" and layout == "units" then baseline = y end
      krow.y = y
      local t = plan:time { rounds = rounds, warmup = 2, x = x_gpu }
      krow.gpu_ms, krow.gpu_min_ms, krow.gpu_max_ms = t.median_ms, t.min_ms, t.max_ms
    end)
    if not ok then krow.error = experiment.reason(err) end
    ex:progress("kernel %s %s: %s", order, layout, krow.error or (krow.gpu_ms and ("%.3f ms"):format(krow.gpu_ms))
      or "compiled, contract kept")
    kernel_rows[#kernel_rows + 1] = krow
  end
end
if baseline == nil then -- "units" not run: the first order's bits are the baseline
  for _, k in ipairs(kernel_rows) do baseline = baseline or k.y end
end
for _, k in ipairs(kernel_rows) do
  if k.y and baseline then
    local d = spk.compare(k.y, baseline)
    k.same_bits = d.max_ulp == 0 and d.nan_mismatch == 0
  end
  k.y = nil
end
-- The kernel's columns beside each order's packing row (the first layout's; every layout in the JSON and CSV).
for _, r in ipairs(rows) do
  for _, k in ipairs(kernel_rows) do
    if k.order == r.order and k.layout == ex.opts.layouts[1] then
      r.contract, r.gpu_ms, r.rel_l2, r.same_bits, r.kernel_error = k.contract, k.gpu_ms, k.rel_l2, k.same_bits,
        k.error
    end
  end
end

local report = require "spk.report"
local columns = { "order", { key = "ok", title = "all exact" }, { key = "interleaved_round_trip", title = "round trip" },
                  { key = "rows_in_place", title = "rows" }, { key = "bias_summed", title = "bias" },
                  { key = "reference_bitwise", title = "reference" },
                  { key = "interleaved_ms", title = "pack ms (interleaved)", format = report.fmt_ms },
                  { key = "blocked_ms", title = "reorder ms (blocked)", format = report.fmt_ms },
                  { key = "contract", title = "kernel compiles" } }
if ex.gpu then
  for _, c in ipairs { { key = "gpu_ms", title = ("%s ms (%s)"):format(spec.name, ex.opts.layouts[1]), format = report.fmt_ms },
                       { key = "rel_l2", title = "rel L2 vs f64", format = report.fmt_sci },
                       { key = "same_bits", title = "bits = ifco" } } do
    columns[#columns + 1] = c
  end
end
columns[#columns + 1] = { key = "kernel_error", title = "kernel error", empty = "" }
ex:table(rows, columns, { title = ("Gate orders: layer 1's W [2, 512, 60] and R [2, 512, 128], median of %d rounds; %s at batch %d"):format(
  rounds, spec.name, ex.batches[1]),
  footer = ex.gpu and "The built-in kernels take \"ifco\" interleaved; the kernel column runs each order through the stack."
    or "No GPU: the kernel was compiled and its contract checked in every order; running it needs a GPU." })
if #ex.opts.layouts > 1 then
  ex:table(kernel_rows, { "order", "layout", { key = "contract", title = "compiles" },
                          { key = "gpu_ms", title = "ms", format = report.fmt_ms },
                          { key = "rel_l2", title = "rel L2", format = report.fmt_sci },
                          { key = "same_bits", title = "bits = ifco units" },
                          { key = "error", title = "error", empty = "" } },
    { title = ("%s in every order and layout"):format(spec.name) })
end
ex:csv("gate_order.csv", rows, { "order", "ok", "interleaved_round_trip", "rows_in_place", "bias_summed",
                                 "reference_bitwise", "interleaved_ms", "interleaved_min_ms", "interleaved_max_ms",
                                 "blocked_ms", "blocked_min_ms", "blocked_max_ms", "contract", "gpu_ms", "rel_l2",
                                 "same_bits", "kernel_error" })
ex:json("gate_order.json", { rows = rows, kernel = kernel_rows, kernel_file = ex.opts.kernel, rounds = rounds,
                             steps = steps, batch = ex.batches[1] })
local names = {}
local inter = { name = "interleaved (pack)", values = {}, low = {}, high = {} }
local blocked = { name = "blocked (reorder)", values = {}, low = {}, high = {} }
for i, r in ipairs(rows) do
  names[i] = r.order
  inter.values[i], inter.low[i], inter.high[i] = r.interleaved_ms, r.interleaved_min_ms, r.interleaved_max_ms
  blocked.values[i], blocked.low[i], blocked.high[i] = r.blocked_ms, r.blocked_min_ms, r.blocked_max_ms
end
local spread = ("median, min-max of %d rounds"):format(rounds)
ex:svg("pack_ms.svg", plot.bar {
  title = "CPU cost of each gate order (layer 1, W and R)", x_label = "gate order", y_label = "ms",
  categories = names, width = 1100, series = { inter, blocked }, spread = spread })
local timed = false
for _, k in ipairs(kernel_rows) do timed = timed or k.gpu_ms ~= nil end
if timed then
  local series = {}
  for _, layout in ipairs(ex.opts.layouts) do
    local one = { name = layout, values = {}, low = {}, high = {} }
    for i, order in ipairs(names) do
      for _, k in ipairs(kernel_rows) do
        if k.order == order and k.layout == layout and k.gpu_ms then
          one.values[i], one.low[i], one.high[i] = k.gpu_ms, k.gpu_min_ms, k.gpu_max_ms
        end
      end
    end
    series[#series + 1] = one
  end
  ex:svg("kernel_ms.svg", plot.bar { title = ("%s: ms per forward in each gate order (batch %d)"):format(spec.name,
    ex.batches[1]), x_label = "gate order", y_label = "ms", categories = names, width = 1100, series = series,
    spread = spread })
end
ex:finish()
for _, r in ipairs(rows) do
  if not r.ok then
    io.stderr:write(("gate_order: order %s is not exact\n"):format(r.order))
    os.exit(1)
  end
end
for _, k in ipairs(kernel_rows) do
  if k.error or k.same_bits == false then
    io.stderr:write(("gate_order: kernel %s in order %s %s: %s\n"):format(spec.name, k.order, k.layout,
      k.error or "other bits than in ifco units"))
    os.exit(1)
  end
end
