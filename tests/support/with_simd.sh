#!/bin/sh
# Usage: with_simd.sh LEVEL CTORCH_BINARY COMMAND [ARGS...]
# Runs COMMAND with CTORCH_SIMD=LEVEL (portable, avx2 or avx512), which caps every kernel
# family, or exits 77 (skipped) when this CPU lacks LEVEL: the CPU device that
# `ctorch devices` lists then reports a lower level than the one asked for.
set -u
level=$1; ct=$2; shift 2
case $level in
  portable) want="portable kernels" ;;
  avx2) want="AVX2 kernels" ;;
  avx512) want="AVX-512 kernels" ;;
  *) echo "with_simd.sh: unknown level '$level' (portable, avx2, avx512)" >&2; exit 2 ;;
esac
if ! CTORCH_SIMD=$level "$ct" devices 2>/dev/null | grep -q "$want"; then
  echo "skipped: this CPU lacks the $level kernels"
  exit 77
fi
echo "CTORCH_SIMD=$level" >&2
CTORCH_SIMD=$level exec "$@"
