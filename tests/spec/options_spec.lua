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
    -- a positional argument is named as its usage writes it
    assert.are.equal("ROUNDS: '0' is not an integer >= 1", usage_error(function() options.positive("0", "ROUNDS") end))
    assert.are.equal("BATCHES: 'x' is not an integer >= 1", usage_error(function() options.positives("1,x", "BATCHES") end))
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

  it("reads backends: each one registered, and with a math each one that has it", function()
    local spk = require "spk"
    local names = {}
    for name in pairs(spk.lstm.backends) do names[#names + 1] = name end
    table.sort(names)
    assert.are.same({ "cluster", "cudnn" }, options.backends("cluster,cudnn", "backends"))
    assert.are.same({ "cluster", "tensor_core" }, options.backends("cluster,tensor_core", "backends", "3xtf32"))
    assert.are.equal("--backends: unknown backend 'tpu' (registered: " .. table.concat(names, ", ") .. ")",
      usage_error(function() options.backends("cluster,tpu", "backends") end))
    assert.matches("^%-%-backends: backend cudnn has no math \"3xtf32\"",
      usage_error(function() options.backends("cluster,cudnn", "backends", "3xtf32") end))
    assert.are.same({ "cpu" }, options.check_backends({ "cpu" }, "backends"))
    assert.matches("^%-%-only: backend cpu has no math \"tf32\"",
      usage_error(function() options.check_backends({ "cpu" }, "only", "tf32") end))
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

  it("checks option keys raw, naming the first unknown one, from a set or a list of names", function()
    assert.are.same({}, options.check_keys(nil, { a = true }, "f"))
    local o = { a = 1 }
    assert.are.equal(o, options.check_keys(o, { "a", "b" }, "f"))
    local ok, err = pcall(options.check_keys, { a = 1, c = 2 }, { b = true, a = true }, "f")
    assert.is_false(ok)
    assert.matches("f: unknown option 'c' %(known: a, b%)$", err)
    ok, err = pcall(options.check_keys, { [2] = true }, { "a" }, "f")
    assert.matches("f: unknown option 2 %(a number key; known: a%)", err)
    ok, err = pcall(options.check_keys, "x", { "a" }, "f")
    assert.matches("f: options must be a table, got a string", err)
    -- a metatable is not consulted: its __index and __pairs never run
    local ran = false
    local trap = setmetatable({ a = 1 }, { __index = function() ran = true end,
                                          __pairs = function() ran = true return next, {}, nil end })
    options.check_keys(trap, { "a" }, "f")
    assert.is_false(ran)
  end)

  it("wraps a function so that an argument past the ones it takes is an error at the caller's line", function()
    local f = options.takes(2, "demo", function(a, b) return a, b end)
    assert.are.same({ 1, 2 }, { f(1, 2) })
    assert.are.same({ 1 }, { f(1, nil, nil) })
    local ok, err = pcall(function() f(1, 2, "x") end)
    assert.is_false(ok)
    assert.matches("options_spec%.lua:%d+: bad argument #3 to 'demo' %(unexpected argument %(string \"x\"%): demo "
      .. "takes %(a, b%)%)", err)
    local g = options.takes(0, "none", function() return true end)
    ok, err = pcall(g, {})
    assert.matches("bad argument #1 to 'none' %(unexpected argument %(table%): none takes no arguments%)", err)
    -- the wrapped function's own errors still point at its caller (a tail call)
    local h = options.takes(1, "h", function() error("h: bad", 2) end)
    ok, err = pcall(function() h() end)
    assert.matches("options_spec%.lua:%d+: h: bad", err)
  end)
end)
