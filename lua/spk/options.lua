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

-- The comma-separated items of `text`, each a key of the set `known`; `noun`
-- names one item in the message ("--math: unknown math 'x' (known: fp32, tf32)").
function M.choices(text, what, noun, known)
  local out = M.list(text, what)
  for _, item in ipairs(out) do
    if not known[item] then
      local names = {}
      for name in pairs(known) do names[#names + 1] = name end
      table.sort(names)
      M.fail(("--%s: unknown %s '%s' (known: %s)"):format(what, noun, item, table.concat(names, ", ")))
    end
  end
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

-- The start every command shares: parses `args` with parse(args) → opts, and
-- answers a usage error (exit 2, message after the command's name on stderr)
-- and --help (the usage text, exit 0). Returns opts, out (write and progress
-- functions, io_override in tests), or nil, exit status.
function M.start(command, parse, args, io_override, usage)
  local out = io_override or { write = function(s) io.stdout:write(s) end,
                               progress = function(s) io.stderr:write(s) end }
  local ok, o = pcall(parse, args or {})
  if not ok then
    io.stderr:write("spk ", command, ": ", M.message(o), "\n")
    return nil, 2
  end
  if o.help then
    out.write(usage .. "\n")
    return nil, 0
  end
  return o, out
end

return M
