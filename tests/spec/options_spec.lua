-- spk.options: the argument helpers the command-line commands share.
local options = require "spk.options"

local function usage_error(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok)
  assert.are.equal("table", type(err))
  return err.usage_error
end

describe("spk.options", function()
  it("reads integers at or above a least value, naming the option otherwise", function()
    assert.are.equal(7, options.positive("7", "rounds"))
    assert.are.equal(0, options.positive("0", "warmup", 0))
    assert.are.equal("--rounds: '0' is not an integer >= 1", usage_error(function() options.positive("0", "rounds") end))
    assert.matches("'2.5' is not an integer", usage_error(function() options.positive("2.5", "steps") end))
    assert.matches("'x' is not an integer", usage_error(function() options.positive("x", "steps") end))
  end)

  it("splits comma-separated lists and checks their items", function()
    assert.are.same({ "a", "b" }, options.list("a,b", "backends"))
    assert.are.same({ 1, 8, 32 }, options.positives("1,8,32", "batches"))
    assert.are.equal("--batches needs a value", usage_error(function() options.list(",", "batches") end))
    assert.matches("--batches: '%-1'", usage_error(function() options.positives("1,-1", "batches") end))
    local known = { fp32 = true, tf32 = true }
    assert.are.same({ "tf32", "fp32" }, options.choices("tf32,fp32", "math", "math", known))
    assert.are.equal("--math: unknown math 'fp16' (known: fp32, tf32)",
      usage_error(function() options.choices("fp32,fp16", "math", "math", known) end))
  end)

  it("starts a command: usage errors exit 2 on stderr, --help prints the usage and exits 0", function()
    local written = {}
    local out = { write = function(s) written[#written + 1] = s end, progress = function() end }
    local function parse(args)
      if args[1] == "--help" then return { help = true } end
      if args[1] then options.fail("unknown argument '" .. args[1] .. "'") end
      return { ok = true }
    end
    local o, io_out = options.start("demo", parse, {}, out, "usage: spk demo")
    assert.are.same({ ok = true }, o)
    assert.are.equal(out, io_out)
    local none, code = options.start("demo", parse, { "--help" }, out, "usage: spk demo")
    assert.is_nil(none)
    assert.are.equal(0, code)
    assert.are.equal("usage: spk demo\n", table.concat(written))
    local saved = io.stderr
    local captured = {}
    io.stderr = { write = function(_, ...) for _, s in ipairs { ... } do captured[#captured + 1] = s end end }
    none, code = options.start("demo", parse, { "--bad" }, out, "usage: spk demo")
    io.stderr = saved
    assert.is_nil(none)
    assert.are.equal(2, code)
    assert.are.equal("spk demo: unknown argument '--bad'\n", table.concat(captured))
  end)
end)
