#!/usr/bin/env python3
"""ONNX fixtures from both PyTorch exporters, for spk.lstm.load("model.onnx").

Usage:
    python3 tools/make_onnx_fixtures.py OUTDIR [--hidden 32]

Builds a model shaped like pyannote's segmentation network (a convolutional
front end over a waveform, a 4-layer bidirectional LSTM, linear heads) with
seeded random weights, small enough to commit, and writes to OUTDIR:

  seg_torchscript.onnx          torch.onnx.export(dynamo=False): LSTM nodes fed by initializers
  seg_dynamo.onnx, .onnx.data   torch.onnx.export(dynamo=True): W/R/B built from the
                                parameters by Slice/Concat/Unsqueeze, tensors in external data
  waveform.npy                  the model input [B, 1, samples] f32
  lstm_x.npy                    the LSTM stack's input [B, T, 60] f32 (after the front end)
  lstm_y_f64.npy                the LSTM stack's output [B, T, 2H], nn.LSTM in float64 on the CPU
  logits_torch.npy              the whole model's output in float32 (PyTorch)
  report.txt                    versions, shapes, and ONNX Runtime's error on each exported file

Runs where PyTorch, onnx and onnxruntime are installed (the GPU machine).
"""
import sys

# --help before the imports below, so that it works where they are missing
if __name__ == "__main__" and sys.argv[1:2] in (["--help"], ["-h"]):
    print(__doc__.strip())
    sys.exit(0)

import argparse
import os

import numpy as np
import torch
from torch import nn


class Segmentation(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.conv1 = nn.Conv1d(1, 30, kernel_size=251, stride=10)
        self.norm1 = nn.InstanceNorm1d(30, affine=True)
        self.conv2 = nn.Conv1d(30, 60, kernel_size=5)
        self.norm2 = nn.InstanceNorm1d(60, affine=True)
        self.pool = nn.MaxPool1d(3, stride=3)
        self.lstm = nn.LSTM(60, hidden, num_layers=4, bidirectional=True, batch_first=True)
        self.linear1 = nn.Linear(2 * hidden, 32)
        self.linear2 = nn.Linear(32, 32)
        self.classifier = nn.Linear(32, 7)

    def front(self, waveform):
        x = self.norm1(torch.abs(self.pool(self.conv1(waveform))))
        x = nn.functional.leaky_relu(self.norm2(self.pool(self.conv2(x))))
        return x.transpose(1, 2)  # [B, T, 60]

    def forward(self, waveform):
        y, _ = self.lstm(self.front(waveform))
        y = nn.functional.leaky_relu(self.linear1(y))
        y = nn.functional.leaky_relu(self.linear2(y))
        return torch.log_softmax(self.classifier(y), dim=-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--samples", type=int, default=4000)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(1)
    model = Segmentation(a.hidden).eval()
    wave = torch.randn(a.batch, 1, a.samples)
    lines = [f"torch {torch.__version__}"]
    with torch.no_grad():
        lstm_x = model.front(wave)
        logits = model(wave)
        lstm64 = nn.LSTM(60, a.hidden, num_layers=4, bidirectional=True, batch_first=True).double()
        lstm64.load_state_dict({k: v.double() for k, v in model.lstm.state_dict().items()})
        y64, _ = lstm64(lstm_x.double())
    np.save(os.path.join(a.out, "waveform.npy"), wave.numpy())
    np.save(os.path.join(a.out, "lstm_x.npy"), lstm_x.numpy())
    np.save(os.path.join(a.out, "lstm_y_f64.npy"), y64.numpy())
    np.save(os.path.join(a.out, "logits_torch.npy"), logits.numpy())
    lines.append(f"waveform {tuple(wave.shape)} lstm_x {tuple(lstm_x.shape)} lstm_y {tuple(y64.shape)}")

    files = {}
    path = os.path.join(a.out, "seg_torchscript.onnx")
    try:
        torch.onnx.export(model, (wave,), path, dynamo=False, input_names=["waveform"],
                          output_names=["logits"], opset_version=17)
        files["torchscript"] = path
    except Exception as e:  # noqa: BLE001 - reported, the other exporter still runs
        lines.append(f"torchscript exporter failed: {e!r}")
    path = os.path.join(a.out, "seg_dynamo.onnx")
    try:
        prog = torch.onnx.export(model, (wave,), dynamo=True, input_names=["waveform"],
                                 output_names=["logits"])
        prog.save(path, external_data=True)
        files["dynamo"] = path
    except Exception as e:  # noqa: BLE001
        lines.append(f"dynamo exporter failed: {e!r}")

    try:
        import onnx
        import onnxruntime as ort
        lines.append(f"onnx {onnx.__version__} onnxruntime {ort.__version__}")
        for name, p in files.items():
            m = onnx.load(p)
            ops = {}
            for n in m.graph.node:
                ops[n.op_type] = ops.get(n.op_type, 0) + 1
            sess = ort.InferenceSession(p, providers=["CPUExecutionProvider"])
            got = sess.run(None, {sess.get_inputs()[0].name: wave.numpy()})[0]
            err = float(np.abs(got - logits.numpy()).max())
            lines.append(f"{name}: {os.path.basename(p)} {os.path.getsize(p)} bytes, ops {sorted(ops.items())}, "
                         f"ORT vs torch max abs {err:.3g}")
    except Exception as e:  # noqa: BLE001
        lines.append(f"onnx check failed: {e!r}")
    with open(os.path.join(a.out, "report.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("files:", sorted(os.listdir(a.out)))


if __name__ == "__main__":
    sys.exit(main())
