#!/usr/bin/env bash
# spk bench of a reference tree's kernels and this tree's in turn, in one
# device call, and whether this tree's medians stay within 2 % of the
# reference's at every batch:
#
# usage:
#   tools/bench_ab.sh prepare COMMIT     # here: the reference, a commit you name, exported and built in build-ref/
#   tools/bench_ab.sh run [OUT_DIR]      # on the GPU, with build/, build-ref/ and .deps carried
#
# run: four runs of `spk bench --backends cluster,persistent --math $BENCH_AB_MATHS
# (default fp32) --batches $BENCH_AB_BATCHES (default 1,8,32,64,128,256) --rounds 5 --no-check
# --json`, reference, this tree,
# reference, this tree (each tree's own spk, Lua and kernels), into OUT_DIR
# (default results/bench_ab): 1_before.{txt,json}, 2_after, 3_before,
# 4_after; then a table per backend, math and batch of the better median of each
# tree and their ratio, "ok" within 2 %, "SLOWER" past it. Last line:
# "bench_ab: N rows within 2 %, N slower"; exit status 0 when none is.
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  prepare)
    ref=${2:-}
    [ -n "$ref" ] || { echo "bench_ab: prepare needs the reference commit: tools/bench_ab.sh prepare COMMIT (the tree before the change, e.g. main)" >&2; exit 2; }
    git rev-parse --verify --quiet "$ref^{commit}" >/dev/null || { echo "bench_ab: '$ref' is no commit" >&2; exit 2; }
    rm -rf build-ref && mkdir -p build-ref
    git archive "$ref" | tar -x -C build-ref
    make -C build-ref --no-print-directory -j2 build/spk >/dev/null || exit 1
    # what a run needs: its program, Lua and kernels (less to carry to the GPU)
    find build-ref -mindepth 1 -maxdepth 1 ! -name build ! -name lua ! -name kernels -exec rm -rf {} +
    find build-ref/build -mindepth 1 -maxdepth 1 ! -name spk -exec rm -rf {} +
    git rev-parse --short "$ref^{commit}" > build-ref/COMMIT
    echo "bench_ab: reference $ref built in build-ref/ (carry build, build-ref and .deps)"
    ;;
  run)
    out=${2:-results/bench_ab}
    mkdir -p "$out"
    [ -x build-ref/build/spk ] || { echo "bench_ab: build-ref/build/spk is missing: run 'tools/bench_ab.sh prepare COMMIT'" >&2; exit 2; }
    echo "bench_ab: reference $(cat build-ref/COMMIT 2>/dev/null || echo '(commit not recorded)') against this tree"
    root="$PWD/.deps/root"
    if [ -x "$root/usr/bin/lua5.4" ]; then
      export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    # speed alone (the outputs' bits are default_bits_spec's): no f64 reference
    args=(bench --backends cluster,persistent --math "${BENCH_AB_MATHS:-fp32}" --batches "${BENCH_AB_BATCHES:-1,8,32,64,128,256}" --rounds 5 --no-check)
    for round in 1 2; do
      SPK_LUA_DIR="$PWD/build-ref/lua" SPK_KERNEL_DIR="$PWD/build-ref/kernels" build-ref/build/spk "${args[@]}" --json "$out/$((2 * round - 1))_before.json" \
        >"$out/$((2 * round - 1))_before.txt" 2>&1
      SPK_KERNEL_DIR="$PWD/kernels" build/spk "${args[@]}" --json "$out/$((2 * round))_after.json" \
        >"$out/$((2 * round))_after.txt" 2>&1
    done
    build/spk run tools/bench_ab_compare.lua "$out"
    ;;
  *)
    echo "usage: tools/bench_ab.sh prepare COMMIT | run [OUT_DIR]" >&2
    exit 2
    ;;
esac
