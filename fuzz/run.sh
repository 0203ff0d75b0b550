#!/bin/sh
# Usage: [FUZZ=gguf|model] fuzz/run.sh [SECONDS] [BUILD_DIR]
# Builds a harness with clang + libFuzzer + ASan/UBSan in a separate build directory
# and fuzzes for SECONDS (default 60) on one core, starting from a copy of its seed
# corpus (left alone): FUZZ=gguf (the default, CI's smoke) the GGUF reader from
# fuzz/corpus; FUZZ=model the model loader, tokenizer and a CPU evaluation from
# fuzz/corpus_model (it builds the whole library instrumented: ~7 minutes on 2 cores).
# Crashes are written as crash-*/leak-*/timeout-* into the work directory.
set -eu
SECONDS_TO_RUN=${1:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${2:-$ROOT/build-fuzz}
FUZZ=${FUZZ:-gguf}
case "$FUZZ" in
  gguf) SEEDS=$ROOT/fuzz/corpus ;;
  model) SEEDS=$ROOT/fuzz/corpus_model ;;
  *) echo "fuzz/run.sh: FUZZ must be gguf or model, not '$FUZZ'" >&2; exit 2 ;;
esac
WORK=$BUILD/fuzz-work-$FUZZ

CC=${CC:-clang} cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCTORCH_BUILD_FUZZ=ON -DCTORCH_SANITIZE=ON -DCTORCH_BUILD_TESTS=OFF -DCTORCH_BUILD_BENCH=OFF \
  -DCTORCH_CUDA=OFF -DCTORCH_OPENCL=OFF -DCTORCH_BLAS=OFF >/dev/null
cmake --build "$BUILD" --target "fuzz_$FUZZ" -j2 >/dev/null

mkdir -p "$WORK/corpus" "$WORK/artifacts"
cp "$SEEDS"/* "$WORK/corpus/" 2>/dev/null || true
echo "fuzzing $FUZZ for ${SECONDS_TO_RUN}s (corpus $WORK/corpus, artifacts $WORK/artifacts)"
set +e
"$BUILD/fuzz/fuzz_$FUZZ" "$WORK/corpus" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 -artifact_prefix="$WORK/artifacts/" -close_fd_mask=1
rc=$?
set -e
n=$(ls "$WORK/artifacts" | wc -l)
echo "fuzz_$FUZZ exit code $rc, $n artifact(s) in $WORK/artifacts"
exit $rc
