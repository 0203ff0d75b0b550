#!/bin/sh
# Usage: with_opencl.sh CTORCH_BINARY COMMAND [ARGS...]
# Runs COMMAND with the chain opencl:0 -> cpu, or exits 77 (skipped) when `ctorch devices`
# discovers no OpenCL device (no ICD loader, no platform).
set -u
ct=$1; shift
if ! "$ct" devices 2>/dev/null | grep -q "opencl:0"; then
  echo "skipped: no OpenCL device"
  exit 77
fi
CTORCH_DEVICES=opencl:0,cpu exec "$@"
