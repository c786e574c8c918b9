#!/usr/bin/env python3
"""Synthetic ONNX models of LSTM stacks, shaped as PyTorch's two exporters
write them, and broken ones, for tests/spec/onnx_spec.lua.

Usage:
    python3 tools/onnx_models.py OUT_DIR
    python3 tools/onnx_models.py --seeds tests/fuzz/corpus/onnx

Writes OUT_DIR/<case>/model.onnx for every case below; a case that spk must
load also gets x.npy (float64, [batch, steps, input]) and y.npy: the model's
stack output for x, computed by tools/onnx_numpy.py in float64, so the spec
compares spk.lstm.reference on the loaded layers with an evaluation of the
graph that shares no code with spk. Cases that spk must refuse get only the
model (the spec holds the expected messages).

Shapes: 3 layers, input 7, hidden 5, batch 2, steps 6; weights uniform in
[-0.5, 0.5), float32 unless the case says otherwise.

--seeds writes every case, valid and broken, with 2 layers, input 3 and
hidden 2, as seeds of the libFuzzer target tests/fuzz/fuzz_onnx.c: one file
per case, the model's bytes followed by "\n--spk-file--\n" and its
external-data file where it has one.

Needs numpy and onnx (Debian: python3-numpy, python3-onnx).
"""
import sys

# --help before the imports below, so that it works where they are missing
if __name__ == "__main__" and sys.argv[1:2] in (["--help"], ["-h"]):
    print(__doc__.strip())
    sys.exit(0)

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_numpy  # noqa: E402

LAYERS, INPUT, HIDDEN, BATCH, STEPS = 3, 7, 5, 2, 6
OPSET = 17


def params(seed=1, dtype=np.float32, layers=LAYERS):
    """PyTorch's nn.LSTM parameters: per layer and direction weight_ih
    [4H, in], weight_hh [4H, H], bias_ih, bias_hh [4H], gates i, f, g, o."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(layers):
        inp = INPUT if k == 0 else 2 * HIDDEN
        dirs = []
        for _ in range(2):
            dirs.append({
                "weight_ih": rng.uniform(-0.5, 0.5, (4 * HIDDEN, inp)).astype(dtype),
                "weight_hh": rng.uniform(-0.5, 0.5, (4 * HIDDEN, HIDDEN)).astype(dtype),
                "bias_ih": rng.uniform(-0.5, 0.5, (4 * HIDDEN,)).astype(dtype),
                "bias_hh": rng.uniform(-0.5, 0.5, (4 * HIDDEN,)).astype(dtype),
            })
        out.append(dirs)
    return out


def to_onnx_gates(w):
    """Rows of gates i, f, g, o (PyTorch) to i, o, f, c (ONNX)."""
    i, f, g, o = np.split(w, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


def onnx_weights(p):
    """W [2, 4H, in], R [2, 4H, H], B [2, 8H] of each layer."""
    layers = []
    for dirs in p:
        W = np.stack([to_onnx_gates(d["weight_ih"]) for d in dirs])
        R = np.stack([to_onnx_gates(d["weight_hh"]) for d in dirs])
        B = np.stack([np.concatenate([to_onnx_gates(d["bias_ih"]), to_onnx_gates(d["bias_hh"])]) for d in dirs])
        layers.append((W, R, B))
    return layers


class Graph:
    def __init__(self):
        self.nodes, self.inits, self.infos, self.count = [], [], [], 0

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def init(self, base, array, raw=True):
        name = self.name(base)
        t = numpy_helper.from_array(array, name) if raw else helper.make_tensor(
            name, helper.np_dtype_to_tensor_dtype(array.dtype) if hasattr(helper, "np_dtype_to_tensor_dtype")
            else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[array.dtype], array.shape, array.flatten().tolist())
        self.inits.append(t)
        return name

    def ints(self, values):
        return self.init("ints", np.array(values, dtype=np.int64))

    def op(self, op, inputs, outputs=1, **attributes):
        outs = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(op), **attributes))
        return outs[0] if outputs == 1 else outs

    def info(self, name, dims, elem=TensorProto.FLOAT):
        self.infos.append(helper.make_tensor_value_info(name, elem, dims))

    def model(self, x, y, elem=TensorProto.FLOAT, extra_outputs=()):
        graph = helper.make_graph(
            self.nodes, "lstm_stack",
            [helper.make_tensor_value_info(x, elem, ["batch", "steps", INPUT])],
            [helper.make_tensor_value_info(y, elem, ["batch", "steps", 2 * HIDDEN])] +
            [helper.make_tensor_value_info(o, elem, ["batch", "steps", 3]) for o in extra_outputs],
            self.inits, value_info=self.infos)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8,
                                 producer_name="spk tests")


def merge_directions(g, y, dynamic=False):
    """Y [T, 2, B, H] -> [T, B, 2H]: Transpose and Reshape, with the shape
    [0, 0, -1] (TorchScript) or computed from Shape (torch.export)."""
    t = g.op("Transpose", [y], perm=[0, 2, 1, 3])
    if not dynamic:
        return g.op("Reshape", [t, g.ints([0, 0, -1])])
    s = g.op("Shape", [t])
    part = lambda a, b: g.op("Slice", [s, g.ints([a]), g.ints([b])])
    dh = g.op("Reshape", [g.op("Mul", [part(2, 3), part(3, 4)]), g.ints([-1])])
    return g.op("Reshape", [t, g.op("Concat", [part(0, 1), part(1, 2), dh], axis=0)])


def torchscript_style(p, dtype=np.float32, raw=True, heads=True, with_bias=True, lstm_attrs=None,
                      zero_states=True):
    """Folded initializers feeding the LSTM nodes; zero states from
    ConstantOfShape of a shape computed from the input; a head after."""
    g = Graph()
    x = "input"
    elem = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    cur = g.op("Transpose", [x], perm=[1, 0, 2])
    batch = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", [x]), g.ints(0)], axis=0), g.ints([0])])
    shape = g.op("Concat", [g.ints([2 * len(p)]), batch, g.ints([HIDDEN])], axis=0)
    value = numpy_helper.from_array(np.zeros(1, dtype=dtype))
    h0 = g.op("ConstantOfShape", [shape], value=value)
    c0 = g.op("ConstantOfShape", [shape], value=value)
    for k, (W, R, B) in enumerate(onnx_weights(p)):
        hk = g.op("Slice", [h0, g.ints([2 * k]), g.ints([2 * k + 2]), g.ints([0])])
        ck = g.op("Slice", [c0, g.ints([2 * k]), g.ints([2 * k + 2]), g.ints([0])])
        if not zero_states:
            hk = g.init("h0", np.full((2, BATCH, HIDDEN), 0.25, dtype=dtype))
        ins = [cur, g.init("W", W.astype(dtype), raw), g.init("R", R.astype(dtype), raw),
               g.init("B", B.astype(dtype), raw) if with_bias else "", "", hk, ck]
        attrs = {"direction": "bidirectional", "hidden_size": HIDDEN}
        attrs.update(lstm_attrs or {})
        y = g.op("LSTM", ins, outputs=3, **attrs)[0]
        cur = merge_directions(g, y)
    out = g.op("Transpose", [cur], perm=[1, 0, 2])
    extra = []
    if heads:  # a linear head and a sigmoid after the stack, as pyannote has
        rng = np.random.default_rng(7)
        extra = [g.op("Sigmoid", [g.op("MatMul", [out, g.init("head", rng.uniform(-1, 1, (2 * HIDDEN, 3))
                                                                   .astype(dtype))])])]
    return g.model(x, out, elem, extra)


def dynamo_style(p):
    """PyTorch-layout parameters; W, R and B built per layer by Slice (ends
    from the hidden size that Shape reads off initial_h), Concat and
    Unsqueeze; zero states by Expand; Reshapes computed from Shape."""
    g = Graph()
    x = "x"
    names = []
    for k, dirs in enumerate(p):
        for d, suffix in enumerate(["", "_reverse"]):
            entry = {}
            for key, array in dirs[d].items():
                name = f"lstm.{key}_l{k}{suffix}"
                g.inits.append(numpy_helper.from_array(array, name))
                entry[key] = name
            names.append(entry)
    cur = g.op("Transpose", [x], perm=[1, 0, 2])
    batch = g.op("Slice", [g.op("Shape", [x]), g.ints([0]), g.ints([1])])
    state_shape = g.op("Concat", [g.ints([2 * len(p)]), batch, g.ints([HIDDEN])], axis=0)
    h0 = g.op("Expand", [g.init("zero", np.zeros((), dtype=np.float32)), state_shape])
    c0 = g.op("Expand", [g.init("zero", np.zeros((), dtype=np.float32)), state_shape])
    g.info(h0, [2 * len(p), "batch", HIDDEN])
    for k in range(len(p)):
        hk = g.op("Slice", [h0, g.ints([2 * k]), g.ints([2 * k + 2]), g.ints([0])])
        ck = g.op("Slice", [c0, g.ints([2 * k]), g.ints([2 * k + 2]), g.ints([0])])
        g.info(hk, [2, "batch", HIDDEN])
        hidden = g.op("Shape", [hk], start=2, end=3)

        def gates(w):
            cuts = [g.ints([0]), hidden, g.op("Mul", [hidden, g.ints([2])]), g.op("Mul", [hidden, g.ints([3])]),
                    g.op("Mul", [hidden, g.ints([4])])]
            s = [g.op("Slice", [w, cuts[j], cuts[j + 1], g.ints([0])]) for j in range(4)]
            return g.op("Concat", [s[0], s[3], s[1], s[2]], axis=0)  # i, o, f, g

        Ws, Rs, Bs = [], [], []
        for d in range(2):
            n = names[2 * k + d]
            Ws.append(g.op("Unsqueeze", [gates(n["weight_ih"]), g.ints([0])]))
            Rs.append(g.op("Unsqueeze", [gates(n["weight_hh"]), g.ints([0])]))
            b = g.op("Concat", [gates(n["bias_ih"]), gates(n["bias_hh"])], axis=0)
            Bs.append(g.op("Unsqueeze", [b, g.ints([0])]))
        W, R, B = (g.op("Concat", parts, axis=0) for parts in (Ws, Rs, Bs))
        y = g.op("LSTM", [cur, W, R, B, "", hk, ck], outputs=3, direction="bidirectional",
                 hidden_size=HIDDEN)[0]
        cur = merge_directions(g, y, dynamic=True)
    out = g.op("Transpose", [cur], perm=[1, 0, 2])
    return g.model(x, out)


def layout1_style(p):
    """LSTM nodes with layout = 1 (batch first): Reshape alone between them."""
    g = Graph()
    cur = "x"
    for W, R, B in onnx_weights(p):
        y = g.op("LSTM", [cur, g.init("W", W), g.init("R", R), g.init("B", B)], outputs=3,
                 direction="bidirectional", hidden_size=HIDDEN, layout=1)[0]
        cur = g.op("Reshape", [y, g.ints([0, 0, -1])])
    return g.model("x", cur)


def other_ops_style(p):
    """W, R and B stored in other layouts and brought to ONNX's by the
    other nodes spk folds: W as [in, 2, 4H] through Transpose [1, 2, 0];
    R and another tensor side by side, taken by Split; B as float64 [16H],
    Cast and Reshaped; W of the last layer as FLOAT16 (exact in float32),
    Cast; Squeeze of an Unsqueeze; Flatten and Reshape of R."""
    g = Graph()
    cur = g.op("Transpose", ["x"], perm=[1, 0, 2])
    layers = onnx_weights(p)
    for k, (W, R, B) in enumerate(layers):
        last = k == len(layers) - 1
        if last:
            w = g.op("Cast", [g.init("W16", W.astype(np.float16))], to=TensorProto.FLOAT)
        else:
            w = g.op("Transpose", [g.init("Wt", np.ascontiguousarray(np.transpose(W, (2, 0, 1))))], perm=[1, 2, 0])
        pair = g.init("RR", np.concatenate([R, np.ones_like(R)], axis=1))
        r = g.op("Split", [pair, g.ints([4 * HIDDEN, 4 * HIDDEN])], outputs=2, axis=1)[0]
        r = g.op("Squeeze", [g.op("Unsqueeze", [r, g.ints([1])]), g.ints([1])])
        r = g.op("Reshape", [g.op("Flatten", [r], axis=1), g.ints([2, 4 * HIDDEN, HIDDEN])])
        b = g.op("Reshape", [g.op("Cast", [g.init("B64", B.astype(np.float64).reshape(-1))], to=TensorProto.FLOAT),
                             g.ints([2, -1])])
        y = g.op("LSTM", [cur, w, r, b], outputs=3, direction="bidirectional", hidden_size=HIDDEN)[0]
        cur = merge_directions(g, y)
    return g.model("x", g.op("Transpose", [cur], perm=[1, 0, 2]))


def edit(model, fn):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    fn(m.graph)
    return m


def lstm_nodes(graph):
    return [n for n in graph.node if n.op_type == "LSTM"]


def set_attr(node, name, value):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))


def producer(graph, name):
    return next(n for n in graph.node if name in n.output)


def valid_cases():
    p = params()
    return {
        "torchscript": torchscript_style(p),
        "torchscript_f64": torchscript_style(params(dtype=np.float64), dtype=np.float64),
        "torchscript_typed_fields": torchscript_style(p, raw=False),
        "torchscript_no_bias": torchscript_style(p, with_bias=False, heads=False),
        "torchscript_default_activations": torchscript_style(
            p, lstm_attrs={"activations": ["Sigmoid", "Tanh", "Tanh"] * 2, "input_forget": 0}),
        "dynamo": dynamo_style(p),
        "layout1": layout1_style(p),
        "other_ops": other_ops_style(p),
        "one_layer": torchscript_style(params(layers=1)),
    }


def broken_cases():
    p = params()
    ts = torchscript_style(p)
    cases = {}

    def no_lstm(gr):
        keep = [n for n in gr.node if n.op_type in ("Transpose",)][:1]
        del gr.node[:]
        gr.node.extend(keep)
        gr.output[0].name = keep[0].output[0]
    cases["no_lstm"] = edit(ts, no_lstm)
    cases["forward"] = edit(ts, lambda gr: set_attr(lstm_nodes(gr)[1], "direction", "forward"))
    cases["activations"] = edit(ts, lambda gr: set_attr(lstm_nodes(gr)[0], "activations",
                                                        ["Sigmoid", "Tanh", "Relu"] * 2))
    cases["clip"] = edit(ts, lambda gr: set_attr(lstm_nodes(gr)[2], "clip", 3.0))
    cases["input_forget"] = edit(ts, lambda gr: set_attr(lstm_nodes(gr)[0], "input_forget", 1))
    cases["layout2"] = edit(ts, lambda gr: set_attr(lstm_nodes(gr)[0], "layout", 2))
    cases["nonzero_state"] = torchscript_style(p, zero_states=False)

    def state_input(gr):
        gr.input.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, [2, "batch", HIDDEN]))
        lstm_nodes(gr)[1].input[5] = "h0"
    cases["state_input"] = edit(ts, state_input)

    def sequence_lens(gr):
        gr.input.append(helper.make_tensor_value_info("lens", TensorProto.INT32, ["batch"]))
        lstm_nodes(gr)[0].input[4] = "lens"
    cases["sequence_lens"] = edit(ts, sequence_lens)

    def add_between(gr):  # layer 2 takes layer 1's output plus a constant
        second = lstm_nodes(gr)[1]
        one = numpy_helper.from_array(np.ones(1, dtype=np.float32), "one")
        gr.initializer.append(one)
        gr.node.insert(list(gr.node).index(second),
                       helper.make_node("Add", [second.input[0], "one"], ["shifted"], name="shift"))
        second.input[0] = "shifted"
    cases["chain_add"] = edit(ts, add_between)

    def wrong_perm(gr):  # [T, B, H, 2]: the directions' features interleave
        second = lstm_nodes(gr)[1]
        reshape = producer(gr, second.input[0])
        set_attr(producer(gr, reshape.input[0]), "perm", [0, 2, 3, 1])
    cases["chain_perm"] = edit(ts, wrong_perm)

    def two_chains(gr):  # layer 3 reads the stack's input again
        third = lstm_nodes(gr)[2]
        first = lstm_nodes(gr)[0]
        third.input[0] = first.input[0]
    cases["two_chains"] = edit(ts, two_chains)

    def branch(gr):  # layers 2 and 3 both read layer 1
        nodes = lstm_nodes(gr)
        nodes[2].input[0] = nodes[1].input[0]
    cases["branch"] = edit(ts, branch)

    def wrong_hidden(gr):
        set_attr(lstm_nodes(gr)[0], "hidden_size", HIDDEN + 1)
    cases["hidden_size"] = edit(ts, wrong_hidden)

    def lying_dims(gr):  # the first W claims more rows than its raw_data holds
        w = next(t for t in gr.initializer if t.name == lstm_nodes(gr)[0].input[1])
        w.dims[1] += 4
    cases["lying_dims"] = edit(ts, lying_dims)
    cases.update(rule_cases(ts))
    return cases


def rule_cases(ts):
    """Models that break ONNX's own rules (onnx.checker's, or the LSTM
    operator's where the checker does not look), each in one way."""
    cases = {}

    def repeat(name, first, second, k=0):
        def fn(gr):
            node = lstm_nodes(gr)[k]
            for a in list(node.attribute):
                if a.name == name:
                    node.attribute.remove(a)
            node.attribute.extend([helper.make_attribute(name, first), helper.make_attribute(name, second)])
        return fn
    cases["repeated_activations"] = edit(ts, repeat("activations", ["Sigmoid", "Tanh", "Tanh"] * 2,
                                                    ["Sigmoid", "Tanh", "Relu"] * 2))
    cases["repeated_input_forget"] = edit(ts, repeat("input_forget", 0, 1))
    cases["repeated_direction"] = edit(ts, repeat("direction", "bidirectional", "forward", 1))
    cases["repeated_hidden_size"] = edit(ts, repeat("hidden_size", HIDDEN, HIDDEN + 1))

    def initializer_of(gr, name):
        return next(t for t in gr.initializer if t.name == name)

    def mixed_types(gr):  # layer 1's W in float64, its R in float32
        w = initializer_of(gr, lstm_nodes(gr)[0].input[1])
        w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w).astype(np.float64), w.name))
    cases["mixed_types"] = edit(ts, mixed_types)

    def state_type(gr):  # initial_h in float64 (zeros)
        gr.initializer.append(numpy_helper.from_array(np.zeros((2, BATCH, HIDDEN)), "h0_f64"))
        lstm_nodes(gr)[0].input[5] = "h0_f64"
    cases["state_type"] = edit(ts, state_type)
    cases["empty_x"] = edit(ts, lambda gr: lstm_nodes(gr)[0].input.__setitem__(0, ""))
    cases["empty_r"] = edit(ts, lambda gr: lstm_nodes(gr)[1].input.__setitem__(2, ""))
    cases["nine_inputs"] = edit(ts, lambda gr: lstm_nodes(gr)[0].input.extend(
        [""] * (9 - len(lstm_nodes(gr)[0].input))))
    cases["four_outputs"] = edit(ts, lambda gr: lstm_nodes(gr)[0].output.append("extra_output"))

    def raw_and_float(gr):  # R's values in raw_data and again in float_data
        r = initializer_of(gr, lstm_nodes(gr)[0].input[2])
        r.float_data.extend(numpy_helper.to_array(r).flatten().tolist())
    cases["raw_and_float_data"] = edit(ts, raw_and_float)

    def wrong_field(gr):  # a FLOAT tensor's values in double_data
        b = initializer_of(gr, lstm_nodes(gr)[0].input[3])
        values = numpy_helper.to_array(b).flatten().astype(np.float64).tolist()
        b.ClearField("raw_data")
        b.double_data.extend(values)
    cases["wrong_value_field"] = edit(ts, wrong_field)

    def empty_with_data(gr):  # an unused 0-element initializer that holds a value
        t = numpy_helper.from_array(np.zeros((0,), np.float32), "nothing")
        t.float_data.append(1.0)
        gr.initializer.append(t)
    cases["empty_with_data"] = edit(ts, empty_with_data)

    def peephole_shape(gr):  # zero peepholes of shape [1], not [2, 3H]
        gr.initializer.append(numpy_helper.from_array(np.zeros(1, np.float32), "p_short"))
        lstm_nodes(gr)[0].input.append("p_short")
    cases["peephole_shape"] = edit(ts, peephole_shape)

    def state_shape(gr):  # zero initial_h of [2, batch, H + 1]
        gr.initializer.append(numpy_helper.from_array(np.zeros((2, BATCH, HIDDEN + 1), np.float32), "h0_wide"))
        lstm_nodes(gr)[2].input[5] = "h0_wide"
    cases["state_shape"] = edit(ts, state_shape)
    cases["direction_case"] = edit(ts, lambda gr: set_attr(lstm_nodes(gr)[0], "direction", "Bidirectional"))
    cases["direction_type"] = edit(ts, lambda gr: set_attr(lstm_nodes(gr)[0], "direction", 2))
    cases["hidden_size_type"] = edit(ts, lambda gr: set_attr(lstm_nodes(gr)[0], "hidden_size", float(HIDDEN)))

    def unused_stack(gr):  # the model's output is its input: the LSTM nodes compute nothing it returns
        gr.node.append(helper.make_node("Identity", ["input"], ["passed"], name="pass_through"))
        del gr.output[:]
        gr.output.append(helper.make_tensor_value_info("passed", TensorProto.FLOAT, ["batch", "steps", INPUT]))
    cases["unused_stack"] = edit(ts, unused_stack)

    def unused_last_layer(gr):  # the output is taken after layer 2; layer 3 computes nothing it returns
        second = lstm_nodes(gr)[1]
        gr.node.append(helper.make_node("Identity", [second.output[1]], ["h_2"], name="take_h"))
        del gr.output[:]
        gr.output.append(helper.make_tensor_value_info("h_2", TensorProto.FLOAT, [2, "batch", HIDDEN]))
    cases["unused_last_layer"] = edit(ts, unused_last_layer)

    def between(gr, op):
        second = lstm_nodes(gr)[1]
        reshape = producer(gr, second.input[0])
        return reshape if op == "Reshape" else producer(gr, reshape.input[0])
    cases["repeated_perm"] = edit(ts, lambda gr: between(gr, "Transpose").attribute.append(
        helper.make_attribute("perm", [0, 1, 2, 3])))
    cases["unknown_attribute"] = edit(ts, lambda gr: between(gr, "Transpose").attribute.append(
        helper.make_attribute("perms", [0, 2, 1, 3])))
    cases["reshape_three_inputs"] = edit(ts, lambda gr: between(gr, "Reshape").input.append(
        between(gr, "Reshape").input[1]))
    cases["unnamed_attribute"] = edit(ts, lambda gr: lstm_nodes(gr)[0].attribute.append(
        helper.make_attribute("", 1)))

    def two_values(gr):  # hidden_size as an INT that also holds a FLOAT
        a = next(a for a in lstm_nodes(gr)[0].attribute if a.name == "hidden_size")
        a.f = 2.5
    cases["attribute_two_values"] = edit(ts, two_values)
    def concat_without_axis(gr):  # the zero states' shape, concatenated without the required axis
        concat = next(n for n in gr.node if n.op_type == "Concat")
        for a in list(concat.attribute):
            concat.attribute.remove(a)
    cases["concat_without_axis"] = edit(ts, concat_without_axis)
    layout_old = edit(ts, lambda gr: set_attr(lstm_nodes(gr)[0], "layout", 0))
    layout_old.opset_import[0].version = 13
    cases["layout_before_opset_14"] = layout_old
    return cases


def save(model, folder, external=False):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    if external:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data", size_threshold=0)
    else:
        onnx.save_model(model, path)
    return path


def seeds(out):
    global LAYERS, INPUT, HIDDEN
    LAYERS, INPUT, HIDDEN = 2, 3, 2
    import tempfile
    os.makedirs(out, exist_ok=True)
    cases = dict(valid_cases())
    cases.update(broken_cases())
    for name, model in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = save(model, tmp, external=name == "dynamo")
            with open(path, "rb") as f:
                data = f.read()
            extra = os.path.join(tmp, "model.onnx.data")
            if os.path.exists(extra):
                with open(extra, "rb") as f:
                    data += b"\n--spk-file--\n" + f.read()
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--seeds":
        return seeds(sys.argv[2])
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)  # the Usage: paragraph
        return 2
    out = sys.argv[1]
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (BATCH, STEPS, INPUT))
    for name, model in valid_cases().items():
        onnx.checker.check_model(model)
        folder = os.path.join(out, name)
        path = save(model, folder, external=name == "dynamo")
        np.save(os.path.join(folder, "x.npy"), x)
        np.save(os.path.join(folder, "y.npy"), onnx_numpy.run(path, x))
    for name, model in broken_cases().items():
        save(model, os.path.join(out, name))
    # external-data failures: the dynamo model with its data file missing,
    # cut short, or named outside the model's folder
    save(dynamo_style(params()), os.path.join(out, "external_missing"), external=True)
    os.remove(os.path.join(out, "external_missing", "model.onnx.data"))
    save(dynamo_style(params()), os.path.join(out, "external_short"), external=True)
    data = os.path.join(out, "external_short", "model.onnx.data")
    os.truncate(data, os.path.getsize(data) // 2)
    outside = dynamo_style(params())
    from onnx.external_data_helper import convert_model_to_external_data
    convert_model_to_external_data(outside, all_tensors_to_one_file=True, location="../elsewhere.data",
                                   size_threshold=0)
    for t in outside.graph.initializer:
        t.ClearField("raw_data")
    os.makedirs(os.path.join(out, "external_outside"), exist_ok=True)
    with open(os.path.join(out, "external_outside", "model.onnx"), "wb") as f:
        f.write(outside.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
