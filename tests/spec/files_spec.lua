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
