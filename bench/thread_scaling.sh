#!/bin/bash
# CPU thread scaling of ctorch bench on a TinyLlama-shaped random model in several formats.
# usage: bench/thread_scaling.sh BUILD_DIR [THREADS...]   (default threads: 4 8 16)
# Writes models to ${XDG_CACHE_HOME:-~/.cache}/ctorch/scaling; prints one table row per run.
# Used on the GPU machine's 16-core host, where the 2-core CI machine cannot measure it.
set -u
B=${1:?usage: thread_scaling.sh BUILD_DIR [THREADS...]}; shift
THREADS=${*:-4 8 16}
W=${XDG_CACHE_HOME:-$HOME/.cache}/ctorch/scaling
mkdir -p "$W"
[ -f "$W/f16.gguf" ] || "$B/bench/ctorch-make-model" --threads "$(nproc)" "$W/f16.gguf" >&2
for t in Q4_K_M Q8_0 Q4_0; do
  [ -f "$W/$t.gguf" ] || "$B/tools/ctorch" quantize -t "$(nproc)" "$W/f16.gguf" "$W/$t.gguf" "$t" >&2
done
echo "| type | threads | pp128 t/s | tg64 t/s |"
echo "|---|---:|---:|---:|"
for m in Q4_K_M Q8_0 Q4_0 f16; do
  for th in $THREADS; do
    out=$("$B/tools/ctorch" bench -m "$W/$m.gguf" -p 128 -n 64 -r 3 -t "$th" 2>/dev/null)
    pp=$(echo "$out" | awk -F'|' '/pp128/ {gsub(/ /, "", $8); print $8}')
    tg=$(echo "$out" | awk -F'|' '/tg64/ {gsub(/ /, "", $8); print $8}')
    echo "| $m | $th | $pp | $tg |"
  done
done
