#!/bin/sh
# Usage: fuzz/run.sh [SECONDS] [BUILD_DIR]
# Builds the harnesses with clang + libFuzzer + ASan/UBSan in a separate build
# directory and fuzzes the GGUF reader for SECONDS (default 60) on one core,
# starting from a copy of fuzz/corpus (the seed corpus itself is left alone).
# Crashes are written as crash-*/leak-*/timeout-* into the work directory.
set -eu
SECONDS_TO_RUN=${1:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${2:-$ROOT/build-fuzz}
WORK=$BUILD/fuzz-work

CC=${CC:-clang} cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCTORCH_BUILD_FUZZ=ON -DCTORCH_SANITIZE=ON -DCTORCH_BUILD_TESTS=OFF -DCTORCH_BUILD_BENCH=OFF \
  -DCTORCH_CUDA=OFF -DCTORCH_OPENCL=OFF -DCTORCH_BLAS=OFF >/dev/null
cmake --build "$BUILD" --target fuzz_gguf -j2 >/dev/null

mkdir -p "$WORK/corpus" "$WORK/artifacts"
cp "$ROOT"/fuzz/corpus/* "$WORK/corpus/" 2>/dev/null || true
echo "fuzzing gguf for ${SECONDS_TO_RUN}s (corpus $WORK/corpus, artifacts $WORK/artifacts)"
set +e
"$BUILD/fuzz/fuzz_gguf" "$WORK/corpus" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 -artifact_prefix="$WORK/artifacts/" -close_fd_mask=1
rc=$?
set -e
n=$(ls "$WORK/artifacts" | wc -l)
echo "fuzz_gguf exit code $rc, $n artifact(s) in $WORK/artifacts"
exit $rc
