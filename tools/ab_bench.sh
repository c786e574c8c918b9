#!/usr/bin/env bash
# Two builds of spk timed in turn in one call (old, new, old, new), so a
# change to the kernels or their plans is judged against the code before it
# on the same machine in the same state. A refactor that keeps the kernels'
# bits must keep their speed: compare the medians run for run.
#
# Usage: tools/ab_bench.sh OLD OUTDIR [spk bench options...]
#   OLD     a folder with an old build: OLD/spk, OLD/lua, OLD/kernels
#           (e.g. a worktree of the old commit after make, its build/spk copied in)
#   OUTDIR  where each run's table (.txt) and rows (.json) go
# The new build is this tree's $BUILD/spk (default build) with its lua/ and
# kernels/. Default bench options: --backends cluster,persistent --math fp32
# --batches 1,8,32,64,128,256 --rounds 5. Prints, last, one line a run:
# "run backend: batch ms, ..." from the runs' JSON (python3).
set -u
cd "$(dirname "$0")/.."
old=${1:?usage: tools/ab_bench.sh OLD OUTDIR [bench options...]}
out=${2:?usage: tools/ab_bench.sh OLD OUTDIR [bench options...]}
shift 2
[ -x "$old/spk" ] && [ -d "$old/lua" ] && [ -d "$old/kernels" ] ||
  { echo "ab_bench: $old needs spk, lua/ and kernels/" >&2; exit 2; }
[ $# -gt 0 ] || set -- --backends cluster,persistent --math fp32 --batches 1,8,32,64,128,256 --rounds 5
mkdir -p "$out"
run() { # name spk lua kernels
  SPK_LUA_DIR="$3" SPK_KERNEL_DIR="$4" "$2" bench "${@:5}" --json "$out/$1.json" >"$out/$1.txt" 2>"$out/$1.err"
  echo "ab_bench: $1 exit $?" >&2
}
new_spk="${BUILD:-build}/spk"
run 1_old "$old/spk" "$old/lua" "$old/kernels" "$@"
run 2_new "$new_spk" "$PWD/lua" "$PWD/kernels" "$@"
run 3_old "$old/spk" "$old/lua" "$old/kernels" "$@"
run 4_new "$new_spk" "$PWD/lua" "$PWD/kernels" "$@"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
for name in ("1_old", "2_new", "3_old", "4_new"):
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        print(name, "no json")
        continue
    rows = json.load(open(path))["rows"]
    by = {}
    for r in rows:
        if r.get("median_ms") is not None and r.get("backend") != "cudnn":
            by.setdefault(r["backend"], []).append("%d %.4g" % (r["batch"], r["median_ms"]))
    for backend, cells in by.items():
        print("%s %s: %s" % (name, backend, ", ".join(cells)))
PY
