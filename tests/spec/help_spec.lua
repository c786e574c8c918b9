-- The doc registry and what reads it: every exported function documented
-- (so the next one cannot be added without a doc), help(), ?name at the
-- prompt, module tables printed as their names, and Tab completion that
-- never runs a metamethod of the user's.
local spk = require "spk"
local doc = require "spk.doc"
local repl = require "spk.repl"

local _, registered_types = spk.core.doc_registry()

-- Every function reachable from spk (spk.core included) by string keys,
-- with the path it was reached by; tables walked once.
local function exported_functions()
  local found, seen = {}, {}
  local function walk(t, path)
    if seen[t] then return end
    seen[t] = true
    for key, v in next, t do
      if type(key) == "string" and not key:match("^__") then
        local p = path .. "." .. key
        if type(v) == "function" then found[#found + 1] = { path = p, key = key, fn = v }
        elseif type(v) == "table" then walk(v, p) end
      end
    end
  end
  walk(spk, "spk")
  return found
end

-- Methods of every type in the registry, and of the objects the API returns
-- that a machine without a GPU can make.
local function methods_of(methods, name, out)
  for key, v in next, methods do
    if type(key) == "string" and type(v) == "function" and not key:match("^__") then
      out[#out + 1] = { path = name .. ":" .. key, key = key, fn = v }
    end
  end
end

local function sample_objects()
  local layers = spk.lstm.random { layers = 1, input = 3, hidden = 4, seed = 1 }
  return {
    tensor = spk.zeros(2),
    generator = spk.generator(1),
    ["cpu plan"] = spk.lstm.stack { layers = layers, batch = 1, steps = 2, backend = "cpu" },
    ["auto plan"] = spk.lstm.stack { layers = layers, batch = 1, steps = 2 },
    schedule = spk.schedule.new { batch = 4, capacity = 132 },
  }
end

describe("the doc registry", function()
  it("documents every exported function, first line naming it", function()
    local undocumented, misnamed = {}, {}
    local all = exported_functions()
    for name, entry in next, registered_types do methods_of(entry.methods, name, all) end
    for name, object in next, sample_objects() do
      local mt = getmetatable(object)
      if type(mt) == "table" and type(mt.__index) == "table" then methods_of(mt.__index, name, all) end
    end
    assert.is_true(#all > 200, "expected the whole API, found " .. #all .. " functions")
    for _, f in ipairs(all) do
      local text = doc.get(f.fn)
      if not text then
        undocumented[#undocumented + 1] = f.path
      elseif not text:match("^[^\n]*[%w_]") or not text:match("^[^\n]*" .. f.key) then
        -- an alias (spk.lstm.backends.cluster is spk.lstm.cluster_stack) names its original
        if not (f.path:match("backends%.") or f.path:match("%.core%.")) then
          misnamed[#misnamed + 1] = f.path .. ": " .. text:match("^[^\n]*")
        end
      end
    end
    table.sort(undocumented)
    assert.are.same({}, undocumented)
    assert.are.same({}, misnamed)
  end)

  it("knows every spk userdata type that has methods", function()
    local missing = {}
    for name, mt in next, debug.getregistry() do
      if type(name) == "string" and name:match("^spk%.") and type(mt) == "table" and rawget(mt, "__name") == name
          and rawget(mt, "__index") ~= nil and not registered_types[name] then
        missing[#missing + 1] = name
      end
    end
    table.sort(missing)
    assert.are.same({}, missing)
  end)

  it("gives every area a summary, a readable source header and documented contents", function()
    assert.is_true(#doc.areas >= 10)
    for _, a in ipairs(doc.areas) do
      assert.is_truthy(a.header or doc.header(a.source), a.name .. ": no header in " .. tostring(a.source))
      local text = doc.help_text(a.name)
      assert.matches("^" .. a.name .. ": ", text)
      assert.is_nil(text:find("(no documentation)", 1, true), a.name .. " lists an undocumented name")
    end
  end)

  it("is fed by Lua modules with doc(value, text), which checks its arguments", function()
    local f = function() end
    assert.are.equal(f, doc(f, "\nmy.f(x) -> y\nDoes it.\n"))
    assert.are.equal("my.f(x) -> y\nDoes it.", doc.get(f))
    assert.has_error(function() doc(f) end, "doc: a documentation text is required")
    assert.has_error(function() doc(42, "n") end, "doc: can document functions and tables, not a number")
  end)
end)

describe("help", function()
  local function printed(...)
    local lines = {}
    local saved = _G.print
    _G.print = function(...)
      local parts = {}
      for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
      lines[#lines + 1] = table.concat(parts, "\t")
    end
    local ok, err = pcall(spk.help, ...)
    _G.print = saved
    assert(ok, err)
    return table.concat(lines, "\n")
  end

  it("help() lists the areas", function()
    local text = printed()
    for _, name in ipairs { "tensor", "cuda", "lstm", "stack", "cluster", "cudnn", "debug", "auto", "report",
                            "plot", "experiment", "core" } do
      assert.matches("\n  " .. name .. " +%S", text)
    end
  end)

  it("help(f) prints f's documentation, C bindings and Lua functions alike", function()
    assert.matches("^spk%.zeros%(shape", printed(spk.zeros))
    assert.matches("^spk%.lstm%.reference%(layers, x", printed(spk.lstm.reference))
    assert.matches("^t:narrow%(dim, start, length%)", printed(spk.zeros(2).narrow))
  end)

  it("help(tensor) lists the tensor methods; help(table) the table's names with their first lines", function()
    local text = printed(spk.zeros(3))
    assert.matches("^tensor: ", text)
    assert.matches("\n  t:narrow%(dim, start, length%) %-> view", text)
    assert.matches("\n  t:cuda%(%[stream%]%)", text) -- added by the GPU area
    text = printed(spk.lstm)
    assert.matches("^lstm: ", text)
    assert.matches("\n  spk%.lstm%.load%(path%) %-> layers", text)
  end)

  it("help \"word\" finds the names that mention it; a name path resolves", function()
    assert.matches("\n  t:narrow%(dim, start, length%)", printed("narrow"))
    assert.matches("^spk%.lstm%.stack{", printed("spk.lstm.stack"))
    assert.matches("no help for", printed("no_such_thing_at_all"))
  end)

  it("says what a value without documentation is", function()
    assert.matches("Lua function", printed(print))
    assert.matches("^a number: 3", printed(3))
  end)
end)

describe("the REPL's help and printing", function()
  it("?name at the prompt prints help, and help() is a global", function()
    local out, err, code = run_spk({ "repl" }, { stdin = "?spk.zeros\nx = spk.zeros(2)\n?x:narrow\n? lstm\nhelp(spk.ones)\n" })
    assert.are.equal(0, code, err)
    assert.are.equal("", err)
    assert.matches("^spk%.zeros%(shape", out)
    assert.matches("\nt:narrow%(dim, start, length%)", out)
    assert.matches("\nlstm: layer stacks", out)
    assert.matches("\nspk%.ones%(shape", out)
  end)

  it("prints a module table as all its names, not cut at ...", function()
    local text = repl.format(spk.lstm)
    assert.matches("^spk%.lstm: %d+ names", text)
    local count = 0
    for key in pairs(spk.lstm) do
      count = count + 1
      assert.matches("[ \n]" .. key .. "[(.]?", text)
    end
    assert.is_true(count > repl.max_entries)
    assert.is_nil(text:find("...", 1, true))
    assert.matches("^string: ", repl.format(string))
    -- a data table stays one line
    assert.are.equal("{1, 2}", repl.format({ 1, 2 }))
  end)

  it("spk -e has spk and help loaded, as the REPL does", function()
    local out, err, code = run_spk({ "-e", "print(type(spk), type(help), spk == require 'spk')", "-e", "help(spk.ones)" })
    assert.are.equal(0, code, err)
    assert.matches("^table\tfunction\ttrue\nspk%.ones%(shape", out)
  end)
end)

describe("completion", function()
  local function complete(text) return table.concat(repl.complete(text), " ") end

  it("completes globals, keywords, fields and methods, functions with (", function()
    _G.spk = spk -- as the REPL has it
    assert.are.equal("spk.lstm", complete("spk.ls"))
    _G.completion_tensor = spk.zeros(2)
    assert.are.equal("completion_tensor:narrow(", complete("completion_tensor:nar"))
    assert.matches("completion_tensor:sum%(", complete("completion_tensor:"))
    assert.matches("spk%.lstm%.random%(", complete("spk.lstm.ra"))
    assert.matches("^print%(", complete("prin"))
    assert.matches("function", complete("func"))
    assert.are.equal("string.format(", complete("string.for"))
    local s_methods = complete("(''):up") -- not a name path: nothing
    assert.are.equal("", s_methods)
    _G.completion_text = "abc"
    assert.are.equal("completion_text:upper(", complete("completion_text:upp"))
    _G.completion_tensor, _G.completion_text, _G.spk = nil, nil, nil
  end)

  it("completes fields and methods of any value an expression names: indexes, locals, inside a call", function()
    _G.completion_layers = spk.lstm.random { layers = 2, input = 3, hidden = 2, seed = 1 }
    assert.are.equal("completion_layers[1].B completion_layers[1].R completion_layers[1].W",
      complete("completion_layers[1]."))
    assert.are.equal("completion_layers[2].W", complete("completion_layers[2].W"))
    assert.are.equal("", complete("completion_layers[3]."))
    _G.completion_x = spk.zeros(2, 3)
    assert.are.equal("completion_x[1]:narrow(", complete("completion_x[1]:nar"))
    assert.are.equal("", complete("completion_x[1][2]:nar")) -- past the dims: a number, no methods
    _G.completion_x3 = spk.zeros(2, 3, 4)
    assert.are.equal("completion_x3[1][2]:narrow(", complete("completion_x3[1][2]:nar"))
    _G.completion_x3 = nil
    _G.completion_map = { ["a key"] = { inner = 1 } }
    assert.are.equal('completion_map["a key"].inner', complete('completion_map["a key"].in'))
    assert.are.equal("print(spk.lstm", complete("print(spk.ls"))
    assert.are.equal("y = completion_x:narrow(", complete("y = completion_x:narr"))
    assert.are.equal("", complete("completion_x:narrow(1, 1, 1):nu")) -- a call's result: not evaluated
    -- the session's locals (repl.env), which readline gets as replacements of its word
    rawset(repl.env, "completion_local", { field = 1 })
    assert.are.equal("completion_local.field", complete("completion_local.fi"))
    assert.are.equal("completion_local", complete("completion_loc"))
    assert.are.same({ "1].W" }, repl.complete_line("completion_layers[1].W", 18))
    assert.are.same({ "W" }, repl.complete_line("completion_layers[1].W", 21))
    rawset(repl.env, "completion_local", nil)
    _G.completion_layers, _G.completion_x, _G.completion_map = nil, nil, nil
  end)

  it("follows __index tables (classes) and registered userdata types", function()
    local plan = spk.lstm.stack { layers = spk.lstm.random { layers = 1, input = 3, hidden = 4 }, batch = 1,
                                  steps = 2, backend = "cpu" }
    _G.completion_plan = plan
    assert.are.equal("completion_plan:forward(", complete("completion_plan:for"))
    assert.matches("completion_plan%.batch", complete("completion_plan.ba"))
    _G.completion_plan = nil
  end)

  it("never runs a metamethod: __index, __pairs, __len, __tostring, __call functions are left alone", function()
    local calls = 0
    local function trap() calls = calls + 1; error(debug.traceback("a metamethod ran")) end
    local hostile = setmetatable({ visible = 1 }, { __index = trap, __pairs = trap, __len = trap,
                                                    __tostring = trap, __call = trap, __newindex = trap,
                                                    __eq = trap, __lt = trap, __le = trap, __concat = trap })
    _G.completion_hostile = hostile
    assert.are.equal("completion_hostile.visible", complete("completion_hostile.vi"))
    assert.are.equal("", complete("completion_hostile.missing.x"))
    assert.are.equal("", complete("completion_hostile:x"))
    -- a protected metatable and a proxy whose __index is a function
    _G.completion_protected = setmetatable({}, { __metatable = "locked", __index = trap })
    assert.are.equal("", complete("completion_protected.a"))
    local proxy = setmetatable({}, { __index = setmetatable({ inner = 1 }, { __index = trap }) })
    _G.completion_proxy = proxy
    assert.are.equal("completion_proxy.inner", complete("completion_proxy.in"))
    -- a userdata of no registered type with a trapping metatable
    local u = io.tmpfile()
    debug.setmetatable(u, { __index = trap, __name = "not.spk" })
    _G.completion_userdata = u
    assert.are.equal("", complete("completion_userdata:re"))
    -- help reads the same way
    doc.help_text(hostile)
    doc.help_text(proxy)
    assert.are.equal(0, calls)
    _G.completion_hostile, _G.completion_protected, _G.completion_proxy, _G.completion_userdata = nil, nil, nil, nil
  end)

  -- What a terminal session shows for `typing` (a shell command writing keystrokes
  -- with pauses), through script(1); nil when script cannot make a terminal here.
  local function on_terminal(typing, columns)
    if not os.execute("script -qec true /dev/null >/dev/null 2>&1 </dev/null") then return nil end
    local home = spec_tmpdir()
    local log = home .. "/log"
    local ok = os.execute(typing .. " | env -u SPK_HISTORY HOME=" .. shell_quote(home) .. " COLUMNS=" .. columns
      .. " timeout -s KILL 30 script -qfec " .. shell_quote(SPK .. " repl") .. " /dev/null >" .. shell_quote(log)
      .. " 2>&1")
    local out = read_file(log):gsub("\r", ""):gsub("\27%[[%d;?]*%a", "")
    os.execute("rm -rf " .. shell_quote(home))
    assert.is_true(ok == true, out)
    return out
  end

  it("works on a terminal: spk.ls<Tab> and x:nar<Tab>, then a banner-opened session runs them", function()
    local out = on_terminal("(sleep 0.8; printf 'spk.ls\\t'; sleep 0.3; printf '.cudnn_algorithm_n\\t'; sleep 0.3;"
      .. " printf '\\r'; sleep 0.3; printf 'x = spk.zeros(3)\\r'; sleep 0.3; printf 'x:nar\\t'; sleep 0.3;"
      .. " printf '1, 2, 1):numel()\\r'; sleep 0.3; printf '\\004'; sleep 0.3)", 80)
    if not out then return pending("script(1) cannot make a terminal here") end
    assert.matches("^spk %S+, Lua 5%.4[^\n]*help%(%) for help", out)
    assert.matches('> spk.lstm.cudnn_algorithm_names\n{"standard", ', out, 1, true)
    assert.matches("> x:narrow(1, 2, 1):numel()\n1\n", out, 1, true)
  end)

  -- The last line is dropped with Ctrl-U (readline's line discard), not Ctrl-C: what an
  -- interrupt does at the prompt is cli_spec's, and a signal's delivery is the machine's.
  it("works on a terminal: layers[1].<Tab>, x[1]:nar<Tab>, and file names listed as a shell lists them", function()
    local out = on_terminal("(sleep 0.8; printf 'layers = {{W = 42}}\\r'; sleep 0.3; printf 'layers[1].\\t'; sleep 0.3;"
      .. " printf '\\r'; sleep 0.3; printf 'x = spk.zeros(2, 3)\\r'; sleep 0.3; printf 'x[1]:nar\\t'; sleep 0.3;"
      .. " printf '1, 1, 2):numel()\\r'; sleep 0.3; printf 'spk.load(\"experiments/\\t\\t'; sleep 0.6;"
      .. " printf '\\025'; sleep 0.3; printf '\\004'; sleep 0.3)", 200)
    if not out then return pending("script(1) cannot make a terminal here") end
    assert.matches("> layers[1].W\n42\n", out, 1, true)
    assert.matches("> x[1]:narrow(1, 1, 2):numel()\n2\n", out, 1, true)
    assert.matches("custom_kernel.lua", out, 1, true)
    assert.matches("kernels/", out, 1, true)
    assert.is_nil(out:find("lua%s+lua"), out) -- names, not extensions
  end)
end)
