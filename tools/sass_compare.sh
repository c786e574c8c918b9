#!/usr/bin/env bash
# The kernels' machine code (SASS) of this tree against a reference commit's,
# variant by variant, with NVRTC for sm_90 (no GPU needed):
#
# usage: tools/sass_compare.sh --ref COMMIT | --ref-dir TREE [--list defaults|options|tc|all] [--keep DIR]
#
# The reference, a commit you name (the tree before the change, e.g. main),
# is exported with git archive into a temporary folder and built there
# (build/spk only), unless --ref-dir names a built tree (with --ref too,
# that commit names it in the output). Each tree's own spk compiles each variant from its own kernels/
# (tools/kernel_cubins.lua, which knows both trees' APIs), this tree first: the
# variants the reference's Lua cannot name (the tc list in a tree without
# spk.tensor_core.sweep_jobs) it compiles with this tree's defines
# (--defines-from); then tools/cubin_compare.lua compares the kernels' .text sections. The last line
# reads "N identical, N differ, N in one tree only"; exit status 0 when none
# differs. Needs this tree built (make).
set -eu
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
root=$PWD
ref="" ref_dir="" list=all keep="" ref_given=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ref) ref=$2; ref_given=1; shift 2 ;;
    --ref-dir) ref_dir=$2; shift 2 ;;
    --list) list=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "sass_compare: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -x build/spk ] || { echo "sass_compare: build/spk is missing: run make" >&2; exit 2; }
[ -n "$ref" ] || [ -n "$ref_dir" ] || { echo "sass_compare: name the reference: --ref COMMIT (e.g. main) or --ref-dir TREE" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$ref_dir" ]; then
  ref_dir=$tmp/ref
  mkdir -p "$ref_dir"
  git archive "$ref" | tar -x -C "$ref_dir"
  echo "sass_compare: building the reference ($ref) in $ref_dir" >&2
  make -C "$ref_dir" --no-print-directory -j2 build/spk >"$tmp/ref-build.log" 2>&1 ||
    { cat "$tmp/ref-build.log" >&2; exit 1; }
fi
out=${keep:-$tmp/cubins}
mkdir -p "$out/ref" "$out/new"
# Each tree's own Lua and kernels; the script is this tree's.
SPK_CACHE_DIR=$tmp/cache-new SPK_KERNEL_DIR=$root/kernels build/spk run tools/kernel_cubins.lua "$out/new" --list "$list"
SPK_CACHE_DIR=$tmp/cache-ref SPK_KERNEL_DIR=$ref_dir/kernels "$ref_dir/build/spk" run \
  "$root/tools/kernel_cubins.lua" "$out/ref" --list "$list" --defines-from "$out/new"
if [ -n "$ref_given" ] || [ "$ref_dir" = "$tmp/ref" ]; then label="$ref ($ref_dir)"; else label="the tree in $ref_dir"; fi
echo "reference: $label; this tree: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- kernels src lua || echo ' + uncommitted changes')"
build/spk run tools/cubin_compare.lua "$out/ref" "$out/new"
