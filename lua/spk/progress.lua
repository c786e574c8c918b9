-- spk.progress: one status line for long work, on a terminal only. spk
-- bench, spk tune, the sweeps and the experiments use it; piped or
-- redirected, it writes nothing at all.
--
--   local progress = require "spk.progress"
--   local p = progress.new{label = "tile_sweep", total = 40}   -- total: optional, or per update
--   p:step("batch 8: u4 t256")     -- an item starts (the one before it is done)
--   p:update("batch 8: cudnn", done, total)                     -- or say where it is
--   p:print("a line")              -- a line of its own on stderr, the status line kept below it
--   p:finish()                     -- clears the status line
--
-- The line: "[tile_sweep] 12/40 batch 8: u4 t256 | 31.2 s, about 73 s left": what
-- runs now, done/total, the time since new() and the time left at the pace so far
-- (once an item is done). It is redrawn in place (carriage return, erase line) at
-- each step, update and print, cut to the terminal's width ($COLUMNS, else 100).
-- Options: stream = io.stderr, enabled = (default: the stream is a terminal and
-- $SPK_PROGRESS is not "0"), clock = a function returning milliseconds (tests).
local core = require "spk.core"

local M = {}

local P = {}
P.__index = P

local function now_ms() return core.clock_ms() end

-- "8.2 s", "3 min 05 s", "1 h 02 min"
function M.duration(seconds)
  if seconds < 60 then return ("%.1f s"):format(seconds) end
  if seconds < 3600 then return ("%d min %02d s"):format(seconds // 60, math.floor(seconds % 60)) end
  return ("%d h %02d min"):format(seconds // 3600, math.floor(seconds % 3600 / 60))
end

function M.terminal(stream)
  if os.getenv("SPK_PROGRESS") == "0" then return false end
  local ok, tty = pcall(core.system_isatty, stream or io.stderr)
  return ok and tty == true
end

function M.new(opts)
  opts = require("spk.options").check_keys(opts, { "label", "total", "stream", "enabled", "clock" }, "progress.new")
  local stream = opts.stream or io.stderr
  local enabled = opts.enabled
  if enabled == nil then enabled = M.terminal(stream) end
  local clock = opts.clock or now_ms
  return setmetatable({ label = opts.label, total = opts.total, done = 0, started = clock(), clock = clock,
                        stream = stream, enabled = enabled, shown = false, steps = 0 }, P)
end

-- The status line's text (no control characters), as drawn now.
function P:line()
  local elapsed = (self.clock() - self.started) / 1000
  local parts = {}
  if self.label then parts[#parts + 1] = "[" .. self.label .. "]" end
  if self.total then parts[#parts + 1] = ("%d/%d"):format(self.done, self.total)
  elseif self.done > 0 then parts[#parts + 1] = ("%d done"):format(self.done) end
  if self.what then parts[#parts + 1] = self.what end
  local time = M.duration(elapsed)
  if self.total and self.done > 0 and self.done < self.total then
    time = time .. ", about " .. M.duration(elapsed / self.done * (self.total - self.done)) .. " left"
  end
  return table.concat(parts, " ") .. " | " .. time
end

local function width()
  local w = math.tointeger(tonumber(os.getenv("COLUMNS") or ""))
  return (w and w > 20) and w or 100
end

function P:draw()
  if not self.enabled then return end
  local text = self:line()
  local w = width() - 1
  if utf8.len(text) and utf8.len(text) > w then text = text:sub(1, utf8.offset(text, w + 1) - 1) end
  self.stream:write("\r\27[K", text)
  self.stream:flush()
  self.shown = true
end

function P:clear()
  if self.enabled and self.shown then
    self.stream:write("\r\27[K")
    self.stream:flush()
    self.shown = false
  end
end

function P:update(what, done, total)
  if what ~= nil then self.what = tostring(what) end
  if done ~= nil then self.done = done end
  if total ~= nil then self.total = total end
  self:draw()
end

function P:step(what)
  if self.steps > 0 then self.done = self.done + 1 end
  self.steps = self.steps + 1
  self:update(what)
end

function P:print(line)
  self:clear()
  self.stream:write(line, line:sub(-1) == "\n" and "" or "\n")
  self.stream:flush()
  if self.what or self.done > 0 then self:draw() end
end

function P:finish()
  if self.steps > 0 and self.total and self.done < self.total then self.done = self.done + 1 end
  self:clear()
end

return M
