#!/usr/bin/env bash
# LLM benchmark pipeline: ctorch vs llama.cpp on a TinyLlama-shaped model with
# random weights (speed depends only on shapes and types).
#   1. builds ctorch (Release) into $BUILD_DIR
#   2. makes $MODELS_DIR/tinyllama-f16.gguf with ctorch-make-model, quantizes it
#      with `ctorch quantize` to each type in $TYPES
#   3. measures the machine's memory bandwidth (ctorch-bench-bandwidth)
#   4. per file, back to back: `ctorch bench` and llama.cpp (bench/llama_cpp_bench.py,
#      needs `pip install llama-cpp-python`; skipped when missing)
#   5. prints a markdown table; raw JSON stays in $RESULTS_DIR
# Environment knobs (defaults): BUILD_DIR=<repo>/build-bench
#   MODELS_DIR=${XDG_CACHE_HOME:-~/.cache}/ctorch/models
#   TYPES="F16 Q8_0 Q4_K_M"  PP=128 TG=64 REPS=3 THREADS=2  SKIP_LLAMA=0  SKIP_CTORCH=0
#   SKIP_BUILD=0  RESULTS_DIR=$MODELS_DIR/bench-results  PYTHON=python3
# Model files are large (2.2 GB for F16): keep MODELS_DIR outside the repository.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$REPO/build-bench}"
MODELS_DIR="${MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctorch/models}"
TYPES="${TYPES:-F16 Q8_0 Q4_K_M}"
PP="${PP:-128}"
TG="${TG:-64}"
REPS="${REPS:-3}"
THREADS="${THREADS:-2}"
SKIP_LLAMA="${SKIP_LLAMA:-0}"
SKIP_CTORCH="${SKIP_CTORCH:-0}"
SKIP_BUILD="${SKIP_BUILD:-0}"
RESULTS_DIR="${RESULTS_DIR:-$MODELS_DIR/bench-results}"
PYTHON="${PYTHON:-python3}"

log() { echo "[run_llm_bench] $*" >&2; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

if [ "$SKIP_BUILD" != 1 ]; then
    log "building ctorch (Release) in $BUILD_DIR"
    cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCTORCH_SANITIZE=OFF -DCTORCH_BUILD_TESTS=OFF >/dev/null
    cmake --build "$BUILD_DIR" -j2 >&2 || log "warning: some targets failed to build; using what was built"
fi
find_exe() { find "$BUILD_DIR" -type f -name "$1" -perm -u+x -print -quit; }
MAKE_MODEL="$(find_exe ctorch-make-model)"
BANDWIDTH="$(find_exe ctorch-bench-bandwidth)"
CTORCH="$(find_exe ctorch)"
[ -n "$MAKE_MODEL" ] || { log "ctorch-make-model was not built"; exit 1; }
[ -n "$BANDWIDTH" ] || { log "ctorch-bench-bandwidth was not built"; exit 1; }
[ -n "$CTORCH" ] || log "warning: the ctorch command was not built: no quantized files, no ctorch figures"

mkdir -p "$MODELS_DIR" "$RESULTS_DIR"
F16="$MODELS_DIR/tinyllama-f16.gguf"
if [ ! -s "$F16" ]; then
    log "making $F16"
    "$MAKE_MODEL" "$F16.tmp" && mv "$F16.tmp" "$F16"
fi

model_file() {
    local t; t="$(echo "$1" | tr 'A-Z' 'a-z')"
    echo "$MODELS_DIR/tinyllama-$t.gguf"
}
for T in $TYPES; do
    [ "$T" = F16 ] && continue
    M="$(model_file "$T")"
    if [ ! -s "$M" ]; then
        if [ -z "$CTORCH" ]; then log "cannot make $M without the ctorch command"; continue; fi
        log "quantizing to $T: $M"
        if "$CTORCH" quantize "$F16" "$M.tmp" "$T" >&2; then mv "$M.tmp" "$M"; else log "quantize $T failed"; rm -f "$M.tmp"; fi
    fi
done

HAVE_LLAMA=0
if [ "$SKIP_LLAMA" != 1 ] && "$PYTHON" -c "import llama_cpp" 2>/dev/null; then HAVE_LLAMA=1; fi
[ "$HAVE_LLAMA" = 1 ] || log "llama.cpp yardstick skipped (SKIP_LLAMA=1 or llama_cpp not importable)"

log "memory bandwidth (load average $(loadavg))"
"$BANDWIDTH" -t "$THREADS" -s 1024 -r 5 -o json >"$RESULTS_DIR/bandwidth.json"
cat "$RESULTS_DIR/bandwidth.json" >&2

LOADS=()
for T in $TYPES; do
    M="$(model_file "$T")"
    [ -s "$M" ] || { log "skipping $T: $M is missing"; continue; }
    rm -f "$RESULTS_DIR/ctorch-$T.json" "$RESULTS_DIR/llama-$T.json"
    before="$(loadavg)"
    if [ -n "$CTORCH" ] && [ "$SKIP_CTORCH" != 1 ]; then
        log "ctorch bench $T (load average $before)"
        "$CTORCH" bench -m "$M" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" -o json \
            >"$RESULTS_DIR/ctorch-$T.json" || { log "ctorch bench $T failed"; rm -f "$RESULTS_DIR/ctorch-$T.json"; }
    fi
    if [ "$HAVE_LLAMA" = 1 ]; then
        log "llama.cpp $T (load average $(loadavg))"
        "$PYTHON" "$REPO/bench/llama_cpp_bench.py" -m "$M" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" -b 512 \
            >"$RESULTS_DIR/llama-$T.json" || { log "llama.cpp $T failed"; rm -f "$RESULTS_DIR/llama-$T.json"; }
    fi
    LOADS+=("$T: $before -> $(loadavg)")
done

"$PYTHON" - "$RESULTS_DIR" "$PP" "$TG" "$THREADS" "$MODELS_DIR" "$TYPES" "$REPO/bench" "${LOADS[@]}" <<'EOF'
import json, os, sys

res_dir, pp, tg, threads, models_dir, types, bench_dir = sys.argv[1:8]
loads = sys.argv[8:]
sys.path.insert(0, bench_dir)
from benchlib import gguf_tensor_bytes  # the GGUF tensor-size reader shared with compare_llamacpp.py

def load(name):
    p = os.path.join(res_dir, name)
    try:
        with open(p) as f: return json.load(f)
    except (OSError, ValueError):
        return None

def pick(rows, test):
    for r in rows or []:
        if test == "pp" and r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0: return r
        if test == "tg" and r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0: return r
    return None

def fmt(r):
    return "%.1f ± %.1f" % (r["avg_ts"], r["stddev_ts"]) if r else "n/a"

def ratio(a, b):
    return "%.2f" % (a["avg_ts"] / b["avg_ts"]) if a and b and b["avg_ts"] > 0 else "n/a"

bw = load("bandwidth.json")
read_bps = bw["read_gbs"] * 1e9 if bw else None
print()
if bw:
    print("Memory bandwidth (%d threads, %d MiB arrays, median of %d): read %.1f GB/s, triad %.1f GB/s" %
          (bw["threads"], bw["array_mib"], bw["reps"], bw["read_gbs"], bw["triad_gbs"]))
llama_ver = None
print()
print("| type | file MB | ctorch pp%s t/s | llama.cpp pp%s t/s | ratio | ctorch tg%s t/s | llama.cpp tg%s t/s | ratio "
      "| decode bandwidth fraction (ctorch / llama.cpp) |" % (pp, pp, tg, tg))
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for t in types.split():
    path = os.path.join(models_dir, "tinyllama-%s.gguf" % t.lower())
    if not os.path.exists(path): continue
    c, l = load("ctorch-%s.json" % t), load("llama-%s.json" % t)
    if l and l[0].get("build_commit"): llama_ver = l[0]["build_commit"] + ", flash attention " + l[0].get("flash_attn", "?")
    tb = gguf_tensor_bytes(path)
    per_tok = sum(v for k, v in tb.items() if k != "token_embd.weight")
    def frac(r):
        return "%.2f" % (per_tok * r["avg_ts"] / read_bps) if r and read_bps else "n/a"
    cpp, ctg, lpp, ltg = pick(c, "pp"), pick(c, "tg"), pick(l, "pp"), pick(l, "tg")
    print("| %s | %.0f | %s | %s | %s | %s | %s | %s | %s / %s |" % (
        t, os.path.getsize(path) / 1e6, fmt(cpp), fmt(lpp), ratio(cpp, lpp), fmt(ctg), fmt(ltg), ratio(ctg, ltg),
        frac(ctg), frac(ltg)))
print()
print("Threads %s; ratio = ctorch / llama.cpp (> 1: ctorch faster). Decode bandwidth fraction = bytes of weights read "
      "per token (all tensors except token_embd) x tg t/s / read bandwidth." % threads)
if llama_ver: print("llama.cpp: %s." % llama_ver)
for s in loads: print("load average (1/5/15 min) before -> after: " + s)
EOF
