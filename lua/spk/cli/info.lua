-- versions of spk, Lua and CUDA, the GPU devices this machine has, the CPU path, and spk's folders
--
-- spk info: prints what spk was built with and what the machine offers. A
-- machine without a GPU or driver is a normal answer ("no CUDA device"), not
-- an error. The optional second argument lets tests supply the facts:
-- {program = ..., cuda = ..., cpu = ..., find_dir = ..., version = ..., write = function(text)}
-- (cpu: spk.lstm.cpu_info()'s facts; cpu = false and find_dir = false leave
-- the CPU line and the folder lines out).

local USAGE = [[
usage: spk info [--help]

Prints what this spk is (its version, the commit it was built from and
whether tracked files differed from it, the Lua release, the CUDA toolkit it
was built with), what the machine offers (CUDA runtime and driver, NVRTC,
cuDNN, each GPU; "no CUDA device" is a normal answer, exit 0), the host,
and the folders spk reads its own files from.]]

local options = require "spk.options"

-- 13000 -> "13.0", 12080 -> "12.8" (CUDA's 1000 * major + 10 * minor).
local function cuda_version(number)
  return require("spk.provenance").cuda_version(number)
end

local function gib(bytes)
  return string.format("%.1f GiB", bytes / 2 ^ 30)
end

local function program_facts()
  local ok, program = pcall(require, "spk.program")
  if ok and type(program) == "table" then return program end
  return {}
end

local function cuda_area()
  local ok, spk = pcall(require, "spk")
  if ok and type(spk) == "table" then return spk.cuda end
  return nil
end

-- The CPU path's vector unit and default thread count (spk.lstm.cpu_info).
local function cpu_line(cpu, say)
  if cpu == nil then
    local ok, spk = pcall(require, "spk")
    cpu = ok and type(spk) == "table" and spk.lstm and spk.lstm.cpu_info and spk.lstm.cpu_info()
  end
  if type(cpu) ~= "table" then return end
  local unit = ("%s vectors (this CPU: %s)"):format(cpu.vector, table.concat(cpu.vectors or {}, ", "))
  if cpu.threads_error then
    say(("CPU path: %s; threads: %s"):format(unit, cpu.threads_error))
    return
  end
  local from = cpu.threads_from == "SPK_THREADS" and "SPK_THREADS"
    or ("the %d CPU%s this process may use"):format(cpu.cpus, cpu.cpus == 1 and "" or "s")
  say(("CPU path: %s, %d thread%s (%s)"):format(unit, cpu.threads, cpu.threads == 1 and "" or "s", from))
end

-- Where spk reads its own files from (spk.find_dir: installed, or a source tree).
local function folder_lines(find_dir, say)
  if find_dir == nil then
    local ok, spk = pcall(require, "spk")
    find_dir = ok and type(spk) == "table" and spk.find_dir
  end
  if type(find_dir) ~= "function" then return end
  local kinds = {}
  for kind in pairs(find_dir()) do kinds[#kinds + 1] = kind end
  table.sort(kinds)
  for _, kind in ipairs(kinds) do
    local dir, why = find_dir(kind)
    say(kind .. " folder: " .. (dir or ("not found: " .. tostring(why))))
  end
end

-- "no CUDA device (<what the runtime said>)", said once (spk.cuda.no_device_reason).
local function no_device(message)
  local real = cuda_area()
  if type(real) == "table" and type(real.no_device_reason) == "function" then
    return real.no_device_reason(message or "no CUDA device")
  end
  return tostring(message or "no CUDA device")
end

local function gpu_lines(cuda, say)
  if type(cuda) ~= "table" or type(cuda.info) ~= "function" then
    say("GPU runtime: not built in")
    return
  end
  local ok, info = pcall(cuda.info)
  if not ok then
    -- The runtime exists but could not answer: say why, still no crash.
    say("GPU: " .. no_device(info))
    return
  end
  say("CUDA runtime: " .. (cuda_version(info.runtime_version) or "unknown"))
  say("CUDA driver: " .. (cuda_version(info.driver_version) or "none"))
  say("NVRTC: " .. tostring(info.nvrtc_version or "unknown"))
  local devices = info.devices or {}
  if #devices == 0 then
    say("GPU: " .. no_device(info.error))
    return
  end
  for _, d in ipairs(devices) do
    say(string.format("GPU %d: %s (compute capability %s, %d SMs, %s)",
      d.index, d.name, d.cc, d.sms, gib(d.memory_bytes)))
  end
end

-- The build's commit (spk.version): "commit <hash> (clean | dirty | state unknown)".
local function commit_line(version)
  if type(version) ~= "table" then return nil end
  local state = version.dirty == true and "dirty: tracked files differed from it at build time"
    or version.dirty == false and "clean" or "state unknown"
  return ("commit %s (%s)"):format(tostring(version.commit), state)
end

local function parse(args)
  local o = {}
  for _, a in ipairs(args) do
    if a == "--help" or a == "-h" then o.help = true
    else options.fail(("takes no arguments (got '%s'; see spk info --help)"):format(a)) end
  end
  return o
end

return function(args, context)
  context = context or {}
  local write = context.write or io.write
  local function say(line) write(line, "\n") end
  local o, code = options.start("info", parse, args, context.write and { write = write } or nil, USAGE)
  if not o then return code end
  local program = context.program or program_facts()
  say("spk " .. (program.version or "(version unknown: not run by the spk program)"))
  local version = context.version
  if version == nil then
    local ok, spk = pcall(require, "spk")
    version = ok and type(spk) == "table" and spk.version
  end
  local commit = commit_line(version)
  if commit then say(commit) end
  say(program.lua_release or _VERSION)
  say("CUDA toolkit (built with): " .. (cuda_version(program.cuda_toolkit_version) or "unknown"))
  local cuda = context.cuda
  if cuda == nil then cuda = cuda_area() end
  gpu_lines(cuda, say)
  if context.cuda == nil then
    local ok, core = pcall(require, "spk.core")
    local env = ok and type(core) == "table" and core.system_environment and core.system_environment()
    if env then
      say("cuDNN: " .. (require("spk.provenance").cudnn_version(env.cudnn_version) or "none"))
      say("host: " .. tostring(env.host or "unknown") .. (env.os and (" (" .. env.os .. ")") or ""))
    end
  end
  cpu_line(context.cpu, say)
  folder_lines(context.find_dir, say)
  return 0
end
