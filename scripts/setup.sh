#!/usr/bin/env bash
# make setup: installs with apt-get the Debian packages this machine lacks,
# then checks that the CUDA toolkit pieces spk builds against are present.
# Safe to run twice: it installs only what is missing and says what it did.
# CUDA_HOME (default /usr/local/cuda) selects the toolkit.
#
# usage: scripts/setup.sh [--help]      (or make setup)
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi

# protobuf-c and libonnx-dev (its onnx.proto) build the ONNX reader; python3-onnx
# builds the ONNX test models and evaluates them (tests/spec/onnx_spec.lua).
# groff-base formats the man page, which tests/spec/commands_spec.lua checks.
packages=(lua5.4 liblua5.4-dev lua-busted libreadline-dev python3-numpy gcc make clang luarocks
          libprotobuf-c-dev protobuf-c-compiler libonnx-dev python3-onnx groff-base)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$package")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: packages already installed: ${packages[*]}"
else
  echo "setup: installing ${missing[*]}"
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: not root and no sudo: install ${missing[*]} by hand" >&2; exit 1; }
    as_root=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Debian's luarocks pulls in lua5.1, whose alternatives outrank lua5.4's:
  # keep `lua` and `luac` (busted's interpreter) what they were, or lua5.4's
  # where there were none.
  target() { if [ -e "$1" ]; then readlink -f "$1"; else echo "$2"; fi; }
  lua_before=$(target /usr/bin/lua /usr/bin/lua5.4)
  luac_before=$(target /usr/bin/luac /usr/bin/luac5.4)
  "${as_root[@]}" apt-get update -q
  "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
  for pair in "lua-interpreter /usr/bin/lua $lua_before" "lua-compiler /usr/bin/luac $luac_before"; do
    read -r name link before <<<"$pair"
    after=$(target "$link" "")
    if [ -n "$after" ] && [ "$after" != "$before" ] && [ -x "$before" ]; then
      if "${as_root[@]}" update-alternatives --quiet --set "$name" "$before"; then
        echo "setup: set $link back to $before (installing made it $after)"
      else
        echo "setup: $link is now $after (was $before); update-alternatives could not set it back" >&2
      fi
    fi
  done
  echo "setup: installed ${missing[*]}"
fi

# The CUDA toolkit is not a Debian package here: check it, do not install it.
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
absent=()
for piece in include/cuda_runtime.h include/nvrtc.h include/cublas_v2.h include/cudnn.h \
             lib64/libcudart_static.a lib64/libnvrtc.so lib64/libcublas.so; do
  [ -e "$CUDA_HOME/$piece" ] || absent+=("$CUDA_HOME/$piece")
done

# cuDNN may live outside the toolkit: wherever the linker finds it.
cudnn=""
for dir in "$CUDA_HOME/lib64" "$CUDA_HOME/lib"; do
  [ -e "$dir/libcudnn.so" ] && { cudnn="$dir/libcudnn.so"; break; }
done
if [ -z "$cudnn" ]; then
  found=$(gcc -print-file-name=libcudnn.so 2>/dev/null || true)
  [ "$found" != "libcudnn.so" ] && [ -e "$found" ] && cudnn=$found
fi
if [ -z "$cudnn" ]; then
  cudnn=$( (ldconfig -p 2>/dev/null || true) | awk '$1 == "libcudnn.so" { print $NF; exit }')
fi
[ -n "$cudnn" ] || absent+=("libcudnn.so (not in $CUDA_HOME/lib64, $CUDA_HOME/lib, the compiler's paths or ldconfig)")

if [ ${#absent[@]} -gt 0 ]; then
  echo "setup: the CUDA toolkit is incomplete; missing:" >&2
  printf '  %s\n' "${absent[@]}" >&2
  echo "setup: install the CUDA toolkit with cuBLAS, NVRTC and cuDNN (or set CUDA_HOME)" >&2
  exit 1
fi
version=$(awk '/#define CUDART_VERSION/ { print int($3 / 1000) "." int($3 % 1000 / 10) }' "$CUDA_HOME/include/cuda_runtime_api.h" 2>/dev/null || true)
echo "setup: CUDA toolkit ${version:-(version unknown)} in $CUDA_HOME, cuDNN at $cudnn: complete"
