#!/usr/bin/env python3
"""The shape of a kernel's machine code without a disassembler (the build
machine has none): counts of each opcode in a cubin's .text sections, and
the order of the instructions that matter for a pipeline (HGMMA, the
warpgroup fences and waits, mbarrier waits and arrives, TMA loads and
stores with their bulk groups' commits and waits, shared loads and stores,
FADD, global stores, named barriers, branches).

Usage:
    python3 tools/cubin_opcodes.py KERNEL.cubin [--sequence]
    python3 tools/cubin_opcodes.py --calibrate      (needs nvcc: re-derives the table)

A sm_90 instruction is 16 bytes; its low 12 bits name the opcode (with some
operand forms, e.g. FADD with an immediate, under another value). The names
below were found by compiling kernels with a known number of one instruction
(--calibrate does it again: the opcode whose count grows with that number);
other opcodes print as their value.
"""
import sys

# --help before the imports below, so that it works where they are missing
if __name__ == "__main__" and sys.argv[1:2] in (["--help"], ["-h"]):
    print(__doc__.strip())
    sys.exit(0)

import collections
import os
import struct
import subprocess
import tempfile

NAMES = {0xdf0: "HGMMA", 0x9c5: "WARPGROUP", 0x5a7: "SYNCS.TRYWAIT", 0x9a7: "SYNCS.ARRIVE", 0x5b4: "UTMALDG",
         0x986: "STG", 0x984: "LDS", 0x221: "FADD", 0x947: "BRA", 0x94d: "EXIT", 0xb1d: "BAR", 0x918: "NOP",
         0x3b5: "UTMASTG", 0x988: "STS", 0x388: "STS", 0x9b7: "UTMACMDFLUSH", 0x91a: "DEPBAR"}
SEQUENCE = ("HGMMA", "WARPGROUP", "SYNCS.TRYWAIT", "SYNCS.ARRIVE", "UTMALDG", "LDS", "FADD", "STG", "BAR", "STS",
            "UTMASTG", "UTMACMDFLUSH", "DEPBAR", "EXIT")


def text_sections(path):
    b = open(path, "rb").read()
    if b[:4] != b"\x7fELF":
        sys.exit("cubin_opcodes: %s is no ELF file" % path)
    shoff = struct.unpack_from("<Q", b, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    secs = [struct.unpack_from("<IIQQQQ", b, shoff + i * shentsize) for i in range(shnum)]
    strtab = secs[shstrndx][4]

    def name(n):
        end = b.index(b"\0", strtab + n)
        return b[strtab + n:end].decode()

    return {name(s[0]): b[s[4]:s[4] + s[5]] for s in secs if name(s[0]).startswith(".text")}


def opcodes(code):
    return [int.from_bytes(code[i:i + 16], "little") & 0xFFF for i in range(0, len(code), 16)]


def report(path, sequence):
    for section, code in text_sections(path).items():
        ops = opcodes(code)
        print("%s: %d instructions" % (section, len(ops)))
        for op, n in sorted(collections.Counter(ops).items(), key=lambda x: -x[1]):
            print("  0x%03x %-14s %d" % (op, NAMES.get(op, "?"), n))
        if sequence:
            runs = []
            for i, op in enumerate(ops):
                n = NAMES.get(op)
                if n in SEQUENCE:
                    if runs and runs[-1][0] == n:
                        runs[-1][1] += 1
                    else:
                        runs.append([n, 1, i])
            print("  " + " ".join("%s%s@%d" % (n, "x%d" % c if c > 1 else "", i) for n, c, i in runs))


CALIBRATION = r"""
struct __align__(64) M { unsigned long long o[16]; };
extern "C" __global__ void k(const __grid_constant__ M map, float *out, unsigned bar, unsigned dst, int c0,
                             unsigned long long desc, unsigned a0) {
  float d[4] = {0, 0, 0, 0};
#pragma unroll
  for (int j = 0; j < N; j++) {
#if WHAT == 1
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#elif WHAT == 2
    { unsigned done; asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar + 8 * j), "r"(j & 1) : "memory"); out[j] = done; }
#elif WHAT == 3
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" :: "r"(dst + 1024 * j), "l"((unsigned long long)&map), "r"(bar), "r"(c0 + j), "r"(j), "r"(0) : "memory");
#elif WHAT == 4
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar + 8 * j) : "memory");
#elif WHAT == 5
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\nwgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a0), "r"(a0 + 1), "r"(a0 + 2), "r"(a0 + 3), "l"(desc + 2 * j), "r"(j));
#elif WHAT == 6
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" :: "l"((unsigned long long)&map), "r"(dst + 8192 * j), "r"(c0 + 32 * j), "r"(j), "r"(0) : "memory");
#elif WHAT == 7
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(dst + 136 * j), "f"(d[0] + j), "f"(d[1]) : "memory");
#elif WHAT == 11
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(dst + 8 * threadIdx.x + 136 * j), "f"(d[0] + j), "f"(d[1]) : "memory");
#elif WHAT == 8
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#elif WHAT == 9
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#elif WHAT == 10
    asm volatile("bar.sync 1, 128;" ::: "memory");
#endif
  }
  for (int i = 0; i < 4; i++) out[64 + i] = d[i];
}
"""


def calibrate():
    what = {1: "WARPGROUP (wgmma.fence)", 2: "SYNCS.TRYWAIT", 3: "UTMALDG", 4: "SYNCS.ARRIVE", 5: "HGMMA",
            6: "UTMASTG", 7: "STS", 8: "UTMACMDFLUSH (bulk commit)", 9: "DEPBAR (bulk wait)", 10: "BAR (bar.sync)",
            11: "STS (address in a thread's register)"}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "cal.cu")
        open(src, "w").write(CALIBRATION)
        for w, label in what.items():
            counts = {}
            for n in (2, 5):
                out = os.path.join(tmp, "k%d_%d.cubin" % (w, n))
                subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-DWHAT=%d" % w, "-DN=%d" % n, "-o", out, src],
                               check=True, capture_output=True)
                counts[n] = collections.Counter(op for c in text_sections(out).values() for op in opcodes(c))
            grew = [op for op in counts[5] if counts[5][op] - counts[2].get(op, 0) == 3]
            print("%-24s %s" % (label, ", ".join("0x%03x" % op for op in grew) or "none found"))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--calibrate"]:
        calibrate()
    elif args and not args[0].startswith("-") and set(args[1:]) <= {"--sequence"}:
        report(args[0], "--sequence" in args[1:])
    else:
        sys.exit(__doc__)
