-- spk.plot: well-formed SVG, points where they belong, ticks, refusals.
local spk = require "spk"
local plot = require "spk.plot"
local xml = require "xml_check"

local function plot_area(svg)
  local x, y, w, h = svg:match('<rect class="plot%-area" x="([%d.]+)" y="([%d.]+)" width="([%d.]+)" height="([%d.]+)"')
  return tonumber(x), tonumber(y), tonumber(w), tonumber(h)
end

local function point(svg, px, py)
  local pat = ('<circle class="point" data%%-x="%s" data%%-y="%s" cx="([%%d.%%-]+)" cy="([%%d.%%-]+)"')
    :format(("%.17g"):format(px):gsub("%.", "%%."), ("%.17g"):format(py):gsub("%.", "%%."))
  local cx, cy = svg:match(pat)
  return tonumber(cx), tonumber(cy)
end

local function tick_values(svg, axis)
  local out = {}
  for v in svg:gmatch('class="tick ' .. axis .. '%-tick" data%-value="([^"]*)"') do out[#out + 1] = tonumber(v) or v end
  return out
end

describe("spk.plot", function()
  it("the XML checker itself rejects broken documents", function()
    assert.is_true(xml.check('<svg a="1"><g><line/></g><text>a &amp; b</text></svg>'))
    assert.is_nil(xml.check('<svg><g></svg>'))
    assert.is_nil(xml.check('<svg><text>a & b</text></svg>'))
    assert.is_nil(xml.check('<svg a="1" a="2"></svg>'))
    assert.is_nil(xml.check('<svg a=1></svg>'))
    assert.is_nil(xml.check('<svg></svg><svg></svg>'))
  end)

  it("writes a well-formed line chart with title, labels, legend and escaped names", function()
    local svg = plot.line { title = "ms & <batch>", x_label = "batch", y_label = "ms",
      series = { { name = "a \"quoted\" <name>", points = { { 1, 2 }, { 3, 4 } } },
                 { name = "ref", dashed = true, points = { { 1, 3 }, { 3, 1 } } } } }
    assert.is_true(xml.check(svg))
    assert.truthy(svg:find("ms &amp; &lt;batch&gt;", 1, true))
    assert.truthy(svg:find('class="legend"', 1, true))
    assert.truthy(svg:find("a &quot;quoted&quot; &lt;name&gt;", 1, true))
    assert.truthy(svg:find('stroke-dasharray="6 4"', 1, true))
    -- two series, two colours
    local colours = {}
    for c in svg:gmatch('<path d="[^"]*" fill="none" stroke="(#%x+)"') do colours[#colours + 1] = c end
    assert.are.equal(2, #colours)
    assert.are_not.equal(colours[1], colours[2])
  end)

  it("maps a known point to the expected pixels on linear axes", function()
    local svg = plot.line { x_range = { 0, 10 }, y_range = { 0, 100 },
      series = { { name = "s", points = { { 0, 0 }, { 5, 50 }, { 10, 100 }, { 2.5, 75 } } } } }
    local x, y, w, h = plot_area(svg)
    local cx, cy = point(svg, 5, 50)
    assert.near(x + w / 2, cx, 0.01)
    assert.near(y + h / 2, cy, 0.01)
    cx, cy = point(svg, 0, 0)
    assert.near(x, cx, 0.01) -- origin at the bottom left
    assert.near(y + h, cy, 0.01)
    cx, cy = point(svg, 2.5, 75)
    assert.near(x + w / 4, cx, 0.01)
    assert.near(y + h / 4, cy, 0.01)
  end)

  it("maps by decades on log axes", function()
    local svg = plot.line { x_log = true, y_log = true, x_range = { 1, 1000 }, y_range = { 0.01, 1 },
      series = { { name = "s", points = { { 10, 0.1 }, { 1000, 1 } } } } }
    local x, y, w, h = plot_area(svg)
    local cx, cy = point(svg, 10, 0.1)
    assert.near(x + w / 3, cx, 0.01)
    assert.near(y + h / 2, cy, 0.01)
  end)

  it("puts log ticks at the decades around the data", function()
    local svg = plot.line { x_log = true, y_log = true,
      series = { { name = "s", points = { { 1, 3.2 }, { 512, 240 } } } } }
    assert.are.same({ 1, 10, 100, 1000 }, tick_values(svg, "x"))
    assert.are.same({ 1, 10, 100, 1000 }, tick_values(svg, "y"))
    local values = plot.ticks(2e-8, 3e-5, { log = true })
    assert.are.same({ 1e-8, 1e-7, 1e-6, 1e-5, 1e-4 }, values)
  end)

  it("chooses round linear ticks covering the data", function()
    local values, lo, hi = plot.ticks(0.013, 0.5)
    assert.are.same({ 0, 0.1, 0.2, 0.3, 0.4, 0.5 }, (function()
      local r = {}
      for i, v in ipairs(values) do r[i] = math.floor(v * 1e9 + 0.5) / 1e9 end
      return r
    end)())
    assert.are.equal(0, lo)
    assert.near(0.5, hi, 1e-12)
    values = plot.ticks(-2.5, 7)
    assert.are.same({ -4, -2, 0, 2, 4, 6, 8 }, values)
    assert.are.same({ 0, 500, 1000, 1500 }, (plot.ticks(3, 1234)))
  end)

  it("refuses non-positive values on a log axis, naming the series and point", function()
    local ok, err = pcall(plot.line, { y_log = true, series = { { name = "gpu", points = { { 1, 1 }, { 2, 0 } } } } })
    assert.is_false(ok)
    assert.matches("gpu", err)
    assert.matches("point 2", err)
    assert.matches("log axis", err)
    ok, err = pcall(plot.line, { x_log = true, series = { { name = "s", points = { { -1, 1 } } } } })
    assert.is_false(ok)
    assert.matches("log axis", err)
    ok, err = pcall(plot.bar, { y_log = true, categories = { "a" }, series = { { name = "b", values = { -3 } } } })
    assert.is_false(ok)
    assert.matches("log axis", err)
  end)

  it("refuses non-finite values and empty charts", function()
    assert.has_error(function() plot.line { series = { { name = "s", points = { { 1, 0 / 0 } } } } } end)
    assert.has_error(function() plot.line { series = {} } end)
    assert.has_error(function() plot.bar { categories = {}, series = { { name = "s", values = {} } } } end)
  end)

  it("draws grouped bars from zero with their heights in scale", function()
    local svg = plot.bar { title = "bars", y_range = { 0, 10 }, categories = { "1", "8" },
      series = { { name = "a", values = { 5, 10 } }, { name = "b", values = { 2.5 } } } }
    assert.is_true(xml.check(svg))
    local _, y, _, h = plot_area(svg)
    local bars = {}
    for cat, v, by, bh in svg:gmatch('<rect class="bar" data%-category="([^"]*)" data%-y="([^"]*)" x="[^"]*" y="([^"]*)" width="[^"]*" height="([^"]*)"') do
      bars[#bars + 1] = { cat = cat, v = tonumber(v), y = tonumber(by), h = tonumber(bh) }
    end
    assert.are.equal(3, #bars) -- b's missing second value is left out
    for _, b in ipairs(bars) do
      assert.near(h * b.v / 10, b.h, 0.02)
      assert.near(y + h, b.y + b.h, 0.02) -- every bar stands on zero
    end
    assert.are.same({ 1, 8 }, tick_values(svg, "x"))
  end)

  it("draws a point's measured spread as a whisker from lo to hi, in scale, named in the legend", function()
    local svg = plot.line { x_range = { 0, 10 }, y_range = { 0, 100 }, spread = "min-max of 5 rounds",
      series = { { name = "s", points = { { 5, 50, 40, 70 }, { 8, 20 } } } } }
    assert.is_true(xml.check(svg))
    local _, y, _, h = plot_area(svg)
    local whiskers = {}
    for x, lo, hi, y1, y2 in svg:gmatch('<line class="whisker" data%-x="([^"]*)" data%-lo="([^"]*)" data%-hi="([^"]*)" '
        .. 'x1="[^"]*" y1="([^"]*)" x2="[^"]*" y2="([^"]*)"') do
      whiskers[#whiskers + 1] = { tonumber(x), tonumber(lo), tonumber(hi), tonumber(y1), tonumber(y2) }
    end
    assert.are.equal(1, #whiskers) -- the point without a spread has none
    assert.are.same({ 5, 40, 70 }, { whiskers[1][1], whiskers[1][2], whiskers[1][3] })
    assert.near(y + h * 0.6, whiskers[1][4], 0.01)
    assert.near(y + h * 0.3, whiskers[1][5], 0.01)
    assert.matches('class="legend%-entry legend%-spread"[^>]*>min%-max of 5 rounds<', svg)
    assert.has_error(function()
      plot.line { series = { { name = "s", points = { { 1, 5, 6, 4 } } } } }
    end, "plot: series 1 (s): point 1: spread low = 6 is above high = 4")
  end)

  it("draws bars' spread and every measurement, and widens the axis to hold them", function()
    local svg = plot.bar { categories = { "1", "8" }, spread = "rounds",
      series = { { name = "a", values = { 5, 3 }, low = { 4, 2 }, high = { 12, 3.5 },
                   samples = { { 4, 5, 12 }, { 2, 3, 3.5 } } } } }
    assert.is_true(xml.check(svg))
    local samples = {}
    for cat, v in svg:gmatch('<circle class="sample" data%-category="([^"]*)" data%-y="([^"]*)"') do
      samples[#samples + 1] = cat .. "=" .. v
    end
    assert.are.same({ "1=4", "1=5", "1=12", "8=2", "8=3", "8=3.5" }, samples)
    local whiskers = 0
    for _ in svg:gmatch('<line class="whisker" data%-category=') do whiskers = whiskers + 1 end
    assert.are.equal(2, whiskers)
    local ticks = tick_values(svg, "y")
    assert.is_true(ticks[#ticks] >= 12, "the axis reaches the highest round")
  end)

  it("saves to a file and reports a bad path", function()
    local dir = spec_tmpdir()
    local path = plot.save(dir .. "/a.svg", plot.line { series = { { name = "s", points = { { 1, 1 }, { 2, 2 } } } } })
    local f = assert(io.open(path))
    local text = f:read("a")
    f:close()
    assert.is_true(xml.check(text))
    assert.has_error(function() plot.save(dir .. "/missing/a.svg", "<svg/>") end)
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
