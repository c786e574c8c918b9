#!/usr/bin/env python3
"""Runs an spk-saved ONNX model in ONNX Runtime and compares its output with
the float64 reference spk wrote beside it.

Usage:
    python3 tools/onnx_ort_check.py MODEL.onnx X.npy Y64.npy [--max-rel-l2 B]

X feeds the model's input (cast to the model's element type); the output is
compared with Y64 (spk.lstm.reference in f64 on the same layers and x): the
relative L2 error must be at most B (default 1e-6, where a float32 LSTM
stack's error lies). ONNX Runtime's CPU provider decides the verdict; the
CUDA provider, where present, is reported beside it. The last line says
"ort check: ok" or "ort check: FAIL"; the exit status is 0 or 1.

Make the three files with spk (tools/onnx_save_check.lua); this script needs
numpy and onnxruntime only, so it runs where spk's Lua does not.
"""
import argparse
import sys

import numpy as np
import onnxruntime as ort


def run(model, x, provider):
    session = ort.InferenceSession(model, providers=[provider])
    inp = session.get_inputs()[0]
    dtype = np.float64 if inp.type == "tensor(double)" else np.float32
    return session.run(None, {inp.name: x.astype(dtype)})[0].astype(np.float64)


def errors(y, want):
    rel = float(np.linalg.norm(y - want) / np.linalg.norm(want))
    return rel, float(np.max(np.abs(y - want)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("x")
    parser.add_argument("y64")
    parser.add_argument("--max-rel-l2", type=float, default=1e-6)
    args = parser.parse_args()
    x, want = np.load(args.x), np.load(args.y64)
    print(f"onnxruntime {ort.__version__}; model {args.model}; x {list(x.shape)}; bound {args.max_rel_l2:g}")
    ok = True
    for provider in ("CPUExecutionProvider", "CUDAExecutionProvider"):
        if provider not in ort.get_available_providers():
            continue
        y = run(args.model, x, provider)
        if y.shape != want.shape:
            print(f"{provider}: output shape {list(y.shape)}, reference {list(want.shape)}")
            ok = ok and provider != "CPUExecutionProvider"
            continue
        rel, max_abs = errors(y, want)
        verdict = rel <= args.max_rel_l2
        role = "" if provider == "CPUExecutionProvider" else " (reported only)"
        print(f"{provider}: rel_l2 {rel:.3e}, max_abs {max_abs:.3e} against the f64 reference: "
              f"{'within' if verdict else 'BEYOND'} the bound{role}")
        if provider == "CPUExecutionProvider":
            ok = ok and verdict
    print("ort check: ok" if ok else "ort check: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
