-- The kernel option tables (src/lstm/kernel_options.h): what spk help prints
-- is README's list, every option of both families is there with its values,
-- and the Lua side reads kernel tables through the tables (no option rule
-- written a second time in Lua).
local spk = require "spk"

-- every built-in kernel family (src/lstm/family.c's spk_families): a new one is checked here too
local FAMILIES = {}
for _, f in ipairs(require("spk.core").kernel_families()) do FAMILIES[#FAMILIES + 1] = f.backend end

-- the options that set no macro of their own: the launch's, or the define the family writes for them
local NO_MACRO = { cluster = { tile_rows = "launch" }, persistent = { tile_rows = "launch" },
                   tensor_core = { exclusive_sm = "launch", split = "TC_SPLIT", mma = "TC_MMA" } }

local function read(path)
  local f = assert(io.open(path, "r"))
  local s = f:read("a")
  f:close()
  return s
end

describe("kernel options", function()
  it("spk help ends with the kernel options, and README shows the same text", function()
    local out, _, code = run_spk { "help" }
    assert.are.equal(0, code)
    local printed = out:match("\n(kernel options %(.-)$")
    assert.is_truthy(printed, "spk help has no kernel options section:\n" .. out)
    local readme = read("README.md")
    local block = readme:match("### Kernel options.-```text\n(.-)```")
    assert.is_truthy(block, "README.md has no ```text block under ### Kernel options")
    assert.are.equal(printed, block)
  end)

  it("lists every option of every family with its values, default rule and help", function()
    assert.are.same({ "persistent", "cluster" }, { FAMILIES[1], FAMILIES[2] })
    for _, backend in ipairs(FAMILIES) do
      local t = spk.lstm.kernel_options(backend)
      assert.are.equal(backend, t.backend)
      for _, o in ipairs(t.options) do
        assert.is_truthy(t.text:find("  " .. o.name .. " ", 1, true), backend .. " " .. o.name)
        assert.is_truthy(t.text:find(o.help, 1, true), o.name)
        assert.is_truthy(o.default == "batch" or o.default == "fit" or o.default == "layers", o.name)
        -- every option sets a macro of the kernel source but the launch's (tile_rows, exclusive_sm) and the
        -- words the family encodes in a define of its own (the tensor-core kernel's split and mma)
        local own = NO_MACRO[backend] and NO_MACRO[backend][o.name]
        assert.are.equal(own == nil, o.macro ~= nil, backend .. " " .. o.name .. ": a macro where there should be none, or none")
        if own and own ~= "launch" then
          assert.is_truthy(spk.lstm.kernel_variant { backend = backend, batch = 8 }.defines[own], own)
        end
        if o.default ~= "layers" then assert.is_truthy(t.text:find(o.takes, 1, true), o.name) end
      end
      for _, rule in ipairs(t.rules) do assert.is_truthy(t.text:find(rule, 1, true), rule) end
    end
  end)

  it("every value the table allows is accepted and the next one refused, with the table's words", function()
    for _, backend in ipairs(FAMILIES) do
      for _, o in ipairs(spk.lstm.kernel_options(backend).options) do
        if o.words then
          local ok, err = pcall(spk.lstm.kernel_variant, { backend = backend, kernel = { [o.name] = "nonsense" } })
          assert.is_false(ok)
          assert.matches("kernel." .. o.name .. " must be " .. o.takes:gsub("%p", "%%%0"), tostring(err))
        elseif o.default ~= "layers" then
          local ok, err = pcall(spk.lstm.kernel_variant, { backend = backend, kernel = { [o.name] = o.max + 1 } })
          assert.is_false(ok)
          assert.matches("kernel." .. o.name .. " must be " .. o.takes:gsub("%p", "%%%0"), tostring(err))
          assert.matches(("got %d"):format(o.max + 1), tostring(err))
        end
      end
    end
  end)

  it("each rule is enforced: its message when a script breaks it", function()
    local breaking = {
      cluster = {
        { push = "scalar", gate_block = 4 }, { push = "warp", gate_block = 1 },
        { push = "scalar", gates_ahead = 2 }, { push = "scalar", row_phases = 2 },
        { push = "scalar", early_gates = 1 }, { push = "scalar", cell = "trimmed" },
        { push = "scalar", mapped_pushes = 1 }, { push = "warp", mapped_pushes = 2 },
      },
      persistent = { { units = 32, gate_block = 1 } },
    }
    for backend, cases in pairs(breaking) do
      local rules = spk.lstm.kernel_options(backend).rules
      assert.are.equal(#rules, #cases, backend .. ": a case per rule")
      for i, kernel in ipairs(cases) do
        local ok, err = pcall(spk.lstm.kernel_variant, { backend = backend, kernel = kernel })
        assert.is_false(ok)
        assert.is_truthy(tostring(err):find(rules[i], 1, true), ("%s: %s"):format(rules[i], tostring(err)))
      end
    end
  end)

  it("the recurrence kernels keep their shape: no function over 120 lines, at most 10 branches a file", function()
    local files = { "kernels/lstm_cluster.cu", "kernels/lstm_cluster_baseline.cu", "kernels/lstm_cluster_stages.cuh",
                    "kernels/cluster_sync.cuh", "kernels/cluster_dots.cuh", "kernels/lstm_recurrence.cu",
                    "kernels/lstm_recurrence_stages.cuh" }
    local out, _, code = run_spk { "run", "tools/kernel_metrics.lua", "--check", table.unpack(files) }
    assert.are.equal(0, code, out)
    for _, f in ipairs(files) do assert.is_truthy(out:find(f, 1, true), f) end
    -- the check can fail: a function of 121 lines counted from its signature (three lines of it, as the
    -- kernels' entries have), or 11 branches in one, exits 1; one of 120 lines passes
    local dir = spec_tmpdir()
    local function function_of(lines)
      local text = { "extern \"C\" __global__ void __launch_bounds__(128, 1)", "f(const float *x, // the input",
                     "  int n)", "{" }
      for i = 1, lines - 5 do text[#text + 1] = ("    n += %d;"):format(i) end
      text[#text + 1] = "}"
      return text
    end
    local long = function_of(121)
    local fits = function_of(120)
    local f = assert(io.open(dir .. "/fits.cu", "w"))
    f:write("// a file comment\n#include <x.h>\nstatic int g;\n", table.concat(fits, "\n"), "\n")
    f:close()
    local fits_text, _, fits_code = run_spk { "run", "tools/kernel_metrics.lua", "--check", dir .. "/fits.cu" }
    assert.are.equal(0, fits_code, fits_text)
    assert.matches("longest function f %(120 lines%)", fits_text)
    local branchy = { "__device__ void g(int x)", "{" }
    for i = 1, 11 do
      branchy[#branchy + 1] = ("#if A%d"):format(i)
      branchy[#branchy + 1] = "    x++;"
      branchy[#branchy + 1] = "#endif"
    end
    branchy[#branchy + 1] = "}"
    for name, lines in pairs { ["long.cu"] = long, ["branchy.cu"] = branchy } do
      local f = assert(io.open(dir .. "/" .. name, "w"))
      f:write(table.concat(lines, "\n"), "\n")
      f:close()
      local text, _, bad = run_spk { "run", "tools/kernel_metrics.lua", "--check", dir .. "/" .. name }
      assert.are.equal(1, bad, text)
    end
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("an option left out is the batch's default in every family", function()
    for _, backend in ipairs(FAMILIES) do
      for _, batch in ipairs { 1, 8, 33, 64, 129, 256, 1000 } do
        local default = spk.lstm.kernel_variant { backend = backend, batch = batch }
        assert.are.same(default, spk.lstm.kernel_variant { backend = backend, batch = batch, kernel = {} })
      end
    end
    local ok, err = pcall(spk.lstm.kernel_variant, { backend = "cudnn" })
    assert.is_false(ok)
    assert.matches("backend cudnn has no kernel options", tostring(err))
  end)
end)
