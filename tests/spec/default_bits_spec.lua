-- The per-batch defaults give the bits they gave before the kernels were
-- last restructured: every fixture in tests/fixtures/defaults/ (written by
-- tools/default_fixtures.lua on the H200 from the earlier tree; the format is
-- in that tool's header) is run again here, its output saved by spk.save and
-- that file's SHA-256 compared. GPU specs: skipped without a device; with one,
-- a missing fixture folder fails rather than passes.
local spk = require "spk"
local report = require "spk.report"

local dir = "tests/fixtures/defaults"

local function fixtures()
  local out = {}
  local p = io.popen(("ls %s/*.json 2>/dev/null"):format(dir))
  for path in p:lines() do out[#out + 1] = path end
  p:close()
  table.sort(out)
  return out
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

describe("the per-batch defaults keep their bits", function()
  gpu_it("has fixtures to check", function()
    assert.is_true(#fixtures() > 0, "no fixtures in " .. dir .. " (tools/default_fixtures.lua writes them)")
  end)

  for _, path in ipairs(fixtures()) do
    gpu_it(path, function()
      local f = report.json_decode(read(path))
      for _, key in ipairs { "backend", "math", "batch", "steps", "seed", "sha256" } do
        assert.is_not_nil(f[key], path .. ": no " .. key)
      end
      local layers = spk.lstm.random { layers = f.layers or 4, input = f.input or 60, hidden = f.hidden or 128,
                                       seed = f.seed }
      local x = spk.randn({ f.batch, f.steps, f.input or 60 }, { seed = f.seed })
      local plan = spk.lstm.stack { layers = layers, batch = f.batch, steps = f.steps, backend = f.backend,
                                    math = f.math }
      local y = plan:forward(x)
      local file = os.tmpname() .. ".npy"
      spk.save(file, y)
      local digest = spk.cuda.sha256(read(file))
      os.remove(file)
      local flat = y:contiguous():view { y:numel() }
      local first = {}
      for i = 1, 8 do first[i] = ("%.9g"):format(flat:get(i)) end
      assert.are.equal(f.sha256, digest, ("%s (%s): other bits; first values now %s, then %s"):format(path,
        plan.variant, table.concat(first, " "), table.concat((function()
          local t = {}
          for i, v in ipairs(f.first or {}) do t[i] = ("%.9g"):format(v) end
          return t
        end)(), " ")))
      plan:close()
    end)
  end
end)
