#!/usr/bin/env bash
# Runs every suite (C unit tests, busted specs, which include the program's
# tests) and prints, as its last line, "N passed, N failed[, N skipped]".
# usage: scripts/test.sh [busted args...]   (BUILD selects the build folder)
# Each C test binary and each spec file is a job of its own, SPK_TEST_JOBS of
# them at a time (default: the online CPUs; scripts/gpu-test.sh runs one at a
# time, so GPU specs never share the device); a job's lines are printed when
# it ends. With busted args, or one job at a time, the specs run in one busted
# process. SPK_SPEC_DIR names the specs' folder (default tests/spec).
# SPK_SKIP_C_TESTS=1 runs the specs alone; SPK_TAP_FILE keeps
# busted's TAP output in that file (as it is written with one busted process,
# a spec file's when it ends otherwise: useful when a run may be cut short);
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
spec_passed=0 spec_failed=0 spec_skipped=0

jobs=${SPK_TEST_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
case "$jobs" in
  '' | *[!0-9]* | 0)
    echo "test: SPK_TEST_JOBS is the number of jobs at a time (1 or more), got '$jobs'" >&2
    echo "0 passed, 1 failed"; exit 2 ;;
esac

# Every test cleans up after itself: the run gets a private TMPDIR, and what
# is left in it at the end (a test's folder, a spec's file) is named and
# counted as one failure, then removed. The jobs' output is kept apart from it.
results=$(mktemp -d "${TMPDIR:-/tmp}/spk-test-results-XXXXXX") || exit 1
scratch=$(mktemp -d "${TMPDIR:-/tmp}/spk-test-run-XXXXXX") || { rmdir "$results"; exit 1; }
trap 'rm -rf "$scratch" "$results"' EXIT
# Jobs run in the background, where a script's children ignore Ctrl-C: stop them with it.
stop_jobs() {
  local p
  for p in $(jobs -p); do pkill -TERM -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
  exit 130
}
trap stop_jobs INT TERM
export TMPDIR=$scratch

if [ -n "${SPK_ASAN:-}" ]; then
  # Under the sanitizers the specs run inside the instrumented program, which
  # carries the same bindings as spk.so.
  runner=("$BUILD/spk" run scripts/busted.lua)
else
  runner=(lua5.4 scripts/busted.lua)
fi

# The jobs: "c PATH" (a C test binary), "spec PATH" (one spec file), "specs"
# (one busted process over the arguments given, or every spec).
spec_dir=${SPK_SPEC_DIR:-tests/spec}
job_kind=() job_arg=()
if [ -z "${SPK_SKIP_C_TESTS:-}" ]; then
  for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    job_kind+=(c); job_arg+=("$t")
  done
fi
if [ $# -gt 0 ] || [ "$jobs" -eq 1 ]; then
  job_kind+=(specs); job_arg+=("")
else
  for s in "$spec_dir"/*_spec.lua; do
    [ -e "$s" ] || continue # a folder without specs: none to run
    job_kind+=(spec); job_arg+=("$s")
  done
fi

# A job writes its output to $results/N.out and, last, its exit status to N.rc.
start_job() { # index [busted args...]
  local i=$1
  shift
  case "${job_kind[$i]}" in
    c) ("${job_arg[$i]}" >"$results/$i.out" 2>&1; echo $? >"$results/$i.rc") & ;;
    spec) ("${runner[@]}" -o TAP "${job_arg[$i]}" >"$results/$i.out" 2>&1; echo $? >"$results/$i.rc") & ;;
    specs)
      [ $# -gt 0 ] || set -- "$spec_dir"
      ("${runner[@]}" -o TAP "$@" >"${SPK_TAP_FILE:-$results/$i.out}" 2>&1; echo $? >"$results/$i.rc") & ;;
  esac
}

# C unit tests: each binary ends with "c/<name>: N passed, N failed".
report_c() { # index exit-status
  local t=${job_arg[$1]} rc=$2 out line p f
  out="$results/$1.out"
  grep -v '^ok - ' "$out"
  line=$(grep -E '^c/.*: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
  if [ -z "$line" ]; then
    echo "$t: crashed or printed no summary (exit $rc)"; failed=$((failed + 1)); return
  fi
  p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/' <<<"$line")
  f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/' <<<"$line")
  passed=$((passed + p)); failed=$((failed + f))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then echo "$t: exit $rc"; failed=$((failed + 1)); fi
}

# busted specs, read through TAP: "ok N - ...", "not ok N - ...", "ok N - # SKIP ...".
report_specs() { # index exit-status
  local tap="$results/$1.out" rc=$2 what=${job_arg[$1]:-busted} bp bs bf
  [ "${job_kind[$1]}" = specs ] && [ -n "${SPK_TAP_FILE:-}" ] && tap=$SPK_TAP_FILE
  grep -vE '^(ok [0-9]+ |1\.\.[0-9]+$)' "$tap"
  bp=$(grep -cE '^ok [0-9]+ ' "$tap" || true)
  bs=$(grep -cE '^ok [0-9]+ .*# SKIP' "$tap" || true)
  bf=$(grep -cE '^not ok [0-9]+ ' "$tap" || true)
  if ! grep -qE '^1\.\.[0-9]+' "$tap"; then
    echo "$what: busted did not finish (exit $rc)"; bf=$((bf + 1))
  fi
  if [ "${job_kind[$1]}" = spec ] && [ -n "${SPK_TAP_FILE:-}" ]; then cat "$tap" >>"$SPK_TAP_FILE"; fi
  spec_passed=$((spec_passed + bp - bs)); spec_skipped=$((spec_skipped + bs)); spec_failed=$((spec_failed + bf))
}

[ -n "${SPK_TAP_FILE:-}" ] && : >"$SPK_TAP_FILE"
next=0 total=${#job_kind[@]} running=()
while [ "$next" -lt "$total" ] || [ "${#running[@]}" -gt 0 ]; do
  while [ "${#running[@]}" -lt "$jobs" ] && [ "$next" -lt "$total" ]; do
    start_job "$next" "$@"
    running+=("$next"); next=$((next + 1))
  done
  wait -n 2>/dev/null || sleep 0.1 # until a job ends
  still=()
  for i in "${running[@]}"; do
    if [ -s "$results/$i.rc" ]; then
      rc=$(cat "$results/$i.rc")
      if [ "${job_kind[$i]}" = c ]; then report_c "$i" "$rc"; else report_specs "$i" "$rc"; fi
    else
      still+=("$i")
    fi
  done
  running=("${still[@]}")
done
echo "specs: $spec_passed passed, $spec_failed failed, $spec_skipped skipped"
passed=$((passed + spec_passed)); skipped=$((skipped + spec_skipped)); failed=$((failed + spec_failed))

# Files a program outside spk leaves in any TMPDIR it is given (SPK_TEST_FOREIGN, shell
# patterns; default: the mat-debug-PID.log and .ses a GPU machine's libraries write) are named, not counted.
foreign=${SPK_TEST_FOREIGN-mat-debug-*.log .ses}
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
