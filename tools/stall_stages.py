#!/usr/bin/env python3
"""Where a recurrence kernel's warps wait, instruction by instruction: reads
the source page of an Nsight Compute report (warp-stall samples per SASS
instruction; tools/ncu_source.sh makes it on a machine with a GPU) and
prints the step loop (the instructions executed at least --min-share of the
most executed one's count), each with its samples and its two largest stall
reasons, then the loop's samples summed by kind of instruction and by the
stretch between landmarks: the mbarrier wait (SYNCS...TRYWAIT), the first
shared load after it (the dot products), the first butterfly shuffle (the
reduction), the first MUFU (the cell), the first remote store (STAS: the
publish) and the first cp.async (LDGSTS: the next gates). The compiler
interleaves stages, so a stretch is where its landmark's work starts, not all
of it; the landmarks' addresses are printed with it.

Usage:
    python3 tools/stall_stages.py SOURCE.csv [--min-share 0.5] [--step-ns NS] [--loop]

SOURCE.csv: `ncu -i REPORT --page source --csv --print-source sass` of a
report with the SourceCounters section (the first line names the kernel,
the second is the header). --step-ns: the step's measured time, to print
each stretch's share as ns of it. --loop: print the loop's instructions too.
The last line is "stall_stages: N instructions in the loop, S samples (P % of
the kernel's)".
"""
import sys

if __name__ == "__main__" and sys.argv[1:2] in (["--help"], ["-h"]):
    print(__doc__.strip())
    sys.exit(0)

import argparse
import csv

LANDMARKS = (("wait", "SYNCS.PHASECHK"), ("dot", "LDS"), ("reduce", "SHFL.BFLY"), ("cell", "MUFU"),
             ("publish", "STAS"), ("fetch", "LDGSTS"))
KINDS = (("mbarrier and cache", ("SYNCS", "CCTL")), ("shared loads", ("LDS",)), ("shuffles", ("SHFL",)),
         ("MUFU", ("MUFU",)), ("FP32 math", ("FFMA", "FADD", "FMUL", "FMNMX", "FSEL", "FSETP")),
         ("remote stores", ("STAS",)), ("global and cp.async", ("LDG", "STG", "LDGSTS", "LDGDEPBAR", "DEPBAR")),
         ("branches", ("BRA", "BSSY", "BSYNC")))


def opcode(sass):
    """The instruction's opcode: its first word after a predicate such as @!P0."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def number(text):
    try:
        return float(text.replace(",", "")) if text else 0.0
    except ValueError:
        return 0.0


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) < 3 or not rows[0] or rows[0][0] != "Kernel Name":
        raise SystemExit("stall_stages: %s is not an ncu source page (its first line names no kernel)" % path)
    header = rows[1]
    need = ("Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed")
    missing = [n for n in need if n not in header]
    if missing:
        raise SystemExit("stall_stages: %s has no column %s (collect with --section SourceCounters)" %
                         (path, ", ".join(missing)))
    col = {n: header.index(n) for n in need}
    stalls = [(i, h[len("stall_"):]) for i, h in enumerate(header) if h.startswith("stall_") and "Not Issued" not in h]
    out = []
    for r in rows[2:]:
        if len(r) < len(header):
            continue
        out.append({"address": r[col["Address"]], "sass": r[col["Source"]].strip(),
                    "samples": number(r[col["Warp Stall Sampling (All Samples)"]]),
                    "executed": number(r[col["Instructions Executed"]]),
                    "stalls": sorted(((number(r[i]), name) for i, name in stalls), reverse=True)[:2]})
    return rows[0][1], out


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python3 tools/stall_stages.py", add_help=False,
        usage="python3 tools/stall_stages.py SOURCE.csv [--min-share 0.5] [--step-ns NS] [--loop]")
    parser.add_argument("source")
    parser.add_argument("--min-share", type=float, default=0.5)
    parser.add_argument("--step-ns", type=float, default=0.0)
    parser.add_argument("--loop", action="store_true")
    opts = parser.parse_args(argv)
    kernel, rows = read(opts.source)
    if not rows:
        raise SystemExit("stall_stages: %s lists no instructions" % opts.source)
    share, step_ns = opts.min_share, opts.step_ns
    most = max(r["executed"] for r in rows)
    loop = [r for r in rows if most > 0 and r["executed"] >= share * most]
    total = sum(r["samples"] for r in rows)
    in_loop = sum(r["samples"] for r in loop)
    print("kernel %s: %d instructions, %d samples; the loop: %d instructions executed >= %.2f x %d" %
          (kernel, len(rows), total, len(loop), share, most))
    if opts.loop:
        for r in loop:
            top = " ".join("%s:%d" % (name, v) for v, name in r["stalls"] if v > 0)
            print("%s %9d %5d  %-58s %s" % (r["address"][-6:], r["executed"], r["samples"], r["sass"][:58], top))

    def line(name, samples, where=""):
        part = 100.0 * samples / in_loop if in_loop else 0.0
        ns = "  %6.1f ns" % (step_ns * samples / in_loop) if step_ns and in_loop else ""
        print("  %-22s %6d  %5.1f %%%s%s" % (name, samples, part, ns, where))

    print("by kind (samples, share of the loop's%s):" % (", ns of a %.1f-ns step" % step_ns if step_ns else ""))
    counted = 0
    for name, prefixes in KINDS:
        s = sum(r["samples"] for r in loop if opcode(r["sass"]).split(".")[0] in prefixes)
        counted += s
        line(name, s)
    line("other (integer, moves)", in_loop - counted)
    # the stretches: from each landmark's first instruction (in loop order, each after the one before) to the next
    marks, start = [], 0
    for name, prefix in LANDMARKS:
        for k in range(start, len(loop)):
            if opcode(loop[k]["sass"]).startswith(prefix):
                marks.append((name, k))
                start = k + 1
                break
    print("by stretch, landmark to landmark (the loop's head to the first landmark is 'head'):")
    bounds = [("head", 0)] + marks + [("end", len(loop))]
    for (name, k), (_, k_next) in zip(bounds, bounds[1:]):
        if name == "end":
            break
        s = sum(r["samples"] for r in loop[k:k_next])
        line(name, s, "  from %s" % loop[k]["address"][-6:] if k < len(loop) else "")
    missing = [n for n, _ in LANDMARKS if n not in dict(marks)]
    if missing:
        print("  (no landmark for: %s)" % ", ".join(missing))
    print("stall_stages: %d instructions in the loop, %d samples (%.1f %% of the kernel's)" %
          (len(loop), in_loop, 100.0 * in_loop / total if total else 0.0))


if __name__ == "__main__":
    main(sys.argv[1:])
