-- spk.plot: SVG line and bar charts for experiment results, readable in any
-- browser. Plain Lua, no GPU:
--
--   local plot = require "spk.plot"
--   local svg = plot.line{
--     title = "ms per forward", x_label = "batch", y_label = "ms",
--     x_log = true, y_log = false,          -- log axes: decades as ticks
--     x_range = {lo, hi}, y_range = {lo, hi}, -- optional, else from the data
--     series = { {name = "u4", points = {{1, 3.2}, {8, 18.3}}},
--                {name = "cuDNN best", points = {...}, dashed = true} },
--     width = 760, height = 460, markers = true}
--   plot.save("results/x/ms.svg", svg)
--
--   plot.bar{title =, x_label =, y_label =, y_log =, y_range =,
--            categories = {"1", "8", "32"},           -- groups along x
--            series = { {name = "u4", values = {3.2, 18.3, 21.5}}, ... }}
--     grouped bars; a nil value leaves its bar out.
--
-- Linear axes get "nice" ticks (1, 2 or 5 times a power of ten) and their
-- range widens to the outer ticks; log axes span whole decades with a tick at
-- each. A non-positive value on a log axis, a non-finite value or an empty
-- chart is an error naming the series and point. Series take distinct colours
-- in order (10, then repeat with dashes); the legend sits right of the plot.
--
-- The SVG marks its parts for tools and tests: the plot area is
-- <rect class="plot-area">, tick labels are <text class="tick x-tick"
-- data-value="v">, and each point of a line chart is a
-- <circle class="point" data-x= data-y= cx= cy=> (bars: <rect class="bar">).
--   plot.ticks(lo, hi, {log = bool, count = 6}) -> {values}, lo', hi' (exposed for tests)
local M = {}

M.colors = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
             "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf" }

local function finite(x)
  return type(x) == "number" and x == x and x ~= math.huge and x ~= -math.huge
end

local function escape(s)
  return (tostring(s):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
                                          ['"'] = "&quot;", ["'"] = "&apos;" }))
end
M.escape = escape

local function px(v) return ("%.2f"):format(v) end

-- ------------------------------------------------------------------ ticks

local function nice_step(span, count)
  local raw = span / math.max(count - 1, 1)
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local norm = raw / mag
  local nice = norm <= 1 and 1 or norm <= 2 and 2 or norm <= 5 and 5 or 10
  return nice * mag
end

-- Text of a tick value: enough decimals for the step, no float noise.
local function tick_text(v, step)
  if v == 0 then return "0" end
  local a = math.abs(v)
  if a >= 1e6 or a < 1e-4 then
    local s = ("%.3g"):format(v):gsub("e%+?(%-?)0*(%d)", "e%1%2")
    return s
  end
  local decimals = 0
  if step and step < 1 then decimals = math.max(0, math.ceil(-math.log(step, 10) - 1e-9)) end
  if not step then decimals = a < 1 and math.ceil(-math.log(a, 10) - 1e-9) or 0 end
  return ("%." .. decimals .. "f"):format(v)
end

local function decade_text(e)
  if e >= -4 and e <= 5 then return tick_text(10 ^ e) end
  return ("1e%d"):format(e)
end

function M.ticks(lo, hi, opts)
  opts = require("spk.options").check_keys(opts, { "log", "count" }, "plot.ticks")
  if opts.log then
    if not (lo > 0 and hi > 0) then error("plot: a log axis needs positive limits", 2) end
    local e_lo = math.floor(math.log(lo, 10) + 1e-9)
    local e_hi = math.ceil(math.log(hi, 10) - 1e-9)
    if e_hi <= e_lo then e_hi = e_lo + 1 end
    local values, labels = {}, {}
    local stride = math.max(1, math.ceil((e_hi - e_lo) / 8))
    for e = e_lo, e_hi do
      values[#values + 1] = 10 ^ e
      labels[#labels + 1] = ((e - e_lo) % stride == 0) and decade_text(e) or ""
    end
    return values, 10 ^ e_lo, 10 ^ e_hi, labels
  end
  if lo == hi then
    local pad = lo == 0 and 1 or math.abs(lo) * 0.1
    lo, hi = lo - pad, hi + pad
  end
  local step = nice_step(hi - lo, opts.count or 6)
  local first = math.floor(lo / step + 1e-9) * step
  local last = math.ceil(hi / step - 1e-9) * step
  local values, labels = {}, {}
  local n = math.floor((last - first) / step + 0.5)
  for i = 0, n do
    local v = first + i * step
    if math.abs(v) < step * 1e-9 then v = 0 end
    values[#values + 1] = v
    labels[#labels + 1] = tick_text(v, step)
  end
  return values, first, last, labels
end

-- An axis: a map from data to pixels over [p0, p1].
local function axis(lo, hi, log, p0, p1)
  local a = { lo = lo, hi = hi, log = log }
  if log then
    local l0, l1 = math.log(lo, 10), math.log(hi, 10)
    function a.map(v) return p0 + (math.log(v, 10) - l0) / (l1 - l0) * (p1 - p0) end
  else
    function a.map(v) return p0 + (v - lo) / (hi - lo) * (p1 - p0) end
  end
  return a
end

-- --------------------------------------------------------------- checks

local function check_value(v, log, where, what)
  if not finite(v) then
    error(("plot: %s: %s is %s, expected a finite number"):format(where, what, tostring(v)), 4)
  end
  if log and v <= 0 then
    error(("plot: %s: %s = %s cannot be shown on a log axis (values must be > 0)"):format(where, what,
      tostring(v)), 4)
  end
end

local function check_range(r, log, name)
  if r == nil then return nil end
  if type(r) ~= "table" or not finite(r[1]) or not finite(r[2]) or r[1] >= r[2] then
    error(("plot: %s must be {lo, hi} with lo < hi"):format(name), 4)
  end
  if log and r[1] <= 0 then error(("plot: %s must be positive on a log axis"):format(name), 4) end
  return r
end

local function extent(values, log)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(values) do
    if v < lo then lo = v end
    if v > hi then hi = v end
  end
  if not log and lo > 0 and hi > 0 and lo < hi * 0.5 then lo = 0 end -- bars and times read from zero
  return lo, hi
end

-- --------------------------------------------------------------- frame

-- The common frame: background, title, grid, axes with ticks and labels.
-- Returns the parts list and the two axes.
local function frame(opts, xs, ys, xcats)
  local width, height = opts.width or 760, opts.height or 460
  local legend_width = 0
  for _, s in ipairs(opts.series) do
    legend_width = math.max(legend_width, 7 * #tostring(s.name or "") + 40)
  end
  legend_width = math.min(legend_width, 260)
  local left, right = 78, width - 20 - legend_width
  local top, bottom = opts.title and 44 or 20, height - 56
  if right - left < 100 then error("plot: width too small for the legend", 3) end

  local parts = {}
  local function add(s) parts[#parts + 1] = s end
  add(('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
       .. 'font-family="Helvetica, Arial, sans-serif" font-size="12">'):format(width, height, width, height))
  add(('<rect x="0" y="0" width="%d" height="%d" fill="white"/>'):format(width, height))
  if opts.title then
    add(('<text class="title" x="%s" y="26" text-anchor="middle" font-size="16" font-weight="bold">%s</text>')
      :format(px((left + right) / 2), escape(opts.title)))
  end

  local x_axis, y_axis
  local xt, xl
  if xcats then
    x_axis = { lo = 0, hi = #xcats, map = function(v) return left + v / #xcats * (right - left) end }
  else
    local lo, hi
    if opts.x_range then lo, hi = opts.x_range[1], opts.x_range[2] else lo, hi = extent(xs, opts.x_log) end
    local t, l0, h0, labels = M.ticks(lo, hi, { log = opts.x_log })
    if opts.x_range then l0, h0 = lo, hi end
    x_axis = axis(l0, h0, opts.x_log, left, right)
    xt, xl = t, labels
  end
  local lo, hi
  if opts.y_range then lo, hi = opts.y_range[1], opts.y_range[2] else lo, hi = extent(ys, opts.y_log) end
  local yt, l0, h0, yl = M.ticks(lo, hi, { log = opts.y_log })
  if opts.y_range then l0, h0 = lo, hi end
  y_axis = axis(l0, h0, opts.y_log, bottom, top)

  local eps = 1e-9 * (right - left + bottom - top)
  add('<g class="grid" stroke="#e4e4e4" stroke-width="1">')
  local function minor(ax, horizontal)
    if not ax.log then return end
    local e = math.floor(math.log(ax.lo, 10) + 1e-9)
    while 10 ^ e < ax.hi do
      for m = 2, 9 do
        local v = m * 10 ^ e
        if v > ax.lo and v < ax.hi then
          local p = ax.map(v)
          if horizontal then
            add(('<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#f2f2f2"/>'):format(left, px(p), right, px(p)))
          else
            add(('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#f2f2f2"/>'):format(px(p), top, px(p), bottom))
          end
        end
      end
      e = e + 1
    end
  end
  minor(y_axis, true)
  if not xcats then minor(x_axis, false) end
  for _, v in ipairs(yt) do
    local p = y_axis.map(v)
    if p <= bottom + eps and p >= top - eps then
      add(('<line x1="%d" y1="%s" x2="%d" y2="%s"/>'):format(left, px(p), right, px(p)))
    end
  end
  if xt then
    for _, v in ipairs(xt) do
      local p = x_axis.map(v)
      if p >= left - eps and p <= right + eps then
        add(('<line x1="%s" y1="%d" x2="%s" y2="%d"/>'):format(px(p), top, px(p), bottom))
      end
    end
  end
  add('</g>')

  add(('<rect class="plot-area" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>')
    :format(left, top, right - left, bottom - top))

  add('<g class="y-axis" stroke="#444">')
  for i, v in ipairs(yt) do
    local p = y_axis.map(v)
    if p <= bottom + eps and p >= top - eps then
      add(('<line x1="%d" y1="%s" x2="%d" y2="%s"/>'):format(left - 5, px(p), left, px(p)))
      if yl[i] ~= "" then
        add(('<text class="tick y-tick" data-value="%.17g" x="%d" y="%s" text-anchor="end" '
             .. 'dominant-baseline="middle" stroke="none" fill="#222">%s</text>'):format(v, left - 8, px(p), escape(yl[i])))
      end
    end
  end
  add('</g>')
  add('<g class="x-axis" stroke="#444">')
  if xcats then
    for i, name in ipairs(xcats) do
      local p = x_axis.map(i - 0.5)
      add(('<text class="tick x-tick" data-value="%s" x="%s" y="%d" text-anchor="middle" stroke="none" '
           .. 'fill="#222">%s</text>'):format(escape(name), px(p), bottom + 18, escape(name)))
    end
  else
    for i, v in ipairs(xt) do
      local p = x_axis.map(v)
      if p >= left - eps and p <= right + eps then
        add(('<line x1="%s" y1="%d" x2="%s" y2="%d"/>'):format(px(p), bottom, px(p), bottom + 5))
        if xl[i] ~= "" then
          add(('<text class="tick x-tick" data-value="%.17g" x="%s" y="%d" text-anchor="middle" stroke="none" '
               .. 'fill="#222">%s</text>'):format(v, px(p), bottom + 18, escape(xl[i])))
        end
      end
    end
  end
  add('</g>')
  if opts.x_label then
    add(('<text class="x-label" x="%s" y="%d" text-anchor="middle" font-size="13">%s</text>')
      :format(px((left + right) / 2), height - 14, escape(opts.x_label)))
  end
  if opts.y_label then
    local cy = (top + bottom) / 2
    add(('<text class="y-label" x="18" y="%s" text-anchor="middle" font-size="13" transform="rotate(-90 18 %s)">%s</text>')
      :format(px(cy), px(cy), escape(opts.y_label)))
  end
  local box = { left = left, right = right, top = top, bottom = bottom, width = width, height = height }
  return parts, x_axis, y_axis, box
end

local function style_of(i, s)
  local color = s.color or M.colors[(i - 1) % #M.colors + 1]
  local dashed = s.dashed or ((i - 1) // #M.colors) % 2 == 1
  return color, dashed
end

local function legend(parts, series, box, kind)
  parts[#parts + 1] = '<g class="legend">'
  local x, y = box.right + 16, box.top + 8
  for i, s in ipairs(series) do
    local color, dashed = style_of(i, s)
    local yy = y + (i - 1) * 20
    if kind == "bar" then
      parts[#parts + 1] = ('<rect x="%d" y="%d" width="22" height="10" fill="%s"/>'):format(x, yy - 5, color)
    else
      parts[#parts + 1] = ('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>')
        :format(x, yy, x + 22, yy, color, dashed and ' stroke-dasharray="6 4"' or "")
    end
    parts[#parts + 1] = ('<text class="legend-entry" x="%d" y="%d" dominant-baseline="middle">%s</text>')
      :format(x + 28, yy, escape(s.name or ("series " .. i)))
  end
  parts[#parts + 1] = '</g>'
end

local function check_common(opts, fname)
  if type(opts) ~= "table" then error(("plot.%s: expects a table of options"):format(fname), 3) end
  if type(opts.series) ~= "table" or #opts.series == 0 then
    error(("plot.%s: series must be a non-empty list"):format(fname), 3)
  end
end

-- ----------------------------------------------------------------- line

function M.line(opts)
  check_common(opts, "line")
  require("spk.options").check_keys(opts, { "series", "x_range", "y_range", "x_log", "y_log", "markers", "title",
                                            "x_label", "y_label", "width", "height" }, "plot.line")
  check_range(opts.x_range, opts.x_log, "x_range")
  check_range(opts.y_range, opts.y_log, "y_range")
  local xs, ys = {}, {}
  for i, s in ipairs(opts.series) do
    local name = ("series %d (%s)"):format(i, tostring(s.name))
    if type(s.points) ~= "table" then error(("plot.line: %s has no points list"):format(name), 2) end
    for k, p in ipairs(s.points) do
      if type(p) ~= "table" then error(("plot.line: %s point %d must be {x, y}"):format(name, k), 2) end
      check_value(p[1], opts.x_log, name, ("point %d: x"):format(k))
      check_value(p[2], opts.y_log, name, ("point %d: y"):format(k))
      xs[#xs + 1], ys[#ys + 1] = p[1], p[2]
    end
  end
  if #xs == 0 then error("plot.line: no points in any series", 2) end
  local parts, xa, ya, box = frame(opts, xs, ys)
  parts[#parts + 1] = ('<clipPath id="plot-clip"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>')
    :format(box.left - 4, box.top - 4, box.right - box.left + 8, box.bottom - box.top + 8)
  for i, s in ipairs(opts.series) do
    local color, dashed = style_of(i, s)
    parts[#parts + 1] = ('<g class="series" data-name="%s" clip-path="url(#plot-clip)">'):format(escape(s.name or ""))
    local path = {}
    for k, p in ipairs(s.points) do
      path[#path + 1] = (k == 1 and "M" or "L") .. px(xa.map(p[1])) .. " " .. px(ya.map(p[2]))
    end
    if #path > 1 then
      parts[#parts + 1] = ('<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>')
        :format(table.concat(path, " "), color, dashed and ' stroke-dasharray="6 4"' or "")
    end
    if opts.markers ~= false and #s.points <= 200 then
      for _, p in ipairs(s.points) do
        parts[#parts + 1] = ('<circle class="point" data-x="%.17g" data-y="%.17g" cx="%s" cy="%s" r="3" fill="%s"/>')
          :format(p[1], p[2], px(xa.map(p[1])), px(ya.map(p[2])), color)
      end
    end
    parts[#parts + 1] = '</g>'
  end
  legend(parts, opts.series, box, "line")
  parts[#parts + 1] = '</svg>\n'
  return table.concat(parts, "\n")
end

-- ------------------------------------------------------------------ bar

function M.bar(opts)
  check_common(opts, "bar")
  require("spk.options").check_keys(opts, { "series", "categories", "y_range", "y_log", "title", "x_label",
                                            "y_label", "width", "height" }, "plot.bar")
  check_range(opts.y_range, opts.y_log, "y_range")
  local cats = opts.categories
  if type(cats) ~= "table" or #cats == 0 then error("plot.bar: categories must be a non-empty list", 2) end
  local ys = {}
  for i, s in ipairs(opts.series) do
    local name = ("series %d (%s)"):format(i, tostring(s.name))
    if type(s.values) ~= "table" then error(("plot.bar: %s has no values list"):format(name), 2) end
    for k = 1, #cats do
      local v = s.values[k]
      if v ~= nil then
        check_value(v, opts.y_log, name, ("value %d (%s)"):format(k, tostring(cats[k])))
        ys[#ys + 1] = v
      end
    end
  end
  if #ys == 0 then error("plot.bar: no values in any series", 2) end
  if not opts.y_log and not opts.y_range then ys[#ys + 1] = 0 end -- bars grow from zero
  local names = {}
  for i, c in ipairs(cats) do names[i] = tostring(c) end
  local parts, xa, ya, box = frame(opts, nil, ys, names)
  local n = #opts.series
  local group = (box.right - box.left) / #cats
  local bar_w = group * 0.8 / n
  local base = opts.y_log and box.bottom or ya.map(math.max(ya.lo, math.min(ya.hi, 0)))
  for i, s in ipairs(opts.series) do
    local color = style_of(i, s)
    parts[#parts + 1] = ('<g class="series" data-name="%s">'):format(escape(s.name or ""))
    for k = 1, #cats do
      local v = s.values[k]
      if v ~= nil then
        local x = xa.map(k - 1) + group * 0.1 + (i - 1) * bar_w
        local y = ya.map(v)
        y = math.max(box.top, math.min(box.bottom, y))
        local y0, h = math.min(y, base), math.abs(base - y)
        parts[#parts + 1] = ('<rect class="bar" data-category="%s" data-y="%.17g" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s: %s</title></rect>')
          :format(escape(names[k]), v, px(x), px(y0), px(bar_w * 0.92), px(h), color,
                  escape(s.name or ""), escape(("%.6g"):format(v)))
      end
    end
    parts[#parts + 1] = '</g>'
  end
  legend(parts, opts.series, box, "bar")
  parts[#parts + 1] = '</svg>\n'
  return table.concat(parts, "\n")
end

function M.save(path, svg)
  if type(path) ~= "string" or type(svg) ~= "string" then
    error("plot.save: expects (path, svg string)", 2)
  end
  local f, err = io.open(path, "w")
  if not f then error("plot.save: " .. tostring(err), 2) end
  local ok, werr = f:write(svg)
  f:close()
  if not ok then error("plot.save: " .. path .. ": " .. tostring(werr), 2) end
  return path
end

-- An argument a function does not take is an error that names it.
do
  local options = require "spk.options"
  M.ticks = options.takes(3, "plot.ticks", M.ticks)
  M.line = options.takes(1, "plot.line", M.line)
  M.bar = options.takes(1, "plot.bar", M.bar)
end

return M
