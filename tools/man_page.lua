-- Writes spk's man page (roff) from the help texts the program prints, so the
-- page says what `--help` says: `spk --help`, each command's `spk help CMD`,
-- each experiment's and tool's `--help`. man/spk.1 is its output, committed;
-- make install puts it in share/man/man1, and tests/spec/commands_spec.lua
-- checks that it is what this writes today. No GPU needed.
--
--   build/spk run tools/man_page.lua [OUT]      (default: standard output)
local spk = require "spk"
local script = require("spk.options").script { usage = "spk run tools/man_page.lua [OUT]" }

local program = require("spk.program").argv[1]
local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- What `spk WORDS...` prints on stdout, with no device looked for.
local function help_of(...)
  local words = { "CUDA_VISIBLE_DEVICES=", shell_quote(program) }
  for _, w in ipairs { ... } do words[#words + 1] = shell_quote(w) end
  local p = assert(io.popen(table.concat(words, " ") .. " 2>/dev/null"))
  local text = p:read("a")
  p:close()
  return (text:gsub("%s+$", ""))
end

local function names(kind, pattern)
  local dir = assert(spk.find_dir(kind))
  local out = {}
  for _, name in ipairs(spk.files.list(dir)) do
    if name:match(pattern) then out[#out + 1] = name end
  end
  table.sort(out)
  return out, dir
end

-- roff: backslashes and hyphens escaped, other than ASCII as \[uXXXX], no line
-- starting with a control character
local function roff(text)
  local lines = {}
  for line in (text .. "\n"):gmatch("(.-)\n") do
    line = line:gsub("\\", "\\e"):gsub("%-", "\\-")
    if line:find("[\128-\255]") and utf8.len(line) then
      local chars = {}
      for _, c in utf8.codes(line) do chars[#chars + 1] = c < 128 and utf8.char(c) or ("\\[u%04X]"):format(c) end
      line = table.concat(chars)
    end
    if line:match("^[.']") then line = "\\&" .. line end
    lines[#lines + 1] = line
  end
  return table.concat(lines, "\n")
end

local function verbatim(text) return ".nf\n" .. roff(text) .. "\n.fi" end

local out = {}
local function add(s) out[#out + 1] = s end

add(('.TH SPK 1 "" "spk %s" "spk manual"'):format(spk.version.version))
add(".SH NAME")
add("spk \\- a Lua\\-scriptable research toolkit for persistent LSTM recurrence kernels on NVIDIA GPUs")
add(".SH SYNOPSIS")
add(".B spk\n[\\fIoptions\\fR] [\\fIscript\\fR [\\fIargs\\fR...]]\n.br\n.B spk\n\\fIcommand\\fR [\\fIargs\\fR...]")
add(".SH DESCRIPTION")
add(roff("spk is a Lua 5.4 interpreter with the spk module built in: tensors, weight packing, tile schedules, "
  .. "NVRTC-compiled kernels and their launches, an f64 reference and cuDNN to check every result against, "
  .. "and timing. Every command, experiment and tool answers --help without a GPU; spk help COMMAND shows a "
  .. "command's help. The README and docs/ (installed in share/doc/spk) say more."))
add(".SH USAGE")
local general = help_of("--help")
local usage, statuses = general:match("^(.-)\n\n(exit status.-)\n\nkernel options")
add(verbatim(usage or general))
add(".SH EXIT STATUS")
add(verbatim((statuses or ""):gsub("^[^\n]*\n", "")))

add(".SH COMMANDS")
local commands = { "run", "repl", "help" }
local cli = assert(spk.find_dir("lua")) .. "/spk/cli"
local listed = {}
for _, name in ipairs(spk.files.list(cli)) do
  local command = name:match("^([%w_-]+)%.lua$")
  if command then listed[#listed + 1] = command end
end
table.sort(listed)
for _, c in ipairs(listed) do commands[#commands + 1] = c end
for _, command in ipairs(commands) do
  add(".SS " .. command)
  add(verbatim(help_of("help", command)))
end

add(".SH EXPERIMENTS")
add(roff("Scripts in share/spk/experiments, run as spk run experiments/NAME.lua; each takes --quick, --batches, "
  .. "--out DIR, --dry-run, --debug and --help, and writes its results folder (every file with its provenance)."))
for _, file in ipairs((names("experiments", "%.lua$"))) do
  local lines = {}
  for line in (help_of("run", "experiments/" .. file, "--help") .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
  add(".TP\n.B experiments/" .. roff(file))
  add(roff(lines[2] or ""))
end

add(".SH TOOLS")
add(roff("spk scripts in share/spk/tools, run as spk run tools/NAME.lua; each answers --help."))
for _, file in ipairs((names("tools", "%.lua$"))) do
  local text = help_of("run", "tools/" .. file, "--help")
  local first = text:match("^(.-)\n%s*\n") or text
  local usage = text:match("\nusage: ([^\n]*)")
  add(".TP\n.B " .. roff(usage or ("spk run tools/" .. file)))
  add(roff((first:gsub("\n", " "))))
end

add(".SH KERNEL OPTIONS")
add(verbatim(general:match("\n(kernel options.*)$") or ""))
add(".SH ENVIRONMENT")
for _, v in ipairs {
  { "SPK_LUA_DIR, SPK_KERNEL_DIR, SPK_EXPERIMENT_DIR, SPK_TOOL_DIR", "where spk finds its own files of each kind" },
  { "SPK_CACHE_DIR", "the compiled-kernel cache (default ~/.cache/spk)" },
  { "SPK_TUNE_DIR", "the tuning records of spk tune (default $XDG_CACHE_HOME/spk/tune, else ~/.cache/spk/tune)" },
  { "SPK_BASELINE_DIR", "the stored baselines of spk test" },
  { "SPK_HISTORY", "the REPL's history file (default ~/.spk_history)" },
  { "SPK_NVTX", "0: no NVTX ranges (on by default: Nsight Systems shows layers, projections and recurrences)" },
  { "SPK_PROGRESS", "0: no status line for long work, even on a terminal" },
  { "CUDA_HOME", "the CUDA toolkit spk is built with (make; default /usr/local/cuda)" },
} do
  add(".TP\n.B " .. roff(v[1]))
  add(roff(v[2]))
end
add(".SH SEE ALSO")
add(roff("README.md and docs/ in share/doc/spk: docs/experiments.md, docs/kernels.md, docs/tuning.md, "
  .. "docs/testing.md, docs/debugging.md."))

local text = table.concat(out, "\n") .. "\n"
local path = script.args[1]
if path then
  require("spk").files.write(path, text)
else
  io.write(text)
end
