-- The status line of long work (lua/spk/progress.lua): what runs now,
-- done/total, elapsed and time left, drawn in place on a terminal and never
-- when the output is piped; spk bench through a pipe and on a terminal.
local progress = require "spk.progress"

-- A stream that keeps what is written, and a clock the test moves.
local function fake()
  local written = {}
  local stream = { write = function(self, ...) for _, s in ipairs { ... } do written[#written + 1] = s end return self end,
                   flush = function() end }
  local now = 0
  return stream, function() return table.concat(written) end, function(ms) now = ms end, function() return now end
end

describe("spk.progress", function()
  it("says what runs now, done of all, the time spent and the time left at the pace so far", function()
    local stream, text, set, clock = fake()
    local p = progress.new { label = "sweep", total = 4, stream = stream, enabled = true, clock = clock }
    p:step("batch 1: u4")
    assert.are.equal("[sweep] 0/4 batch 1: u4 | 0.0 s", p:line())
    set(3000)
    p:step("batch 1: u8")
    assert.are.equal("[sweep] 1/4 batch 1: u8 | 3.0 s, about 9.0 s left", p:line())
    set(150000)
    p:update("batch 8: u4", 2)
    assert.are.equal("[sweep] 2/4 batch 8: u4 | 2 min 30 s, about 2 min 30 s left", p:line())
    p:finish()
    assert.matches("\r\27%[K%[sweep%] 0/4 batch 1: u4 | 0%.0 s\r\27%[K%[sweep%] 1/4", text())
    assert.matches("\r\27%[K$", text(), nil, "finish clears the line")
  end)

  it("keeps the status line below the lines printed meanwhile", function()
    local stream, text = fake()
    local p = progress.new { label = "x", total = 2, stream = stream, enabled = true, clock = function() return 0 end }
    p:step("a")
    p:print("batch 1: f64 reference ...")
    assert.are.equal("\r\27[K[x] 0/2 a | 0.0 s\r\27[Kbatch 1: f64 reference ...\n\r\27[K[x] 0/2 a | 0.0 s", text())
  end)

  it("writes nothing but the printed lines when it is not on a terminal", function()
    local stream, text = fake()
    local p = progress.new { label = "x", total = 2, stream = stream, enabled = false }
    p:step("a")
    p:update("b", 1)
    p:print("a line")
    p:finish()
    assert.are.equal("a line\n", text())
  end)

  it("is off for a pipe, and cuts the line to $COLUMNS", function()
    local out, err, code = run_spk({ "-e", [[
      local progress = require "spk.progress"
      print(progress.terminal(io.stderr), progress.terminal(io.stdout))
      local p = progress.new { label = "a fairly long label", total = 3, stream = io.stdout, enabled = true }
      p:step(string.rep("w", 80))
      p:finish()]] }, { env = { COLUMNS = "40" } })
    assert.are.equal(0, code, err)
    local first, drawn = out:match("^([^\n]*)\n\r\27%[K([^\r]*)\r")
    assert.are.equal("false\tfalse", first)
    assert.are.equal(39, #drawn)
    assert.matches("^%[a fairly long label%] 0/3 www", drawn)
    assert.are.equal("3.5 s", progress.duration(3.5))
    assert.are.equal("1 h 01 min", progress.duration(3660))
  end)
end)

describe("spk bench's progress", function()
  local args = { "bench", "--backends", "cpu", "--batches", "1,2", "--steps", "3", "--hidden", "8", "--layers", "1",
                 "--input", "4", "--rounds", "1", "--warmup", "0" }

  it("through a pipe: its lines only, no status line", function()
    local _, err, code = run_spk(args)
    assert.are.equal(0, code, err)
    -- then the CPU section's lines, at the threads this machine gives it
    assert.are.equal("batch 1: f64 reference ...\nbatch 1: cpu (1/1) ...\nbatch 2: f64 reference ...\n"
      .. "batch 2: cpu (1/1) ...\ncpu section: batch 1, T threads ...\ncpu section: batch 2, T threads ...\n",
      (err:gsub("batch (%d), %d+ threads? ", "batch %1, T threads ")))
  end)

  it("on a terminal: the status line with the steps of the whole run", function()
    if not os.execute("script -qec true /dev/null >/dev/null 2>&1 </dev/null") then
      return require("spk.busted").skip("script(1) cannot make a terminal here")
    end
    local function on_terminal(env)
      local log = os.tmpname()
      local words = { env or "", shell_quote(SPK) }
      for _, a in ipairs(args) do words[#words + 1] = a end
      local ok = os.execute("script -qfec " .. shell_quote(table.concat(words, " ") .. " >/dev/null") .. " /dev/null >"
        .. shell_quote(log) .. " 2>&1 </dev/null")
      local out = read_file(log)
      os.remove(log)
      assert.is_true(ok == true, out)
      return out
    end
    local out = on_terminal()
    assert.matches("\27%[K%[spk bench%] 0/4 batch 1: f64 reference | ", out)
    assert.matches("\27%[K%[spk bench%] 3/4 batch 2: cpu %(1/1%) | [%d.]+ s, about [%d.]+ s left", out)
    -- SPK_PROGRESS=0: the lines alone, on a terminal too
    out = on_terminal("SPK_PROGRESS=0")
    assert.matches("batch 2: cpu %(1/1%) %.%.%.", out)
    assert.is_nil(out:find("[spk bench]", 1, true), out)
  end)
end)
