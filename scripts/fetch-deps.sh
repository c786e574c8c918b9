#!/usr/bin/env bash
# Downloads Debian's Lua 5.4 interpreter, busted and every Lua package busted
# needs into .deps/debs (apt-get download: no installation, no root needed
# once the package lists are current) and unpacks them with dpkg -x into
# .deps/root. The GPU machine has no Lua and cannot install anything; the
# build tree plus .deps is carried there and scripts/gpu-test.sh runs the
# suites with .deps/root's lua5.4 and busted (see README, "GPU tests").
#
# usage: scripts/fetch-deps.sh [--help]        (re-running refreshes .deps/root)
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."

# busted's run-time closure (apt-cache depends --recurse lua-busted), minus
# what every Linux system has (libc, tar, dpkg): the interpreter and its
# library, busted, its Lua modules, the C modules' libraries (lfs, term,
# system, yaml) and libyaml for lua-yaml. readline and tinfo come with the
# GPU machine's Ubuntu (lua5.4 links libreadline.so.8).
packages=(
  lua5.4 liblua5.4-0
  lua-busted lua-cliargs lua-dkjson lua-filesystem lua-inifile lua-luassert
  lua-mediator lua-penlight lua-say lua-system lua-term lua-yaml libyaml-0-2
)

mkdir -p .deps/debs
rm -rf .deps/root
mkdir -p .deps/root
(
  cd .deps/debs
  if ! apt-get download "${packages[@]}"; then
    echo "fetch-deps: apt-get download failed; run 'apt-get update' (as root) and try again" >&2
    exit 1
  fi
)
for p in "${packages[@]}"; do
  # newest downloaded version of each package (the folder may hold older ones)
  deb=$(ls -t .deps/debs/"${p}"_*.deb | head -n 1)
  dpkg -x "$deb" .deps/root
done

# The busted launcher and lua5.4 itself, run from the unpacked tree.
lua=.deps/root/usr/bin/lua5.4
[ -x "$lua" ] || { echo "fetch-deps: $lua missing after unpacking" >&2; exit 1; }
echo "fetch-deps: unpacked ${#packages[@]} packages into .deps/root ($(du -sh .deps/root | cut -f1))"
