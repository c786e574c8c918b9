-- Every reader of a file spk is given, fed what is not a regular file (a
-- FIFO without a writer, a link to one, a link to /dev/zero, /dev/null, a
-- folder, a socket) and, where reads are bounded, a file over the bound: each
-- must answer with an error naming the file and the problem, within a time
-- bound, never block in open() or read until memory runs out.
--
-- The readers run in a child spk process under `timeout`, one line per case,
-- so a reader that blocks shows as its missing lines instead of a stalled
-- suite.
local BUILD = os.getenv("BUILD") or "build"
local BOUND_MS = 3000 -- per case; a blocked open never returns

local CHILD = [==[
local spk = require "spk"
local tuning = require "spk.tuning"
local dir, spk_program = ...
io.stdout:setvbuf("line")
local function sh(cmd) assert(os.execute(cmd), cmd) end

-- The hostile kinds: name -> how to make one at path p.
local kinds = {
  { "fifo", function(p) sh("mkfifo '" .. p .. "'") end, "not a regular file %(a FIFO%)" },
  { "fifo link", function(p) sh("mkfifo '" .. p .. ".target' && ln -s '" .. p .. ".target' '" .. p .. "'") end,
    "not a regular file %(a FIFO%)" },
  { "/dev/zero link", function(p) sh("ln -s /dev/zero '" .. p .. "'") end, "not a regular file %(a character device%)" },
  { "/dev/null link", function(p) sh("ln -s /dev/null '" .. p .. "'") end, "not a regular file %(a character device%)" },
  { "folder", function(p) sh("mkdir '" .. p .. "'") end, "not a regular file %(a folder%)" },
  { "socket", function(p) -- bound by its name in its folder: a socket's path has at most 107 bytes
      local folder, name = p:match("^(.*)/([^/]*)$")
      return os.execute("cd '" .. folder .. "' && /usr/bin/python3 -c 'import socket,sys; "
        .. "socket.socket(socket.AF_UNIX).bind(sys.argv[1])' '" .. name .. "' 2>/dev/null") == true
    end, "not a regular file %(a socket%)" },
}
-- Sparse regular files just over a reader's limit.
local function big(p, mib) sh(("truncate -s %dM '%s'"):format(mib, p)) end

local n = 0
local function case(reader, kind, make, problem, run)
  n = n + 1
  local p = ("%s/c%d"):format(dir, n)
  sh("mkdir '" .. p .. "'")
  local target = run.path(p)
  if make(target) == false then
    print(("SKIP\t%s\t%s"):format(reader, kind))
    return
  end
  local t0 = spk.clock_ms()
  local ok, err = run.call(target, p)
  local ms = spk.clock_ms() - t0
  local named = type(err) == "string" and err:find(run.named and run.named(target) or target, 1, true) ~= nil
  local matched = type(err) == "string" and err:match(problem) ~= nil
  print(("CASE\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s"):format(reader, kind, tostring(not ok), tostring(named),
    tostring(matched), ms, (tostring(err):gsub("\n.*", ""))))
end

local function raising(fn) return function(target) return pcall(fn, target) end end
local layers = spk.lstm.random { layers = 1, input = 2, hidden = 2, seed = 1 }
local arch = "sm_90"

local readers = {
  { "spk.load .npy", { path = function(p) return p .. "/x.npy" end, call = raising(spk.load) } },
  { "spk.load_safetensors", { path = function(p) return p .. "/x.safetensors" end, call = raising(spk.load_safetensors) } },
  { "spk.lstm.load folder", {
      path = function(p)
        spk.lstm.save(p .. "/w", layers)
        os.remove(p .. "/w/l0_W.npy")
        return p .. "/w/l0_W.npy"
      end,
      call = function(_, p) return pcall(spk.lstm.load, p .. "/w") end } },
  { "spk.lstm.load .safetensors", { path = function(p) return p .. "/w.safetensors" end, call = raising(spk.lstm.load) } },
  { "spk.files.read", { path = function(p) return p .. "/f" end, call = raising(spk.files.read) } },
  { "spk.cuda.compile file", { path = function(p) return p .. "/k.cu" end,
      call = function(t) return pcall(spk.cuda.compile, { file = t, arch = arch, cache = false }) end } },
  { "spk.cuda.compile #include \"\"", { path = function(p) return p .. "/inc.cuh" end,
      call = function(t)
        return pcall(spk.cuda.compile, { source = '#include "' .. t .. '"\n', arch = arch, cache = false })
      end } },
  { "spk.cuda.compile #include <>", { path = function(p) return p .. "/inc.cuh" end,
      call = function(_, p)
        return pcall(spk.cuda.compile, { source = "#include <inc.cuh>\n", arch = arch, cache = false,
                                         options = { "-I" .. p } })
      end } },
  { "tuning.load", { path = function(p) return p .. "/r.json" end,
      call = function(t)
        local record, why = tuning.load(t)
        return record ~= nil, why
      end } },
}

-- The kernel cache: a hostile file where a compile's entry goes is refused
-- with a warning and the compile goes on (recompiled). Each reader's call
-- returns ok (read it as a file) and the error or warning.
local src = 'extern "C" __global__ void k(float *p) { p[0] = 1; }\n'
readers[#readers + 1] = { "kernel-cache entry", {
  path = function(p)
    spk.cuda.set_cache_dir(p)
    local m = spk.cuda.compile { source = src, arch = arch }
    os.remove(p .. "/" .. m.key .. ".bin")
    return p .. "/" .. m.key .. ".bin"
  end,
  call = function(t, p)
    local err_file = p .. ".stderr"
    -- the warning goes to stderr: catch it by running the compile in a grandchild
    local script = p .. ".lua"
    local f = assert(io.open(script, "w"))
    f:write(("local spk = require 'spk'; spk.cuda.set_cache_dir(%q); local m = spk.cuda.compile { source = %q, arch = %q }; "
      .. "local i = spk.cuda.cache_info(); print(m.cached, i.rejected)"):format(p, src, arch))
    f:close()
    local pipe = io.popen(("timeout 20 %q %q 2>%q"):format(spk_program, script, err_file))
    local out = pipe:read("a")
    pipe:close()
    local ef = io.open(err_file, "rb")
    local warning = ef and ef:read("a") or ""
    if ef then ef:close() end
    if out:match("^false\t1") then return false, warning end -- recompiled, counted, and the warning names it
    return true, "compile did not recompile: " .. out .. warning
  end } }

-- A tuning record at the path `find` looks at.
local fields = { device = "test", cc = "9.0", sms = 1, driver = 1, runtime = 1, cudnn = 1, kernels = {} }
readers[#readers + 1] = { "tuning.find", {
  path = function(p) return tuning.path(tuning.key(fields), p) end,
  named = function(t) return t end,
  call = function(t, p)
    local warned
    local saved = tuning.warn
    tuning.warn = function(message) warned = message end
    local record = tuning.find(fields, p)
    tuning.warn = saved
    return record ~= nil, warned
  end } }

for _, r in ipairs(readers) do
  for _, k in ipairs(kinds) do case(r[1], k[1], k[2], k[3], r[2]) end
end
-- Bounded reads: sources and includes at 16 MiB, cache entries and
-- spk.files.read at 64 MiB.
case("spk.cuda.compile file", "17 MiB", function(t) big(t, 17) end, "larger than the 16 MiB limit", readers[6][2])
case("spk.cuda.compile #include \"\"", "17 MiB", function(t) big(t, 17) end, "larger than the 16 MiB limit",
  readers[7][2])
case("spk.files.read", "65 MiB", function(t) big(t, 65) end, "larger than the 64 MiB limit", readers[5][2])
case("kernel-cache entry", "65 MiB", function(t) big(t, 65) end, "larger than the 64 MiB limit", readers[10][2])
print("readers: done")
]==]

describe("readers", function()
  it("refuse FIFOs, devices, folders, sockets and oversized files at once, naming the file", function()
    local dir = spec_tmpdir()
    local child = dir .. "/child.lua"
    write_file(child, CHILD)
    local spk_path = BUILD:sub(1, 1) == "/" and BUILD or (os.getenv("PWD") .. "/" .. BUILD)
    local p = io.popen(("timeout 300 %s/spk %s %s %s/spk 2>&1"):format(shell_quote(spk_path), shell_quote(child),
      shell_quote(dir), shell_quote(spk_path)))
    local out = p:read("a")
    p:close()
    os.execute("rm -rf " .. shell_quote(dir))
    local cases, failures = 0, {}
    for line in out:gmatch("[^\n]+") do
      local reader, kind, failed, named, matched, ms, message =
        line:match("^CASE\t(.-)\t(.-)\t(%a+)\t(%a+)\t(%a+)\t(%d+)\t(.*)$")
      if reader then
        cases = cases + 1
        if failed ~= "true" or named ~= "true" or matched ~= "true" or tonumber(ms) > BOUND_MS then
          failures[#failures + 1] = ("%s / %s (%s ms): %s"):format(reader, kind, ms, message)
        end
      end
    end
    assert.truthy(out:find("readers: done", 1, true), "the child did not finish (a reader blocked?):\n" .. out)
    assert.are.same({}, failures)
    assert.is_true(cases >= 60, ("only %d cases:\n%s"):format(cases, out))
  end)

  it("the spk program lists its commands even with a FIFO among them", function()
    local dir = spec_tmpdir()
    os.execute(("cp -r lua %s/lua && mkfifo %s/lua/spk/cli/blocked.lua"):format(shell_quote(dir), shell_quote(dir)))
    local stdout, stderr, code = run_spk({ "help" }, { env = { SPK_LUA_DIR = dir .. "/lua" } })
    os.execute("rm -rf " .. shell_quote(dir))
    assert.are.equal(0, code, stderr)
    assert.matches("blocked", stdout) -- listed, without its summary
  end)

  it("the REPL keeps no history in a FIFO, and says so", function()
    local dir = spec_tmpdir()
    os.execute(("mkfifo %s/history"):format(shell_quote(dir)))
    local p = io.popen(("echo 'print(6 * 7)' | SPK_HISTORY=%s/history timeout 20 %s repl 2>&1; echo \"exit $?\"")
      :format(shell_quote(dir), shell_quote(SPK)))
    local out = p:read("a")
    p:close()
    os.execute("rm -rf " .. shell_quote(dir))
    assert.matches("42", out)
    assert.matches("history: not a regular file %(a FIFO%); history is not kept", out)
    assert.matches("exit 0", out)
  end)

  it("tools/bench_plot.lua refuses a FIFO as its input", function()
    local dir = spec_tmpdir()
    os.execute(("mkfifo %s/bench.json"):format(shell_quote(dir)))
    local _, stderr, code = run_spk({ "run", "tools/bench_plot.lua", dir .. "/bench.json", dir .. "/out.svg" })
    os.execute("rm -rf " .. shell_quote(dir))
    assert.are.equal(1, code)
    assert.matches("bench.json: not a regular file %(a FIFO%)", stderr)
  end)
end)
