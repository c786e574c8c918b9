-- spk.options: what the command-line commands (lua/spk/cli/) share to read
-- their arguments. A bad argument raises {usage_error = message}, which the
-- command catches, prints after its name and answers with exit status 2.
local M = {}

-- Raises the usage error `message`.
function M.fail(message)
  error({ usage_error = message }, 0)
end

-- The integer in `text`, which must be >= least (default 1); `what` names the
-- option in the message.
function M.positive(text, what, least)
  least = least or 1
  local n = math.tointeger(tonumber(text))
  if not n or n < least then
    M.fail(("--%s: '%s' is not an integer >= %d"):format(what, tostring(text), least))
  end
  return n
end

-- The comma-separated items of `text` (at least one).
function M.list(text, what)
  local out = {}
  for item in tostring(text):gmatch("[^,]+") do out[#out + 1] = item end
  if #out == 0 then M.fail(("--%s needs a value"):format(what)) end
  return out
end

-- The comma-separated integers >= 1 of `text` (at least one).
function M.positives(text, what)
  local out = {}
  for i, item in ipairs(M.list(text, what)) do out[i] = M.positive(item, what) end
  return out
end

-- The text of an error caught around parsing: the usage error's message, or
-- any other error as a string.
function M.message(err)
  return type(err) == "table" and err.usage_error or tostring(err)
end

return M
