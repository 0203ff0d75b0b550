#!/bin/sh
# On a machine with an NVIDIA GPU: builds ctorch with the CUDA backend (or uses a given
# build directory), runs the whole test suite with the default chain and again with
# CTORCH_DEVICES=cuda,cpu (every op that CUDA takes runs there), optionally with
# CTORCH_DEVICES=opencl:0,cpu (the GPU's OpenCL: every op OpenCL claims runs there), and
# prints one summary table on stdout (logs go to the build directory; progress to stderr).
#
#   scripts/gpu-check.sh [BUILD_DIR]        default: build-cuda (configured and built here)
#   JOBS=N  CTEST_ARGS="-R cuda"  CUDA_ARCHS="90-real"  environment knobs
#   PASSES="default cuda_cpu cuda_only"  the suite passes to run (each ~2-3 min on 16 cores);
#                                        opencl_cpu adds the OpenCL one (not run by default)
#   LLAMA_BENCH=path/to/llama-bench  also benchmark against llama.cpp (bench/gpu_compare.sh)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-cuda}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
CTEST_ARGS=${CTEST_ARGS:-}
say() { echo "gpu-check: $*" >&2; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  say "no NVIDIA GPU visible (nvidia-smi); the CUDA tests would only skip"
  exit 77
fi
GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)

# The tests read the refdata folder the build was configured with (CTORCH_REFDATA, default
# ../shared/refdata); CTORCH_REFDATA=DIR in the environment points an existing build there too.
REF_ARG=""
[ -n "${CTORCH_REFDATA:-}" ] && REF_ARG="-DCTORCH_REFDATA=$CTORCH_REFDATA"
if [ ! -f "$BUILD/CMakeCache.txt" ] || [ -n "$REF_ARG" ]; then
  say "configuring $BUILD"
  ARCH_ARG=""
  [ -n "${CUDA_ARCHS:-}" ] && ARCH_ARG="-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCTORCH_WERROR=ON -DCTORCH_CUDA=ON $ARCH_ARG $REF_ARG \
    >"$BUILD.configure.log" 2>&1 || { say "configure failed: $BUILD.configure.log"; exit 1; }
fi
REFDATA=$(sed -n 's/^CTORCH_REFDATA:PATH=//p' "$BUILD/CMakeCache.txt")
[ -d "$REFDATA" ] || say "no refdata at $REFDATA: the agreement tests will skip (set CTORCH_REFDATA=DIR)"
say "building $BUILD (-j$JOBS)"
t0=$(date +%s)
cmake --build "$BUILD" -j"$JOBS" >"$BUILD/gpu-check-build.log" 2>&1 || { say "build failed: $BUILD/gpu-check-build.log"; exit 1; }
build_s=$(( $(date +%s) - t0 ))

# One ctest pass: "name passed failed skipped seconds" on stdout, the log in $BUILD.
run_suite() {
  name=$1; shift
  log="$BUILD/gpu-check-$name.log"
  t0=$(date +%s)
  env "$@" ctest --test-dir "$BUILD" -j"$JOBS" --output-on-failure $CTEST_ARGS >"$log" 2>&1
  secs=$(( $(date +%s) - t0 ))
  passed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed' "$log")
  failed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Failed )' "$log")
  skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*Skipped|Not Run)' "$log")
  echo "$name $passed $failed $skipped $secs"
  if [ "$failed" -gt 0 ]; then
    say "$name: failures (see $log):"
    grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Failed )' "$log" >&2
  fi
}

PASSES=${PASSES:-default cuda_cpu cuda_only}
R1= R2= R3= R4=
case " $PASSES " in *" default "*) say "test suite, default chain"; R1=$(run_suite default) ;; esac
case " $PASSES " in *" cuda_cpu "*) say "test suite, CTORCH_DEVICES=cuda,cpu"; R2=$(run_suite cuda_cpu CTORCH_DEVICES=cuda,cpu) ;; esac
case " $PASSES " in *" cuda_only "*) say "CUDA tests alone"; R3=$(CTEST_ARGS="-L cuda" run_suite cuda_only) ;; esac
# opencl:0 is the first OpenCL device ctorch ranks: the GPU where one exists (above PoCL)
case " $PASSES " in *" opencl_cpu "*) say "test suite, CTORCH_DEVICES=opencl:0,cpu"; R4=$(run_suite opencl_cpu CTORCH_DEVICES=opencl:0,cpu) ;; esac

# ---------------------------------------------------------------- summary
echo "## gpu-check: $GPU"
echo
echo "refdata: $REFDATA $([ -d "$REFDATA" ] && echo "(found)" || echo "(missing: the agreement tests skipped)")"
echo
echo "| run | passed | failed | skipped | seconds |"
echo "|---|---:|---:|---:|---:|"
for r in "$R1" "$R2" "$R3" "$R4"; do
  [ -n "$r" ] || continue
  set -- $r
  case $1 in
    default) label="ctest, default chain" ;;
    cuda_cpu) label="ctest, CTORCH_DEVICES=cuda,cpu" ;;
    opencl_cpu) label="ctest, CTORCH_DEVICES=opencl:0,cpu" ;;
    *) label="ctest -L cuda" ;;
  esac
  echo "| $label | $2 | $3 | $4 | $5 |"
done
echo "| build ($JOBS jobs) | | | | $build_s |"
echo
# ================================================================= BENCHMARKS
# With LLAMA_BENCH=path/to/llama-bench (llama.cpp built on this machine with CUDA), ctorch next
# to llama.cpp on TinyLlama-shaped models per format, then the single-op benchmarks.
if [ -n "${LLAMA_BENCH:-}" ]; then
  echo "### ctorch vs llama.cpp on this GPU"
  echo
  "$ROOT/bench/gpu_compare.sh" "$BUILD" "$LLAMA_BENCH" ${BENCH_TYPES:-Q4_K_M Q5_K_M Q6_K Q8_0 F16}
  echo
  for b in cuda-quant cuda-nn cuda-transfer; do
    [ -x "$BUILD/bench/ctorch-bench-$b" ] && { echo "### ctorch-bench-$b"; echo; "$BUILD/bench/ctorch-bench-$b"; echo; }
  done
fi
# ================================================================= END BENCHMARKS

fails=0
for r in "$R1" "$R2" "$R3" "$R4"; do [ -n "$r" ] || continue; set -- $r; fails=$((fails + $3)); done
[ "$fails" -eq 0 ]
