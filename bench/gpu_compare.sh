#!/bin/bash
# ctorch on a GPU next to llama.cpp's llama-bench on the same GPU, in one run: TinyLlama-shaped
# random models (ctorch-make-model + ctorch quantize) in several formats, plus the CPU figure of
# each format (the GPU/CPU ratio). Meant for the GPU machine (issue 10's table); prints markdown.
# usage: bench/gpu_compare.sh BUILD_DIR LLAMA_BENCH|- [TYPES...]   (default: Q4_K_M Q5_K_M Q6_K Q8_0 F16)
#   a TYPE that ends in .gguf is a model file used as it is (the real files: Gemma 3 270M, SmolLM2)
#   env: PP (512), TG (128), REPS (3), DEV (cuda), CPU_THREADS (nproc), MODELS (a folder to keep models),
#        COPY_GBS (a device copy's GB/s, read + write: adds decode's fraction of it, file bytes x tg t/s)
set -u
B=${1:?usage: gpu_compare.sh BUILD_DIR LLAMA_BENCH|- [TYPES...]}; LB=${2:?llama-bench path or -}; shift 2
TYPES=${*:-Q4_K_M Q5_K_M Q6_K Q8_0 F16}
PP=${PP:-512} TG=${TG:-128} REPS=${REPS:-3} DEV=${DEV:-cuda,cpu} CT=${CPU_THREADS:-$(nproc)}
W=${MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/ctorch/gpu-models}
mkdir -p "$W"
[ -f "$W/F16.gguf" ] || "$B/bench/ctorch-make-model" --threads "$(nproc)" "$W/F16.gguf" >&2
for t in $TYPES; do
  case $t in *.gguf) continue ;; esac
  [ "$t" = F16 ] || [ -f "$W/$t.gguf" ] || "$B/tools/ctorch" quantize -t "$(nproc)" "$W/F16.gguf" "$W/$t.gguf" "$t" >&2 2>&1 || true
done

# t/s column of a ctorch bench markdown row (pp or tg)
ct_ts() { awk -F'|' -v k="$1" '$0 ~ k {split($8, a, " "); print a[1]}'; }
# llama-bench markdown: the t/s column is the last; "1234.56 ± 7.8" -> 1234.56
lb_ts() { awk -F'|' -v k="$1" '$0 ~ k {n = split($(NF-1), a, " "); print a[1]}'; }

echo "| type | ctorch pp$PP | llama.cpp pp$PP | ratio | ctorch tg$TG | llama.cpp tg$TG | ratio | ctorch CPU tg32 ($CT t) | GPU/CPU | decode GB/s (of copy) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for t in $TYPES; do
  m="$W/$t.gguf"
  case $t in *.gguf) m=$t; t=$(basename "$t" .gguf) ;; esac
  out=$("$B/tools/ctorch" bench -m "$m" -d "$DEV" -p "$PP" -n "$TG" -r "$REPS" 2>"$W/$t.ctorch.log")
  cpp=$(echo "$out" | ct_ts "pp$PP"); ctg=$(echo "$out" | ct_ts "tg$TG")
  lpp=-; ltg=-
  if [ "$LB" != - ]; then
    lo=$("$LB" -m "$m" -p "$PP" -n "$TG" -r "$REPS" -fa 1 -ngl 99 2>"$W/$t.llama.log")
    lpp=$(echo "$lo" | lb_ts "pp$PP"); ltg=$(echo "$lo" | lb_ts "tg$TG")
  fi
  cpu=$("$B/tools/ctorch" bench -m "$m" -d cpu -t "$CT" -p 0 -n 32 -r 2 2>/dev/null | ct_ts "tg32")
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
  bw=$(awk -v b="$(stat -c %s "$m")" -v t="${ctg:-0}" -v c="${COPY_GBS:-0}" 'BEGIN {
    g = b * t / 1e9; if (t + 0 <= 0) { print "-"; exit } if (c + 0 > 0) printf "%.0f (%.0f%%)", g, 100 * g / c; else printf "%.0f", g }')
  echo "| $t | ${cpp:--} | $lpp | $(ratio "$cpp" "$lpp") | ${ctg:--} | $ltg | $(ratio "$ctg" "$ltg") | ${cpu:--} | $(ratio "$ctg" "$cpu") | $bw |"
done
