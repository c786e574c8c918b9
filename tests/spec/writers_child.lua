-- Run by writers_spec.lua in a child spk (build/spk run tests/spec/writers_child.lua DIR MODE): every
-- writer spk has, aimed at DIR/<its target>, which holds MODE's obstacle:
--   full: a previous good file ("good"), while the file-size limit (ulimit -f, SIGXFSZ ignored) is far
--         below what the writer writes, as a full disk would be;
--   fifo: a FIFO with no reader.
-- Prints one line per writer: name TAB "ok" or "error" TAB the message (newlines as spaces).
local spk = require "spk"
local report = require "spk.report"
local plot = require "spk.plot"
local tuning = require "spk.tuning"
local experiment = require "spk.experiment"

local dir, mode = arg[1], arg[2]
local big = spk.zeros({ 1 << 16 }) -- 256 KiB of f32

local record = tuning.new_record({ device = "writers spec", cc = "9.0", sms = 132, driver = 13000, runtime = 13000,
                                   cudnn = "none" }, "writers spec")
local tuning_dir = dir .. "/tuning"
os.execute("mkdir -p '" .. tuning_dir .. "'")
local tuning_target = tuning.path(tuning.key(record.fields), tuning_dir)
for i = 1, 2000 do record.entries[i] = { batch = i, median_ms = i / 7 } end

local ex = experiment.start { name = "writers", arg = { "--out", dir .. "/results" } }

-- name, the target it writes (relative to dir, or absolute), the write
local writers = {
  { "spk.save (.npy)", "t.npy", function(p) spk.save(p, big) end },
  { "t:save", "m.npy", function(p) big:save(p) end },
  { "spk.save (.safetensors)", "t.safetensors", function(p) spk.save(p, { a = big }) end },
  { "spk.save_safetensors", "s.safetensors", function(p) spk.save_safetensors(p, { a = big }) end },
  { "spk.lstm.save (onnx)", "stack.onnx",
    function(p) spk.lstm.save(p, spk.lstm.random { layers = 1, input = 64, hidden = 64, seed = 1 }) end },
  { "spk.lstm.save (safetensors)", "stack.safetensors",
    function(p) spk.lstm.save(p, spk.lstm.random { layers = 1, input = 64, hidden = 64, seed = 1 }) end },
  { "spk.lstm.save (npy folder)", "folder/l0_W.npy",
    function(p) spk.lstm.save(p:gsub("/l0_W%.npy$", ""), spk.lstm.random { layers = 1, input = 64, hidden = 64, seed = 1 }) end },
  { "spk.files.write", "text.bin", function(p) spk.files.write(p, ("x"):rep(1 << 18)) end },
  { "report.json", "r.json", function(p) report.json(p, { values = big:tolist() }) end },
  { "report.csv", "r.csv", function(p)
      local rows = {}
      for i = 1, 20000 do rows[i] = { i = i, v = i / 3 } end
      report.csv(p, rows, { "i", "v" })
    end },
  { "plot.save", "p.svg", function(p) plot.save(p, ("<svg/>"):rep(1 << 16)) end },
  { "experiment text", "results/notes.txt", function() ex:text("notes.txt", ("n"):rep(1 << 18)) end },
  { "tuning.save", tuning_target, function() tuning.save(record, tuning_dir) end },
  { "spk test --init", "init/variant_spec.lua", function(p)
      local said, stderr = {}, io.stderr
      io.stderr = { write = function(self, ...) for _, s in ipairs { ... } do said[#said + 1] = s end return self end }
      local ok, code = pcall(require("spk.cli.test"), { "--init", (p:gsub("/variant_spec%.lua$", "")), "--force" })
      io.stderr = stderr
      if not ok or code ~= 0 then error("spk test --init: " .. tostring(ok and table.concat(said) or code)) end
    end },
}

for _, w in ipairs(writers) do
  local name, target, write = w[1], w[2], w[3]
  local path = target:sub(1, 1) == "/" and target or dir .. "/" .. target
  os.execute("mkdir -p '" .. path:match("^(.*)/") .. "'")
  if mode == "full" then
    spk.files.write(path, "good")
  else
    os.execute("mkfifo '" .. path .. "'")
  end
  local ok, err = pcall(write, path)
  io.stdout:write(name, "\t", ok and "ok" or "error", "\t", (tostring(err or ""):gsub("\n", " ")), "\n")
  io.stdout:flush()
end
