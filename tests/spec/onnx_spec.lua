-- ONNX models: spk.lstm.load on a .onnx file and spk.lstm.save{format =
-- "onnx"}.
--
-- Oracles: models shaped as PyTorch's two exporters write them
-- (tools/onnx_models.py, built with Debian's python3-onnx) are evaluated by
-- tools/onnx_numpy.py, a NumPy interpreter of the graph that shares no code
-- with spk; the loaded layers must give that output through spk's f64
-- reference. Saved models go through onnx's checker and the same
-- interpreter, and through ONNX Runtime where a Python has onnxruntime (the
-- GPU machine: scripts/gpu-test.sh); elsewhere those specs are reported as
-- skipped. Broken models must be refused with a message that names the file
-- and the problem. The PyTorch exporters' own files are in
-- tests/fixtures/onnx/ (see its README).
local spk = require "spk"

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  return ok == true, out
end

local onnx_ok = os.execute(PYTHON .. " -c 'import onnx, numpy' >/dev/null 2>&1") == true
local onnx_it = onnx_ok and it or function(name) pending(name .. " [needs python3-onnx]") end

-- A Python with onnxruntime: $SPK_ORT_PYTHON, $SPK_PYTHON, python3 on PATH.
local ort_python
for _, py in ipairs { os.getenv("SPK_ORT_PYTHON") or false, PYTHON, "python3" } do
  if py and os.execute(py .. " -c 'import onnxruntime, numpy' >/dev/null 2>&1") == true then
    ort_python = py
    break
  end
end
local ort_it = ort_python and it or function(name) pending(name .. " [needs onnxruntime]") end

local function equal_layers(a, b)
  assert.equal(#a, #b)
  for k = 1, #a do
    for _, part in ipairs { "W", "R", "B" } do
      assert.same(a[k][part]:shape(), b[k][part]:shape())
      assert.equal(a[k][part]:dtype(), b[k][part]:dtype())
      assert.equal(0, spk.compare(a[k][part], b[k][part]).max_abs, ("layer %d %s"):format(k, part))
    end
  end
end

describe("spk.lstm.save and load with ONNX files", function()
  local dir
  before_each(function() dir = spec_tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("a saved stack loads back bitwise, f32 and f64", function()
    for _, dtype in ipairs { "f32", "f64" } do
      local layers = spk.lstm.random { layers = 3, input = 7, hidden = 5, seed = 3, dtype = dtype }
      local path = dir .. "/stack_" .. dtype .. ".onnx"
      assert.equal(path, spk.lstm.save(path, layers))
      equal_layers(layers, spk.lstm.load(path))
    end
  end)

  it("the format comes from a .onnx path, or from format = \"onnx\" for any name", function()
    local layers = spk.lstm.random { layers = 2, input = 3, hidden = 2, seed = 1 }
    spk.lstm.save(dir .. "/a.ONNX", layers)
    equal_layers(layers, spk.lstm.load(dir .. "/a.ONNX"))
    spk.lstm.save(dir .. "/model.bin", layers, { format = "onnx" })
    -- the bytes are a model: renamed, it loads
    assert(os.rename(dir .. "/model.bin", dir .. "/b.onnx"))
    equal_layers(layers, spk.lstm.load(dir .. "/b.onnx"))
    local ok, err = pcall(spk.lstm.save, dir .. "/c", layers, { format = "onnnx" })
    assert.is_false(ok)
    assert.matches('format must be "npy", "safetensors", "torch" or "onnx", got onnnx', err, 1, true)
  end)

  it("refuses a stack of mixed dtypes, naming the layer and the tensor", function()
    local layers = spk.lstm.random { layers = 2, input = 3, hidden = 2, seed = 1 }
    layers[2].R = layers[2].R:to("f64")
    local ok, err = pcall(function() spk.lstm.save(dir .. "/m.onnx", layers) end)
    assert.is_false(ok)
    assert.matches("^[^:]*onnx_spec%.lua:%d+: ", err)
    assert.matches("layer 2: R is f64 but layer 1's W is f32", err, 1, true)
  end)

  it("errors name the file and point at the caller's line", function()
    local missing = dir .. "/missing.onnx"
    local ok, err = pcall(function() local layers = spk.lstm.load(missing); return layers end)
    assert.is_false(ok)
    assert.matches("^[^:]*onnx_spec%.lua:%d+: ", err)
    assert.matches(missing .. ": cannot open: No such file or directory", err, 1, true)
    assert(os.execute("mkdir '" .. dir .. "/folder.onnx'"))
    ok, err = pcall(spk.lstm.load, dir .. "/folder.onnx")
    assert.matches("folder.onnx: not a regular file", err, 1, true)
  end)

  it("a truncated model is refused, wherever it is cut", function()
    local layers = spk.lstm.random { layers = 2, input = 3, hidden = 2, seed = 1 }
    local path = dir .. "/whole.onnx"
    spk.lstm.save(path, layers)
    local bytes = read_file(path)
    local refused = 0
    for _, n in ipairs { 0, 1, 10, 40, #bytes // 3, #bytes // 2, #bytes - 200, #bytes - 1 } do
      write_file(dir .. "/cut.onnx", bytes:sub(1, n))
      local ok, err = pcall(spk.lstm.load, dir .. "/cut.onnx")
      if not ok then
        refused = refused + 1
        assert.matches(dir .. "/cut.onnx: ", err, 1, true)
      end
    end
    assert.is_true(refused >= 7)
  end)

  it("a file that is not ONNX is refused", function()
    write_file(dir .. "/text.onnx", "this is not a protobuf at all\n")
    local ok, err = pcall(spk.lstm.load, dir .. "/text.onnx")
    assert.is_false(ok)
    assert.matches("text.onnx: not a valid ONNX file", err, 1, true)
  end)
end)

-- The cases of tools/onnx_models.py.
local valid = { "torchscript", "torchscript_f64", "torchscript_typed_fields", "torchscript_no_bias",
                "torchscript_default_activations", "dynamo", "layout1", "other_ops", "one_layer" }
local refused = {
  no_lstm = { "no LSTM node in the model's graph (1 nodes: Transpose)" },
  forward = { "layer 2 (LSTM node '", "direction is \"forward\"; spk's stacks are bidirectional" },
  activations = { "layer 1 (LSTM node '", "activations are [Sigmoid, Tanh, Relu, Sigmoid, Tanh, Relu]" },
  clip = { "layer 3 (LSTM node '", "clip = 3; spk does not clip" },
  input_forget = { "input_forget = 1; spk computes input_forget = 0" },
  layout2 = { "layout = 2, expected 0 or 1" },
  nonzero_state = { "layer 1 (LSTM node '", "initial_h ('", "which is not all zeros; spk computes from zero initial states" },
  state_input = { "layer 2 (LSTM node '", "initial_h ('h0') comes from the graph input 'h0'" },
  sequence_lens = { "sequence_lens ('lens') is given" },
  chain_add = { "the LSTM nodes do not form one chain", "comes from Add node 'shift'" },
  chain_perm = { "the LSTM chain breaks between layer 1", "make [T, B, H*D] of Y's axes",
                 "layer 2 needs [T, B, D*H]" },
  two_chains = { "the LSTM nodes do not form one chain", "takes the graph input 'input'" },
  branch = { "the LSTM chain branches" },
  hidden_size = { "hidden_size = 6 but R has shape [2, 20, 5]" },
  lying_dims = { "W ('", "its shape needs 1344 bytes, raw_data holds 1120" },
  external_missing = { "external data file 'model.onnx.data'", "model.onnx.data: cannot open: No such file" },
  external_short = { "is past the end of 'model.onnx.data'" },
  external_outside = { "external data location '../elsewhere.data' leaves the model's folder" },
  -- ONNX's own rules (tools/onnx_models.py's rule_cases)
  repeated_activations = { "LSTM node '", "attribute 'activations' is given more than once",
                           "ONNX allows an attribute once in a node" },
  repeated_input_forget = { "attribute 'input_forget' is given more than once" },
  repeated_direction = { "attribute 'direction' is given more than once" },
  repeated_hidden_size = { "attribute 'hidden_size' is given more than once" },
  repeated_perm = { "Transpose node '", "attribute 'perm' is given more than once" },
  unknown_attribute = { "Transpose node '", "unknown attribute 'perms'; Transpose (opset 1 and later) has perm" },
  unnamed_attribute = { "LSTM node '", "an attribute has no name" },
  attribute_two_values = { "attribute 'hidden_size' holds both a FLOAT and an INT value" },
  direction_type = { "attribute 'direction' is an INT; LSTM's direction is a STRING" },
  hidden_size_type = { "attribute 'hidden_size' is a FLOAT; LSTM's hidden_size is an INT" },
  layout_before_opset_14 = { "unknown attribute 'layout'; LSTM (opsets 7 to 13) has activation_alpha" },
  concat_without_axis = { "Concat node '", "attribute 'axis' is missing; Concat (opset 1 and later) requires it" },
  mixed_types = { "layer 1 (LSTM node '", "W ('", "is DOUBLE but X is FLOAT",
                  "ONNX's LSTM takes X, W, R, B, initial_h, initial_c and P of one element type" },
  state_type = { "initial_h ('h0_f64') is DOUBLE but X is FLOAT" },
  empty_x = { "LSTM node '", "input 0 is empty (\"\"); LSTM requires input 0" },
  empty_r = { "input 2 is empty (\"\"); LSTM requires input 2" },
  nine_inputs = { "9 inputs; LSTM (opset 14 and later) takes 3 to 8 inputs" },
  four_outputs = { "4 outputs; LSTM (opset 14 and later) gives 0 to 3 outputs" },
  reshape_three_inputs = { "Reshape node '", "3 inputs; Reshape (opset 14 and later) takes 2 inputs" },
  raw_and_float_data = { "tensor 'R_", "holds values in both raw_data and float_data",
                         "ONNX keeps a tensor's values in exactly one field" },
  wrong_value_field = { "of data type FLOAT holds its values in double_data; ONNX keeps them in float_data" },
  empty_with_data = { "tensor 'nothing' has no element but holds float_data" },
  peephole_shape = { "layer 1 (LSTM node '", "P ('p_short') has shape [1]",
                     "ONNX's LSTM needs [num_directions, 3*hidden_size] = [2, 15]" },
  state_shape = { "layer 3 (LSTM node '", "initial_h ('h0_wide') has shape [2, 2, 6]",
                  "needs [num_directions, batch_size, hidden_size] = [2, batch, 5]" },
  direction_case = { "direction is \"Bidirectional\"; ONNX's LSTM takes \"forward\", \"reverse\" or " ..
                     "\"bidirectional\", spelled so" },
  unused_stack = { "layer 3 (LSTM node '", "no graph output depends on it (the outputs: 'passed')",
                   "the model does not compute this stack" },
  unused_last_layer = { "layer 3 (LSTM node '", "no graph output depends on it (the outputs: 'h_2')" },
}

-- Of the cases above, those onnx.checker (full_check) refuses too; the rest
-- break the LSTM operator's definition where the checker does not look
-- (ONNX Runtime refuses the first three when it runs them), or compute
-- nothing the outputs return.
local checker_refuses = {
  "repeated_activations", "repeated_input_forget", "repeated_direction", "repeated_hidden_size", "repeated_perm",
  "unknown_attribute", "unnamed_attribute", "attribute_two_values", "direction_type", "hidden_size_type",
  "layout_before_opset_14", "concat_without_axis", "mixed_types", "state_type", "empty_x", "empty_r", "nine_inputs", "four_outputs",
  "reshape_three_inputs", "raw_and_float_data", "wrong_value_field", "empty_with_data",
}
local checker_accepts = { "peephole_shape", "state_shape", "direction_case", "unused_stack", "unused_last_layer" }

describe("models shaped as PyTorch's exporters write them", function()
  local root

  setup(function()
    if not onnx_ok then return end
    root = spec_tmpdir()
    local ok, out = sh(("%s tools/onnx_models.py %s"):format(PYTHON, shell_quote(root)))
    assert(ok, "tools/onnx_models.py failed:\n" .. out)
  end)
  teardown(function()
    if root then os.execute("rm -rf '" .. root .. "'") end
  end)

  for _, name in ipairs(valid) do
    onnx_it(name .. ": the loaded stack gives the NumPy evaluation of the graph (1e-12 relative L2)", function()
      local dir = root .. "/" .. name
      local layers = spk.lstm.load(dir .. "/model.onnx")
      assert.equal(name == "one_layer" and 1 or 3, #layers)
      assert.equal(name == "torchscript_f64" and "f64" or "f32", layers[1].W:dtype())
      local y = spk.lstm.reference(layers, spk.load(dir .. "/x.npy"), { precision = "f64" })
      assert.tensor_near(y, spk.load(dir .. "/y.npy"), { rel_l2 = 1e-12 })
    end)
  end

  local names = {}
  for name in pairs(refused) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    onnx_it(name .. ": refused with a message naming the file and the problem", function()
      local path = root .. "/" .. name .. "/model.onnx"
      local ok, err = pcall(spk.lstm.load, path)
      assert.is_false(ok)
      assert.matches(path .. ": ", err, 1, true)
      for _, part in ipairs(refused[name]) do assert.matches(part, err, 1, true) end
    end)
  end

  onnx_it("onnx's checker refuses the cases that break its rules, and accepts the others", function()
    local list = {}
    for _, name in ipairs(checker_refuses) do list[#list + 1] = name end
    for _, name in ipairs(checker_accepts) do list[#list + 1] = name end
    local script = "import onnx, sys\n" ..
      "for name in sys.argv[2:]:\n" ..
      "    try:\n" ..
      "        onnx.checker.check_model(onnx.load(sys.argv[1] + '/' + name + '/model.onnx'), full_check=True)\n" ..
      "        print(name, 'accepted')\n" ..
      "    except Exception as e:\n" ..
      "        print(name, 'refused', str(e).splitlines()[0])\n"
    local file = root .. "/check.py"
    local f = assert(io.open(file, "w"))
    f:write(script)
    f:close()
    local ok, out = sh(("%s %s %s %s"):format(PYTHON, file, shell_quote(root), table.concat(list, " ")))
    assert(ok, out)
    for _, name in ipairs(checker_refuses) do
      assert.matches("\n" .. name .. " refused ", "\n" .. out, 1, true)
    end
    for _, name in ipairs(checker_accepts) do
      assert.matches("\n" .. name .. " accepted", "\n" .. out, 1, true)
    end
  end)
end)

describe("saved models run by ONNX's semantics", function()
  local dir
  before_each(function() dir = spec_tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  onnx_it("onnx's checker accepts a saved model, and its NumPy evaluation is the f64 reference", function()
    local layers = spk.lstm.random { layers = 3, input = 6, hidden = 4, seed = 9 }
    local x = spk.randn({ 3, 11, 6 }, { seed = 4 })
    spk.lstm.save(dir .. "/s.onnx", layers)
    spk.save(dir .. "/x.npy", x)
    local ok, out = sh(("%s -c \"import onnx; onnx.checker.check_model(onnx.load('%s/s.onnx'), full_check=True)\"")
      :format(PYTHON, dir))
    assert(ok, out)
    ok, out = sh(("%s tools/onnx_numpy.py %s/s.onnx %s/x.npy %s/y.npy"):format(PYTHON, dir, dir, dir))
    assert(ok, out)
    local y64 = spk.lstm.reference(layers, x, { precision = "f64" })
    assert.tensor_near(y64, spk.load(dir .. "/y.npy"), { rel_l2 = 1e-12 })
  end)

  ort_it("ONNX Runtime runs a saved pyannote-sized stack to the f64 reference's accuracy", function()
    local ok, out = sh(("%s run tools/onnx_save_check.lua %s"):format(SPK, shell_quote(dir)))
    assert(ok, out)
    local report = out
    ok, out = sh(("%s tools/onnx_ort_check.py %s/model.onnx %s/x.npy %s/y64.npy"):format(ort_python, dir, dir, dir))
    report = report .. out
    io.stdout:write((report:gsub("[^\n]+", "# %0"))) -- the numbers, as TAP comments
    assert(ok, out)
    assert.matches("ort check: ok", out, 1, true)
  end)
end)

describe("PyTorch's exporters' files (tests/fixtures/onnx)", function()
  local root = "tests/fixtures/onnx"
  local x, y64, loaded = nil, nil, {}

  setup(function()
    x = spk.load(root .. "/lstm_x.npy")
    y64 = spk.load(root .. "/lstm_y_f64.npy")
  end)

  for _, file in ipairs { "seg_torchscript.onnx", "seg_dynamo.onnx" } do
    describe(file, function()
      it("holds pyannote's stack shape: 4 bidirectional layers, input 60, hidden 32", function()
        loaded[file] = spk.lstm.load(root .. "/" .. file)
        assert.same({ layers = 4, hidden = 32, input = 60 }, spk.lstm.validate(loaded[file]))
      end)

      it("the f64 reference is within 1e-12 relative L2 of nn.LSTM in float64", function()
        local y = spk.lstm.reference(loaded[file] or spk.lstm.load(root .. "/" .. file), x, { precision = "f64" })
        assert.tensor_near(y, y64, { rel_l2 = 1e-12 })
      end)

      it("the f32 reference is within 2e-5 relative L2 of nn.LSTM in float64", function()
        local y = spk.lstm.reference(loaded[file] or spk.lstm.load(root .. "/" .. file), x, { precision = "f32" })
        assert.tensor_near(y, y64, { rel_l2 = 2e-5 })
      end)
    end)
  end

  it("both exporters' files hold the same weights, bit for bit", function()
    equal_layers(spk.lstm.load(root .. "/seg_torchscript.onnx"), spk.lstm.load(root .. "/seg_dynamo.onnx"))
  end)

  it("the torch.export file without its external data is refused, naming the data file", function()
    local dir = spec_tmpdir()
    assert(os.execute(("cp %s/seg_dynamo.onnx %s/"):format(root, dir)))
    local ok, err = pcall(spk.lstm.load, dir .. "/seg_dynamo.onnx")
    os.execute("rm -rf '" .. dir .. "'")
    assert.is_false(ok)
    assert.matches("external data file 'seg_dynamo.onnx.data'", err, 1, true)
    assert.matches("seg_dynamo.onnx.data: cannot open: No such file or directory", err, 1, true)
  end)

  it("the stack saved from the loaded layers loads back bitwise", function()
    local dir = spec_tmpdir()
    local layers = spk.lstm.load(root .. "/seg_torchscript.onnx")
    spk.lstm.save(dir .. "/again.onnx", layers)
    local again = spk.lstm.load(dir .. "/again.onnx")
    os.execute("rm -rf '" .. dir .. "'")
    equal_layers(layers, again)
  end)
end)
