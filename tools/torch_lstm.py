#!/usr/bin/env python3
"""The independent oracle: PyTorch's nn.LSTM on weights in spk's ONNX layout.

Usage:
    python3 tools/torch_lstm.py DIR

reads DIR/x.npy (f32 [B, T, in]) and DIR/l<k>_W.npy, l<k>_R.npy, l<k>_B.npy
(ONNX layout: W [2, 4H, in], R [2, 4H, H], B [2, 8H], gate blocks i, o, f, c)
and writes DIR/y_f64.npy (nn.LSTM in float64 on the CPU) and, where a CUDA
device is present, DIR/y_cudnn_f32.npy (float32 on the GPU, cuDNN, TF32 off).
Runs where PyTorch is installed (the GPU machine); spk itself never imports it.
"""
import sys

# --help before the imports below, so that it works where they are missing
if __name__ == "__main__" and sys.argv[1:2] in (["--help"], ["-h"]):
    print(__doc__.strip())
    sys.exit(0)

import os

import numpy as np
import torch

# PyTorch's gate blocks are i, f, g, o; ONNX's are i, o, f, c (c = g).
# torch block k takes ONNX block ONNX_OF_TORCH[k].
ONNX_OF_TORCH = [0, 2, 3, 1]
TORCH_OF_ONNX = [ONNX_OF_TORCH.index(g) for g in range(4)]


def reorder(blocks, order, hidden):
    """Reorders the 4 gate blocks (first axis, `hidden` rows each)."""
    return np.concatenate([blocks[g * hidden:(g + 1) * hidden] for g in order], axis=0)


def load_layers(folder):
    layers = []
    k = 0
    while os.path.exists(os.path.join(folder, f"l{k}_W.npy")):
        layers.append(tuple(np.load(os.path.join(folder, f"l{k}_{n}.npy")) for n in "WRB"))
        k += 1
    if not layers:
        raise SystemExit(f"{folder}: no l0_W.npy")
    return layers


def lstm_from_onnx(layers, dtype):
    """An nn.LSTM (batch_first, bidirectional) holding the given ONNX weights."""
    hidden = layers[0][1].shape[2]
    input_size = layers[0][0].shape[2]
    lstm = torch.nn.LSTM(input_size, hidden, num_layers=len(layers), bidirectional=True,
                         batch_first=True).to(dtype)
    with torch.no_grad():
        for k, (w, r, b) in enumerate(layers):
            for d, suffix in enumerate(["", "_reverse"]):
                wb, rb = b[d, :4 * hidden], b[d, 4 * hidden:]
                params = {
                    f"weight_ih_l{k}{suffix}": reorder(w[d], ONNX_OF_TORCH, hidden),
                    f"weight_hh_l{k}{suffix}": reorder(r[d], ONNX_OF_TORCH, hidden),
                    f"bias_ih_l{k}{suffix}": reorder(wb, ONNX_OF_TORCH, hidden),
                    f"bias_hh_l{k}{suffix}": reorder(rb, ONNX_OF_TORCH, hidden),
                }
                for name, value in params.items():
                    getattr(lstm, name).copy_(torch.from_numpy(np.ascontiguousarray(value)).to(dtype))
    return lstm


def onnx_from_lstm(lstm):
    """The ONNX-layout weights (f32) of an nn.LSTM (bidirectional)."""
    hidden = lstm.hidden_size
    layers = []
    for k in range(lstm.num_layers):
        ws, rs, bs = [], [], []
        for suffix in ["", "_reverse"]:
            get = lambda n: getattr(lstm, f"{n}_l{k}{suffix}").detach().cpu().numpy().astype(np.float32)
            ws.append(reorder(get("weight_ih"), TORCH_OF_ONNX, hidden))
            rs.append(reorder(get("weight_hh"), TORCH_OF_ONNX, hidden))
            bs.append(np.concatenate([reorder(get("bias_ih"), TORCH_OF_ONNX, hidden),
                                      reorder(get("bias_hh"), TORCH_OF_ONNX, hidden)]))
        layers.append((np.stack(ws), np.stack(rs), np.stack(bs)))
    return layers


def run(layers, x):
    """(y_f64 from the CPU, y_f32 from cuDNN or None)."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        lstm64 = lstm_from_onnx(layers, torch.float64)
        y64 = lstm64(torch.from_numpy(x.astype(np.float64)))[0].numpy()
        y32 = None
        if torch.cuda.is_available():
            lstm32 = lstm_from_onnx(layers, torch.float32).cuda()
            y32 = lstm32(torch.from_numpy(x.astype(np.float32)).cuda())[0].cpu().numpy()
    return y64, y32


def main(folder):
    layers = load_layers(folder)
    x = np.load(os.path.join(folder, "x.npy"))
    y64, y32 = run(layers, x)
    np.save(os.path.join(folder, "y_f64.npy"), y64)
    if y32 is not None:
        np.save(os.path.join(folder, "y_cudnn_f32.npy"), y32)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
