-- The LSTM cell shared by both recurrence kernels (kernels/lstm_cell.cuh) is
-- written for latency (reciprocals, a branch-free tanh) and claims the bits of
-- its plain forms (divisions, a branch). kernels/lstm_cell_check.cu compares
-- the two on the GPU for every float bit pattern, and the cluster kernel's
-- trimmed forms (kernel.cell "trimmed") with the reference forms.
local spk = require "spk"

local NONE = 1 << 32 -- above every pattern: "no mismatch" in out[3..4] and out[8..9]

local function check_module()
  return spk.cuda.compile { file = spk.cuda.kernel_dir() .. "/lstm_cell_check.cu", arch = "sm_80" }
end

describe("the LSTM cell's activations", function()
  it("compile with their plain forms for the check (no GPU needed)", function()
    local m = check_module()
    assert.are.equal("string", type(m:code()))
  end)

  gpu_it("give the plain forms' bits for all 2^32 float inputs", function()
    local k = spk.cuda.compile { file = spk.cuda.kernel_dir() .. "/lstm_cell_check.cu" }
        :kernel("activation_mismatches")
    local out = spk.tensor({ 0, 0, NONE, NONE, 0, 0, 0, NONE, NONE }, "u64"):cuda()
    k:launch { grid = 1024, block = 256, args = { spk.u64(0), spk.u64(1 << 32), out } }
    local r = out:cpu():tolist()
    local function at(bits)
      if bits == NONE then return "none" end
      return string.format("0x%08x (%.9g)", bits, string.unpack("<f", string.pack("<I4", bits)))
    end
    assert.are.same({ 0, 0 }, { r[1], r[2] },
      string.format("sigmoid mismatches %d (first %s), tanh %d (first %s)", r[1], at(r[3]), r[2], at(r[4])))
    assert.are.same({ NONE, NONE }, { r[3], r[4] })
    -- the control: rcp.approx alone is not the division everywhere, and the
    -- check sees it
    assert.is_true(r[5] > 0, "the control found no difference")
    -- the trimmed forms: the reference forms' bits
    assert.are.same({ 0, 0 }, { r[6], r[7] },
      string.format("trimmed sigmoid mismatches %d (first %s), trimmed tanh %d (first %s)", r[6], at(r[8]), r[7],
        at(r[9])))
  end)
end)
