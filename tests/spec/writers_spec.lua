-- Every writer spk has writes through one helper (src/core/file.c, spk.files.write in Lua): a temporary
-- file beside the target, renamed over it once whole. So a failed write (a full disk) leaves the user's
-- previous file as it was, a FIFO or device at the target is refused at once (nothing blocks, nothing is
-- removed), and no temporary file is left behind.
--
-- Each writer runs in a child spk (writers_child.lua lists them: tensor files, ONNX and weight folders,
-- spk.files.write, report JSON and CSV, plots, an experiment's results, tuning records, spk test --init),
-- once against a previous good file under a file-size limit below what it writes (ulimit -f 2, 1 KiB in
-- dash's 512-byte blocks, below the 4 KiB template spk test --init writes; SIGXFSZ
-- ignored: the write fails with EFBIG as a full disk fails it with ENOSPC), once against a FIFO. A source
-- check keeps every writer on the helper: no Lua file of spk or its tools opens a file for writing, no C
-- file but the helper's creates, removes or renames one.

local spk = require "spk"
local WRITERS = 14 -- the writers writers_child.lua lists

local function run_child(dir, mode)
  local child = ("trap '' XFSZ; ulimit -f 2; exec %s run tests/spec/writers_child.lua %s %s"):format(
    shell_quote(SPK), shell_quote(dir), mode)
  local p = io.popen(("timeout 120 sh -c %s 2>&1"):format(shell_quote(child)))
  local out = p:read("a")
  p:close()
  local results = {}
  for name, verdict, message in out:gmatch("([^\t\n]+)\t(%a+)\t([^\n]*)\n") do
    results[#results + 1] = { name = name, verdict = verdict, message = message }
  end
  return results, out
end

-- The names in `dir` (recursively) that a writer's temporary file would have.
local function temporaries(dir)
  local p = io.popen(("find %s -name '*.spk-tmp-*' -o -name '*.tmp-*' -o -name '*.tmp.*'"):format(shell_quote(dir)))
  local out = p:read("a")
  p:close()
  return out
end

describe("every writer", function()
  local dir
  before_each(function() dir = spec_tmpdir() end)
  after_each(function() os.execute("rm -rf " .. shell_quote(dir)) end)

  it("keeps the previous file whole when the write fails part-way (a full disk), and leaves no temporary", function()
    local results, out = run_child(dir, "full")
    assert.are.equal(WRITERS, #results, out)
    local targets = {}
    for line in io.lines("tests/spec/writers_child.lua") do
      local name, target = line:match('^  { "([^"]+)", "([^"]+)"')
      if name then targets[name] = target end
    end
    for _, r in ipairs(results) do
      assert.are.equal("error", r.verdict, r.name .. " wrote past the limit: " .. r.message)
      assert.matches("File too large (the file is unchanged)", r.message, 1, true)
      local target = targets[r.name]
      if target and target:sub(1, 1) ~= "/" then
        assert.are.equal("good", read_file(dir .. "/" .. target), r.name .. " changed its target")
      end
    end
    assert.are.equal("", temporaries(dir))
  end)

  it("spk.files.remove takes back a file spk wrote, refuses a folder or a FIFO, and names a missing path", function()
    local p = spk.files.write(dir .. "/gone.txt", "x")
    assert.is_true(spk.files.remove(p))
    assert.is_nil(spk.files.kind(p))
    local ok, why = spk.files.remove(p)
    assert.is_nil(ok)
    assert.matches("cannot remove .*gone%.txt: No such file", why)
    ok, why = spk.files.remove(dir)
    assert.is_nil(ok)
    assert.matches("not a regular file %(a folder%); spk removes only files it wrote", why)
    assert.are.equal("folder", spk.files.kind(dir))
    assert.is_true(os.execute("mkfifo " .. shell_quote(dir .. "/pipe")))
    ok, why = spk.files.remove(dir .. "/pipe")
    assert.is_nil(ok)
    assert.matches("a FIFO", why)
    assert.are.equal("fifo", spk.files.kind(dir .. "/pipe"))
  end)

  it("spk.files.make_folder makes a folder and the missing ones above it, and refuses what is in the way", function()
    local deep = dir .. "/a/b//c/"
    local p, made = spk.files.make_folder(deep)
    assert.are.equal(deep, p)
    assert.is_true(made)
    assert.are.equal("folder", spk.files.kind(dir .. "/a/b/c"))
    p, made = spk.files.make_folder(dir .. "/a/b/c")
    assert.is_false(made) -- already there: fine, and said
    spk.files.write(dir .. "/a/file", "x")
    local ok, err = pcall(spk.files.make_folder, dir .. "/a/file/d")
    assert.is_false(ok)
    assert.matches("cannot make the folder .*/a/file/d: .*/a/file is a regular file", tostring(err))
    assert.is_nil(spk.files.kind(dir .. "/a/file/d"))
    ok, err = pcall(spk.files.make_folder, "")
    assert.is_false(ok)
    assert.matches("the path is empty", tostring(err))
    assert.is_true(os.execute("mkfifo " .. shell_quote(dir .. "/pipe")))
    ok, err = pcall(spk.files.make_folder, dir .. "/pipe")
    assert.is_false(ok)
    assert.matches("pipe is a FIFO", tostring(err))
  end)

  it("spk.files.remove_folder takes back an empty folder only, naming what it refuses", function()
    spk.files.make_folder(dir .. "/full/inner")
    local ok, why = spk.files.remove_folder(dir .. "/full")
    assert.is_nil(ok)
    assert.matches("cannot remove the folder .*/full: Directory not empty", why)
    assert.is_true(spk.files.remove_folder(dir .. "/full/inner"))
    assert.is_nil(spk.files.kind(dir .. "/full/inner"))
    spk.files.write(dir .. "/full/f", "x")
    ok, why = spk.files.remove_folder(dir .. "/full/f")
    assert.is_nil(ok)
    assert.matches("it is a regular file", why)
    ok, why = spk.files.remove_folder(dir .. "/absent")
    assert.is_nil(ok)
    assert.matches("absent: No such file", why)
  end)

  it("makes, removes and tests folders through spk.files, never a shell command", function()
    local p = io.popen("grep -rnE '(os\\.execute|io\\.popen)\\([^)]*(mkdir|rmdir|test -[edf]|\"ls )' " ..
      "lua tools experiments --include=*.lua")
    local offenders = {}
    for line in p:lines() do offenders[#offenders + 1] = line end
    p:close()
    assert.are.same({}, offenders)
  end)

  it("refuses a FIFO at the target at once, naming it, and leaves the FIFO", function()
    local t0 = os.time()
    local results, out = run_child(dir, "fifo")
    assert.is_true(os.time() - t0 < 100, "a writer blocked on the FIFO")
    assert.are.equal(WRITERS, #results, out)
    for _, r in ipairs(results) do
      assert.are.equal("error", r.verdict, r.name .. " wrote into the FIFO")
      assert.matches("not a regular file (a FIFO); spk writes only regular files", r.message, 1, true)
    end
    local p = io.popen(("find %s -type p | wc -l"):format(shell_quote(dir)))
    local fifos = tonumber(p:read("a"))
    p:close()
    assert.are.equal(WRITERS, fifos)
    assert.are.equal("", temporaries(dir))
  end)

  it("goes through the one helper: no other code opens a file to write, removes or renames one, or makes a folder", function()
    local offenders = {}
    local p = io.popen("grep -rnE 'io\\.open\\([^)]*\"[wa]|io\\.output\\(|os\\.rename\\(' lua tools experiments " ..
      "--include=*.lua; grep -rn 'os\\.remove(' lua --include=*.lua")
    for line in p:lines() do offenders[#offenders + 1] = line end
    p:close()
    p = io.popen("grep -rnE 'fopen\\([^)]*\"[wa]|[^_a-z](remove|rename|unlink|creat|mkdir|rmdir)\\(|O_CREAT|O_TRUNC' src " ..
      "--include=*.c | grep -v '^src/core/file\\.c:'")
    for line in p:lines() do
      -- the REPL's history is appended to, never replaced (O_APPEND, a file it made)
      -- spk.files.remove's binding names itself (it calls spk_file_remove, which file.c holds)
      if not line:match("^src/cli/repl%.c:.*O_APPEND") and not line:match("^src/lua/files%.c:.*spk%.files%.remove%(")
      then
        offenders[#offenders + 1] = line
      end
    end
    p:close()
    assert.are.same({}, offenders)
  end)
end)
