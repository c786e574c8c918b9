-- spk.schedule: the tile-height rule with its reference test vectors, and
-- the checker of script-made schedules. Launch `first` is a 0-based tile index.
local spk = require "spk"

local function new(batch, capacity, concurrent)
  return spk.schedule.new { batch = batch, capacity = capacity, concurrent_capacity = concurrent }
end

describe("spk.schedule", function()
  it("batch 32, capacity 350, concurrent 350: 8-row tiles, concurrent, one launch", function()
    local s = new(32, 350, 350)
    assert.equal(8, s.tile_rows)
    assert.equal(4, s.tiles)
    assert.is_true(s.concurrent)
    assert.equal(32, s.groups)
    assert.same({ { first = 0, count = 4 } }, s:launches())
  end)

  it("batch 64, capacity 350: 16-row tiles", function()
    local s = new(64, 350, 350)
    assert.equal(16, s.tile_rows)
    assert.equal(4, s.tiles)
    assert.is_true(s.concurrent)
  end)

  it("batch 65, capacity 65, concurrent 65: sequential 32-row tiles, launches (0,2), (2,1)", function()
    local s = new(65, 65, 65)
    assert.is_false(s.concurrent)
    assert.equal(32, s.tile_rows)
    assert.equal(3, s.tiles)
    assert.equal(2, s.tiles_per_launch)
    assert.same({ { first = 0, count = 2 }, { first = 2, count = 1 } }, s:launches())
  end)

  it("batch 64, capacity 32: two sequential launches", function()
    local s = new(64, 32, 32)
    assert.is_false(s.concurrent)
    assert.same({ { first = 0, count = 1 }, { first = 1, count = 1 } }, s:launches())
  end)

  it("batch 1, capacity 31: an error naming needed and available blocks", function()
    local ok, err = pcall(new, 1, 31, 31)
    assert.is_false(ok)
    assert.matches("needs 32 co%-resident blocks, only 31 available", err)
  end)

  it("an unknown concurrent capacity selects sequential launches", function()
    local s = new(32, 350, nil)
    assert.is_false(s.concurrent)
    assert.equal(32, s.tile_rows)
    assert.equal(10, s.tiles_per_launch)
    assert.same({ { first = 0, count = 1 } }, s:launches())
  end)

  it("takes other groups and heights", function()
    local s = spk.schedule.new { batch = 24, capacity = 128, concurrent_capacity = 128, groups = 16, heights = { 4, 12 } }
    assert.equal(12, s.tile_rows) -- 4 rows: 6 tiles * 2 * 16 = 192 > 128
    assert.equal(2, s.tiles)
    assert.matches("2 tiles of 12 rows, concurrent", tostring(s))
    local ok, err = pcall(spk.schedule.new, { batch = 4, capacity = 350, heights = { 0 } })
    assert.matches("tile height 1 is 0", err)
    ok, err = pcall(spk.schedule.new, { batch = 4 })
    assert.matches("batch and capacity are required", err)
    ok, err = pcall(spk.schedule.new, { batch = 4, capacity = 64, tile = 8 })
    assert.matches("unknown option 'tile'", err)
  end)

  describe("check", function()
    it("accepts the schedules new makes", function()
      for _, c in ipairs { { 32, 350, 350 }, { 65, 65, 65 }, { 64, 32, 32 }, { 1000, 96 }, { 7, 1000, 1000 } } do
        local s = new(c[1], c[2], c[3])
        assert.equal(s, spk.schedule.check(s, c[1]))
      end
    end)

    it("accepts a script-made schedule and rejects broken ones clearly", function()
      local s = { tile_rows = 32, tiles = 3, tiles_per_launch = 2,
                  launches = { { first = 0, count = 2 }, { first = 2, count = 1 } } }
      assert.equal(s, spk.schedule.check(s, 65))
      local function fails(batch, launches, pattern, fields)
        local t = { tile_rows = 32, tiles = 3, tiles_per_launch = 2, launches = launches }
        for k, v in pairs(fields or {}) do t[k] = v end
        local ok, err = pcall(spk.schedule.check, t, batch)
        assert.is_false(ok)
        assert.matches(pattern, err)
      end
      fails(65, { { first = 0, count = 2 }, { first = 1, count = 2 } }, "launch 2 starts at tile 1, overlapping")
      fails(65, { { first = 0, count = 1 }, { first = 2, count = 1 } }, "leaving tiles 1..1 uncovered")
      fails(65, { { first = 0, count = 2 } }, "leaving tiles 2..2 uncovered")
      fails(65, { { first = 0, count = 3 } }, "count 3, expected 1..2")
      fails(100, s.launches, "3 tiles of 32 rows cover 96 rows, the batch has 100")
      fails(64, s.launches, "leave tile 2 empty")
      fails(65, { { first = 0, count = 2 }, { first = 2, count = 2 } }, "beyond the last tile 2")
      fails(65, { { first = 0 } }, "field 'count' must be an integer")
      fails(65, s.launches, "field 'tiles' must be an integer", { tiles = "3" })
      -- without a list, launches of tiles_per_launch consecutive tiles
      local plain = { tile_rows = 32, tiles = 3, tiles_per_launch = 2 }
      assert.equal(plain, spk.schedule.check(plain, 65))
      fails(100, nil, "3 tiles of 32 rows cover 96 rows, the batch has 100")
      local ok, err = pcall(spk.schedule.check, { tile_rows = 32, tiles = 3 }, 65)
      assert.is_false(ok)
      assert.matches("no launches", err)
    end)
  end)
end)
