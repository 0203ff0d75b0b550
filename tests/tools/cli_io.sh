#!/bin/sh
# The ctorch command never loses a user's data and reports I/O honestly:
# quantize refuses to overwrite its input (by name, ./name, symlink, hard link)
# and a missing output folder before any work; a failed stdout write is exit 1;
# Ctrl-C exits 130; CTORCH_LOG quiets the command's own lines; metadata from the
# file is escaped; plain progress starts at 0% and the timings start their own line.
# Works on a tiny random model from ctorch-make-model, so it needs no ../shared.
# Usage: cli_io.sh CTORCH_BINARY MAKE_MODEL_BINARY
set -u
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
CT=$(abs "$1")   # the quantize checks run from inside the test folder
MK=$(abs "$2")
T=$(mktemp -d "${CTORCH_TEST_TMP:-/tmp}/cli-io-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { if [ "$2" = "$3" ]; then pass=$((pass+1)); echo "ok   $1"; else fail=$((fail+1)); echo "FAIL $1"; echo "  got:  $2"; echo "  want: $3"; fi; }
has() { if grep -q -- "$2" "$1"; then echo yes; else echo no; fi; }
sum() { cksum < "$1"; }

# A tiny llama with a synthesized vocabulary and a hostile general.name: ESC,
# a C1 CSI (U+009B) and an invalid UTF-8 byte.
name=$(printf 'evil\033[2Jname\302\233x\377')
"$MK" --layers 1 --embd 64 --ff 128 --heads 2 --kv-heads 1 --vocab 300 --ctx 32768 --seed 7 \
      --name "$name" --vocab-file /nonexistent "$T/m.gguf" >/dev/null 2>"$T/mk.err"
check "make tiny model" "$?" "0"
M=$T/m.gguf

# ---- quantize never writes over its input ----
mkdir -p "$T/q" && cp "$M" "$T/q/in.gguf" && ln -s in.gguf "$T/q/sym.gguf" && ln "$T/q/in.gguf" "$T/q/hard.gguf"
before=$(sum "$T/q/in.gguf")
for out in "$T/q/in.gguf" "./in.gguf" "sym.gguf" "hard.gguf" "$T/q/../q/in.gguf"; do
  (cd "$T/q" && "$CT" quantize in.gguf "$out" Q8_0) >"$T/out" 2>"$T/err"; rc=$?
  check "quantize over input ($out): exit 1" "$rc" "1"
  check "quantize over input ($out): says so" "$(has "$T/err" 'same file')" "yes"
  check "quantize over input ($out): no work" "$(has "$T/err" '^quantize: ')" "no"
done
(cd "$T/q" && "$CT" quantize sym.gguf in.gguf Q8_0) >/dev/null 2>"$T/err"
check "quantize from a symlink onto its target: exit 1" "$?" "1"
check "input unchanged" "$(sum "$T/q/in.gguf")" "$before"
check "no file left behind" "$(ls -A "$T/q" | tr '\n' ' ')" "hard.gguf in.gguf sym.gguf "

"$CT" quantize "$M" "$T/no-such-folder/out.gguf" Q8_0 >/dev/null 2>"$T/err"
check "missing folder: exit 1" "$?" "1"
check "missing folder: says so" "$(has "$T/err" 'does not exist')" "yes"
check "missing folder: before any work" "$(has "$T/err" '^quantize: ')" "no"

"$CT" quantize "$M" "$T/q/out.gguf" Q8_0 >"$T/out" 2>"$T/err"
check "quantize to a new file" "$?" "0"
check "quantize prints the output path" "$(cat "$T/out")" "$T/q/out.gguf"
check "quantize: plain progress starts at 0%" "$(head -n 1 "$T/err")" "quantize: 0%"
"$CT" quantize "$M" "$T/q/out.gguf" Q8_0 >/dev/null 2>&1
check "quantize over an existing other file" "$?" "0"
check "no temporary file left" "$(ls -A "$T/q" | grep -c ctorch-tmp)" "0"

# ---- a failed write to stdout is an error, for every command ----
for cmd in "--help" "version" "devices" "devices --json" "info $M" "tokenize -m $M -p hello" \
           "run -m $M -p hello -n 4 --temp 0" "quantize $M $T/q/full.gguf Q8_0"; do
  # shellcheck disable=SC2086
  "$CT" $cmd >/dev/full 2>"$T/err"; rc=$?
  check "$cmd >/dev/full: exit 1" "$rc" "1"
  check "$cmd >/dev/full: message" "$(has "$T/err" 'writing the output failed')" "yes"
done

"$CT" help run >/dev/full 2>"$T/err"
check "help run >/dev/full: exit 1" "$?" "1"
printf 'hello\nworld\n' | "$CT" run -m "$M" -i -n 4 --temp 0 >/dev/full 2>"$T/err"
check "run -i >/dev/full: exit 1" "$?" "1"
check "run -i >/dev/full: message once" "$(grep -c 'writing the output failed' "$T/err")" "1"
yes hello | head -n 50 | "$CT" chat -m "$M" -n 4 >/dev/full 2>"$T/err"
check "chat >/dev/full: exit 1" "$?" "1"
check "chat >/dev/full: stops at the first reply" "$(grep -c '^\[' "$T/err")" "0"

# ---- escaped metadata ----
"$CT" info "$M" >"$T/out" 2>&1
check "info: no raw ESC" "$(tr -d -c '\033' <"$T/out" | wc -c | tr -d ' ')" "0"
check "info: no raw C1" "$(grep -c "$(printf '\302\233')" "$T/out")" "0"
check "info: name escaped" "$(has "$T/out" 'evil\\x1b\[2Jname\\u009bx\\xff')" "yes"
"$CT" run -m "$M" -p hello -n 2 --temp 0 >/dev/null 2>"$T/err"
check "run: model line escaped" "$(has "$T/err" 'model: evil\\x1b\[2Jname\\u009bx\\xff')" "yes"
check "run: no raw ESC" "$(tr -d -c '\033' <"$T/err" | wc -c | tr -d ' ')" "0"

# ---- progress and timings when stdout is not a terminal ----
check "run: plain progress starts at 0%" "$(head -n 1 "$T/err")" "loading: 0%"
"$CT" run -m "$M" -p hello -n 8 --temp 0 >"$T/both" 2>&1
check "run 2>&1: timings on their own line" "$(grep -c '^timings: ' "$T/both")" "1"
"$CT" run -m "$M" -p hello -n 8 --temp 0 >"$T/out" 2>/dev/null
"$CT" run -m "$M" -p hello -n 8 --temp 0 2>/dev/null | cat >"$T/out2"
check "run: stdout is exactly the text (file vs pipe)" "$(sum "$T/out")" "$(sum "$T/out2")"

# ---- CTORCH_LOG quiets the command's own lines ----
CTORCH_LOG=warn "$CT" run -m "$M" -p hello -n 4 --temp 0 >/dev/null 2>"$T/err"
check "CTORCH_LOG=warn run: nothing on stderr" "$(wc -c <"$T/err" | tr -d ' ')" "0"
printf 'hello\n' | CTORCH_LOG=warn "$CT" run -m "$M" -p hi -i -n 4 --temp 0 --ignore-eos >/dev/null 2>"$T/err"
check "CTORCH_LOG=warn run -i --ignore-eos: nothing on stderr" "$(wc -c <"$T/err" | tr -d ' ')" "0"
CTORCH_LOG=error "$CT" run -m "$M" -p hi -n 2 -t 100000 >/dev/null 2>"$T/err"
check "CTORCH_LOG=error run -t (too many): no warning" "$(wc -c <"$T/err" | tr -d ' ')" "0"
CTORCH_LOG=error "$CT" quantize "$M" "$T/q/quiet.gguf" Q8_0 >/dev/null 2>"$T/err"
check "CTORCH_LOG=error quantize: nothing on stderr" "$(wc -c <"$T/err" | tr -d ' ')" "0"
CTORCH_LOG=warn "$CT" bench -m "$M" -p 8 -n 4 -r 1 >/dev/null 2>"$T/err"
check "CTORCH_LOG=warn bench: nothing on stderr" "$(wc -c <"$T/err" | tr -d ' ')" "0"
i=0; while [ $i -lt 40 ]; do printf 'the quick brown fox jumps over the lazy dog '; i=$((i+1)); done >"$T/text.txt"
CTORCH_LOG=warn "$CT" perplexity -m "$M" -f "$T/text.txt" -c 16 --chunks 2 >"$T/out" 2>"$T/err"
check "CTORCH_LOG=warn perplexity: nothing on stderr" "$(wc -c <"$T/err" | tr -d ' ')" "0"
check "CTORCH_LOG=warn perplexity: result on stdout" "$(has "$T/out" 'Final estimate')" "yes"
CTORCH_LOG=error "$CT" run -m "$T/none.gguf" -p hello >/dev/null 2>"$T/err"
check "CTORCH_LOG=error: errors still shown" "$(has "$T/err" 'error')" "yes"
"$CT" run -m "$M" -p hello -n 4 --temp 0 >/dev/null 2>"$T/err"
check "default: info lines shown" "$(has "$T/err" '^timings: ')" "yes"

# ---- Ctrl-C exits 130 ----
: >"$T/err"   # the wait below must not find the previous run's "prompt:" line (a kill before the
             # handler is installed is ignored: sh starts background jobs with SIGINT ignored)
# The whole 32768-token context: a replayed decode of this tiny model fills the default 4096
# in ~0.1 s, before a Ctrl-C could arrive; the handler is set before "prompt:" is printed.
"$CT" run -m "$M" -p hello -n -1 -c 32768 --temp 0 >"$T/out" 2>"$T/err" &
pid=$!
i=0
while [ $i -lt 200 ] && ! grep -q '^prompt: ' "$T/err"; do sleep 0.05; i=$((i+1)); done
sleep 0.2   # some text first (filling the context takes ~10 s here)
kill -INT $pid
wait $pid; rc=$?
check "run interrupted: exit 130" "$rc" "130"
check "run interrupted: says so" "$(has "$T/err" 'interrupted')" "yes"
check "run interrupted: some text was generated" "$([ -s "$T/out" ] && echo yes)" "yes"

# run -i: Ctrl-C at the prompt (after a reply to a typed line) exits 130
mkfifo "$T/rin"
"$CT" run -m "$M" -p hello -i -n 4 --temp 0 <"$T/rin" >"$T/out" 2>"$T/err" &
pid=$!
exec 3>"$T/rin"
printf 'more\n' >&3
i=0
while [ $i -lt 200 ] && [ "$(grep -c 'prompt: ' "$T/err")" = 0 ]; do sleep 0.05; i=$((i+1)); done
sleep 0.5
kill -INT $pid
# a loaded machine may still be replying: that Ctrl-C only stops the reply, the next one is at the prompt
i=0
while [ $i -lt 20 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i+1)); done
kill -0 $pid 2>/dev/null && kill -INT $pid
wait $pid; rc=$?
exec 3>&-
check "run -i interrupted at the prompt: exit 130" "$rc" "130"
check "run -i interrupted: timings still printed" "$(grep -c '^timings: ' "$T/err")" "1"

# quantize: Ctrl-C stops it with 130 and leaves neither the output nor a temporary file
if [ -n "${CTORCH_REFDATA:-}" ] && [ -f "$CTORCH_REFDATA/mini-a/mini-a-f16.gguf" ]; then
  mkdir -p "$T/qi"
  "$CT" quantize "$CTORCH_REFDATA/mini-a/mini-a-f16.gguf" "$T/qi/out.gguf" Q4_K_M -t 1 >/dev/null 2>"$T/err" &
  pid=$!
  i=0
  while [ $i -lt 200 ] && ! grep -q '^quantize: 0%' "$T/err"; do sleep 0.02; i=$((i+1)); done
  kill -INT $pid
  wait $pid; rc=$?
  check "quantize interrupted: exit 130" "$rc" "130"
  check "quantize interrupted: says so" "$(has "$T/err" 'interrupted')" "yes"
  check "quantize interrupted: folder left empty" "$(ls -A "$T/qi" | wc -l | tr -d ' ')" "0"
fi

# chat: Ctrl-C at the prompt exits 130 (during a reply it only stops the reply)
mkfifo "$T/in"
: >"$T/err"
"$CT" chat -m "$M" -n 4 <"$T/in" >"$T/out" 2>"$T/err" &
pid=$!
exec 3>"$T/in"   # keeps chat waiting at its prompt
i=0
while [ $i -lt 200 ] && ! grep -q 'chat template' "$T/err"; do sleep 0.05; i=$((i+1)); done
sleep 0.3
kill -INT $pid
wait $pid; rc=$?
exec 3>&-
check "chat interrupted at the prompt: exit 130" "$rc" "130"

# ---- --dump-logits writes its file whole: llama.cpp's logits, bound of tests/llm ----
"$CT" run -m "$M" -p hello -n 1 --dump-logits "$T/no-such-folder/l.f32" >/dev/null 2>"$T/err"
check "--dump-logits into a missing folder: exit 1" "$?" "1"
check "--dump-logits into a missing folder: before loading" "$(has "$T/err" '^loading')" "no"
R=${CTORCH_REFDATA:-}
if [ -n "$R" ] && [ -f "$R/mini-a/logits/mini-a-f16.p0.last.f32" ] && command -v python3 >/dev/null; then
  prompt=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[0], end='')" "$R/mini-a/prompts.json")
  "$CT" run -m "$R/mini-a/mini-a-f16.gguf" -p "$prompt" -n 1 --temp 0 --dump-logits "$T/l.f32" >/dev/null 2>&1
  nmse=$(python3 -c "
import struct,sys
a=open(sys.argv[1],'rb').read(); b=open(sys.argv[2],'rb').read()
if len(a)!=len(b): print('sizes', len(a), len(b)); sys.exit()
x=struct.unpack('<%df'%(len(a)//4),a); y=struct.unpack('<%df'%(len(b)//4),b)
e=sum((p-q)**2 for p,q in zip(x,y)); n=sum(q*q for q in y)
print('ok' if e/n < 1e-4 else 'nmse %g'%(e/n))" "$T/l.f32" "$R/mini-a/logits/mini-a-f16.p0.last.f32")
  check "--dump-logits matches llama.cpp's logits (nmse < 1e-4)" "$nmse" "ok"
fi

# ---- tools find their data without a fixed absolute path ----
if [ -n "${CTORCH_REFDATA:-}" ] && [ -f "$CTORCH_REFDATA/tokenizer/ggml-vocab-llama-spm.gguf" ]; then
  "$MK" --layers 1 --embd 64 --ff 128 --heads 2 --kv-heads 1 --ctx 64 "$T/v.gguf" >/dev/null 2>"$T/err"
  check "make-model default vocabulary from CTORCH_REFDATA" \
        "$(has "$T/err" "copied from $CTORCH_REFDATA/tokenizer/ggml-vocab-llama-spm.gguf")" "yes"
  rm -f "$T/v.gguf"
fi
mkdir -p "$T/cache/ctorch"
CTORCH_REFDATA= XDG_CACHE_HOME=$T/cache "$MK" --layers 1 --embd 64 --ff 128 --heads 2 --kv-heads 1 --ctx 64 \
    --vocab 300 "$T/v.gguf" >/dev/null 2>"$T/err"
check "make-model without a vocabulary synthesizes one" "$(has "$T/err" 'synthesized')" "yes"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
