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
--     width = 760, height = 460, markers = true,
--     spread = "min-max of 7 rounds"}       -- names the whiskers in the legend
--     A point {x, y, lo, hi} also draws the spread measured around y: a whisker
--     from lo to hi (<line class="whisker" data-x= data-lo= data-hi=>), e.g. the
--     fastest and slowest of the timed rounds around their median.
--   plot.save("results/x/ms.svg", svg[, {provenance = run | record | false}])
--     writes the chart with <metadata id="spk-provenance"> after the <svg> tag: where
--     the result came from (spk.provenance.record(run) as JSON; false: none)
--
--   plot.bar{title =, x_label =, y_label =, y_log =, y_range =, spread = "legend text",
--            categories = {"1", "8", "32"},           -- groups along x
--            series = { {name = "u4", values = {3.2, 18.3, 21.5},
--                        low = {...}, high = {...},    -- optional: a whisker per bar
--                        samples = {{3.1, 3.3, 3.2}, ...}}, ... }}  -- optional: each as a dot
--     grouped bars; a nil value leaves its bar out. low/high draw the spread measured
--     around each value (<line class="whisker">), samples every measurement
--     (<circle class="sample" data-y=>) spread across the bar.
--
--   plot.gantt{title =, x_label =, tracks = {"block 0", ...}, categories = {"wait", ...},
--              bars = {{track = 1, from =, to =, category = "dot", title = "hover text",
--                       data = {step = 3}}, ...},      -- a bar per interval, coloured by category
--              highlight = {{track =, from =, to =, data = {...}}, ...}, -- outlined (a path)
--              links = {{from_track =, to_track =, at =}, ...},          -- joins between tracks
--              markers = {{at =, label = "step 3"}, ...},                -- dashed vertical lines
--              highlight_name = "critical path", width = 960, height = (from the tracks)}
--     time along x (linear, from the data), one row per track (track 1 on top). Bars are
--     <rect class="bar" data-track= data-category= data-from= data-to= data-...>, highlights
--     <rect class="highlight" ...>, links <line class="link">, markers <line class="marker">.
--   plot.timeline(tl[, {step_range = {first, last}, title =, width =}]) -> svg: plot.gantt of a
--     step timeline (info.timeline of a timeline forward): the blocks as tracks, every stage
--     of the steps in the window as a bar, the critical path (spk.timeline.critical_path over
--     the window) outlined, its jumps between blocks as links, each step's earliest start
--     as a marker. Default window: four steps from the second recorded one.
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

-- The chart's title, centred over the plot between left and right but never
-- past the chart's left edge (at most 10 px a character).
local function add_title(add, opts, left, right)
  if not opts.title then return end
  local half = 5 * (utf8.len(tostring(opts.title)) or #tostring(opts.title)) + 8
  add(('<text class="title" x="%s" y="26" text-anchor="middle" font-size="16" font-weight="bold">%s</text>')
    :format(px(math.max((left + right) / 2, half)), escape(opts.title)))
end

-- A log axis's minor grid lines (2..9 times each decade) inside box.
local function minor_grid(add, ax, horizontal, box)
  if not ax.log then return end
  local e = math.floor(math.log(ax.lo, 10) + 1e-9)
  while 10 ^ e < ax.hi do
    for m = 2, 9 do
      local v = m * 10 ^ e
      if v > ax.lo and v < ax.hi then
        local p = ax.map(v)
        if horizontal then
          add(('<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#f2f2f2"/>'):format(box.left, px(p), box.right, px(p)))
        else
          add(('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#f2f2f2"/>'):format(px(p), box.top, px(p), box.bottom))
        end
      end
    end
    e = e + 1
  end
end

-- The frame's axes: x over categories or values, y over values, each with
-- its ticks and their labels (xt, xl nil for categories).
local function frame_axes(opts, xs, ys, xcats, box)
  local left, right, top, bottom = box.left, box.right, box.top, box.bottom
  local x_axis, xt, xl
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
  local y_axis = axis(l0, h0, opts.y_log, bottom, top)
  return x_axis, xt, xl, y_axis, yt, yl
end

-- The grid: a log axis's minor lines, then a line at each tick.
local function frame_grid(add, box, x_axis, xt, y_axis, yt, xcats)
  local left, right, top, bottom = box.left, box.right, box.top, box.bottom
  local eps = 1e-9 * (right - left + bottom - top)
  add('<g class="grid" stroke="#e4e4e4" stroke-width="1">')
  minor_grid(add, y_axis, true, box)
  if not xcats then minor_grid(add, x_axis, false, box) end
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
end

-- The axes' tick marks and labels.
local function frame_ticks(add, box, x_axis, xt, xl, y_axis, yt, yl, xcats)
  local left, right, top, bottom = box.left, box.right, box.top, box.bottom
  local eps = 1e-9 * (right - left + bottom - top)
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
end

-- The common frame: background, title, grid, axes with ticks and labels.
-- Returns the parts list and the two axes.
local function frame(opts, xs, ys, xcats)
  local width, height = opts.width or 760, opts.height or 460
  local legend_width = 0
  for _, s in ipairs(opts.series) do
    legend_width = math.max(legend_width, 7 * #tostring(s.name or "") + 40)
  end
  if opts.spread then legend_width = math.max(legend_width, 7 * #tostring(opts.spread) + 40) end
  legend_width = math.min(legend_width, 260)
  local left, right = 78, width - 20 - legend_width
  local top, bottom = opts.title and 44 or 20, height - 56
  if right - left < 100 then error("plot: width too small for the legend", 3) end
  local box = { left = left, right = right, top = top, bottom = bottom, width = width, height = height }

  local parts = {}
  local function add(s) parts[#parts + 1] = s end
  add(('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
       .. 'font-family="Helvetica, Arial, sans-serif" font-size="12">'):format(width, height, width, height))
  add(('<rect x="0" y="0" width="%d" height="%d" fill="white"/>'):format(width, height))
  add_title(add, opts, left, right)
  local x_axis, xt, xl, y_axis, yt, yl = frame_axes(opts, xs, ys, xcats, box)
  frame_grid(add, box, x_axis, xt, y_axis, yt, xcats)
  add(('<rect class="plot-area" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>')
    :format(left, top, right - left, bottom - top))
  frame_ticks(add, box, x_axis, xt, xl, y_axis, yt, yl, xcats)
  if opts.x_label then
    add(('<text class="x-label" x="%s" y="%d" text-anchor="middle" font-size="13">%s</text>')
      :format(px((left + right) / 2), height - 14, escape(opts.x_label)))
  end
  if opts.y_label then
    local cy = (top + bottom) / 2
    add(('<text class="y-label" x="18" y="%s" text-anchor="middle" font-size="13" transform="rotate(-90 18 %s)">%s</text>')
      :format(px(cy), px(cy), escape(opts.y_label)))
  end
  return parts, x_axis, y_axis, box
end

local function style_of(i, s)
  local color = s.color or M.colors[(i - 1) % #M.colors + 1]
  local dashed = s.dashed or ((i - 1) // #M.colors) % 2 == 1
  return color, dashed
end

local function legend(parts, series, box, kind, spread)
  parts[#parts + 1] = '<g class="legend">'
  local x, y = box.right + 16, box.top + 8
  if spread then
    local yy = y + #series * 20
    parts[#parts + 1] = ('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/><line x1="%d" y1="%d" x2="%d" '
      .. 'y2="%d" stroke="#444"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>'):format(x + 11, yy - 6,
      x + 11, yy + 6, x + 7, yy - 6, x + 15, yy - 6, x + 7, yy + 6, x + 15, yy + 6)
    parts[#parts + 1] = ('<text class="legend-entry legend-spread" x="%d" y="%d" dominant-baseline="middle">%s</text>')
      :format(x + 28, yy, escape(spread))
  end
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

-- A vertical whisker from lo to hi at x (pixels), with caps.
local function whisker(parts, x, ylo, yhi, color, attrs)
  parts[#parts + 1] = ('<line class="whisker" %s x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.2"/>')
    :format(attrs, px(x), px(ylo), px(x), px(yhi), color)
  for _, y in ipairs { ylo, yhi } do
    parts[#parts + 1] = ('<line class="whisker-cap" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.2"/>')
      :format(px(x - 4), px(y), px(x + 4), px(y), color)
  end
end

local function check_spread(lo, hi, v, log, name, what)
  if lo == nil and hi == nil then return false end
  check_value(lo, log, name, what .. " low")
  check_value(hi, log, name, what .. " high")
  if lo > hi then
    error(("plot: %s: %s low = %s is above high = %s"):format(name, what, tostring(lo), tostring(hi)), 4)
  end
  return true
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
                                            "x_label", "y_label", "width", "height", "spread" }, "plot.line")
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
      if check_spread(p[3], p[4], p[2], opts.y_log, name, ("point %d: spread"):format(k)) then
        ys[#ys + 1], ys[#ys + 2] = p[3], p[4]
      end
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
    for _, p in ipairs(s.points) do
      if p[3] ~= nil then
        whisker(parts, xa.map(p[1]), ya.map(p[3]), ya.map(p[4]), color,
          ('data-x="%.17g" data-lo="%.17g" data-hi="%.17g"'):format(p[1], p[3], p[4]))
      end
    end
    if opts.markers ~= false and #s.points <= 200 then
      for _, p in ipairs(s.points) do
        parts[#parts + 1] = ('<circle class="point" data-x="%.17g" data-y="%.17g" cx="%s" cy="%s" r="3" fill="%s"/>')
          :format(p[1], p[2], px(xa.map(p[1])), px(ya.map(p[2])), color)
      end
    end
    parts[#parts + 1] = '</g>'
  end
  legend(parts, opts.series, box, "line", opts.spread)
  parts[#parts + 1] = '</svg>\n'
  return table.concat(parts, "\n")
end

-- ------------------------------------------------------------------ bar

function M.bar(opts)
  check_common(opts, "bar")
  require("spk.options").check_keys(opts, { "series", "categories", "y_range", "y_log", "title", "x_label",
                                            "y_label", "width", "height", "spread" }, "plot.bar")
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
        local what = ("value %d (%s)"):format(k, tostring(cats[k]))
        check_value(v, opts.y_log, name, what)
        ys[#ys + 1] = v
        if check_spread((s.low or {})[k], (s.high or {})[k], v, opts.y_log, name, what) then
          ys[#ys + 1], ys[#ys + 2] = s.low[k], s.high[k]
        end
        for j, sample in ipairs((s.samples or {})[k] or {}) do
          check_value(sample, opts.y_log, name, ("%s: sample %d"):format(what, j))
          ys[#ys + 1] = sample
        end
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
  local bar_w = math.min(group * 0.8 / n, 80) -- a lone bar stays a bar, not a wall
  local inset = (group - bar_w * n) / 2
  local base = opts.y_log and box.bottom or ya.map(math.max(ya.lo, math.min(ya.hi, 0)))
  for i, s in ipairs(opts.series) do
    local color = style_of(i, s)
    parts[#parts + 1] = ('<g class="series" data-name="%s">'):format(escape(s.name or ""))
    for k = 1, #cats do
      local v = s.values[k]
      if v ~= nil then
        local x = xa.map(k - 1) + inset + (i - 1) * bar_w
        local y = ya.map(v)
        y = math.max(box.top, math.min(box.bottom, y))
        local y0, h = math.min(y, base), math.abs(base - y)
        parts[#parts + 1] = ('<rect class="bar" data-category="%s" data-y="%.17g" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s: %s</title></rect>')
          :format(escape(names[k]), v, px(x), px(y0), px(bar_w * 0.92), px(h), color,
                  escape(s.name or ""), escape(("%.6g"):format(v)))
        local middle = x + bar_w * 0.46
        local samples = (s.samples or {})[k] or {}
        for j, sample in ipairs(samples) do -- spread across the bar, in the order measured
          local sx = x + bar_w * 0.92 * (#samples == 1 and 0.5 or (0.2 + 0.6 * (j - 1) / (#samples - 1)))
          parts[#parts + 1] = ('<circle class="sample" data-category="%s" data-y="%.17g" cx="%s" cy="%s" r="2.2" '
            .. 'fill="white" stroke="#222" stroke-width="0.8"/>'):format(escape(names[k]), sample, px(sx),
            px(math.max(box.top, math.min(box.bottom, ya.map(sample)))))
        end
        if s.low and s.low[k] ~= nil then
          whisker(parts, middle, ya.map(s.low[k]), ya.map(s.high[k]), "#222",
            ('data-category="%s" data-lo="%.17g" data-hi="%.17g"'):format(escape(names[k]), s.low[k], s.high[k]))
        end
      end
    end
    parts[#parts + 1] = '</g>'
  end
  legend(parts, opts.series, box, "bar", opts.spread)
  parts[#parts + 1] = '</svg>\n'
  return table.concat(parts, "\n")
end

-- ------------------------------------------------------------------ gantt

local function check_interval(v, where)
  if type(v) ~= "table" then error(("plot.gantt: %s must be a table"):format(where)) end
  if not finite(v.from) or not finite(v.to) or v.from > v.to then
    error(("plot.gantt: %s needs finite from <= to, got from = %s, to = %s"):format(where, tostring(v.from),
      tostring(v.to)))
  end
end

local function data_attributes(data)
  if type(data) ~= "table" then return "" end
  local keys = {}
  for k in pairs(data) do
    if type(k) == "string" and k:match("^[%a_][%w_%-]*$") then keys[#keys + 1] = k end
  end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do
    local v = data[k]
    local text = type(v) == "number" and ("%.17g"):format(v) or tostring(v)
    out[#out + 1] = (' data-%s="%s"'):format(k, escape(text))
  end
  return table.concat(out)
end

-- gantt's checks: the options, each bar, highlight, link and marker; the
-- categories' indices and the time range the bars cover.
local function check_gantt(opts)
  if type(opts) ~= "table" then error("plot.gantt: expects a table of options") end
  require("spk.options").check_keys(opts, { "title", "x_label", "tracks", "categories", "bars", "highlight", "links",
    "markers", "highlight_name", "width", "height" }, "plot.gantt")
  local tracks, cats = opts.tracks, opts.categories
  if type(tracks) ~= "table" or #tracks == 0 then error("plot.gantt: tracks must be a non-empty list") end
  if type(cats) ~= "table" or #cats == 0 then error("plot.gantt: categories must be a non-empty list") end
  if type(opts.bars) ~= "table" or #opts.bars == 0 then error("plot.gantt: bars must be a non-empty list") end
  local cat_index = {}
  for i, c in ipairs(cats) do cat_index[c] = i end
  local lo, hi = math.huge, -math.huge
  local function cover(v) lo, hi = math.min(lo, v.from), math.max(hi, v.to) end
  local function check_track(t, where)
    if math.type(t) ~= "integer" or t < 1 or t > #tracks then
      error(("plot.gantt: %s: track must be 1 .. %d, got %s"):format(where, #tracks, tostring(t)))
    end
  end
  for i, b in ipairs(opts.bars) do
    local where = ("bar %d"):format(i)
    check_interval(b, where)
    check_track(b.track, where)
    if not cat_index[b.category] then
      error(("plot.gantt: bar %d: category %s is not among the categories"):format(i, tostring(b.category)))
    end
    cover(b)
  end
  for i, h in ipairs(opts.highlight or {}) do
    check_interval(h, ("highlight %d"):format(i))
    check_track(h.track, ("highlight %d"):format(i))
  end
  for i, l in ipairs(opts.links or {}) do
    if type(l) ~= "table" or not finite(l.at) then error(("plot.gantt: link %d needs a finite at"):format(i)) end
    check_track(l.from_track, ("link %d"):format(i))
    check_track(l.to_track, ("link %d"):format(i))
  end
  for i, m in ipairs(opts.markers or {}) do
    if type(m) ~= "table" or not finite(m.at) then error(("plot.gantt: marker %d needs a finite at"):format(i)) end
  end
  if lo == hi then hi = lo + 1 end
  return cat_index, lo, hi
end

-- gantt's geometry: the plot area beside the track labels and the legend,
-- the time axis's ticks, and x(time), y(track) of a bar's top.
local function gantt_layout(opts, lo, hi)
  local tracks, cats = opts.tracks, opts.categories
  local g = { row_h = 30, bar_h = 20, width = opts.width or 960 }
  local label_w = 0
  for _, t in ipairs(tracks) do label_w = math.max(label_w, 7 * #tostring(t)) end
  local legend_w = 0
  for _, c in ipairs(cats) do legend_w = math.max(legend_w, 7 * #tostring(c) + 40) end
  legend_w = math.max(legend_w, 7 * #(opts.highlight_name or "critical path") + 40)
  g.left, g.right = 20 + label_w + 10, g.width - 20 - legend_w
  if g.right - g.left < 100 then error("plot.gantt: width too small for the labels and the legend") end
  g.top = opts.title and 60 or 36
  g.bottom = g.top + g.row_h * #tracks
  g.height = opts.height or math.max(g.bottom + 56, g.top + 24 * (#cats + 2) + 20)
  local t0, t1
  g.ticks, t0, t1, g.labels = M.ticks(lo, hi)
  function g.x(v) return g.left + (v - t0) / (t1 - t0) * (g.right - g.left) end
  function g.y(track) return g.top + (track - 1) * g.row_h + (g.row_h - g.bar_h) / 2 end
  return g
end

-- gantt's frame: background, title, grid, track labels, the time axis.
local function gantt_frame(add, g, opts)
  local x, left, right, top, bottom = g.x, g.left, g.right, g.top, g.bottom
  add(('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
       .. 'font-family="Helvetica, Arial, sans-serif" font-size="12">'):format(g.width, g.height, g.width, g.height))
  add(('<rect x="0" y="0" width="%d" height="%d" fill="white"/>'):format(g.width, g.height))
  add_title(add, opts, left, right)
  add('<g class="grid" stroke="#e4e4e4" stroke-width="1">')
  for _, v in ipairs(g.ticks) do
    add(('<line x1="%s" y1="%d" x2="%s" y2="%d"/>'):format(px(x(v)), top, px(x(v)), bottom))
  end
  add('</g>')
  add(('<rect class="plot-area" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>')
    :format(left, top, right - left, bottom - top))
  add('<g class="tracks">')
  for i, t in ipairs(opts.tracks) do
    add(('<text class="track" data-track="%d" x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>')
      :format(i, left - 8, px(top + (i - 0.5) * g.row_h), escape(t)))
  end
  add('</g>')
  add('<g class="x-axis" stroke="#444">')
  for i, v in ipairs(g.ticks) do
    add(('<line x1="%s" y1="%d" x2="%s" y2="%d"/>'):format(px(x(v)), bottom, px(x(v)), bottom + 5))
    add(('<text class="tick x-tick" data-value="%.17g" x="%s" y="%d" text-anchor="middle" stroke="none" '
         .. 'fill="#222">%s</text>'):format(v, px(x(v)), bottom + 18, escape(g.labels[i])))
  end
  add('</g>')
  if opts.x_label then
    add(('<text class="x-label" x="%s" y="%d" text-anchor="middle" font-size="13">%s</text>')
      :format(px((left + right) / 2), bottom + 40, escape(opts.x_label)))
  end
end

-- gantt's content: the markers, the bars, the highlights and links.
local function gantt_marks(add, g, opts, cat_index)
  local x, y, bar_h = g.x, g.y, g.bar_h
  add('<g class="markers">')
  for _, m in ipairs(opts.markers or {}) do
    add(('<line class="marker" data-at="%.17g" x1="%s" y1="%d" x2="%s" y2="%d" stroke="#888" '
         .. 'stroke-dasharray="3 3"/>'):format(m.at, px(x(m.at)), g.top - 4, px(x(m.at)), g.bottom))
    if m.label then
      add(('<text class="marker-label" x="%s" y="%d" font-size="10" fill="#555">%s</text>')
        :format(px(x(m.at) + 2), g.top - 6, escape(m.label)))
    end
  end
  add('</g>')
  add('<g class="bars">')
  for _, b in ipairs(opts.bars) do
    local color = M.colors[(cat_index[b.category] - 1) % #M.colors + 1]
    add(('<rect class="bar" data-track="%d" data-category="%s" data-from="%.17g" data-to="%.17g"%s x="%s" y="%s" '
         .. 'width="%s" height="%d" fill="%s"><title>%s</title></rect>')
      :format(b.track, escape(b.category), b.from, b.to, data_attributes(b.data), px(x(b.from)), px(y(b.track)),
        px(math.max(x(b.to) - x(b.from), 0.5)), bar_h, color, escape(b.title or b.category)))
  end
  add('</g>')
  add('<g class="highlights">')
  for _, h in ipairs(opts.highlight or {}) do
    add(('<rect class="highlight" data-track="%d" data-from="%.17g" data-to="%.17g"%s x="%s" y="%s" width="%s" '
         .. 'height="%d" fill="none" stroke="#111" stroke-width="2.5"/>'):format(h.track, h.from, h.to,
        data_attributes(h.data), px(x(h.from)),
        px(y(h.track) - 2), px(math.max(x(h.to) - x(h.from), 0.5)), bar_h + 4))
  end
  for _, l in ipairs(opts.links or {}) do
    local y1, y2 = y(l.from_track) + bar_h / 2, y(l.to_track) + bar_h / 2
    add(('<line class="link" data-at="%.17g" data-from-track="%d" data-to-track="%d" x1="%s" y1="%s" x2="%s" '
         .. 'y2="%s" stroke="#111" stroke-width="2"/>'):format(l.at, l.from_track, l.to_track, px(x(l.at)), px(y1),
        px(x(l.at)), px(y2)))
  end
  add('</g>')
end

-- gantt's legend: a swatch a category, and the highlight's.
local function gantt_legend(add, g, opts)
  local cats = opts.categories
  add('<g class="legend">')
  local lx, ly = g.right + 16, g.top + 8
  for i, c in ipairs(cats) do
    local yy = ly + (i - 1) * 20
    add(('<rect x="%d" y="%d" width="22" height="10" fill="%s"/>'):format(lx, yy - 5,
      M.colors[(i - 1) % #M.colors + 1]))
    add(('<text class="legend-entry" x="%d" y="%d" dominant-baseline="middle">%s</text>'):format(lx + 28, yy,
      escape(c)))
  end
  if opts.highlight and #opts.highlight > 0 then
    local yy = ly + #cats * 20
    add(('<rect x="%d" y="%d" width="22" height="10" fill="none" stroke="#111" stroke-width="2.5"/>')
      :format(lx, yy - 5))
    add(('<text class="legend-entry" x="%d" y="%d" dominant-baseline="middle">%s</text>'):format(lx + 28, yy,
      escape(opts.highlight_name or "critical path")))
  end
  add('</g>')
end

function M.gantt(opts)
  local cat_index, lo, hi = check_gantt(opts)
  local g = gantt_layout(opts, lo, hi)
  local parts = {}
  local function add(text) parts[#parts + 1] = text end
  gantt_frame(add, g, opts)
  gantt_marks(add, g, opts, cat_index)
  gantt_legend(add, g, opts)
  add('</svg>\n')
  return table.concat(parts, "\n")
end

function M.timeline(tl, opts)
  local timeline = require "spk.timeline_analysis"
  opts = require("spk.options").check_keys(opts, { "steps", "step_range", "title", "width" }, "plot.timeline")
  local rec = timeline.records(tl)
  if #rec.steps == 0 then error("plot.timeline: the timeline has no records") end
  local first, last
  local f, l = timeline.step_range(opts, "plot.timeline")
  if f then
    first, last = f, l
  else
    local s = rec.steps
    local from = #s > 1 and 2 or 1
    first, last = s[from], s[math.min(from + 3, #s)]
  end
  local path = timeline.critical_path(tl, { step_range = { first, last } })
  local track_of, tracks = {}, {}
  for i, b in ipairs(rec.blocks) do
    track_of[b], tracks[i] = i, ("block %d"):format(b)
  end
  -- time from the window's earliest start; microseconds past 10 us
  local origin = math.huge
  for _, b in ipairs(rec.blocks) do
    for s = first, last do
      local r = rec.at[b][s]
      for _, v in ipairs(r and r.t or {}) do
        if v == v then origin = math.min(origin, v) end
      end
    end
  end
  if origin == math.huge then error(("plot.timeline: no stamps in steps %d..%d"):format(first, last)) end
  local span = path.finish - origin
  local scale, unit = 1, "ns"
  if span > 10000 then scale, unit = 1e-3, "µs" end
  local function at(v) return (v - origin) * scale end
  local bars, markers = {}, {}
  for s = first, last do
    local start = math.huge
    for _, b in ipairs(rec.blocks) do
      local r = rec.at[b][s]
      if r then
        if r.t[1] == r.t[1] then start = math.min(start, r.t[1]) end
        for k, name in ipairs(tl.stages) do
          local t0, t1 = r.t[k], r.t[k + 1]
          if t0 == t0 and t1 == t1 then
            bars[#bars + 1] = { track = track_of[b], from = at(t0), to = at(t1), category = name,
                                title = ("block %d, step %d, %s: %.1f ns"):format(b, s, name, t1 - t0),
                                data = { block = b, step = s, stage = name } }
          end
        end
      end
    end
    if start < math.huge then markers[#markers + 1] = { at = at(start), label = ("step %d"):format(s) } end
  end
  local highlight, links = {}, {}
  for _, e in ipairs(path.elements) do
    highlight[#highlight + 1] = { track = track_of[e.block], from = at(e.from), to = at(e.to),
                                  data = { block = e.block, step = e.step, stage = e.stage,
                                           waited_for = e.waited_for } }
    if e.waited_for and e.waited_for ~= e.block then
      links[#links + 1] = { from_track = track_of[e.waited_for], to_track = track_of[e.block], at = at(e.from) }
    end
  end
  local sel = tl.selection or {}
  return M.gantt {
    title = opts.title or ("%s: steps %d..%d of layer %s %s (critical path outlined)"):format(
      tostring(tl.kernel or "kernel"), first, last, tostring(sel.layer or "?"), tostring(sel.direction or "?")),
    x_label = ("time (%s) from the first start shown"):format(unit), tracks = tracks, categories = tl.stages,
    bars = bars, highlight = highlight, links = links, markers = markers, width = opts.width,
  }
end


function M.save(path, svg, opts)
  if type(path) ~= "string" or type(svg) ~= "string" then
    error("plot.save: expects (path, svg string)", 2)
  end
  require("spk.options").check_keys(opts, { "provenance" }, "plot.save", 2)
  local run = opts and opts.provenance
  if run ~= false and not svg:find('<metadata id="spk-provenance">', 1, true) then
    if run ~= nil and type(run) ~= "table" then
      error(("plot.save: provenance must be a table (the run) or false, got %s"):format(type(run)), 2)
    end
    local provenance = require "spk.provenance"
    local at = select(2, svg:find("^%s*<svg[^>]*>"))
    if at then svg = svg:sub(1, at) .. "\n" .. provenance.svg_metadata(provenance.record(run)) .. svg:sub(at + 1) end
  end
  local ok, err = pcall(require("spk.core").files.write, path, svg)
  if not ok then error("plot.save: " .. tostring(err), 2) end
  return path
end

-- An argument a function does not take is an error that names it.
do
  local options = require "spk.options"
  M.ticks = options.takes(3, "plot.ticks", M.ticks)
  M.line = options.takes(1, "plot.line", M.line)
  M.bar = options.takes(1, "plot.bar", M.bar)
  M.gantt = options.takes(1, "plot.gantt", M.gantt)
  M.timeline = options.takes(2, "plot.timeline", M.timeline)
  M.save = options.takes(3, "plot.save", M.save)
end

return M
