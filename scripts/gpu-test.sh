#!/usr/bin/env bash
# The whole test suite on a machine with a GPU (make gpu-test): C tests and
# busted specs, whose gpu_it specs run there instead of being skipped, then
# the benchmark. That machine has no Lua: Lua 5.4 and busted come from
# .deps/root (scripts/fetch-deps.sh, run on the build machine), and the build
# folder comes built (the machine has no Lua headers to build with).
#
# usage (in the repository root, with $BUILD and .deps carried):
#   scripts/gpu-test.sh [--build] [--no-bench] [--kernel-dir DIR] [busted args...]
# --kernel-dir: the kernel folder the suites compile from (default: kernels/
# of this tree), e.g. a variant's copy (tools/gemm_3xtf32_check.lua --write-variant).
# The last line is the suite's "N passed, N failed[, N skipped]"; the exit
# status is the suite's.
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD

build=0 bench=1 kernel_dir="$PWD/kernels"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=1; shift ;;
    --no-bench) bench=0; shift ;;
    --kernel-dir)
      [ $# -ge 2 ] && [ -d "$2" ] || { echo "gpu-test: --kernel-dir needs a folder, got '${2:-}'" >&2; echo "0 passed, 1 failed"; exit 1; }
      kernel_dir=$(cd "$2" && pwd); shift 2 ;;
    *) break ;;
  esac
done

root="$PWD/.deps/root"
if [ ! -x "$root/usr/bin/lua5.4" ]; then
  echo "gpu-test: $root/usr/bin/lua5.4 is missing: run scripts/fetch-deps.sh and carry .deps" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
multiarch=x86_64-linux-gnu
# Only .deps: the paths below replace Lua's defaults (no ";;"), so nothing
# is picked up from a system Lua installation.
export PATH="$root/usr/bin:$PATH"
export LD_LIBRARY_PATH="$root/usr/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LUA_PATH="$root/usr/share/lua/5.4/?.lua;$root/usr/share/lua/5.4/?/init.lua;./?.lua;./?/init.lua"
export LUA_CPATH="$root/usr/lib/$multiarch/lua/5.4/?.so;./?.so"
# The tree may sit elsewhere than where it was built: find kernels/ here
# (or the folder --kernel-dir names).
export SPK_KERNEL_DIR="$kernel_dir"
unset LUA_PATH_5_4 LUA_CPATH_5_4 LUA_INIT LUA_INIT_5_4
# NumPy cross-checks: the first Python here that has numpy.
if [ -z "${SPK_PYTHON:-}" ]; then
  for py in /usr/bin/python3 "$(command -v python3 || true)"; do
    if [ -n "$py" ] && "$py" -c 'import numpy' >/dev/null 2>&1; then
      export SPK_PYTHON="$py"
      break
    fi
  done
fi

if [ "$build" = 1 ] || [ ! -e "$BUILD/spk.so" ]; then
  echo "gpu-test: building $BUILD"
  make --no-print-directory BUILD="$BUILD" -j"$(nproc)" all || { echo "0 passed, 1 failed"; exit 1; }
fi

echo "== GPUs"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L
else
  echo "nvidia-smi not found"
fi
echo "== lua: $(command -v lua5.4) ($(lua5.4 -v 2>&1))"
"$BUILD/spk" info 2>&1 || true

echo "== suites"
# One job at a time: GPU specs share one device, and several time what they run.
export SPK_TEST_JOBS=${SPK_TEST_JOBS:-1}
log=$(mktemp)
scripts/test.sh "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
rm -f "$log"
[ -n "$summary" ] || { summary="0 passed, 1 failed"; status=1; }

if [ "$bench" = 1 ]; then
  echo "== benchmark"
  if [ -f lua/spk/cli/bench.lua ]; then
    "$BUILD/spk" bench --quick || echo "gpu-test: benchmark failed (exit $?)"
  else
    echo "no lua/spk/cli/bench.lua: skipped"
  fi
fi

echo "$summary"
exit "$status"
