-- .npy and .safetensors from Lua: round trips of every dtype, NumPy's view of
-- what spk writes (and the reverse), and malformed files crafted byte by byte.
local spk = require "spk"

local dir
setup(function() dir = spec_tmpdir() end)
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

local function path(name) return dir .. "/" .. name end

local function write_bytes(name, bytes)
  local p = path(name)
  local f = assert(io.open(p, "wb"))
  f:write(bytes)
  f:close()
  return p
end

local function error_of(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

-- The error of loading `p` must name the file and match `problem`.
local function assert_refused(load, p, problem)
  local err = error_of(function() return load(p) end)
  assert.truthy(err:find(p, 1, true), "message does not name the file: " .. err)
  assert.matches(problem, err)
end

-- A .npy image: magic, version, header length (u16 for 1.0, u32 after),
-- the header dict padded with spaces to a multiple of 64, then the data.
local function npy_bytes(header, data, major)
  major = major or 1
  local lenfmt = major == 1 and "<I2" or "<I4"
  local pre = 6 + 2 + (major == 1 and 2 or 4)
  local padded = header .. string.rep(" ", (64 - (pre + #header + 1) % 64) % 64) .. "\n"
  return "\x93NUMPY" .. string.char(major, 0) .. string.pack(lenfmt, #padded) .. padded .. (data or "")
end

local function f32s(...) return string.pack(string.rep("<f", select("#", ...)), ...) end

-- Tensors of every dtype with awkward values.
local function samples()
  return {
    a_f32 = spk.tensor({ { 1.5, -2.25, 3e-8 }, { 1e30, 0, -0.0 } }, "f32"),
    b_f64 = spk.tensor({ 0.1, -1e300, 2 ^ -1074 }, "f64"),
    c_i32 = spk.tensor({ { { -2147483648, 2147483647 } } }, "i32"),
    d_u64 = spk.tensor({ 0, math.maxinteger, -1 }, "u64"), -- -1 is 2^64 - 1
  }
end

describe(".npy", function()
  it("round-trips every dtype", function()
    for name, t in pairs(samples()) do
      local p = path(name .. ".npy")
      t:save(p)
      local back = spk.load(p)
      assert.are.equal(t:dtype(), back:dtype())
      assert.are.same(t:shape(), back:shape())
      assert.are.same(t:tolist(), back:tolist())
    end
  end)

  it("saves views in C order, and 0-d and empty tensors", function()
    local t = spk.arange(0, 6):view(2, 3):transpose(1, 2)
    spk.save(path("t.npy"), t)
    local back = spk.load(path("t.npy"))
    assert.are.same({ 3, 2 }, back:shape())
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, back:tolist())
    spk.tensor(4.5, "f64"):save(path("scalar.npy"))
    assert.are.equal(0, spk.load(path("scalar.npy")):dim())
    assert.are.equal(4.5, spk.load(path("scalar.npy")):get())
    spk.zeros({ 0, 3 }, "i32"):save(path("empty.npy"))
    assert.are.same({ 0, 3 }, spk.load(path("empty.npy")):shape())
  end)

  it("reads versions 2.0 and 3.0 and Fortran order", function()
    local header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
    for _, major in ipairs { 2, 3 } do
      local p = write_bytes("v" .. major .. ".npy", npy_bytes(header, f32s(1, 2), major))
      assert.are.same({ 1, 2 }, spk.load(p):tolist())
    end
    -- column-major data of [[1, 2, 3], [4, 5, 6]]
    local p = write_bytes("fortran.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
      f32s(1, 4, 2, 5, 3, 6)))
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, spk.load(p):tolist())
  end)

  it("refuses malformed, truncated and lying files, naming the file", function()
    local ok_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
    local cases = {
      { "empty", "", "not a .npy file" },
      { "magic", "\x93NUMPX\1\0" .. string.rep(" ", 60), "not a .npy file" },
      { "preamble", "\x93NUMPY\1", "truncated" },
      { "version", npy_bytes(ok_header, f32s(1, 2), 4), "version 4.0" },
      { "header_past_end", "\x93NUMPY\1\0" .. string.pack("<I2", 500) .. "{'descr'", "past the end" },
      { "header_huge", "\x93NUMPY\2\0" .. string.pack("<I4", 0x7fffffff) .. "{", "header" },
      { "dtype", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", f32s(1)), "unknown dtype '<f2'" },
      { "big_endian", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f32s(1, 2)), "big%-endian" },
      { "not_dict", npy_bytes("['<f4', False, (2,)]", f32s(1, 2)), "not a dict" },
      { "missing_shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", f32s(1, 2)), "missing the key 'shape'" },
      { "negative_dim", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", f32s(1, 2)), "shape" },
      { "data_short", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f32s(1, 2)), "truncated" },
      { "data_long", npy_bytes(ok_header, f32s(1, 2, 3)), "trailing bytes" },
      -- claims 2^40 elements: refused from the file's size, not by trying to allocate
      { "lying_shape", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }", f32s(1, 2)),
        "truncated" },
      { "overflow", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
        ""), "too large" },
    }
    for _, case in ipairs(cases) do
      local p = write_bytes(case[1] .. ".npy", case[2])
      assert_refused(spk.load, p, case[3])
    end
  end)

  it("names a missing file", function()
    assert_refused(spk.load, path("missing.npy"), "cannot open")
  end)
end)

-- A .safetensors image: u64 header length, JSON header, data.
local function st_bytes(header, data)
  return string.pack("<I8", #header) .. header .. (data or "")
end

describe(".safetensors", function()
  it("round-trips every dtype through spk.save_safetensors / spk.load_safetensors", function()
    local tensors = samples()
    spk.save_safetensors(path("all.safetensors"), tensors)
    local back, names = spk.load_safetensors(path("all.safetensors"))
    assert.are.same({ "a_f32", "b_f64", "c_i32", "d_u64" }, names) -- written sorted by name
    for name, t in pairs(tensors) do
      assert.are.equal(t:dtype(), back[name]:dtype())
      assert.are.same(t:shape(), back[name]:shape())
      assert.are.same(t:tolist(), back[name]:tolist())
    end
  end)

  it("spk.load and spk.save choose the format by extension", function()
    spk.save(path("pair.safetensors"), { x = spk.tensor { 1, 2 }, y = spk.arange(0, 4):view(2, 2):transpose(1, 2) })
    local back = spk.load(path("pair.safetensors"))
    assert.are.same({ 1, 2 }, back.x:tolist())
    assert.are.same({ { 0, 2 }, { 1, 3 } }, back.y:tolist())
  end)

  it("reads a hand-written file with metadata", function()
    local header = '{"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    local p = write_bytes("hand.safetensors", st_bytes(header, f32s(0.5, -4)))
    assert.are.same({ 0.5, -4 }, spk.load_safetensors(p).w:tolist())
  end)

  it("refuses malformed and lying files, naming the file", function()
    local function entry(dtype, shape, a, b)
      return ('{"w":{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}}'):format(dtype, shape, a, b)
    end
    local cases = {
      { "tiny", "\1\0\0", "too short" },
      { "header_past_end", string.pack("<I8", 1000) .. "{}", "runs past the end" },
      { "header_huge", string.pack("<I8", 1 << 40) .. "{}", "exceeds" },
      { "json", st_bytes('{"w":{"dtype":"F32",', f32s(1)), "header" },
      { "dtype", st_bytes(entry("F16", "2", 0, 4), f32s(1)), "F16" },
      { "outside", st_bytes(entry("F32", "2", 0, 8), f32s(1)), "outside the data" },
      { "disagree", st_bytes(entry("F32", "2,2", 0, 8), f32s(1, 2)), "needs 16 bytes" },
      { "reversed", st_bytes(entry("F32", "0", 8, 0), f32s(1, 2)), "end before" },
      { "lying_shape", st_bytes(entry("F64", "1099511627776", 0, 8), f32s(1, 2)), "needs" },
    }
    for _, case in ipairs(cases) do
      local p = write_bytes(case[1] .. ".safetensors", case[2])
      assert_refused(spk.load_safetensors, p, case[3])
      assert_refused(spk.load, p, case[3])
    end
  end)
end)

describe("file arguments", function()
  it("refuse unknown extensions and mismatched values, naming the file", function()
    local p = write_bytes("data.txt", "hello")
    assert_refused(spk.load, p, "unknown file type")
    assert.matches("data%.bin': unknown file type", error_of(function() spk.save(path("data.bin"), spk.zeros(1)) end))
    assert.matches("t:save writes %.npy", error_of(function() spk.zeros(1):save(path("x.safetensors")) end))
    assert.matches("one tensor", error_of(function() spk.save(path("x.npy"), { a = spk.zeros(1) }) end))
    assert.matches("named tensors", error_of(function() spk.save(path("x.safetensors"), spk.zeros(1)) end))
    assert.matches("entry 'a' is number", error_of(function() spk.save_safetensors(path("x.safetensors"), { a = 1 }) end))
    local closed = spk.zeros(1)
    closed:close()
    assert.matches("closed", error_of(function() spk.save_safetensors(path("x.safetensors"), { a = closed }) end))
  end)
end)

-- NumPy as the independent reader and writer.
local function python(code)
  local script = path("check.py")
  local f = assert(io.open(script, "w"))
  f:write(code)
  f:close()
  local pipe = assert(io.popen(PYTHON .. " '" .. script .. "' 2>&1"))
  local out = pipe:read("a")
  local ok = pipe:close()
  assert.is_true(ok, "python failed:\n" .. out)
  return out
end

local numpy_it = has_numpy() and it or function(name) pending(name .. " [needs python3-numpy]") end

describe("NumPy cross-check", function()
  numpy_it("NumPy reads what spk writes", function()
    for name, t in pairs(samples()) do
      t:save(path(name .. ".npy"))
    end
    -- NumPy checks dtype, shape and values against its own rendering of them
    local out = python(([==[
import numpy as np
d = %q
want = {
    "a_f32": np.array([[1.5, -2.25, 3e-8], [1e30, 0, -0.0]], dtype="<f4"),
    "b_f64": np.array([0.1, -1e300, 2.0 ** -1074], dtype="<f8"),
    "c_i32": np.array([[[-2147483648, 2147483647]]], dtype="<i4"),
    "d_u64": np.array([0, 2**63 - 1, 2**64 - 1], dtype="<u8"),
}
for name, w in want.items():
    a = np.load(d + "/" + name + ".npy")
    assert a.dtype == w.dtype, (name, a.dtype)
    assert a.shape == w.shape, (name, a.shape)
    assert np.array_equal(a, w), (name, a)
    assert np.array_equal(np.signbit(a), np.signbit(w)), name
    print("ok", name)
]==]):format(dir))
    for name in pairs(samples()) do
      assert.truthy(out:find("ok " .. name, 1, true), out)
    end
  end)

  numpy_it("spk reads what NumPy writes: dtypes, Fortran order, version 2.0", function()
    python(([==[
import numpy as np
d = %q
np.save(d + "/np_f32.npy", np.array([[1.25, -3.5], [7, 8]], dtype="<f4"))
np.save(d + "/np_f64.npy", np.arange(6, dtype="<f8").reshape(2, 3) / 4)
np.save(d + "/np_i32.npy", np.array([-5, 6], dtype="<i4"))
np.save(d + "/np_u64.npy", np.array([2**64 - 2, 3], dtype="<u8"))
np.save(d + "/np_fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
with open(d + "/np_v2.npy", "wb") as f:
    np.lib.format.write_array(f, np.array([9, 10], dtype="<i4"), version=(2, 0))
]==]):format(dir))
    assert.are.same({ { 1.25, -3.5 }, { 7, 8 } }, spk.load(path("np_f32.npy")):tolist())
    assert.are.same({ { 0, 0.25, 0.5 }, { 0.75, 1, 1.25 } }, spk.load(path("np_f64.npy")):tolist())
    assert.are.same({ -5, 6 }, spk.load(path("np_i32.npy")):tolist())
    assert.are.same({ -2, 3 }, spk.load(path("np_u64.npy")):tolist()) -- 2^64 - 2 wraps to -2
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 } }, spk.load(path("np_fortran.npy")):tolist())
    assert.are.same({ 9, 10 }, spk.load(path("np_v2.npy")):tolist())
  end)
end)

-- Header fields read as NumPy reads them: thousands of seeded variants of a
-- .npy header (one to three tokens replaced, inserted or deleted: quotes,
-- NUL and other bytes, Python 2 longs, leading zeros, tuples without their
-- comma, other dtypes, keys, comments...), in versions 1.0 to 3.0. Whatever
-- spk accepts, NumPy accepts with the same dtype, shape and bytes; spk may
-- refuse more (it reads four dtypes, and no escapes).
describe("NumPy differential of .npy headers", function()
  numpy_it("spk accepts no header NumPy refuses or reads differently", function()
    local base = { "{", "'descr'", ": ", "'<f4'", ", ", "'fortran_order'", ": ", "False", ", ", "'shape'", ": ",
                   "(", "2", ",", ")", ", ", "}" }
    local tokens = { "'", '"', "(", ")", ",", ":", " ", "\t", "\n", "\0", "\x0c", "L", "0", "1", "02", "+", "-",
                     "True", "False", "None", "'<f8'", "'<i4'", "'<u8'", "'f4'", "'=f4'", "'|f4'", "'>f4'",
                     "'<f4\0'", "'<f4 '", "u", "b", "\\", "#", "{", "}", "[", "]", "'descr'", "'shape'",
                     "'fortran_order'", "2L", "0x2", "1_0", "2.", "e", "\xff", "\x80", "(2)", "(1,2)", "()" }
    local rng = spk.generator(20261201)
    local function pick(n) return rng:next_u64() % n + 1 end -- 1..n
    local N = 3000
    local cases = {}
    for i = 1, N do
      local parts = { table.unpack(base) }
      for _ = 1, ({ 1, 1, 1, 1, 2, 3 })[pick(6)] do
        local k, t, op = pick(#parts), tokens[pick(#tokens)], pick(3)
        if op == 1 then parts[k] = t elseif op == 2 then table.insert(parts, k, t) else table.remove(parts, k) end
      end
      local major = ({ 1, 1, 2, 3 })[pick(4)]
      local data = {}
      for j = 1, ({ 8, 8, 8, 8, 8, 8, 0, 4, 16, 32 })[pick(10)] do data[j] = string.char(pick(256) - 1) end
      local name = ("diff%04d.npy"):format(i)
      write_bytes(name, npy_bytes(table.concat(parts), table.concat(data), major))
      cases[i] = name
    end
    python(([==[
import numpy as np
d = %q
with open(d + "/numpy.txt", "w") as out:
    for i in range(1, %d + 1):
        name = "diff%%04d.npy" %% i
        try:
            a = np.load(d + "/" + name)
            out.write("%%s ok %%s %%s %%s\n" %% (name, a.dtype.str, ",".join(map(str, a.shape)), a.tobytes().hex()))
        except Exception:
            out.write("%%s refused\n" %% name)
]==]):format(dir, N))
    local numpy = {}
    for line in io.lines(path("numpy.txt")) do
      local name, rest = line:match("^(%S+) (.*)$")
      numpy[name] = rest
    end
    local descr = { f32 = "<f4", f64 = "<f8", i32 = "<i4", u64 = "<u8" }
    local both, spk_refused, wrong = 0, 0, {}
    for _, name in ipairs(cases) do
      local ok, t = pcall(spk.load, path(name))
      if ok then
        t:save(path("back.npy"))
        local raw = read_file(path("back.npy"))
        local data = raw:sub(11 + string.unpack("<I2", raw, 9))
        local mine = ("ok %s %s %s"):format(descr[t:dtype()], table.concat(t:shape(), ","),
          (data:gsub(".", function(c) return ("%02x"):format(c:byte()) end)))
        if mine == numpy[name] then
          both = both + 1
        else
          wrong[#wrong + 1] = ("%s: spk %s, NumPy %s: %q"):format(name, mine:sub(1, 40), tostring(numpy[name]):sub(1, 40),
            read_file(path(name)):sub(11, 90))
        end
      else
        spk_refused = spk_refused + 1
      end
    end
    local numpy_ok = 0
    for _, r in pairs(numpy) do numpy_ok = numpy_ok + (r:match("^ok") and 1 or 0) end
    assert.are.same({}, wrong)
    -- the comparison has teeth: most of what NumPy reads, spk reads too
    assert.is_true(both >= 50 and both >= numpy_ok // 2,
      ("only %d variants read by both (NumPy read %d)"):format(both, numpy_ok))
    assert.are.equal(N, both + spk_refused)
  end)

  it("names the value it refuses", function()
    local cases = {
      { "{'descr': '<f4\0', 'fortran_order': False, 'shape': (2,), }", "'descr' '<f4\\x00' holds a byte" },
      { "{'descr': '<f4', 'fortran_order': False, 'shape': (02,), }", "shape entry 0 has a leading zero" },
      { "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", "a one%-entry tuple is written %(n,%)" },
      { "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,), }", "holds an escape" },
    }
    for i, c in ipairs(cases) do
      local p = write_bytes(("named%d.npy"):format(i), npy_bytes(c[1], f32s(1, 2)))
      assert_refused(spk.load, p, c[2])
    end
    -- Python 2's 2L is read in versions 1.0 and 2.0, as NumPy reads it, not in 3.0
    local long = "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }"
    assert.are.same({ 1, 2 }, spk.load(write_bytes("long1.npy", npy_bytes(long, f32s(1, 2), 1))):tolist())
    assert_refused(spk.load, write_bytes("long3.npy", npy_bytes(long, f32s(1, 2), 3)), "malformed 'shape'")
  end)
end)

describe(".safetensors names and layout", function()
  local function entry(name, a, b)
    return ('"%s":{"dtype":"F32","shape":[%d],"data_offsets":[%d,%d]}'):format(name, (b - a) // 4, a, b)
  end

  it("refuses names that are not UTF-8, naming them", function()
    for i, bad in ipairs { "a\xffb", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "caf\xc3" } do
      local p = write_bytes(("utf8_%d.safetensors"):format(i), st_bytes("{" .. entry(bad, 0, 4) .. "}", f32s(1)))
      assert_refused(spk.load_safetensors, p, "is not valid UTF%-8")
    end
    local ok = write_bytes("utf8_ok.safetensors", st_bytes("{" .. entry("caf\xc3\xa9 \xf0\x9f\x98\x80", 0, 4) .. "}", f32s(1)))
    assert.truthy(spk.load_safetensors(ok)["caf\xc3\xa9 \xf0\x9f\x98\x80"])
    local err = error_of(function() spk.save_safetensors(path("bad.safetensors"), { ["a\xffb"] = spk.zeros(1) }) end)
    assert.matches('tensor name "a\\xffb" is not valid UTF%-8', err)
  end)

  it("refuses a name with a NUL on save instead of cutting it", function()
    local err = error_of(function() spk.save_safetensors(path("nul.safetensors"), { ["a\0b"] = spk.zeros(1) }) end)
    assert.matches("tensor name 'a\\0b' holds a NUL byte", err, 1, true)
    assert.is_nil(read_file(path("nul.safetensors")))
  end)

  it("refuses data no tensor owns, as the reference implementation does", function()
    local gap = write_bytes("gap.safetensors", st_bytes("{" .. entry("a", 0, 4) .. "," .. entry("b", 8, 12) .. "}",
      f32s(1, 2, 3)))
    assert_refused(spk.load_safetensors, gap, "bytes 4 to 8 of the data section belong to no tensor")
    local tail = write_bytes("tail.safetensors", st_bytes("{" .. entry("a", 0, 4) .. "}", f32s(1, 2)))
    assert_refused(spk.load_safetensors, tail, "4 trailing bytes after the last tensor's data")
  end)

  it("reads a header of 100,000 tensors in time that grows with their number, not its square", function()
    -- 10,000 and 100,000 tensors on the same machine: a pairwise name check takes 100 times as
    -- long for ten times the tensors (it took 34 s at 100,000), a linear one about 10 times
    local function header(n, name)
      local parts = {}
      for i = 1, n do parts[i] = entry("t" .. i, 4 * (i - 1), 4 * i) end
      return parts, write_bytes(name, st_bytes("{" .. table.concat(parts, ",") .. "}", string.rep("\0", 4 * n)))
    end
    local function best_ms(p, rounds)
      local best = math.huge
      for _ = 1, rounds do
        local t0 = spk.clock_ms()
        spk.load_safetensors(p)
        best = math.min(best, spk.clock_ms() - t0)
      end
      return best
    end
    local _, small = header(10000, "some.safetensors")
    local n = 100000
    local parts, p = header(n, "many.safetensors")
    local named, names = spk.load_safetensors(p)
    assert.are.equal(n, #names)
    assert.truthy(named.t77777)
    local ms_small, ms = best_ms(small, 3), best_ms(p, 2)
    assert.is_true(ms < 40 * math.max(ms_small, 1),
      ("%.0f ms for %d tensors, %.0f ms for 10000: more than linear"):format(ms, n, ms_small))
    parts[n + 1] = entry("t5", 4 * n, 4 * n + 4) -- a duplicate among them, found
    local dup = write_bytes("dup.safetensors", st_bytes("{" .. table.concat(parts, ",") .. "}", string.rep("\0", 4 * n + 4)))
    assert_refused(spk.load_safetensors, dup, "tensor 't5' appears twice")
  end)
end)
