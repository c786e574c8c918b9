-- gate_order: the weight layout experiment, on the CPU side.
--
-- The persistent kernel takes its weights packed in one fixed layout: each
-- hidden unit's four gate rows adjacent (interleaved, packed row u*4 + p) in
-- gate order i, f, c, o ("ifco"). It has no knob for another order, so this
-- experiment cannot time the kernel per order. What it measures, for each of
-- the 24 orders of the gates i, o, f, c:
--   * exactness: packing ONNX weights W, R (and the summed bias) into that
--     order, interleaved, and unpacking them again gives the original bits;
--     packed row u*4 + p holds ONNX row g*H + u of the gate at position p;
--     reordering the gate blocks (blocked layout) there and back also gives
--     the original bits, and the f32 reference on the round-tripped stack
--     gives bitwise the same output as on the original;
--   * the CPU cost of the two layouts: milliseconds to pack (interleaved,
--     spk.lstm.pack_directions) and to reorder blocks (spk.lstm.reorder_gates)
--     one layer's W and R, median over rounds.
-- The numbers of the kernel do not depend on the order (it is a relabelling);
-- only the layout in memory would, and only "ifco" interleaved runs on the GPU.
--
-- GPU: not needed. It runs the same with or without one (exit 0).
-- Run: build/spk run experiments/gate_order.lua [--quick] [--rounds N] [--out DIR]
-- Writes: gate_order.csv, gate_order.json, pack_ms.svg (bars per order).
local spk = require "spk"
local experiment = require "spk.experiment"
local plot = require "spk.plot"

local ex = experiment.start {
  name = "gate_order", gpu = "optional",
  about = "Pack the LSTM weights in each of the 24 gate orders: round trips, numbers, CPU packing time.",
  batches = { 2 }, quick_batches = { 1 },
  options = { { "rounds", 9, quick = 3, help = "timed packing rounds per order" },
              { "steps", 589, quick = 40, help = "time steps of the reference check" } },
}
local rounds, steps = ex.opts.rounds, ex.opts.steps

local layers = spk.lstm.random { layers = 4, input = 60, hidden = 128, seed = 1 }
local H = 128
local x = spk.randn({ ex.batches[1], steps, 60 }, { seed = 1 })
ex:progress("f32 reference on the original stack (batch %d, %d steps) ...", ex.batches[1], steps)
local y0 = spk.lstm.reference(layers, x, { precision = "f32" })

-- The 24 orders of "iofc".
local orders = {}
local function permute(prefix, rest)
  if #rest == 0 then orders[#orders + 1] = prefix return end
  for i = 1, #rest do permute(prefix .. rest:sub(i, i), rest:sub(1, i - 1) .. rest:sub(i + 1)) end
end
permute("", "iofc")

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
  row.interleaved_ms = experiment.time_cpu(function()
    spk.lstm.pack_directions(l1.W, { to = order })
    spk.lstm.pack_directions(l1.R, { to = order })
  end, rounds, 1)
  row.blocked_ms = experiment.time_cpu(function()
    spk.lstm.reorder_gates(l1.W, 2, "iofc", order)
    spk.lstm.reorder_gates(l1.R, 2, "iofc", order)
  end, rounds, 1)
  row.ok = row.interleaved_round_trip and row.rows_in_place and row.bias_summed and row.reference_bitwise
  rows[#rows + 1] = row
  collectgarbage()
end

local report = require "spk.report"
local columns = { "order", { key = "ok", title = "all exact" }, { key = "interleaved_round_trip", title = "round trip" },
                  { key = "rows_in_place", title = "rows" }, { key = "bias_summed", title = "bias" },
                  { key = "reference_bitwise", title = "reference" },
                  { key = "interleaved_ms", title = "pack ms (interleaved)", format = report.fmt_ms },
                  { key = "blocked_ms", title = "reorder ms (blocked)", format = report.fmt_ms } }
ex:table(rows, columns, { title = ("Gate orders: layer 1's W [2, 512, 60] and R [2, 512, 128], median of %d rounds"):format(rounds),
                          footer = "The kernel runs \"ifco\" interleaved only; these are CPU packing costs and exactness checks." })
ex:csv("gate_order.csv", rows, { "order", "ok", "interleaved_round_trip", "rows_in_place", "bias_summed",
                                 "reference_bitwise", "interleaved_ms", "blocked_ms" })
ex:json("gate_order.json", { rows = rows, rounds = rounds, steps = steps, batch = ex.batches[1] })
local names, inter, blocked = {}, {}, {}
for i, r in ipairs(rows) do names[i], inter[i], blocked[i] = r.order, r.interleaved_ms, r.blocked_ms end
ex:svg("pack_ms.svg", plot.bar {
  title = "CPU cost of each gate order (layer 1, W and R)", x_label = "gate order", y_label = "ms",
  categories = names, width = 1100,
  series = { { name = "interleaved (pack)", values = inter }, { name = "blocked (reorder)", values = blocked } } })
ex:finish()
for _, r in ipairs(rows) do
  if not r.ok then
    io.stderr:write(("gate_order: order %s is not exact\n"):format(r.order))
    os.exit(1)
  end
end
