-- spk.code_shape: the measure of a source file's shape, the one that
-- tools/code_shape.lua (function and file lengths against the project's
-- limits) and tools/kernel_metrics.lua (the kernels' branches and function
-- lengths) both report.
--
--   local shape = require "spk.code_shape"
--   shape.c_file(path)   -- {functions = {{name =, first =, lines =}, ...}, lines = N, branches = N}
--   shape.lua_file(path) -- {functions = {...}, lines = N}
--
-- C and CUDA: braces are counted outside comments, strings and character
-- literals, and in the first branch of an #if only (its #else/#elif branches
-- repeat the block's opening). A function is a top-level brace block whose
-- declaration (the text before its opening brace) has a parameter list and is
-- no initializer (`= {`); its name is the last name before a parenthesised
-- list, attributes (__attribute__, __launch_bounds__) left out; it runs from
-- the first line of its declaration (the signature, with its return type and
-- attributes) to its closing brace. A declaration starts after a top-level
-- `;` or `}`, a blank line or a preprocessor line. branches: the #if, #ifdef,
-- #ifndef, #elif and #else lines inside function bodies.
--
-- Lua: a function runs from its `function` to its `end` (keywords counted
-- outside comments and strings); the installer an area file returns (`return
-- function(spk, core)` at the top of a chunk) is the file, not a function.
local M = {}

-- ---- C and CUDA ----------------------------------------------------------------

-- A line without its comments, string and character literals (each a blank);
-- whether a block comment runs on past it.
local function strip_c(line, in_comment)
  local out, i = {}, 1
  while i <= #line do
    if in_comment then
      local e = line:find("*/", i, true)
      if not e then return table.concat(out), true end
      i, in_comment = e + 2, false
    else
      local c2 = line:sub(i, i + 1)
      local c = line:sub(i, i)
      if c2 == "//" then break end
      if c2 == "/*" then
        in_comment, i = true, i + 2
      elseif c == '"' or c == "'" then
        local e = i + 1
        while e <= #line and line:sub(e, e) ~= c do e = e + (line:sub(e, e) == "\\" and 2 or 1) end
        out[#out + 1] = " "
        i = e + 1
      else
        out[#out + 1] = c
        i = i + 1
      end
    end
  end
  return table.concat(out), in_comment
end

local OPENS_BRANCH = { ["if"] = true, ifdef = true, ifndef = true }
local LATER_BRANCH = { elif = true, ["else"] = true }

-- The name a declaration gives its block (at `line`), or nil when the block is no function.
local function function_name(declaration, line)
  local text = declaration:gsub("__attribute__%s*%b()", " "):gsub("__launch_bounds__%s*%b()", " ")
  if not text:match("%)") or text:match("=%s*$") then return nil end
  local name
  for word in text:gmatch("([%a_][%w_]*)%s*%b()") do name = word end
  return name or ("at line " .. line)
end

function M.c_file(path)
  local functions, lines, branches = {}, 0, 0
  local depth, in_comment = 0, false
  local first, declaration = nil, "" -- the top-level declaration under way: its first line, its text
  local current                      -- the function whose body is open
  local conditionals = {}            -- per open #if: true while in a later branch (its braces are not counted)
  for line in io.lines(path) do
    lines = lines + 1
    local code
    code, in_comment = strip_c(line, in_comment)
    local directive = code:match("^%s*#%s*(%a+)")
    if depth > 0 and (OPENS_BRANCH[directive] or LATER_BRANCH[directive]) then branches = branches + 1 end
    local skipping = false
    for _, later in ipairs(conditionals) do skipping = skipping or later end
    if OPENS_BRANCH[directive] then
      conditionals[#conditionals + 1] = false
    elseif LATER_BRANCH[directive] then
      conditionals[#conditionals] = true
    elseif directive == "endif" then
      conditionals[#conditionals] = nil
    end
    if depth == 0 and (directive or line:match("^%s*$")) then first, declaration = nil, "" end
    if directive or skipping then code = "" end
    code = code:gsub("\\%s*$", "") -- a line continued (a macro's) ends in no code
    local from = 1 -- where this line's part of the declaration begins
    for at, ch in code:gmatch("()([^%s])") do
      if depth == 0 and not first then first = lines end
      if ch == "{" then
        if depth == 0 then
          local name = function_name(declaration .. " " .. code:sub(from, at - 1), lines)
          if name then current = { name = name, first = first } end
        end
        depth = depth + 1
      elseif ch == "}" then
        depth = depth - 1
        if depth == 0 then
          if current then
            current.lines = lines - current.first + 1
            functions[#functions + 1] = current
            current = nil
          end
          first, declaration, from = nil, "", at + 1
        end
      elseif ch == ";" and depth == 0 then
        first, declaration, from = nil, "", at + 1
      end
    end
    if depth == 0 and first then declaration = declaration .. " " .. code:sub(from) end
  end
  return { functions = functions, lines = lines, branches = branches }
end

-- ---- Lua -------------------------------------------------------------------------

-- The code of a Lua file line by line, comments and strings blanked (their
-- line breaks kept, so lines keep their numbers).
local function lua_code(text)
  local out, i, n = {}, 1, #text
  while i <= n do
    local c = text:sub(i, i)
    local long = text:match("^%[(=*)%[", i)
    if text:sub(i, i + 1) == "--" then
      local level = text:match("^%-%-%[(=*)%[", i)
      local close
      if level then
        close = text:find("]" .. level .. "]", i, true)
      else
        close = text:find("\n", i, true)
        if close then close = close - 1 end
      end
      close = close or n
      if level then close = close + #level + 1 end
      out[#out + 1] = text:sub(i, close):gsub("[^\n]", " ")
      i = close + 1
    elseif long then
      local close = text:find("]" .. long .. "]", i, true) or n
      close = close + #long + 1
      out[#out + 1] = text:sub(i, close):gsub("[^\n]", " ")
      i = close + 1
    elseif c == '"' or c == "'" then
      local e = i + 1
      while e <= n and text:sub(e, e) ~= c and text:sub(e, e) ~= "\n" do
        e = e + (text:sub(e, e) == "\\" and 2 or 1)
      end
      out[#out + 1] = " " .. text:sub(i + 1, e - 1):gsub("[^\n]", " ") .. " "
      i = e + 1
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return table.concat(out)
end

local OPENS = { ["function"] = true, ["do"] = true, ["if"] = true, ["repeat"] = true }
local CLOSES = { ["end"] = true, ["until"] = true }

function M.lua_file(path)
  local f = assert(io.open(path, "r"))
  local text = f:read("a")
  f:close()
  local code = lua_code(text)
  local functions, stack, lineno = {}, {}, 1
  local lines = select(2, text:gsub("\n", "\n")) + (text:sub(-1) == "\n" and 0 or 1)
  for line in (code .. "\n"):gmatch("([^\n]*)\n") do
    local pos = 1
    while true do
      local s, e, word = line:find("([%a_][%w_]*)", pos)
      if not s then break end
      local before = line:sub(1, s - 1)
      if OPENS[word] then
        local frame = { kind = word, first = lineno }
        if word == "function" then
          frame.name = line:match("^%s*([%w_.:]+)%s*%(", e + 1) or before:match("([%w_.%[%]\"]+)%s*=%s*$")
            or ("at line " .. lineno)
          frame.installer = #stack == 0 and before:match("^%s*return%s*$") ~= nil
        end
        stack[#stack + 1] = frame
      elseif CLOSES[word] then
        local frame = table.remove(stack)
        if frame and frame.kind == "function" and not frame.installer then
          functions[#functions + 1] = { name = frame.name, first = frame.first, lines = lineno - frame.first + 1 }
        end
      end
      pos = e + 1
    end
    lineno = lineno + 1
  end
  return { functions = functions, lines = lines }
end

return M
