#!/usr/bin/env python3
"""Runs an ONNX model in NumPy float64: an oracle for spk's ONNX reader and
writer that shares no code with them.

Usage:
    python3 tools/onnx_numpy.py MODEL.onnx X.npy OUT.npy

X feeds the model's first input; OUT receives its first output, in float64.
The graph is evaluated node by node with ONNX's semantics for the operators
spk's models and the exporters' plumbing use (the list in OPS); LSTM steps
are computed by ONNX's own NumPy reference (onnx.backend.test.case.node.lstm,
one direction at a time), with the default activations only. Every tensor is
promoted to float64 (integers stay int64), so the result is the model's
mathematics without float32 rounding.

Needs numpy and onnx (Debian: python3-numpy, python3-onnx).
"""
import sys

# --help before the imports below, so that it works where they are missing
if __name__ == "__main__" and sys.argv[1:2] in (["--help"], ["-h"]):
    print(__doc__.strip())
    sys.exit(0)


import numpy as np
import onnx
from onnx import numpy_helper
try:  # onnx >= 1.13 names it LSTMHelper; both take and return these shapes
    from onnx.backend.test.case.node.lstm import LSTMHelper as LSTM_Helper
except ImportError:
    from onnx.backend.test.case.node.lstm import LSTM_Helper


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def as_float(a):
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def lstm(inputs, at):
    x, w, r = inputs[0], inputs[1], inputs[2]
    get = lambda i: inputs[i] if len(inputs) > i and inputs[i] is not None else None
    b, seq, h0, c0, p = get(3), get(4), get(5), get(6), get(7)
    activations = [a.decode().lower() if isinstance(a, bytes) else a.lower() for a in at.get("activations", [])]
    if activations and activations != ["sigmoid", "tanh", "tanh"] * (len(activations) // 3):
        raise NotImplementedError(f"LSTM activations {activations} are not modelled")
    if "clip" in at or at.get("input_forget", 0) != 0:
        raise NotImplementedError("LSTM clip and input_forget are not modelled")
    if seq is not None:
        raise NotImplementedError("LSTM sequence_lens is not modelled")
    layout = at.get("layout", 0)
    if layout == 1:
        x = np.swapaxes(x, 0, 1)
        h0 = None if h0 is None else np.swapaxes(h0, 0, 1)
        c0 = None if c0 is None else np.swapaxes(c0, 0, 1)
    direction = at.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = 2 if direction == "bidirectional" else 1
    batch, hidden = x.shape[1], r.shape[-1]
    ys, hs = [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        xd = x[::-1] if reverse else x
        params = {"X": xd, "W": w[d:d + 1], "R": r[d:d + 1]}
        params["B"] = b[d:d + 1] if b is not None else np.zeros((1, 8 * hidden))
        params["initial_h"] = h0[d:d + 1] if h0 is not None else np.zeros((1, batch, hidden))
        params["initial_c"] = c0[d:d + 1] if c0 is not None else np.zeros((1, batch, hidden))
        params["P"] = p[d:d + 1] if p is not None else np.zeros((1, 3 * hidden))
        # step() returns (Y, Y_h), or (Y, Y_h, Y_c) in later onnx releases: Y [T, 1, B, H] first in each
        y = LSTM_Helper(**params).step()[0]
        y = y[::-1] if reverse else y
        ys.append(y)
        last = y[0] if reverse else y[-1]  # [1, B, H]
        hs.append(last)
    y = np.concatenate(ys, axis=1)
    yh = np.concatenate(hs, axis=0)
    if layout == 1:
        y = np.transpose(y, (2, 0, 1, 3))
        yh = np.swapaxes(yh, 0, 1)
    return [y, yh, None]


def slice_op(inputs, at):
    data = inputs[0]
    if len(inputs) > 1:
        starts, ends = inputs[1], inputs[2]
        axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else range(len(starts))
        steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    else:
        starts, ends = at["starts"], at["ends"]
        axes = at.get("axes", range(len(starts)))
        steps = [1] * len(starts)
    index = [slice(None)] * data.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        # ONNX clamps start and end as Python's slices do, huge values included
        index[int(a)] = slice(int(s), int(e), int(st))
    return [data[tuple(index)]]


def split_op(inputs, at, outputs):
    axis = at.get("axis", 0)
    sizes = inputs[1] if len(inputs) > 1 and inputs[1] is not None else at.get("split")
    if sizes is None:
        n = len(outputs)
        chunk = -(-inputs[0].shape[axis] // n)
        sizes = [min(chunk, inputs[0].shape[axis] - i * chunk) for i in range(n)]
    points = np.cumsum(sizes)[:-1]
    return np.split(inputs[0], points, axis=axis)


def reshape_op(data, shape, allowzero=0):
    shape = [int(s) for s in shape]
    if not allowzero:
        shape = [data.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return data.reshape(shape)


def axes_input(inputs, at):
    return list(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else at.get("axes")


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


OPS = {
    "Identity": lambda i, a, o: [i[0]],
    "Dropout": lambda i, a, o: [i[0], np.ones(i[0].shape, dtype=bool)],
    "Cast": lambda i, a, o: [as_float(i[0]) if a["to"] in (1, 10, 11) else i[0].astype(np.int64)],
    "Transpose": lambda i, a, o: [np.transpose(i[0], a.get("perm"))],
    "Reshape": lambda i, a, o: [reshape_op(i[0], i[1], a.get("allowzero", 0))],
    "Unsqueeze": lambda i, a, o: [np.expand_dims(i[0], tuple(axes_input(i, a)))],
    "Squeeze": lambda i, a, o: [np.squeeze(i[0], axis=None if axes_input(i, a) is None else tuple(axes_input(i, a)))],
    "Flatten": lambda i, a, o: [i[0].reshape(int(np.prod(i[0].shape[:a.get("axis", 1)])), -1)],
    "Slice": lambda i, a, o: slice_op(i, a),
    "Split": lambda i, a, o: split_op(i, a, o),
    "Concat": lambda i, a, o: [np.concatenate([x for x in i if x is not None], axis=a["axis"])],
    "Gather": lambda i, a, o: [np.take(i[0], i[1], axis=a.get("axis", 0))],
    "Shape": lambda i, a, o: [np.array(i[0].shape[a.get("start", 0):a.get("end", None)], dtype=np.int64)],
    "ConstantOfShape": lambda i, a, o: [np.full([int(s) for s in i[0]],
                                                 numpy_helper.to_array(a["value"]).item() if "value" in a else 0.0)],
    "Expand": lambda i, a, o: [i[0] * np.ones([int(s) for s in i[1]], dtype=i[0].dtype)],
    "Add": lambda i, a, o: [i[0] + i[1]],
    "Sub": lambda i, a, o: [i[0] - i[1]],
    "Mul": lambda i, a, o: [i[0] * i[1]],
    "Div": lambda i, a, o: [i[0] // i[1] if i[0].dtype.kind == "i" else i[0] / i[1]],
    "MatMul": lambda i, a, o: [i[0] @ i[1]],
    "Sigmoid": lambda i, a, o: [sigmoid(i[0])],
    "Relu": lambda i, a, o: [np.maximum(i[0], 0)],
    "LSTM": lambda i, a, o: lstm(i, a),
}


def constant(at):
    if "value" in at:
        return as_float(numpy_helper.to_array(at["value"]))
    for key in ("value_float", "value_floats"):
        if key in at:
            return np.array(at[key], dtype=np.float64)
    for key in ("value_int", "value_ints"):
        if key in at:
            return np.array(at[key], dtype=np.int64)
    raise NotImplementedError("Constant without a value")


def run(model_path, x):
    model = onnx.load(model_path)  # external data is read beside the model
    g = model.graph
    env = {t.name: as_float(numpy_helper.to_array(t)) for t in g.initializer}
    inputs = [i for i in g.input if i.name not in env]
    env[inputs[0].name] = as_float(x)
    for node in g.node:
        at = attrs(node)
        if node.op_type == "Constant":
            outs = [constant(at)]
        else:
            args = [env[n] if n else None for n in node.input]
            outs = OPS[node.op_type](args, at, node.output)
        for name, value in zip(node.output, outs):
            if name:
                env[name] = value
    return env[g.output[0].name]


def main():
    if len(sys.argv) != 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)  # the Usage: paragraph
        return 2
    y = run(sys.argv[1], np.load(sys.argv[2]))
    np.save(sys.argv[3], np.ascontiguousarray(y, dtype=np.float64))
    return 0


if __name__ == "__main__":
    sys.exit(main())
