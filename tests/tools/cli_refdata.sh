#!/bin/sh
# End-to-end checks of the ctorch command against llama.cpp's outputs in
# ../shared/refdata: greedy text of `run` and ids of `tokenize` must be identical,
# `info`/`quantize` must work, and user errors must be one line with a non-zero exit.
# Usage: cli_refdata.sh CTORCH_BINARY   (CTORCH_REFDATA names the refdata folder)
set -u
CT=$1
REF=${CTORCH_REFDATA:-}
TMP=${CTORCH_TEST_TMP:-/tmp}
if [ -z "$REF" ] || [ ! -f "$REF/mini-a/greedy.json" ]; then
  # CI sets CTORCH_REQUIRE_SHARED=1: a checkout without ../shared must not pass as skipped.
  if [ "${CTORCH_REQUIRE_SHARED:-}" = 1 ]; then
    echo "FAIL: CTORCH_REQUIRE_SHARED=1 but refdata (${REF:-CTORCH_REFDATA unset}) is missing" >&2; exit 1
  fi
  echo "skipped: refdata absent (CTORCH_REFDATA=${REF:-unset})"; exit 77
fi
if ! command -v python3 >/dev/null; then echo "skipped: python3 absent"; exit 77; fi
pass=0; fail=0
check() { if [ "$2" = "$3" ]; then pass=$((pass+1)); echo "ok   $1"; else fail=$((fail+1)); echo "FAIL $1"; echo "  got:  $2"; echo "  want: $3"; fi; }

for f in f16 q8_0 q4_k_m; do
  model="$REF/mini-a/mini-a-$f.gguf"
  for p in 0 3; do
    prompt=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[$p], end='')" "$REF/mini-a/prompts.json")
    want=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['mini-a-$f.gguf'][$p]['gen_text_hex'])" "$REF/mini-a/greedy.json")
    got=$("$CT" run -m "$model" -p "$prompt" -n 24 --temp 0 2>/dev/null | od -An -tx1 -v | tr -d ' \n')
    check "run $f prompt $p" "$got" "$want"
  done
done

model="$REF/mini-a/mini-a-q4_k_m.gguf"
prompt=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[1], end='')" "$REF/mini-a/prompts.json")
want=$(python3 -c "import json,sys; print(' '.join(map(str, json.load(open(sys.argv[1]))[1]['ids'])))" "$REF/mini-a/tokens.json")
check "tokenize" "$("$CT" tokenize -m "$model" -p "$prompt")" "$want"

"$CT" info "$model" > "$TMP/info.txt" 2>&1
check "info exit" "$?" "0"
check "info arch" "$(grep -c 'llama' "$TMP/info.txt" | awk '{print ($1>0)}')" "1"

"$CT" quantize "$REF/mini-a/mini-a-f16.gguf" "$TMP/cli-q8.gguf" Q8_0 >/dev/null 2>&1
check "quantize exit" "$?" "0"
got=$("$CT" run -m "$TMP/cli-q8.gguf" -p "Hello, my name is" -n 24 --temp 0 2>/dev/null | od -An -tx1 -v | tr -d ' \n')
want=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['mini-a-q8_0.gguf'][4]['gen_text_hex'])" "$REF/mini-a/greedy.json")
check "run on our Q8_0 file" "$got" "$want"
rm -f "$TMP/cli-q8.gguf" "$TMP/info.txt"

err=$("$CT" run -m /nonexistent/model.gguf -p hi 2>&1 >/dev/null); rc=$?
check "missing model exit" "$([ $rc -ne 0 ] && echo nonzero)" "nonzero"
check "missing model one line" "$(printf '%s\n' "$err" | wc -l | tr -d ' ')" "1"
err=$("$CT" run -m "$REF/mini-a/prompts.json" -p hi 2>&1 >/dev/null); rc=$?
check "not a gguf exit" "$([ $rc -ne 0 ] && echo nonzero)" "nonzero"
err=$("$CT" run -m "$model" -p "$prompt" -c 8 -n 4 2>&1 >/dev/null); rc=$?
check "context too long exit" "$([ $rc -ne 0 ] && echo nonzero)" "nonzero"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
