-- tools/stall_stages.py, the reader of Nsight Compute's per-instruction
-- warp-stall samples, on a source page the H200 made (the cluster kernel at
-- batch 1, tests/fixtures/ncu/cluster_b1_source.csv: the columns the tool
-- reads of tools/ncu_source.sh's output). Its sums are checked against the
-- file read here, independently, and its refusals against bad input.
local FIXTURE = "tests/fixtures/ncu/cluster_b1_source.csv"
local has_python = os.execute("command -v python3 >/dev/null 2>&1") == true
local it_py = has_python and it or function(name) pending(name .. " [needs python3]") end

local function run(args)
  local err_file = spec_tmpfile()
  local p = io.popen(("python3 tools/stall_stages.py %s 2>%s"):format(args, shell_quote(err_file)))
  local out = p:read("a")
  local _, _, code = p:close()
  local err = read_file(err_file)
  os.remove(err_file)
  return out, err, code
end

-- The fixture's rows: every field is quoted and none holds a quote.
local function rows_of(path)
  local rows = {}
  for line in io.lines(path) do
    local fields = {}
    for field in line:gmatch('"(.-)",?') do fields[#fields + 1] = field end
    rows[#rows + 1] = fields
  end
  return rows
end

describe("tools/stall_stages.py", function()
  it_py("sums the step loop's samples as the source page holds them, by kind and by stretch", function()
    local rows = rows_of(FIXTURE)
    local header = rows[2]
    local col = {}
    for i, name in ipairs(header) do col[name] = i end
    local most, total = 0, 0
    for i = 3, #rows do
      most = math.max(most, tonumber(rows[i][col["Instructions Executed"]]))
      total = total + tonumber(rows[i][col["Warp Stall Sampling (All Samples)"]])
    end
    local loop, in_loop = 0, 0
    for i = 3, #rows do
      if tonumber(rows[i][col["Instructions Executed"]]) >= 0.5 * most then
        loop = loop + 1
        in_loop = in_loop + tonumber(rows[i][col["Warp Stall Sampling (All Samples)"]])
      end
    end
    local out, err, code = run(shell_quote(FIXTURE) .. " --step-ns 362")
    assert.are.equal(0, code, err)
    assert.matches(("kernel spk_lstm_cluster: %d instructions, %d samples"):format(#rows - 2, total), out, 1, true)
    assert.matches(("stall_stages: %d instructions in the loop, %d samples"):format(loop, in_loop), out, 1, true)
    -- each table's lines add up to the loop's samples, and its ns to the step
    for _, title in ipairs { "by kind", "by stretch" } do
      local block = out:match(title .. "[^\n]*\n(.-)\n[bs]")
      assert.is_truthy(block, title .. ":\n" .. out)
      local samples, ns, names = 0, 0, {}
      for name, s, t in block:gmatch("\n?  (%S[^\n]-)%s+(%d+)%s+[%d.]+ %%%s+([%d.]+) ns") do
        samples, ns, names[#names + 1] = samples + tonumber(s), ns + tonumber(t), name
      end
      assert.are.equal(in_loop, samples, title)
      assert.is_true(math.abs(ns - 362) < 0.1 * #names, ("%s: %.1f ns"):format(title, ns))
    end
    -- the landmarks in loop order, each found once
    local order = {}
    for name in out:gmatch("\n  (%a+)%s+%d+%s+[%d.]+ %%[^\n]*from ") do order[#order + 1] = name end
    assert.are.same({ "head", "wait", "dot", "reduce", "cell", "publish", "fetch" }, order)
    assert.is_nil(out:find("no landmark", 1, true))
  end)

  it_py("prints the loop's instructions with --loop", function()
    local out, err, code = run(shell_quote(FIXTURE) .. " --loop")
    assert.are.equal(0, code, err)
    assert.matches("SYNCS.PHASECHK.TRANS64.TRYWAIT", out, 1, true)
    assert.matches("STAS", out, 1, true)
  end)

  it_py("refuses a file that is no source page, and one without the source counters", function()
    local dir = spec_tmpdir()
    write_file(dir .. "/plain.csv", "a,b\n1,2\n3,4\n")
    local out, err, code = run(shell_quote(dir .. "/plain.csv"))
    assert.are_not.equal(0, code)
    assert.matches("is not an ncu source page", err, 1, true)
    write_file(dir .. "/no_samples.csv", '"Kernel Name","k"\n"Address","Source"\n"0x0","NOP"\n')
    out, err, code = run(shell_quote(dir .. "/no_samples.csv"))
    assert.are_not.equal(0, code)
    assert.matches("collect with --section SourceCounters", err, 1, true)
    out, err, code = run("")
    assert.are_not.equal(0, code)
    assert.matches("usage: python3 tools/stall_stages.py", err, 1, true)
    out, err, code = run(shell_quote(FIXTURE) .. " --step-ns")
    assert.are_not.equal(0, code)
    assert.matches("--step-ns: expected one argument", err, 1, true)
    out, err, code = run(shell_quote(FIXTURE) .. " --min-share half")
    assert.are_not.equal(0, code)
    assert.matches("--min-share: invalid float value", err, 1, true)
    remove_scratch(dir)
  end)
end)
