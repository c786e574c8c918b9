-- One list per vocabulary: the maths of spk's products (src/cuda/math_modes.h),
-- the status codes of the built-in kernels (kernels/spk_status.cuh), the gate
-- orders spk names (src/lstm/lstm.h) and the stages of the kernels' steps
-- (kernels/lstm_timeline_stages.cuh) are each spelled in their one file: no
-- other file of src/, lua/ or kernels/ has one in its code (comments and
-- documentation name them freely), and the help and docs that list them are
-- checked against the list.
local spk = require "spk"
local core = require "spk.core"

local function sources()
  local out = {}
  local p = io.popen("find src lua kernels -type f \\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' "
    .. "-o -name '*.lua' \\) | sort")
  for f in p:lines() do out[#out + 1] = f end
  p:close()
  return out
end

-- The string literals of a file's code, each {line =, text =}: C and CUDA
-- literals outside comments (an escaped \"x\" inside a literal is text, not
-- a literal); Lua's short strings outside comments (long strings are
-- documentation).
local function literals(path)
  local f = assert(io.open(path, "r"))
  local text = f:read("a")
  f:close()
  local out, i, n, line = {}, 1, #text, 1
  local lua = path:match("%.lua$")
  local function skip_to(j) -- past text[i..j), counting lines
    line = line + select(2, text:sub(i, j - 1):gsub("\n", ""))
    i = j
  end
  while i <= n do
    local c = text:sub(i, i)
    local two = text:sub(i, i + 1)
    local long = lua and (text:match("^%-%-%[(=*)%[", i) or text:match("^%[(=*)%[", i))
    if long then
      local close = text:find("]" .. long .. "]", i, true) or n
      skip_to(close + #long + 2)
    elseif (lua and two == "--") or (not lua and two == "//") then
      skip_to(text:find("\n", i, true) or n + 1)
    elseif not lua and two == "/*" then
      skip_to((text:find("*/", i + 2, true) or n) + 2)
    elseif c == '"' or (lua and c == "'") then
      local e = i + 1
      while e <= n and text:sub(e, e) ~= c and text:sub(e, e) ~= "\n" do e = e + (text:sub(e, e) == "\\" and 2 or 1) end
      out[#out + 1] = { line = line, text = text:sub(i + 1, e - 1) }
      skip_to(e + 1)
    elseif not lua and c == "'" then
      skip_to(i + 3)
    else
      if c == "\n" then line = line + 1 end
      i = i + 1
    end
  end
  return out
end

local files = sources()

-- Where a name of `names` is a literal of the code outside `home`.
local function spelled_outside(names, home)
  local set, found = {}, {}
  for _, name in ipairs(names) do set[name] = true end
  for _, path in ipairs(files) do
    if not home[path] then
      for _, lit in ipairs(literals(path)) do
        if set[lit.text] then found[#found + 1] = ("%s:%d: \"%s\""):format(path, lit.line, lit.text) end
      end
    end
  end
  return found
end

local math_names, stack_maths, cudnn_maths = {}, {}, {}
for _, m in ipairs(core.blas.math_modes) do
  math_names[#math_names + 1] = m.name
  if m.stacks then stack_maths[#stack_maths + 1] = m.name end
  if m.cudnn then cudnn_maths[#cudnn_maths + 1] = m.name end
end

describe("one list per vocabulary", function()
  it("the maths: spelled in src/cuda/math_modes.h only", function()
    assert.are.same({ "fp32", "tf32", "pedantic", "3xtf32" }, math_names)
    assert.are.same(stack_maths, spk.lstm.math_modes)
    assert.are.same(stack_maths, require("spk.benchmark").maths)
    assert.are.same({}, spelled_outside(math_names, { ["src/cuda/math_modes.h"] = true }))
  end)

  it("the gate orders: spelled in src/lstm/lstm.h only", function()
    local g = core.lstm.gate_orders
    assert.are.same({ onnx = "iofc", torch = "ifco", packed = "ifco" }, g)
    assert.are.same({}, spelled_outside({ g.onnx, g.torch }, { ["src/lstm/lstm.h"] = true }))
  end)

  it("the status codes: defined in kernels/spk_status.cuh only", function()
    local found = {}
    for _, path in ipairs(files) do
      if path ~= "kernels/spk_status.cuh" then
        local n = 0
        for line in io.lines(path) do
          n = n + 1
          if line:match("#%s*define%s+STATUS_") or line:match("STATUS_[%u_]+%s*=%s*%d") then
            found[#found + 1] = ("%s:%d: %s"):format(path, n, line)
          end
        end
      end
    end
    assert.are.same({}, found)
  end)

  it("the stages: listed in kernels/lstm_timeline_stages.cuh only, and docs/timeline.md in their order", function()
    local lists = {}
    for _, case in ipairs { { "persistent", 1 }, { "cluster", 1 }, { "cluster", 256 }, { "cluster", 1, { push = "scalar" } } } do
      local v = spk.lstm.kernel_variant { backend = case[1], batch = case[2], kernel = case[3] }
      lists[#lists + 1] = v.timeline.stages
    end
    local names, seen = {}, {}
    for _, list in ipairs(lists) do
      for _, name in ipairs(list) do
        if not seen[name] then seen[name], names[#names + 1] = true, name end
      end
    end
    -- no other list of them in the code: a line that spells two different stage names
    local found = {}
    for _, path in ipairs(files) do
      if not path:match("^kernels/.*_stages%.cuh$") then
        local per_line = {}
        for _, lit in ipairs(literals(path)) do
          if seen[lit.text] then
            per_line[lit.line] = per_line[lit.line] or {}
            per_line[lit.line][lit.text] = true
          end
        end
        for line, names_there in pairs(per_line) do
          local count = 0
          for _ in pairs(names_there) do count = count + 1 end
          if count > 1 then found[#found + 1] = ("%s:%d"):format(path, line) end
        end
      end
    end
    assert.are.same({}, found)
    -- docs/timeline.md's table names every stage of each kernel in the order a step runs them
    local docs = read_file("docs/timeline.md")
    for _, list in ipairs(lists) do
      local ok = false
      for line in docs:gmatch("[^\n]+") do
        local at, in_order = 1, true
        for _, name in ipairs(list) do
          local s, e = line:find("`" .. name .. "`", at, true)
          if not s then in_order = false break end
          at = e + 1
        end
        ok = ok or in_order
      end
      assert.is_true(ok, "docs/timeline.md lists no kernel's stages as " .. table.concat(list, ", "))
    end
  end)

  it("every help text that lists maths lists one of the list's sets", function()
    local doc = require "spk.doc"
    local values = core.doc_registry()
    local sets = { table.concat(math_names, "|"), table.concat(stack_maths, "|"), table.concat(cudnn_maths, "|") }
    local checked = 0
    for _, text in pairs(values) do
      for run in text:gmatch('"[%w]+"%s*|%s*"[%w]+"[%s|"%w]*') do
        local listed = {}
        for name in run:gmatch('"([%w]+)"') do listed[#listed + 1] = name end
        local is_math = false
        for _, name in ipairs(listed) do
          for _, m in ipairs(math_names) do is_math = is_math or name == m end
        end
        if is_math then
          checked = checked + 1
          local key = table.concat(listed, "|")
          assert.is_truthy(key == sets[1] or key == sets[2] or key == sets[3],
            ("a help text lists the maths %s:\n%s"):format(key, text))
        end
      end
    end
    assert.is_true(checked >= 3, "found " .. checked .. " lists of maths in the help")
    assert.is_table(doc)
  end)

  it("spk bench --help names every math the stacks take", function()
    local out = run_spk { "bench", "--help" }
    for _, name in ipairs(stack_maths) do assert.matches(name, out, 1, true) end
  end)
end)
