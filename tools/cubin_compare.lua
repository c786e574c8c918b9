-- Compares two folders of cubins written by tools/kernel_cubins.lua (a
-- reference tree's and this tree's), variant by variant:
--
--   build/spk run tools/cubin_compare.lua REF_DIR NEW_DIR
--
-- A cubin is an ELF file; a kernel's machine code (its SASS) is the section
-- .text.<kernel>, its launch attributes .nv.info.<kernel>. Per variant the
-- line says whether the kernel's .text is byte-identical (the same SASS:
-- the same instructions in the same order, so the same bits and the same
-- speed), its size and register count, and whether the defines and the
-- whole cubin are the same. Exit status 0 when every variant present in both
-- has the same .text, 1 otherwise; a variant in one folder only is listed.
local spk = require "spk"
local script = require("spk.options").script { usage = "spk run tools/cubin_compare.lua REF_DIR NEW_DIR" }
local ref_dir, new_dir = arg[1], arg[2]
if not ref_dir or not new_dir then script:usage_error("needs two folders of cubins") end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- The sections of an ELF64 little-endian file: {name = {offset, size, info}}.
local function sections(data)
  assert(data:sub(1, 4) == "\127ELF" and data:byte(5) == 2 and data:byte(6) == 1, "not an ELF64 LE file")
  local shoff = string.unpack("<I8", data, 0x28 + 1)
  local shentsize, shnum, shstrndx = string.unpack("<I2I2I2", data, 0x3A + 1)
  local headers = {}
  for i = 0, shnum - 1 do
    local at = shoff + i * shentsize + 1
    local name, _, _, _, offset, size, _, info = string.unpack("<I4I4I8I8I8I8I4I4", data, at)
    headers[i] = { name = name, offset = offset, size = size, info = info }
  end
  local strtab = headers[shstrndx]
  local out = {}
  for i = 0, shnum - 1 do
    local h = headers[i]
    local start = strtab.offset + h.name + 1
    local name = data:sub(start, data:find("\0", start, true) - 1)
    out[name] = { bytes = data:sub(h.offset + 1, h.offset + h.size), info = h.info }
  end
  return out
end

-- Registers per thread of each function, from the EIATTR_REGCOUNT (0x2f)
-- attributes of the cubin's .nv.info section: {symbol name = count}.
local function registers(secs)
  local out = {}
  local info, symtab, strtab = secs[".nv.info"], secs[".symtab"], secs[".strtab"]
  if not (info and symtab and strtab) then return out end
  local at, bytes = 1, info.bytes
  while at + 1 <= #bytes do
    local format, attribute = bytes:byte(at), bytes:byte(at + 1)
    if format == 0x04 then -- a value of `size` bytes
      local size = string.unpack("<I2", bytes, at + 2)
      if attribute == 0x2f and size >= 8 then
        local symbol, count = string.unpack("<I4I4", bytes, at + 4)
        local name_at = string.unpack("<I4", symtab.bytes, symbol * 24 + 1) + 1
        out[strtab.bytes:sub(name_at, strtab.bytes:find("\0", name_at, true) - 1)] = count
      end
      at = at + 4 + size
    elseif format == 0x03 then -- a 16-bit value
      at = at + 4
    else
      at = at + 2
    end
  end
  return out
end

-- The kernel sections: the .text.<entry> whose name starts with spk_lstm_ (the recurrence, not the clear kernel).
local function kernel(secs)
  for name, s in pairs(secs) do
    local entry = name:match("^%.text%.(spk_lstm_[%w_]+)$")
    if entry and entry ~= "spk_lstm_clear" then
      return entry, s, secs[".nv.info." .. entry]
    end
  end
end

local function names_in(dir)
  local out = {}
  for _, name in ipairs(spk.files.list(dir)) do
    local n = name:match("^(.+)%.cubin$")
    if n then out[n] = true end
  end
  return out
end

local ref_names, new_names = names_in(ref_dir), names_in(new_dir)
local all = {}
for n in pairs(ref_names) do all[#all + 1] = n end
for n in pairs(new_names) do if not ref_names[n] then all[#all + 1] = n end end
table.sort(all)

local same, differ, only = 0, 0, 0
print(("%-34s %-9s %8s %8s %5s %5s %-8s %-7s %s"):format("variant", "SASS", "ref B", "new B", "regs", "new", "defines",
  "cubin", "kernel"))
for _, n in ipairs(all) do
  if not (ref_names[n] and new_names[n]) then
    print(("%-34s only in %s"):format(n, ref_names[n] and "the reference" or "this tree"))
    only = only + 1
  else
    local a, b = read(ref_dir .. "/" .. n .. ".cubin"), read(new_dir .. "/" .. n .. ".cubin")
    local sa, sb = sections(a), sections(b)
    local ea, ta = kernel(sa)
    local eb, tb = kernel(sb)
    local ra, rb = registers(sa)[ea or ""] or -1, registers(sb)[eb or ""] or -1
    local identical = ta and tb and ta.bytes == tb.bytes
    local da = read(ref_dir .. "/" .. n .. ".defines") or ""
    local db = read(new_dir .. "/" .. n .. ".defines") or ""
    print(("%-34s %-9s %8d %8d %5d %5d %-8s %-7s %s"):format(n, identical and "identical" or "DIFFERS",
      ta and #ta.bytes or 0, tb and #tb.bytes or 0, ra, rb,
      da == db and "same" or "differ", a == b and "same" or "differ", eb or ea or "?"))
    if identical then same = same + 1 else differ = differ + 1 end
  end
end
print(("%d identical, %d differ, %d in one tree only"):format(same, differ, only))
os.exit(differ == 0 and 0 or 1)
