-- spk.report: terminal tables, CSV and JSON.
local report = require "spk.report"

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

describe("report.table", function()
  local rows = {
    { batch = 32, name = "persistent", ms = 11.364 },
    { batch = 1, name = "cudnn standard", ms = 10.45 },
    { batch = 8, name = "x", ms = nil },
  }

  it("aligns numbers right and text left under a rule, with title and footer", function()
    local text = report.table(rows, { "batch", "name", { key = "ms", title = "median ms", format = report.fmt_ms } },
      { title = "H200", footer = { "note 1", "note 2" } })
    assert.are.equal(table.concat({
      "H200",
      "batch  name            median ms",
      "-----  --------------  ---------",
      "   32  persistent          11.36",
      "    1  cudnn standard      10.45",
      "    8  x                       -",
      "note 1",
      "note 2",
    }, "\n") .. "\n", text)
  end)

  it("sorts by keys (nil last, stable) or a function without touching the rows", function()
    local text = report.table(rows, { "batch", "ms" }, { sort = "ms" })
    local order = {}
    for b in text:gmatch("\n%s*(%d+)  ") do order[#order + 1] = tonumber(b) end
    assert.are.same({ 1, 32, 8 }, order)
    assert.are.equal(32, rows[1].batch)
    text = report.table(rows, { "batch" }, { sort = function(a, b) return a.batch > b.batch end })
    assert.are.equal("batch\n-----\n   32\n    8\n    1\n", text)
    local tied = { { k = 1, v = "a" }, { k = 0, v = "b" }, { k = 1, v = "c" }, { k = 0, v = "d" } }
    assert.are.equal("k  v\n-  -\n0  b\n0  d\n1  a\n1  c\n", report.table(tied, { "k", "v" }, { sort = { "k" } }))
  end)

  it("counts UTF-8 characters for widths and honours align and format strings", function()
    local text = report.table({ { a = "×2", b = 1.5 }, { a = "abc", b = 10 } },
      { { key = "a", align = "right" }, { key = "b", format = "%.1f", align = "left" } })
    assert.are.equal("  a  b\n---  ----\n ×2  1.5\nabc  10.0\n", text)
  end)

  it("prints integers, floats, booleans and non-finite numbers plainly", function()
    local text = report.table({ { v = 3 }, { v = 0.25 }, { v = 0 / 0 }, { v = -math.huge }, { v = true } }, { "v" })
    assert.are.equal("v\n----\n3\n0.25\nnan\n-inf\ntrue\n", text)
  end)

  it("refuses bad columns", function()
    assert.has_error(function() report.table({}, {}) end, "report.table: columns must be a non-empty list")
    assert.has_error(function() report.table({}, { 3 }) end,
      "report.table: column 1 must be a key name or a table with a key")
    assert.has_error(function() report.table({}, { { key = "a", align = "middle" } }) end)
  end)
end)

describe("report number formats", function()
  it("formats ms, ratios, percentages and scientific values, '-' for nil and non-finite", function()
    assert.are.equal("0.812", report.fmt_ms(0.8123))
    assert.are.equal("12.35", report.fmt_ms(12.346))
    assert.are.equal("241.4", report.fmt_ms(241.43))
    assert.are.equal("1.23x", report.fmt_ratio(1.234))
    assert.are.equal("3.4%", report.fmt_pct(0.034))
    assert.are.equal("1.23e-07", report.fmt_sci(1.234e-7))
    assert.are.equal("1.2e-07", report.fmt_sci(1.234e-7, 1))
    assert.are.equal("12", report.fmt_int(12))
    for _, f in ipairs { report.fmt_ms, report.fmt_ratio, report.fmt_pct, report.fmt_sci, report.fmt_int } do
      assert.are.equal("-", f(nil))
      assert.are.equal("-", f(0 / 0))
      assert.are.equal("-", f(math.huge))
    end
  end)
end)

describe("report.csv", function()
  it("quotes fields with commas, quotes, newlines and edge spaces; nil is empty", function()
    local text = report.csv_string({
      { a = "plain", b = 1 },
      { a = 'say "hi"', b = 0.1 },
      { a = "x,y", b = nil },
      { a = "two\nlines", b = 0 / 0 },
      { a = " pad", b = math.huge },
      { a = true, b = -math.huge },
    }, { "a", { key = "b", title = "b,c" } })
    assert.are.equal(table.concat({
      'a,"b,c"', "plain,1", '"say ""hi""",0.1', '"x,y",', '"two\nlines",nan', '" pad",inf', "true,-inf",
    }, "\n") .. "\n", text)
  end)

  it("writes numbers that read back exactly, to a file", function()
    local dir = spec_tmpdir()
    local path = dir .. "/r.csv"
    local values = { 1 / 3, 1e-300, 123456789012, 2 ^ 53 + 0.0, -0.1 }
    local rows = {}
    for i, v in ipairs(values) do rows[i] = { v = v } end
    assert.are.equal(path, report.csv(path, rows, { "v" }, { provenance = false }))
    local lines = {}
    for line in read_file(path):gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.are.equal("v", lines[1])
    for i, v in ipairs(values) do assert.are.equal(v, tonumber(lines[i + 1])) end
    assert.has_error(function() report.csv(dir .. "/missing/x.csv", rows, { "v" }) end)
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("report.json", function()
  it("encodes scalars, escapes strings and writes null for nil and non-finite numbers", function()
    assert.are.equal("null", report.json_encode(nil))
    assert.are.equal("true", report.json_encode(true))
    assert.are.equal("42", report.json_encode(42))
    assert.are.equal("0.1", report.json_encode(0.1))
    assert.are.equal("-2.5e-07", report.json_encode(-2.5e-7))
    assert.are.equal("null", report.json_encode(0 / 0))
    assert.are.equal("null", report.json_encode(math.huge))
    assert.are.equal("null", report.json_encode(-math.huge))
    assert.are.equal([["a\"b\\c\n\t\u0001/é"]], report.json_encode('a"b\\c\n\t\1/é'))
    assert.are.equal('"a\u{FFFD}b"', report.json_encode("a\255b"))
  end)

  it("tells arrays from objects, sorts keys, and honours array/object marks", function()
    assert.are.equal("[1,2,3]", report.json_encode({ 1, 2, 3 }))
    assert.are.equal("[1,null,3]", report.json_encode({ 1, nil, 3 }))
    assert.are.equal('{"a":1,"b":[],"c":{"x":null}}',
      report.json_encode({ b = {}, a = 1, c = { x = 0 / 0 } }))
    assert.are.equal('{"1":"a","5":"b"}', report.json_encode({ [1] = "a", [5] = "b" }))
    assert.are.equal('{"1":true,"k":false}', report.json_encode({ [1] = true, k = false }))
    assert.are.equal("{}", report.json_encode(report.object({})))
    assert.are.equal("[]", report.json_encode(report.array({})))
    assert.are.equal("[\n  1,\n  {\n    \"x\": [\n      2\n    ]\n  }\n]",
      report.json_encode({ 1, { x = { 2 } } }, { indent = 2 }))
  end)

  it("refuses cycles, functions and odd keys, naming where", function()
    local t = { rows = { {} } }
    t.rows[1].back = t
    assert.has_error(function() report.json_encode(t) end, "report.json: $.rows[1].back refers back to itself (a cycle)")
    assert.has_error(function() report.json_encode({ f = print }) end,
      "report.json: $.f is a function, which JSON cannot hold")
    assert.has_error(function() report.json_encode({ [true] = 1 }) end,
      "report.json: $ has a key of type boolean (keys must be strings or integers)")
    -- a table used twice (not a cycle) is fine
    local shared = { 1 }
    assert.are.equal('{"a":[1],"b":[1]}', report.json_encode({ a = shared, b = shared }))
  end)

  it("round-trips through json_decode, nulls kept in arrays", function()
    local value = { rows = { { batch = 1, ms = 3.18, name = "u4 \"tile\" 8\n", ok = true },
                             { batch = 256, ms = 1 / 3, error = "refused: é" } },
                    list = { 1, 0 / 0, 3 }, empty = {}, big = 2 ^ 60, tiny = 5e-324 }
    local back = report.json_decode(report.json_encode(value, { indent = 2 }))
    assert.are.equal(3.18, back.rows[1].ms)
    assert.are.equal(1 / 3, back.rows[2].ms)
    assert.are.equal("u4 \"tile\" 8\n", back.rows[1].name)
    assert.are.equal("refused: é", back.rows[2].error)
    assert.is_true(back.rows[1].ok)
    assert.are.equal(report.null, back.list[2])
    assert.are.equal(3, #back.list)
    assert.are.same({}, back.empty)
    assert.are.equal(2 ^ 60, back.big)
    assert.are.equal(5e-324, back.tiny)
    assert.are.equal("😀", report.json_decode('"\\ud83d\\ude00"'))
    assert.has_error(function() report.json_decode("[1,]") end)
    assert.has_error(function() report.json_decode('{"a" 1}') end)
    assert.has_error(function() report.json_decode("[1] x") end)
  end)

  it("writes a file that Python's json module reads the same", function()
    local dir = spec_tmpdir()
    local path = dir .. "/r.json"
    report.json(path, { a = { 1.5, "x\"y", 0 / 0 }, b = { c = true } }, { indent = 2, provenance = false })
    local text = read_file(path)
    assert.are.equal('{\n  "a": [\n    1.5,\n    "x\\"y",\n    null\n  ],\n  "b": {\n    "c": true\n  }\n}\n', text)
    if os.execute(PYTHON .. " -c 'import json' >/dev/null 2>&1") then
      local p = io.popen(PYTHON .. " -c \"import json,sys; v=json.load(open(sys.argv[1])); "
        .. "print(v['a'][0], v['a'][1], v['a'][2], v['b']['c'])\" '" .. path .. "'")
      local out = p:read("a")
      p:close()
      assert.are.equal('1.5 x"y None True\n', out)
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
