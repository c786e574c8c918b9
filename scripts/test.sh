#!/usr/bin/env bash
# Runs every suite (C unit tests, busted specs, which include the program's
# tests) and prints, as its last line, "N passed, N failed[, N skipped]".
# usage: scripts/test.sh [busted args...]   (BUILD selects the build folder)
# SPK_SKIP_C_TESTS=1 runs the specs alone; SPK_TAP_FILE keeps busted's TAP
# output in that file as it is written (useful when a run may be cut short);
# SPK_VERBOSE=1 adds the measurements the C tests print (ptxas' registers).
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
passed=0 failed=0 skipped=0

# Every test cleans up after itself: the run gets a private TMPDIR, and what
# is left in it at the end (a test's folder, a spec's file) is named and
# counted as one failure, then removed.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/spk-test-run-XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch

# C unit tests: each binary ends with "c/<name>: N passed, N failed".
for t in "$BUILD"/tests/test_*; do
  [ -n "${SPK_SKIP_C_TESTS:-}" ] && break
  [ -x "$t" ] || continue
  out=$("$t" 2>&1); rc=$?
  printf '%s\n' "$out" | grep -v '^ok - '
  line=$(printf '%s\n' "$out" | grep -E '^c/.*: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ -z "$line" ]; then
    echo "$t: crashed or printed no summary (exit $rc)"; failed=$((failed + 1)); continue
  fi
  p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/' <<<"$line")
  f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/' <<<"$line")
  passed=$((passed + p)); failed=$((failed + f))
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { echo "$t: exit $rc"; failed=$((failed + 1)); }
done

# busted specs, read through TAP: "ok N - ...", "not ok N - ...", "ok N - # SKIP ...".
if [ -n "${SPK_ASAN:-}" ]; then
  # Under the sanitizers the specs run inside the instrumented program, which
  # carries the same bindings as spk.so.
  runner=("$BUILD/spk" run scripts/busted.lua)
else
  runner=(lua5.4 scripts/busted.lua)
fi
tap=${SPK_TAP_FILE:-$(mktemp)}
"${runner[@]}" -o TAP "$@" >"$tap" 2>&1; brc=$?
grep -vE '^(ok [0-9]+ |1\.\.[0-9]+$)' "$tap"
bp=$(grep -cE '^ok [0-9]+ ' "$tap" || true)
bs=$(grep -cE '^ok [0-9]+ .*# SKIP' "$tap" || true)
bf=$(grep -cE '^not ok [0-9]+ ' "$tap" || true)
if ! grep -qE '^1\.\.[0-9]+' "$tap"; then
  echo "busted did not finish (exit $brc)"; bf=$((bf + 1))
fi
[ -n "${SPK_TAP_FILE:-}" ] || rm -f "$tap"
echo "specs: $((bp - bs)) passed, $bf failed, $bs skipped"
passed=$((passed + bp - bs)); skipped=$((skipped + bs)); failed=$((failed + bf))

# Files a program outside spk leaves in any TMPDIR it is given (SPK_TEST_FOREIGN, shell
# patterns; default: the mat-debug-PID.log a GPU machine's libraries write) are named, not counted.
foreign=${SPK_TEST_FOREIGN-mat-debug-*.log}
left=$(find "$scratch" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort)
others=""
if [ -n "$foreign" ] && [ -n "$left" ]; then
  kept=""
  for name in $left; do
    is_foreign=0
    for pattern in $foreign; do
      # shellcheck disable=SC2053 # a pattern, unquoted on purpose
      [[ $name == $pattern ]] && is_foreign=1
    done
    if [ $is_foreign = 1 ]; then others="$others $name"; else kept="$kept $name"; fi
  done
  left=$kept
fi
[ -z "$others" ] || { echo "left in the temporary folder by programs outside spk (not counted):"; printf '  %s\n' $others; }
if [ -n "$left" ]; then
  echo "left in the temporary folder (a test did not clean up):"; printf '  %s\n' $left
  failed=$((failed + 1))
fi

if [ "$skipped" -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
