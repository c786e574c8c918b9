-- The kernel cache as a trust boundary, from Lua: it touches only what it
-- wrote, refuses a folder others could plant code in, and compile refuses
-- inputs that would read, write or compile something other than was asked.
-- No GPU needed (NVRTC compiles for sm_90 without one).
local spk = require "spk"
local cuda = spk.cuda

local SRC = 'extern "C" __global__ void k(float *p) { p[0] = SCALE; }\n'

local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("the kernel cache", function()
  local dir
  before_each(function()
    dir = spec_tmpdir()
    cuda.set_cache_dir(dir)
  end)
  after_each(function()
    cuda.set_cache_dir(nil)
    os.execute("rm -rf " .. shell_quote(dir))
  end)

  it("cache_clear and cache_info touch only the entries it wrote", function()
    local m = cuda.compile { source = SRC, defines = { SCALE = "1.0f" }, arch = "sm_90" }
    write_file(dir .. "/firmware.bin", "a user's firmware\n")
    write_file(dir .. "/" .. string.rep("a", 64) .. ".bin", "named like an entry, but not one\n")
    write_file(dir .. "/notes.txt", "notes\n")
    assert.are.equal(1, cuda.cache_info().entries)
    cuda.cache_clear()
    assert.are.equal("a user's firmware\n", read_file(dir .. "/firmware.bin"))
    assert.truthy(read_file(dir .. "/" .. string.rep("a", 64) .. ".bin"))
    assert.truthy(read_file(dir .. "/notes.txt"))
    assert.is_nil(read_file(dir .. "/" .. m.key .. ".bin"))
    assert.are.equal(0, cuda.cache_info().entries)
  end)

  it("refuses a folder others can write: one warning, compiles without it", function()
    local shared = dir .. "/shared"
    os.execute(("mkdir -m 0777 %s && chmod 0777 %s"):format(shell_quote(shared), shell_quote(shared)))
    local script = dir .. "/child.lua"
    write_file(script, ([[
local spk = require "spk"
spk.cuda.set_cache_dir(%q)
for i = 1, 3 do spk.cuda.compile { source = %q, defines = { SCALE = i .. ".0f" }, arch = "sm_90" } end
local info = spk.cuda.cache_info()
print(info.writable, info.entries)
]]):format(shared, SRC))
    local stdout, stderr, code = run_spk({ script })
    assert.are.equal(0, code, stderr)
    assert.are.equal("false\t0\n", stdout)
    local warnings = 0
    for line in stderr:gmatch("[^\n]+") do
      if line:find("spk: warning: kernel cache", 1, true) then warnings = warnings + 1 end
    end
    assert.are.equal(1, warnings, stderr)
    assert.matches("is not safe: it can be written by every user %(mode 0777%)", stderr)
    local listing = io.popen("ls -A " .. shell_quote(shared)):read("a")
    assert.are.equal("", listing)
  end)

  it("makes its folder private (mode 0700)", function()
    cuda.set_cache_dir(dir .. "/new/cache")
    cuda.compile { source = SRC, defines = { SCALE = "2.0f" }, arch = "sm_90" }
    for _, d in ipairs { dir .. "/new", dir .. "/new/cache" } do
      local mode = io.popen("stat -c %a " .. shell_quote(d)):read("l")
      assert.are.equal("700", mode, d)
    end
  end)

  it("with HOME unset uses the user's home from the password database, not /tmp", function()
    local stdout, stderr, code = run_spk({ "-e", "print(require('spk').cuda.cache_info().dir)" },
      { env = { HOME = false, XDG_CACHE_HOME = false, SPK_CACHE_DIR = false } })
    assert.are.equal(0, code, stderr)
    assert.is_nil(stdout:match("^/tmp/%.cache"), stdout)
    assert.matches("/%.cache/spk\n$", stdout)
  end)
end)

describe("spk.cuda.compile refuses", function()
  it("a source with a NUL, and a folder or FIFO as the file", function()
    assert.matches("source holds a NUL byte at offset 3", error_of(cuda.compile, { source = "abc\0def", arch = "sm_90" }))
    assert.matches("/tmp: not a regular file %(a folder%)", error_of(cuda.compile, { file = "/tmp", arch = "sm_90" }))
    assert.matches("must be a string without a NUL",
      error_of(cuda.compile, { source = SRC, arch = "sm_90", options = { "-DA\0--time=x" } }))
  end)

  it("options that write or read files or produce no cubin, naming them", function()
    local cases = {
      { "--time=t.csv", "writes a file" }, { "--create-pch=x.pch", "writes a file" },
      { "--fdevice-time-trace=t.json", "writes a file" }, { "--pch", "writes a file" },
      { "--pre-include=x.h", "reads a file that the cache key does not cover" },
      { "-dlto", "produces no cubin or PTX" }, { "--optix-ir", "produces no cubin or PTX" },
      { "-rdc=true", "device%-link step" }, { "--no-such-option", "is not an NVRTC option spk passes on" },
      { "--ptxas-options=-o", "the ptxas option \"%-o\" is not one spk passes on" },
    }
    for _, c in ipairs(cases) do
      local err = error_of(cuda.compile, { source = SRC, defines = { SCALE = "1" }, arch = "sm_90", options = { c[1] },
                                           cache = false })
      assert.truthy(err:find(c[1], 1, true), err)
      assert.matches(c[2], err)
    end
    assert.is_nil(read_file("t.csv"))
  end)
end)
