#!/usr/bin/env bash
# Registers, spills and shared memory of kernels/lstm_recurrence.cu variants
# from ptxas (no GPU needed).
# usage: tools/ptxas_report.sh [arch] ["-DUNITS=8 -DTHREADS=256" ...]
set -eu
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
arch=${1:-sm_90}; shift || true
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=("" "-DGATHER=1" "-DUNITS=8 -DTHREADS=256" "-DUNITS=8 -DTHREADS=256 -DGATHER=1"
  "-DUNITS=16 -DTHREADS=512" "-DUNITS=16 -DTHREADS=256 -DMAX_TILE_ROWS=16" "-DTHREADS=64 -DMAX_TILE_ROWS=16"
  "-DHIDDEN=64" "-DHIDDEN=256 -DMAX_TILE_ROWS=16" "-DSPK_ACQ_REL=1"
  "-DSPK_DEBUG_TRACE=1" "-DUNITS=8 -DTHREADS=256 -DSPK_DEBUG_TRACE=1")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for v in "${variants[@]}"; do
  # shellcheck disable=SC2086
  line=$("${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" -cubin -arch="$arch" -Xptxas -v $v -o "$tmp/k.cubin" \
    kernels/lstm_recurrence.cu 2>&1 | grep -A3 "entry function 'spk_lstm_recurrence'" | tr -s ' ' | tr '\n' ' ')
  printf '%-46s %s\n' "${v:-default}" "$(sed -E 's/.* ([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads.*Used ([0-9]+) registers.*, ([0-9]+) bytes smem.*/regs \4, stack \1 B, spill stores \2 B, spill loads \3 B, smem \5 B/' <<<"$line")"
done
