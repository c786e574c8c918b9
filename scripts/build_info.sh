#!/bin/sh
# Writes the C header that says which commit a build is made from:
# usage: scripts/build_info.sh OUT.h
# SPK_COMMIT is the commit's full hash and SPK_DIRTY 1 when tracked files
# differ from it, 0 when they do not, -1 when that cannot be known. From a git
# checkout both come from git; from a tarball that `git archive` made,
# scripts/archive-commit.txt holds the hash (export-subst, .gitattributes)
# and SPK_DIRTY is -1; otherwise the commit is "unknown". OUT.h is rewritten
# only when its text changes, so a build with nothing new compiles nothing.
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
out=$1
root=$(cd "$(dirname "$0")/.." && pwd -P)
commit=unknown
dirty=-1
top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null || true)
if [ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$root" ] &&
   hash=$(git -C "$root" rev-parse --verify -q HEAD 2>/dev/null); then
  commit=$hash
  if changes=$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null); then
    if [ -z "$changes" ]; then dirty=0; else dirty=1; fi
  fi
elif [ -f "$root/scripts/archive-commit.txt" ]; then
  hash=$(sed -n '1p' "$root/scripts/archive-commit.txt")
  case $hash in
    *Format*|'') ;;                 # not substituted: not made by git archive
    *) commit=$hash ;;
  esac
fi
mkdir -p "$(dirname "$out")"
tmp=$out.tmp.$$
printf '/* Made by scripts/build_info.sh at build time. */\n#define SPK_COMMIT "%s"\n#define SPK_DIRTY %s\n' \
  "$commit" "$dirty" >"$tmp"
if cmp -s "$tmp" "$out" 2>/dev/null; then rm -f "$tmp"; else mv -f "$tmp" "$out"; fi
