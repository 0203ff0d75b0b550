#!/bin/sh
# The ctorch command line as a llama.cpp user types it: usage errors that name
# the flag, values checked before the model loads, file checks, and the flags
# llama.cpp users expect (-s, -sys, -e, --ignore-eos, --chat-template, -ngl,
# --color, -i). Messages are checked, not only exit codes.
# A tiny random llama model with a synthesized 260-token vocabulary is written
# with ctorch-make-model, so nothing outside the build is needed.
# Usage: cli_args.sh CTORCH_BINARY MAKE_MODEL_BINARY   (CTORCH_TEST_TMP: scratch folder)
set -u
CT=$1
MM=${2:-}
TMP=${CTORCH_TEST_TMP:-/tmp}/cli_args.$$
if [ -z "$MM" ] || [ ! -x "$MM" ]; then echo "skipped: ctorch-make-model not built"; exit 77; fi
mkdir -p "$TMP" || exit 1
trap 'rm -rf "$TMP"' EXIT
M=$TMP/tiny.gguf
"$MM" --layers 1 --embd 64 --ff 128 --heads 2 --kv-heads 1 --vocab 260 --ctx 4096 --seed 7 \
  --vocab-file /nonexistent "$M" >/dev/null 2>&1 || { echo "FAIL: cannot write the tiny model"; exit 1; }

pass=0; fail=0
ok() { pass=$((pass+1)); printf 'ok   %s\n' "$1"; }
bad() { fail=$((fail+1)); printf 'FAIL %s: %s\n' "$1" "$2"; printf '  stdout: %s\n  stderr: %s\n' "$(head -c 600 "$TMP/out")" "$(head -c 600 "$TMP/err")"; }
# runs the command (stdin from /dev/null unless IN is set), 20 s at most
go() { if [ -n "${IN:-}" ]; then printf '%b' "$IN" | timeout 20 "$CT" "$@" >"$TMP/out" 2>"$TMP/err"; else timeout 20 "$CT" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"; fi; rc=$?
  # under ASan/UBSan an error path that leaks or misbehaves must fail too, whatever its exit code
  if grep -q 'Sanitizer\|runtime error:' "$TMP/err"; then fail=$((fail+1)); echo "FAIL sanitizer report: $*"; head -5 "$TMP/err"; fi; }
# expect NAME RC STDERR_TEXT -- ARGS: exit code RC and stderr containing STDERR_TEXT (fixed string)
expect() {
  name=$1 want=$2 text=$3; shift 4
  go "$@"
  if [ $rc -ne "$want" ]; then bad "$name" "exit $rc, want $want"
  elif ! grep -qF -- "$text" "$TMP/err"; then bad "$name" "stderr lacks '$text'"
  else ok "$name"; fi
}
# usage NAME STDERR_TEXT -- ARGS: a usage error (exit 2) found before any loading
usage() {
  un=$1 ut=$2; shift 3
  expect "$un" 2 "$ut" -- "$@"
  if grep -q '^model:\|^loading' "$TMP/err"; then fail=$((fail+1)); pass=$((pass-1)); echo "FAIL $un: the model was loaded first"; fi
  if [ "$(wc -l < "$TMP/err")" -ne 1 ]; then fail=$((fail+1)); pass=$((pass-1)); echo "FAIL $un: not one line"; fi
}
gen_count() { sed -n 's/.*generation \([0-9]*\) tokens.*/\1/p' "$TMP/err"; }
prompt_count() { sed -n 's/^timings: prompt \([0-9]*\) tokens.*/\1/p' "$TMP/err"; }

# --- every subcommand's --help goes to stdout, exit 0, and lists its table
for c in run chat bench perplexity tokenize info quantize devices version; do
  go $c --help
  if [ $rc -eq 0 ] && [ -s "$TMP/out" ] && [ ! -s "$TMP/err" ] && grep -q "^usage: ctorch $c" "$TMP/out"; then ok "$c --help"
  else bad "$c --help" "exit $rc or not on stdout"; fi
done
go run --help
for f in -ngl --gpu-layers --ignore-eos '-e, --escape' --color '-i, --interactive' '-s, --seed' --top-p --min-p; do
  grep -qF -- "$f" "$TMP/out" && ok "run --help lists $f" || bad "run --help lists $f" "missing"
done
grep -q 'layers to offload' "$TMP/out" && ok "run --help: -ngl says what it offloads" || bad "-ngl help" "missing"
go chat --help
for f in '-sys, --system-prompt' '--chat-template' '-s, --seed' --ignore-eos; do
  grep -qF -- "$f" "$TMP/out" && ok "chat --help lists $f" || bad "chat --help lists $f" "missing"
done

# --- usage errors say what is wrong
usage "unknown flag named"   "unknown option '--colour'"       -- run -m "$M" -p hi --colour
usage "unknown =flag named"  "unknown option '--bogus'"        -- run -m "$M" -p hi --bogus=3
usage "missing value named"  "-p needs a value"                -- run -m "$M" -p
usage "missing -m"           "no model given: -m MODEL.gguf is required" -- run -p hi
usage "-p with -f"           "-p and -f conflict"              -- run -m "$M" -p hi -f "$M"
usage "no prompt"            "no prompt: give -p TEXT or -f FILE" -- run -m "$M"
usage "usage before files"   "--temp must be >= 0"             -- run -m "$TMP/none.gguf" -p hi --temp -1
usage "flag with =value"     "--ignore-eos takes no value"     -- run -m "$M" -p hi --ignore-eos=1
usage "extra argument"       "unexpected argument 'stray'"     -- run -m "$M" -p hi stray
usage "chat missing -m"      "no model given"                  -- chat
usage "tokenize -p with -f"  "-p and -f conflict"              -- tokenize -m "$M" -p a -f "$M"
usage "perplexity no -f"     "no text: -f TEXTFILE is required" -- perplexity -m "$M"
usage "quantize missing TYPE" "missing TYPE"                   -- quantize "$M" "$TMP/q.gguf"
usage "quantize -t abc"      "-t wants an integer, got 'abc'"  -- quantize -t abc "$M" "$TMP/q.gguf" Q8_0
usage "quantize unknown type" "unknown type 'Q9'"              -- quantize "$M" "$TMP/q.gguf" Q9
usage "info two models"      "unexpected extra argument"       -- info "$M" "$M"
usage "bench -o xml"         "-o must be one of md|json, got 'xml'" -- bench -m "$M" -o xml

# --- values checked before the model loads
usage "--temp < 0"           "--temp must be >= 0, got -0.5"   -- run -m "$M" -p hi --temp -0.5
usage "--temp nan"           "--temp wants a finite number, got 'nan'" -- run -m "$M" -p hi --temp nan
usage "--temp inf"           "--temp wants a finite number, got 'inf'" -- run -m "$M" -p hi --temp inf
usage "--top-p > 1"          "--top-p must be between 0 and 1, got 1.5" -- run -m "$M" -p hi --top-p 1.5
usage "--min-p < 0"          "--min-p must be between 0 and 1, got -0.1" -- run -m "$M" -p hi --min-p -0.1
usage "--top-k < 0"          "--top-k must be >= 0, got -1"    -- run -m "$M" -p hi --top-k -1
usage "-n < -1"              "-n must be >= -1, got -2"        -- run -m "$M" -p hi -n -2
usage "-n trailing garbage"  "-n wants an integer, got '5x'"   -- run -m "$M" -p hi -n 5x
usage "-n with space"        "-n wants an integer, got ' 5'"   -- run -m "$M" -p hi -n ' 5'
usage "-n overflow"          "-n must be >= -1, got 99999999999" -- run -m "$M" -p hi -n 99999999999
usage "--temp garbage"       "--temp wants a finite number, got '0.7x'" -- run -m "$M" -p hi --temp 0.7x
usage "--temp with space"    "--temp wants a finite number, got ' 1'" -- run -m "$M" -p hi --temp ' 1'
usage "chat two templates"   "--chat-template and --chat-template-file conflict" -- chat -m "$M" --chat-template chatml --chat-template-file "$M"
usage "chat --ignore-eos, no -n" "--ignore-eos needs -n N" -- chat -m "$M" --ignore-eos
usage "info -m and a model"  "two models given"                -- info -m "$M" "$M"
usage "help unknown command" "unknown command 'bogus'"         -- help bogus
# the command list: -h, --help and help alone print it on stdout
for h in -h --help help '--help run'; do
  go $h
  [ $rc -eq 0 ] && grep -q 'quantize' "$TMP/out" && ok "ctorch $h lists the commands" || bad "ctorch $h" "exit $rc"
done
# CTORCH_LOG's level names, read by the command's own log lines: debug keeps the model line,
# error drops it
for lv in debug DEBUG error; do
  CTORCH_LOG=$lv go run -m "$M" -p hi -n 1 --temp 0
  if [ $lv = error ]; then want=0; else want=1; fi
  [ $rc -eq 0 ] && [ "$(grep -c '^model:' "$TMP/err")" -eq $want ] && ok "CTORCH_LOG=$lv run" || bad "CTORCH_LOG=$lv run" "exit $rc"
done
unset CTORCH_LOG # an assignment before a function call may outlive it (dash)
# CTORCH_STATS=1: the executor's summary after the run, on stderr
CTORCH_STATS=1 go run -m "$M" -p hi -n 1 --temp 0
[ $rc -eq 0 ] && grep -q '^ctorch executor summary' "$TMP/err" && ok "CTORCH_STATS=1 summary" || bad "CTORCH_STATS=1" "no summary"
unset CTORCH_STATS
go run -m "$M" -p hi -n 1 --temp 0
grep -q '^ctorch executor summary' "$TMP/err" && bad "no CTORCH_STATS" "summary printed anyway" || ok "no CTORCH_STATS: no summary"
usage "--temp empty"         "--temp wants a finite number, got ''" -- run -m "$M" -p hi --temp ''
usage "-n empty"             "-n wants an integer, got ''"     -- run -m "$M" -p hi -n ''
usage "-n word"              "-n wants an integer, got 'x5'"   -- run -m "$M" -p hi -n x5
usage "--repeat-penalty 0"   "--repeat-penalty must be > 0"    -- run -m "$M" -p hi --repeat-penalty 0
usage "-ngl validated"       "-ngl takes a number of layers (0 or more), all or auto, got 'lots'" -- run -m "$M" -p hi -ngl lots
usage "-ngl < 0"             "-ngl takes a number of layers (0 or more), all or auto, got '-3'" -- run -m "$M" -p hi -ngl -3
usage "-ngl 1.5"             "-ngl takes a number of layers (0 or more), all or auto, got '1.5'" -- run -m "$M" -p hi -ngl 1.5
usage "-s garbage"           "-s wants an integer, got 'x1'"   -- run -m "$M" -p hi -s x1
usage "-s < -1"              "-s must be >= -1, got -2"        -- run -m "$M" -p hi -s -2
usage "chat -s is the seed"  "-s wants an integer, got 'be nice'" -- chat -m "$M" -s 'be nice'
usage "chat --temp < 0"      "--temp must be >= 0"             -- chat -m "$M" --temp -1
usage "perplexity -c 2"      "-c must be >= 3, got 2"          -- perplexity -m "$M" -f "$M" -c 2
usage "perplexity -c 0"      "-c must be >= 3, got 0"          -- perplexity -m "$M" -f "$M" -c 0
usage "bench -r 0"           "-r must be between 1 and 64, got 0" -- bench -m "$M" -r 0

# --- -t above the hardware threads is capped with a warning
hw=$(getconf _NPROCESSORS_ONLN)
expect "-t capped" 0 "-t 100000 is more than the $hw hardware threads; using $hw" -- run -m "$M" -p hi -n 1 -t 100000
grep -qF "; $hw CPU thread" "$TMP/err" && ok "-t capped: runs $hw threads" || bad "-t capped: runs $hw threads" "devices line"
expect "quantize -t capped" 0 "using $hw" -- quantize -t 100000 "$M" "$TMP/q.gguf" Q8_0

# --- files: -m must be a regular file (stat before open: a FIFO never hangs); -f must have text
mkfifo "$TMP/fifo"
expect "-m FIFO"             1 "is not a regular file"         -- run -m "$TMP/fifo" -p hi
[ $rc -ne 124 ] || bad "-m FIFO" "hung"
expect "info FIFO"           1 "is not a regular file"         -- info "$TMP/fifo"
expect "tokenize FIFO"       1 "is not a regular file"         -- tokenize -m "$TMP/fifo" -p hi
expect "quantize FIFO input" 1 "is not a regular file"         -- quantize "$TMP/fifo" "$TMP/q.gguf" Q8_0
expect "-m directory"        1 "model '$TMP' is a directory, not a GGUF file" -- run -m "$TMP" -p hi
expect "-m missing"          1 "cannot open model '$TMP/none.gguf': No such file or directory" -- run -m "$TMP/none.gguf" -p hi
: > "$TMP/empty.txt"
expect "-f empty"            1 "-f $TMP/empty.txt: the file is empty" -- run -m "$M" -f "$TMP/empty.txt"
grep -q '^model:' "$TMP/err" && bad "-f empty before load" "model loaded first" || ok "-f empty before load"
expect "-f directory"        1 "-f $TMP is a directory"        -- run -m "$M" -f "$TMP"
expect "-f missing"          1 "cannot open: No such file or directory" -- run -m "$M" -f "$TMP/none.txt"
expect "perplexity -f empty" 1 "the file is empty"             -- perplexity -m "$M" -f "$TMP/empty.txt"
expect "tokenize -f empty"   1 "the file is empty"             -- tokenize -m "$M" -f "$TMP/empty.txt"
if [ "$(id -u)" -ne 0 ]; then
  echo hi > "$TMP/locked.txt"; chmod 000 "$TMP/locked.txt"
  expect "-f unreadable" 1 "Permission denied" -- run -m "$M" -f "$TMP/locked.txt"
else echo "note: running as root: the unreadable -f check is left out"; fi
printf 'hi\n' > "$TMP/p.txt"
IN='hi\n'; expect "-f from a pipe works" 0 "timings:" -- run -m "$M" -f /dev/stdin -n 2 --temp 0; IN=

# --- -s/--seed: the same seed gives the same sampled text; -1 is a seed from the clock
go run -m "$M" -p hello -n 24 --temp 1 -s 42; a=$(cat "$TMP/out")
go run -m "$M" -p hello -n 24 --temp 1 --seed 42; b=$(cat "$TMP/out")
go run -m "$M" -p hello -n 24 --temp 1 -s 43; c=$(cat "$TMP/out")
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" != "$c" ] && ok "-s fixes the sampled text" || bad "-s fixes the sampled text" "a/b/c"
go run -m "$M" -p hello -n 1 -s -1
grep -q 'seed 18446744073709551615' "$TMP/err" && bad "-s -1 is random" "became 2^64-1" ||
  { grep -q 'seed [0-9]' "$TMP/err" && ok "-s -1 is random (seed printed)" || bad "-s -1" "no seed printed"; }

# --- -e: escapes processed like llama.cpp (compared through the tokenizer)
tk() { "$CT" tokenize -m "$M" "$@" 2>/dev/null; }
nl='
'
[ "$(tk -e -p 'a\nb\tc')" = "$(tk -p "a${nl}b	c")" ] && ok "-e \\n \\t" || bad "-e \\n \\t" "differs"
[ "$(tk -e -p '\x41\x7a')" = "$(tk -p 'Az')" ] && ok "-e \\xNN" || bad "-e \\xNN" "differs"
[ "$(tk -e -p 'a\\n\"\q')" = "$(tk -p 'a\n"\q')" ] && ok "-e \\\\ \\\" and unknown kept" || bad "-e \\\\" "differs"
[ "$(tk -e -p 'x\x4')" = "$(tk -p 'x\x4')" ] && ok "-e short \\x kept" || bad "-e short \\x" "differs"
[ "$(tk -e -p '\x4A\x6a\x4F')" = "$(tk -p 'JjO')" ] && ok "-e \\xNN, both cases" || bad "-e \\xNN cases" "differs"
[ "$(tk -e -p '\xZ1\x4Z\xg0')" = "$(tk -p '\xZ1\x4Z\xg0')" ] && ok "-e \\x without two hex digits kept" || bad "-e bad \\x" "differs"
[ "$(tk -e -p "a\\rb\\'c\\")" = "$(tk -p "a$(printf '\r')b'c\\")" ] && ok "-e \\r \\' and a last backslash" || bad "-e \\r" "differs"
[ "$(tk -p 'a\nb')" != "$(tk -p "a${nl}b")" ] && ok "no -e: backslashes kept" || bad "no -e" "escaped anyway"
go run -m "$M" -e -p 'a\nb' -n 4 --temp 0; a=$(cat "$TMP/out")
go run -m "$M" -p "a${nl}b" -n 4 --temp 0; b=$(cat "$TMP/out")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "run -e" || bad "run -e" "differs from the unescaped prompt"

# --- --ignore-eos: all -n tokens even where the sampler picks end-of-text
# (temperature 100 makes the 260 tokens near-uniform: </s> comes within ~260 draws)
S="--temp 100 --top-k 0 --top-p 1 --min-p 0 -s 3 -n 2000"
go run -m "$M" -p hello $S; n1=$(gen_count)
go run -m "$M" -p hello $S --ignore-eos; n2=$(gen_count)
[ -n "$n1" ] && [ "$n1" -lt 2000 ] && ok "without --ignore-eos it stops early ($n1)" || bad "eos stop" "n=$n1"
[ "$n2" = 2000 ] && ok "--ignore-eos generates all 2000" || bad "--ignore-eos" "n=$n2"

# --- -ngl is accepted (and changes nothing on the CPU)
go run -m "$M" -p hello -n 8 --temp 0; a=$(cat "$TMP/out")
go run -m "$M" -p hello -n 8 --temp 0 -ngl 99; b=$(cat "$TMP/out")
[ $rc -eq 0 ] && [ "$a" = "$b" ] && ok "-ngl 99 accepted" || bad "-ngl 99" "exit $rc or other text"
for v in all auto 0; do
  go run -m "$M" -p hello -n 8 --temp 0 -ngl $v; b=$(cat "$TMP/out")
  [ $rc -eq 0 ] && [ "$a" = "$b" ] && ok "-ngl $v accepted" || bad "-ngl $v" "exit $rc or other text"
done

# --- --color: only on a terminal; piped output stays exactly the generated text
go run -m "$M" -p hello -n 8 --temp 0 --color; b=$(cat "$TMP/out")
[ "$a" = "$b" ] && ok "--color piped: plain text" || bad "--color piped" "escape codes or prompt in a pipe"
if script -qec "true" /dev/null >/dev/null 2>&1; then
  script -qec "$CT run -m $M -p hello -n 8 --temp 0 --color 2>/dev/null" /dev/null > "$TMP/tty.out" </dev/null
  grep -q "$(printf '\033\\[33mhello\033\\[0m')" "$TMP/tty.out" && ok "--color on a terminal: prompt in colour" ||
    bad "--color on a terminal" "no coloured prompt: $(od -c "$TMP/tty.out" | head -3)"
else echo "note: no 'script' to make a terminal: the --color terminal check is left out"; fi

# --- -i: after the prompt's text, each input line is appended and continued
go run -m "$M" -p hello -n 6 --temp 0; a=$(cat "$TMP/out")
IN='more words\n'; go run -m "$M" -p hello -n 6 --temp 0 -i; IN=
b=$(cat "$TMP/out")
[ $rc -eq 0 ] && [ "$(gen_count)" = 12 ] && ok "-i: a second generation" || bad "-i" "exit $rc, $(gen_count) tokens"
case $b in "$a"?*) ok "-i: first text as without -i" ;; *) bad "-i: first text" "differs" ;; esac
np=$(prompt_count); want=$(( $(tk -p hello | wc -w) + $(tk --no-bos -p "more words${nl}" | wc -w) ))
[ "$np" = "$want" ] && ok "-i: the line went into the context ($np tokens)" || bad "-i context" "$np tokens, want $want"

# --- chat: -sys is the system prompt, --chat-template NAME|FILE
IN='hi\n'; go chat -m "$M" -n 8 --temp 0 --chat-template chatml; IN=; a=$(cat "$TMP/out")
grep -qF "chat template: chatml" "$TMP/err" && ok "chat --chat-template NAME" || bad "chat --chat-template NAME" "not chatml"
IN='hi\n'; go chat -m "$M" -n 8 --temp 0 --chat-template chatml -sys "You are terse."; IN=; b=$(cat "$TMP/out")
[ $rc -eq 0 ] && [ "$a" != "$b" ] && ok "chat -sys changes the context" || bad "chat -sys" "exit $rc or same reply"
IN='hi\n'; go chat -m "$M" -n 8 --temp 0 --chat-template chatml --system-prompt "You are terse."; IN=
[ "$(cat "$TMP/out")" = "$b" ] && ok "chat --system-prompt = -sys" || bad "--system-prompt" "differs"
printf '{%% for m in messages %%}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%% endfor %%}' > "$TMP/t.jinja"
IN='hi\n'; go chat -m "$M" -n 8 --temp 0 --chat-template "$TMP/t.jinja"; IN=
grep -qF "chat template: chatml" "$TMP/err" && [ "$(cat "$TMP/out")" = "$a" ] && ok "chat --chat-template FILE recognised" ||
  bad "chat --chat-template FILE" "not chatml"
echo '{{ messages | tojson }}' > "$TMP/u.jinja"
usage "chat template file unknown" "does not run Jinja, and this template matches none" -- chat -m "$M" --chat-template "$TMP/u.jinja"
usage "chat template unknown name" "'nope' is neither a built-in template" -- chat -m "$M" --chat-template nope
usage "chat --ignore-eos needs -n" "--ignore-eos needs -n N" -- chat -m "$M" --ignore-eos

# --- perplexity -c 3, the smallest that scores a token, gives a finite number
yes 'the cat sat on the mat' | head -20 > "$TMP/text.txt"
expect "perplexity -c 3" 0 "tokens scored" -- perplexity -m "$M" -f "$TMP/text.txt" -c 3 --chunks 4
grep -q 'Final estimate: PPL = [0-9]' "$TMP/out" && ! grep -qi nan "$TMP/out" "$TMP/err" && ok "perplexity -c 3 finite" ||
  bad "perplexity -c 3 finite" "nan or no estimate"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
