#!/bin/sh
# `ctorch chat` with piped input on ../shared/refdata's mini-a (skipped when
# absent; its replies are noise, the conversation handling is what is checked):
# slash commands are handled and never sent, a line longer than 8 KiB is one
# message, a conversation that outgrows a small context drops its oldest turns
# (saying so) and still answers every message, a message too long for the
# context is refused with a clear message, and /quit ends the input.
# Usage: cli_chat.sh CTORCH_BINARY   (CTORCH_REFDATA names the refdata folder)
set -u
CT=$1
REF=${CTORCH_REFDATA:-}
TMP=${CTORCH_TEST_TMP:-/tmp}/cli_chat.$$
if [ -z "$REF" ] || [ ! -f "$REF/mini-a/mini-a-q4_k_m.gguf" ] || ! command -v python3 >/dev/null; then
  echo "skipped: refdata or python3 absent"; exit 77
fi
M="$REF/mini-a/mini-a-q4_k_m.gguf"
pass=0; fail=0
check() { if [ "$2" = "$3" ]; then pass=$((pass+1)); echo "ok   $1"; else fail=$((fail+1)); echo "FAIL $1"; echo "  got:  $2"; echo "  want: $3"; fi; }
replies() { grep -c '^\[[0-9]* tokens, ' "$1"; }

# 1. commands: handled by the program, never sent (only "hello" and "//x" get replies)
printf 'hello\n/help\n/foo bar\n/stats\n//x\n/system Be terse.\n/system\n/reset\n/stats\n/quit\nnot read\n' |
  "$CT" chat -m "$M" -n 4 --seed 1 >"$TMP.out" 2>"$TMP.err"
check "commands: exit code" "$?" "0"
check "commands: replies" "$(replies "$TMP.err")" "2"
check "commands: /help lists /reset" "$(grep -c '^  /reset' "$TMP.out")" "1"
check "commands: unknown command" "$(grep -c '^unknown command /foo, /help lists them$' "$TMP.err")" "1"
check "commands: /stats before /reset" "$(grep -c '^conversation: 1 turn kept (2 messages)' "$TMP.out")" "1"
check "commands: /system shows it" "$(grep -c '^system prompt: Be terse.$' "$TMP.out")" "1"
check "commands: /reset keeps the system prompt" \
  "$(grep -c '^conversation: 0 turns kept (0 messages), 0 dropped to fit the context; system prompt: set$' "$TMP.out")" "1"
check "commands: /quit ends the input" "$(grep -c 'not read' "$TMP.out")" "0"

# 1b. leaving before any message (no turns were ever stored: UBSan once saw memmove(NULL) here)
printf '/stats\n/quit\n' | "$CT" chat -m "$M" -n 4 --seed 1 >"$TMP.out" 2>"$TMP.err"
check "no message: exit code" "$?" "0"
check "no message: /stats answered" "$(grep -c '^conversation: 0 turns kept' "$TMP.out")" "1"

# 2. a line of 12,000 bytes is one message (fgets with an 8 KiB buffer made two)
python3 -c "print(' '.join(['international'] * 860)); print('/stats')" |
  "$CT" chat -m "$M" -n 4 --seed 1 >"$TMP.out" 2>"$TMP.err"
check "long line: exit code" "$?" "0"
check "long line: one reply" "$(replies "$TMP.err")" "1"
check "long line: one turn" "$(grep -c '^conversation: 1 turn kept (2 messages)' "$TMP.out")" "1"

# 3. twelve messages in a 128-token context: the oldest turns go, every message is answered
python3 -c "
for i in range(12): print('message number %d about the weather' % i)
print('/stats')" | "$CT" chat -m "$M" -c 128 -n 8 --seed 1 -sys "You are terse." >"$TMP.out" 2>"$TMP.err"
check "overflow: exit code" "$?" "0"
check "overflow: every message answered" "$(replies "$TMP.err")" "12"
dropped=$(grep -c '^(the conversation, [0-9]* tokens, outgrew the 120 the context leaves for the prompt: dropped the oldest [0-9]* turns\?; kept the system prompt and [0-9]* turns\?, this one included: [0-9]* tokens)$' "$TMP.err")
check "overflow: said so on stderr" "$([ "$dropped" -ge 2 ] && echo yes)" "yes"
# dropping goes down to half the room (60 tokens), so it happens every few messages, not at each one
over=$(sed -n 's/^(the conversation, .*: \([0-9]*\) tokens)$/\1/p' "$TMP.err" | awk '$1 > 60' | wc -l | tr -d ' ')
check "overflow: down to half the room" "$over" "0"
used=$(sed -n 's/^context: \([0-9]*\) of 128 tokens in use.*/\1/p' "$TMP.out")
check "overflow: context within 128" "$([ -n "$used" ] && [ "$used" -le 128 ] && [ "$used" -gt 0 ] && echo yes)" "yes"
check "overflow: turns dropped in /stats" "$(grep -c 'turns\? kept ([0-9]* messages), [1-9][0-9]* dropped to fit the context; system prompt: set$' "$TMP.out")" "1"

# 4. a message too long for the context alone is refused, the next one is answered
python3 -c "print(' '.join(['weather'] * 300)); print('short one')" |
  "$CT" chat -m "$M" -c 128 -n 8 --seed 1 -sys "You are terse." >"$TMP.out" 2>"$TMP.err"
check "too long: exit code" "$?" "0"
check "too long: said so" "$(grep -c '^ctorch chat: your message is too long for the context: with the system prompt it takes [0-9]* tokens, and the context leaves 120 for the prompt (-c 128, 8 kept for the reply); not sent$' "$TMP.err")" "1"
check "too long: next message answered" "$(replies "$TMP.err")" "1"

rm -f "$TMP.out" "$TMP.err"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
