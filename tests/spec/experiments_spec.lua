-- The experiments through the built program on this machine: a GPU-only
-- experiment says so and exits 3 without writing anything; gate_order and
-- error_growth run their CPU part and write parseable CSV and well-formed SVG.
local spk = require "spk"
local report = require "spk.report"
local xml = require "xml_check"

local program = (os.getenv("BUILD") or "build") .. "/spk"

local function run(args)
  local p = io.popen(program .. " run " .. args .. " 2>&1; echo \"exit=$?\"")
  local out = p:read("a")
  p:close()
  local code = tonumber(out:match("exit=(%d+)%s*$"))
  return code, out
end

local function read(path)
  local f = assert(io.open(path), path)
  local text = f:read("a")
  f:close()
  return text
end

-- CSV parsing of the files report.csv writes (RFC 4180: a field with a comma, a quote or a line
-- break is quoted, a quote doubled): header and rows.
local function csv_records(text)
  local records, record, field, i, n = {}, {}, {}, 1, #text
  local quoted = false
  while i <= n do
    local ch = text:sub(i, i)
    if quoted then
      if ch == '"' and text:sub(i + 1, i + 1) == '"' then field[#field + 1] = '"'; i = i + 1
      elseif ch == '"' then quoted = false
      else field[#field + 1] = ch end
    elseif ch == '"' then quoted = true
    elseif ch == "," then record[#record + 1] = table.concat(field); field = {}
    elseif ch == "\n" then
      record[#record + 1] = table.concat(field); field = {}
      records[#records + 1] = record; record = {}
    elseif ch ~= "\r" then field[#field + 1] = ch end
    i = i + 1
  end
  assert(not quoted, "CSV: a quoted field is not closed")
  if #field > 0 or #record > 0 then record[#record + 1] = table.concat(field); records[#records + 1] = record end
  return records
end

local function csv_rows(text)
  local records = csv_records(text)
  while records[1] and records[1][1]:match("^#") do table.remove(records, 1) end -- the provenance line
  local header = records[1]
  local rows = {}
  for i = 2, #records do
    local row = {}
    assert.are.equal(#header, #records[i], "field count of line " .. i)
    for k, f in ipairs(records[i]) do row[header[k]] = f end
    rows[#rows + 1] = row
  end
  return header, rows
end

local gpu = spk.cuda.available()

-- Every file an experiment wrote into `dir` carries its provenance (the
-- record's fields, the experiment's name and options, the command that ran
-- it); returns how many files there were.
local function every_file_has_provenance(dir, name, run)
  local p = io.popen("ls -1 '" .. dir .. "'")
  local count = 0
  for file in p:lines() do
    local record = assert_provenance(read(dir .. "/" .. file), name .. "/" .. file, run)
    assert.are.equal(name, record.run.experiment, file)
    assert.matches("experiments/" .. name .. ".lua", record.command, 1, true)
    count = count + 1
  end
  p:close()
  assert.is_true(count > 0, "no files in " .. dir)
  return count
end

describe("experiments", function()
  local dir
  before_each(function() dir = spec_tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  for _, name in ipairs { "tile_sweep", "batch_sweep" } do
    it(name .. " without a GPU says so, exits 3 and writes nothing", function()
      if gpu then pending("a GPU is present") return end
      local code, out = run(("experiments/%s.lua --quick --out '%s/out'"):format(name, dir))
      assert.are.equal(3, code)
      assert.matches(name .. ": needs a CUDA GPU", out)
      assert.matches("Nothing was run", out)
      assert.is_false(os.execute("test -e '" .. dir .. "/out'") == true)
    end)
  end

  it("reads back the CSV report.csv_string writes, quoted fields among them", function()
    local rows = { { batch = 1, variant = 'cluster 8, warp push', note = 'say "hi"' }, { batch = 2, variant = "x" } }
    local columns = { { key = "batch", title = "batch" }, { key = "variant", title = "variant" },
                      { key = "note", title = "note" } }
    local header, back = csv_rows(report.csv_string(rows, columns))
    assert.are.same({ "batch", "variant", "note" }, header)
    assert.are.same({ batch = "1", variant = "cluster 8, warp push", note = 'say "hi"' }, back[1])
    assert.are.same({ batch = "2", variant = "x", note = "" }, back[2])
  end)

  it("custom_kernel without a GPU compiles the kernel, checks the contract, writes check.json and exits 3", function()
    if gpu then pending("a GPU is present") return end
    for _, kernel in ipairs { "row_block", "cluster_registers" } do
      local code, out = run(("experiments/custom_kernel.lua --quick --kernel experiments/kernels/%s.lua --out '%s/%s'")
        :format(kernel, dir, kernel))
      assert.are.equal(3, code, out)
      assert.matches(kernel .. ": .* compiled for sm_90 %(%d+ bytes%); its 10 parameters match the contract", out)
      assert.matches("custom_kernel: running " .. kernel .. " needs a CUDA GPU", out)
      local check = report.json_decode(read(("%s/%s/check.json"):format(dir, kernel)))
      assert.are.equal("sm_90", check.arch)
      assert.are.equal(10, #check.params)
      assert.are.equal(1, every_file_has_provenance(dir .. "/" .. kernel, "custom_kernel",
        { kernel = "experiments/kernels/" .. kernel .. ".lua", variants = { kernel } }))
    end
    -- a kernel that breaks the contract says so (exit 1), before anything else
    local code, out = run(("experiments/custom_kernel.lua --kernel tests/fixtures/kernels/wrong_signature.lua --out '%s/w'")
      :format(dir))
    assert.are.equal(1, code, out)
    assert.matches("parameter 5 is a f32 %(4 bytes%), but args%[5%] is \"batch\"", out)
  end)

  for _, name in ipairs { "quickstart", "tile_sweep", "batch_sweep", "gate_order", "error_growth", "custom_kernel" } do
    it(name .. " --help prints its options and exits 0; a bad option exits 2", function()
      local code, out = run("experiments/" .. name .. ".lua --help")
      assert.are.equal(0, code)
      assert.matches("%-%-quick", out)
      assert.matches("%-%-batches", out)
      assert.matches("%-%-out", out)
      code, out = run("experiments/" .. name .. ".lua --no-such-option")
      assert.are.equal(2, code)
      assert.matches("unknown option", out)
    end)
  end

  it("quickstart --quick checks the auto backend against f64 and writes CSV, JSON and SVG", function()
    local code, out = run(("experiments/quickstart.lua --quick --steps 20 --out '%s'"):format(dir))
    assert.are.equal(0, code, out)
    assert.matches("quickstart %(quick%): results in ", out)
    local header, rows = csv_rows(read(dir .. "/quickstart.csv"))
    assert.are.equal("batch", header[1])
    assert.are.equal("1", rows[1].batch)
    if gpu then assert.are_not.equal("cpu", rows[1].backend) else assert.are.equal("cpu", rows[1].backend) end
    assert.is_true(tonumber(rows[1].rel_l2) <= 1e-4)
    assert.is_true(tonumber(rows[1].median_ms) > 0)
    local json = report.json_decode(read(dir .. "/quickstart.json"))
    assert.are.equal(rows[1].backend, json.auto[1].backend)
    local svg = read(dir .. "/quickstart.svg")
    assert.is_true(xml.check(svg))
    -- the chart shows the spread of the rounds: a whisker and each round as a dot
    assert.truthy(svg:find('class="whisker"', 1, true))
    local dots = 0
    for _ in svg:gmatch('class="sample"') do dots = dots + 1 end
    local samples = 0 -- every row is a bar (with a GPU: the auto backend, cuDNN's algorithms)
    for _, r in ipairs(json.rows) do samples = samples + #r.samples end
    assert.are.equal(samples, dots)
    local backends, seen = {}, {} -- the rows' backends, in their order
    for _, r in ipairs(json.rows) do
      if not seen[r.backend] then seen[r.backend], backends[#backends + 1] = true, r.backend end
    end
    assert.are.equal(3, every_file_has_provenance(dir, "quickstart",
      { seeds = { weights = 1, input = 1 }, dtype = "f32", backends = backends, quick = true,
        shape = { layers = 4, input = 60, hidden = 128, steps = 20, batches = { 1 } } }))
  end)

  it("gate_order --quick checks all 24 orders and writes CSV, JSON and SVG", function()
    local code, out = run(("experiments/gate_order.lua --quick --rounds 1 --steps 3 --out '%s'"):format(dir))
    assert.are.equal(0, code, out)
    local header, rows = csv_rows(read(dir .. "/gate_order.csv"))
    assert.are.equal("order", header[1])
    assert.are.equal(24, #rows)
    local seen = {}
    for _, r in ipairs(rows) do
      assert.are.equal(4, #r.order)
      seen[r.order] = true
      assert.are.equal("true", r.ok)
      assert.truthy(tonumber(r.interleaved_ms) >= 0)
      assert.are.equal("true", r.contract, r.order .. ": the kernel compiled in that order")
      if gpu then
        assert.are.equal("true", r.same_bits, r.order)
        assert.truthy(tonumber(r.gpu_ms) > 0)
      end
    end
    assert.truthy(seen.iofc and seen.ifco and seen.cfoi)
    local json = report.json_decode(read(dir .. "/gate_order.json"))
    assert.are.equal(24, #json.rows)
    local svg = read(dir .. "/pack_ms.svg")
    assert.is_true(xml.check(svg))
    -- the packing time's spread over the rounds, per order and layout
    local whiskers = 0
    for lo, hi in svg:gmatch('class="whisker" data%-category="[^"]*" data%-lo="([^"]*)" data%-hi="([^"]*)"') do
      assert.is_true(tonumber(lo) <= tonumber(hi))
      whiskers = whiskers + 1
    end
    assert.are.equal(48, whiskers)
    every_file_has_provenance(dir, "gate_order", { seeds = { weights = 1, input = 1 } })
  end)

  it("error_growth --quick runs the cpu backend over every layer and step", function()
    local code, out = run(("experiments/error_growth.lua --quick --steps 12 --out '%s'"):format(dir))
    assert.are.equal(0, code, out)
    if not gpu then assert.matches("no GPU: backend persistent left out", out) end
    local header, rows = csv_rows(read(dir .. "/error_growth.csv"))
    assert.are.equal("backend", header[1])
    local cpu = {}
    for _, r in ipairs(rows) do if r.backend == "cpu" then cpu[#cpu + 1] = r end end
    assert.are.equal(4 * 12, #cpu)
    assert.are.equal("48", cpu[48].step)
    assert.are.equal("1", cpu[37].t_forward)
    assert.are.equal("12", cpu[37].t_reverse)
    for _, r in ipairs(cpu) do
      local e = tonumber(r.max_abs)
      assert.truthy(e >= 0 and e < 1e-5, "f32 against f64 error " .. r.max_abs)
    end
    local svg = read(dir .. "/error_growth.svg")
    assert.is_true(xml.check(svg))
    assert.truthy(svg:find('data-name="cpu"', 1, true))
    every_file_has_provenance(dir, "error_growth", { dtype = "f32" })
  end)

  it("a failure removes what the experiment wrote and prints the message alone (--debug: the traceback)", function()
    -- a kernel file that is no kernel fails gate_order after its results folder exists
    local bad = dir .. "/bad.lua"
    local f = assert(io.open(bad, "w"))
    f:write("return 42\n")
    f:close()
    local out_dir = dir .. "/out"
    local code, out = run(("experiments/gate_order.lua --quick --kernel '%s' --out '%s'"):format(bad, out_dir))
    assert.are.equal(1, code, out)
    assert.matches("gate_order %(quick%): results in " .. out_dir:gsub("%p", "%%%0"), out)
    assert.matches("\nspk: gate_order: [^\n]*bad%.lua", out)
    assert.is_nil(out:find("stack traceback", 1, true), out)
    assert.is_false(os.execute("test -e '" .. out_dir .. "'") == true, "the results folder is left")
    code, out = run(("experiments/gate_order.lua --quick --debug --kernel '%s' --out '%s'"):format(bad, out_dir))
    assert.are.equal(1, code, out)
    assert.truthy(out:find("stack traceback", 1, true), out)
    -- a folder that was there before stays, without the files the run wrote
    os.execute("mkdir -p '" .. out_dir .. "' && touch '" .. out_dir .. "/mine.txt'")
    code, out = run(("experiments/gate_order.lua --quick --kernel '%s' --out '%s'"):format(bad, out_dir))
    assert.are.equal(1, code, out)
    assert.are.equal("", read(out_dir .. "/mine.txt"))
    local p = io.popen("ls -A '" .. out_dir .. "'")
    assert.are.equal("mine.txt\n", p:read("a"))
    p:close()
    -- so does an empty one (the run did not make it)
    local empty = dir .. "/empty"
    assert.is_true(os.execute("mkdir '" .. empty .. "'"))
    code, out = run(("experiments/gate_order.lua --quick --kernel '%s' --out '%s'"):format(bad, empty))
    assert.are.equal(1, code, out)
    assert.is_true(os.execute("test -d '" .. empty .. "'"), "the folder that was there is gone")
    -- files written before the failure go too
    local script = dir .. "/failing.lua"
    f = assert(io.open(script, "w"))
    f:write([[
require "spk"
local ex = require("spk.experiment").start { name = "failing", gpu = "optional", batches = { 1 } }
ex:json("a.json", { x = 1 })
ex:csv("b.csv", { { a = 1 } }, { "a" })
error("something broke at step 3")
]])
    f:close()
    local fresh = dir .. "/fresh"
    code, out = run(("'%s' --out '%s'"):format(script, fresh))
    assert.are.equal(1, code, out)
    assert.matches("\nspk: failing: [^\n]*failing%.lua:5: something broke at step 3\nexit=1", out)
    assert.is_false(os.execute("test -e '" .. fresh .. "'") == true, "the results folder is left")
  end)
end)
