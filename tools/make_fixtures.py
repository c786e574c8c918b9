#!/usr/bin/env python3
"""Writes the committed LSTM fixtures under tests/fixtures/ (run on a machine
with PyTorch and a CUDA GPU):

Usage:
    python3 tools/make_fixtures.py [OUT_DIR]     (default tests/fixtures)

Each case folder holds x.npy (f32 [B, T, in]), the weights in ONNX layout
(l<k>_W.npy, l<k>_R.npy, l<k>_B.npy, f32, gates i, o, f, c), y_f64.npy
(torch.nn.LSTM in float64 on the CPU) and y_cudnn_f32.npy (float32 on the GPU
through cuDNN, TF32 off). Weights are PyTorch's default initialisation
(uniform in +-1/sqrt(H)) from a fixed seed, times the case's scale.
"""
import sys

# --help before the imports below, so that it works where they are missing
if __name__ == "__main__" and sys.argv[1:2] in (["--help"], ["-h"]):
    print(__doc__.strip())
    sys.exit(0)

import os

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_lstm  # noqa: E402

# name: (batch, steps, input, hidden, layers, scale, seed)
CASES = {
    "b3_t7_in10_h32_l2": (3, 7, 10, 32, 2, 1.0, 1),
    "b1_t589_in60_h128_l2": (1, 589, 60, 128, 2, 1.0, 2),
    "b2_t50_in60_h128_l1_x4": (2, 50, 60, 128, 1, 4.0, 3),
    "b5_t20_in60_h64_l3": (5, 20, 60, 64, 3, 1.0, 4),
    "b4_t12_in60_h16_l4": (4, 12, 60, 16, 4, 1.0, 5),
}


def make(out, name, batch, steps, inputs, hidden, layers, scale, seed):
    torch.manual_seed(seed)
    lstm = torch.nn.LSTM(inputs, hidden, num_layers=layers, bidirectional=True, batch_first=True)
    weights = [tuple(a * np.float32(scale) for a in layer) for layer in torch_lstm.onnx_from_lstm(lstm)]
    x = torch.randn(batch, steps, inputs, dtype=torch.float32).numpy()
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "x.npy"), x)
    for k, (w, r, b) in enumerate(weights):
        for n, a in zip("WRB", (w, r, b)):
            np.save(os.path.join(folder, f"l{k}_{n}.npy"), np.ascontiguousarray(a, dtype=np.float32))
    y64, y32 = torch_lstm.run(weights, x)
    np.save(os.path.join(folder, "y_f64.npy"), y64)
    if y32 is None:
        raise SystemExit("no CUDA device: y_cudnn_f32.npy needs one")
    np.save(os.path.join(folder, "y_cudnn_f32.npy"), y32)
    rel = np.linalg.norm(y32 - y64) / np.linalg.norm(y64)
    print(f"{name}: y {y64.shape}, cuDNN f32 rel_l2 {rel:.3e} max_abs {np.abs(y32 - y64).max():.3e}")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}")
    for name, case in CASES.items():
        make(out, name, *case)


if __name__ == "__main__":
    main()
