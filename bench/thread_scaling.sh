#!/bin/bash
# CPU thread scaling of ctorch bench on TinyLlama-shaped random models in several formats, and
# llama.cpp's llama-bench on the same files when LLAMA_BENCH names one (alternating: for each
# model and thread count, ctorch then llama.cpp).
# usage: [LLAMA_BENCH=path/llama-bench] [TYPES="Q4_K_M Q8_0 ..."] [REPS=3] [ROUNDS=1]
#        bench/thread_scaling.sh BUILD_DIR [THREADS...]   (default threads: 4 8 16)
#   TYPES: formats of the TinyLlama-shaped model (default F16 Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0), and
#   model files used as they are (a TYPE ending in .gguf: the real files, Gemma 3 270M, SmolLM2)
# Writes models to ${XDG_CACHE_HOME:-~/.cache}/ctorch/scaling; prints one table row per run.
# Used on the GPU machine's 16-core host, where the 2-core CI machine cannot measure it.
# A llama-bench built with CUDA runs with the GPU hidden and -ngl 0. Its CPU backend is the
# best variant the CPU reports; on the H200 machine's VM (session 17) the sapphirerapids variant
# dies with SIGILL (the VM reports AMX and AVX512-FP16), so after a SIGILL the script runs
# llama-bench from a copy of its folder without that variant.
set -u
B=${1:?usage: thread_scaling.sh BUILD_DIR [THREADS...]}; shift
THREADS=${*:-4 8 16}
TYPES=${TYPES:-F16 Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-1}
LB=${LLAMA_BENCH:-}
W=${XDG_CACHE_HOME:-$HOME/.cache}/ctorch/scaling
mkdir -p "$W"
[ -f "$W/F16.gguf" ] || "$B/bench/ctorch-make-model" --threads "$(nproc)" "$W/F16.gguf" >&2
for t in $TYPES; do
  case $t in *.gguf) continue ;; esac
  [ "$t" = F16 ] || [ -f "$W/$t.gguf" ] || "$B/tools/ctorch" quantize -t "$(nproc)" "$W/F16.gguf" "$W/$t.gguf" "$t" >&2
done
lb_run() { CUDA_VISIBLE_DEVICES= LD_LIBRARY_PATH="$(dirname "$LB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$LB" -ngl 0 "$@"; }
# A short run of every file first: a quantized file can reach code an F16 one does not
# (AMX repacks), so any of them may be the one that dies.
if [ -n "$LB" ]; then
  for m in $TYPES; do
    f="$W/$m.gguf"; case $m in *.gguf) f=$m ;; esac
    lb_run -m "$f" -p 8 -n 0 -r 1 -t 2 > /dev/null 2>&1
    [ $? -eq 132 ] && [ -f "$(dirname "$LB")/libggml-cpu-sapphirerapids.so" ] || continue
    copy=$(mktemp -d)
    trap 'rm -rf "$copy"' EXIT
    cp -a "$(dirname "$LB")/." "$copy/" && rm -f "$copy/libggml-cpu-sapphirerapids.so"
    LB="$copy/$(basename "$LB")"
    echo "llama-bench died with SIGILL on $f: running it without its sapphirerapids CPU variant ($copy)" >&2
    break
  done
fi
# the t/s of test $2 (pp128, tg64) in a markdown table $1: ctorch's column 8, llama-bench's last but one
col() { echo "$1" | awk -F'|' -v t="$2" '$0 ~ t {n = split($(NF - 1), a, " "); print a[1]; exit}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b }'; }
echo "| type | threads | ctorch pp128 | llama.cpp pp128 | ratio | ctorch tg64 | llama.cpp tg64 | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for r in $(seq "$ROUNDS"); do
  for m in $TYPES; do
    f="$W/$m.gguf"
    case $m in *.gguf) f=$m; m=$(basename "$m" .gguf) ;; esac
    for th in $THREADS; do
      c=$("$B/tools/ctorch" bench -m "$f" -d cpu -p 128 -n 64 -r "$REPS" -t "$th" 2>/dev/null)
      l=""
      [ -n "$LB" ] && l=$(lb_run -m "$f" -p 128 -n 64 -r "$REPS" -t "$th" 2>/dev/null)
      cp=$(col "$c" pp128); ct=$(col "$c" tg64); lp=$(col "$l" pp128); lt=$(col "$l" tg64)
      echo "| $m | $th | $cp | $lp | $(ratio "$cp" "$lp") | $ct | $lt | $(ratio "$ct" "$lt") |"
    done
  done
done
