-- A small XML well-formedness checker for the SVG specs (and busted's junit
-- output): tags balanced and properly nested, attributes quoted (either
-- quote) and not repeated, entities known, one
-- root element. Returns true, or nil and a message with the position.
local M = {}

local entities = { amp = true, lt = true, gt = true, quot = true, apos = true }

local function check_text(text, pos)
  for ref in text:gmatch("&([^;%s]*);?") do
    if not (entities[ref] or ref:match("^#%d+$") or ref:match("^#x%x+$")) then
      return nil, ("bad entity &%s; near %d"):format(ref, pos)
    end
  end
  if text:find("<", 1, true) then return nil, "stray < near " .. pos end
  return true
end

function M.check(doc)
  local stack, roots, i = {}, 0, 1
  doc = doc:gsub("^<%?xml.-%?>", "")
  while true do
    local s = doc:find("<", i, true)
    local text = doc:sub(i, (s or #doc + 1) - 1)
    local ok, err = check_text(text, i)
    if not ok then return nil, err end
    if #stack == 0 and text:match("%S") then return nil, "text outside the root near " .. i end
    if not s then break end
    if doc:sub(s, s + 3) == "<!--" then
      local e = doc:find("-->", s + 4, true)
      if not e then return nil, "unclosed comment" end
      i = e + 3
    else
      local e = doc:find(">", s, true)
      if not e then return nil, "unclosed tag near " .. s end
      local tag = doc:sub(s + 1, e - 1)
      if tag:sub(1, 1) == "/" then
        local name = tag:match("^/([%w:_%-%.]+)%s*$")
        if not name then return nil, "bad end tag near " .. s end
        local top = table.remove(stack)
        if top ~= name then return nil, ("</%s> closes <%s> near %d"):format(name, tostring(top), s) end
      else
        local self_closing = tag:sub(-1) == "/"
        if self_closing then tag = tag:sub(1, -2) end
        local name, rest = tag:match("^([%w:_][%w:_%-%.]*)(.*)$")
        if not name then return nil, "bad tag near " .. s end
        local seen = {}
        local function attribute(k, v)
          if seen[k] then seen.__dup = k end
          seen[k] = v
          return ""
        end
        rest = rest:gsub('%s+([%w:_%-]+)%s*=%s*"([^"<]*)"', attribute) -- either quote, as XML allows
        rest = rest:gsub("%s+([%w:_%-]+)%s*=%s*'([^'<]*)'", attribute)
        if seen.__dup then return nil, ("attribute %s repeated in <%s>"):format(seen.__dup, name) end
        if rest:match("%S") then return nil, ("bad attributes in <%s>: %s"):format(name, rest) end
        for _, v in pairs(seen) do
          local okv, errv = check_text(v, s)
          if not okv then return nil, errv end
        end
        if #stack == 0 then roots = roots + 1 end
        if roots > 1 then return nil, "more than one root element" end
        if not self_closing then stack[#stack + 1] = name end
      end
      i = e + 1
    end
  end
  if #stack > 0 then return nil, "unclosed <" .. stack[#stack] .. ">" end
  if roots ~= 1 then return nil, "no root element" end
  return true
end

return M
