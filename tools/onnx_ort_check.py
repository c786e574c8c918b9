#!/usr/bin/env python3
"""Runs an spk-saved ONNX model in ONNX Runtime and compares its output with
the float64 reference spk wrote beside it.

Usage:
    python3 tools/onnx_ort_check.py MODEL.onnx X.npy Y64.npy [--max-rel-l2 B]
                                    [--time N [--warmup N] [--threads T]]

X feeds the model's input (cast to the model's element type); the output is
compared with Y64 (spk.lstm.reference in f64 on the same layers and x): the
relative L2 error must be at most B (default 1e-6, where a float32 LSTM
stack's error lies). ONNX Runtime's CPU provider decides the verdict; the
CUDA provider, where present, is reported beside it. The last line says
"ort check: ok" or "ort check: FAIL"; the exit status is 0 or 1.

With --time N the CPU provider is also timed: N runs of the model after
--warmup runs (default 2), on --threads intra-op threads (default: ONNX
Runtime's own choice), wall clock per run; it prints
"ort time: median_ms M min_ms A max_ms B rounds N threads T" (T 0: ONNX
Runtime's choice), which spk bench's CPU section reads.

Make the three files with spk (tools/onnx_save_check.lua); this script needs
numpy and onnxruntime only, so it runs where spk's Lua does not.
"""
import sys

# --help before the imports below, so that it works where they are missing
if __name__ == "__main__" and sys.argv[1:2] in (["--help"], ["-h"]):
    print(__doc__.strip())
    sys.exit(0)

import argparse
import time

import numpy as np
import onnxruntime as ort


def session_for(model, provider, threads=0):
    options = ort.SessionOptions()
    if threads > 0:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(model, sess_options=options, providers=[provider])


def feed(session, x):
    inp = session.get_inputs()[0]
    dtype = np.float64 if inp.type == "tensor(double)" else np.float32
    return {inp.name: x.astype(dtype)}


def run(model, x, provider, threads=0):
    session = session_for(model, provider, threads)
    return session.run(None, feed(session, x))[0].astype(np.float64)


def timed(model, x, rounds, warmup, threads):
    """Median, min and max ms of `rounds` CPU runs after `warmup` ones."""
    session = session_for(model, "CPUExecutionProvider", threads)
    inputs = feed(session, x)
    for _ in range(warmup):
        session.run(None, inputs)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        session.run(None, inputs)
        samples.append((time.perf_counter() - start) * 1e3)
    samples.sort()
    return float(np.median(samples)), samples[0], samples[-1]


def errors(y, want):
    rel = float(np.linalg.norm(y - want) / np.linalg.norm(want))
    return rel, float(np.max(np.abs(y - want)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("x")
    parser.add_argument("y64")
    parser.add_argument("--max-rel-l2", type=float, default=1e-6)
    parser.add_argument("--time", type=int, default=0, metavar="N", help="time N CPU runs")
    parser.add_argument("--warmup", type=int, default=2, metavar="N", help="untimed runs first (with --time)")
    parser.add_argument("--threads", type=int, default=0, metavar="T",
                        help="ONNX Runtime's intra-op threads (0: its own choice)")
    args = parser.parse_args()
    if args.time < 0 or args.warmup < 0 or args.threads < 0:
        parser.error("--time, --warmup and --threads must be >= 0")
    x, want = np.load(args.x), np.load(args.y64)
    print(f"onnxruntime {ort.__version__}; model {args.model}; x {list(x.shape)}; bound {args.max_rel_l2:g}")
    ok = True
    providers = ("CPUExecutionProvider",) if args.time else ("CPUExecutionProvider", "CUDAExecutionProvider")
    for provider in providers:
        if provider not in ort.get_available_providers():
            continue
        y = run(args.model, x, provider, args.threads)
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
    if args.time:
        median, low, high = timed(args.model, x, args.time, args.warmup, args.threads)
        print(f"ort time: median_ms {median:.3f} min_ms {low:.3f} max_ms {high:.3f} rounds {args.time} "
              f"threads {args.threads}")
    print("ort check: ok" if ok else "ort check: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
