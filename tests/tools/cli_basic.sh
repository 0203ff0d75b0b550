#!/bin/sh
# The ctorch command without a model: what --help, version and devices print,
# not only their exit codes. Usage: cli_basic.sh CTORCH_BINARY CASE
set -u
CT=$1
CASE=$2
out=""
fail() { echo "FAIL $CASE: $*"; echo "--- stdout:"; printf '%s\n' "$out"; exit 1; }
has() { printf '%s\n' "$out" | grep -q -- "$1" || fail "stdout lacks '$1'"; }

case $CASE in
help)
  out=$("$CT" --help); rc=$?
  [ $rc -eq 0 ] || fail "exit $rc"
  for c in devices version run chat bench perplexity quantize tokenize info; do has "^  $c "; done
  # `ctorch help CMD` is CMD's own help.
  [ "$("$CT" help run)" = "$("$CT" run --help)" ] || fail "'help run' differs from 'run --help'"
  ;;
version)
  out=$("$CT" version); rc=$?
  [ $rc -eq 0 ] || fail "exit $rc"
  printf '%s\n' "$out" | head -1 | grep -Eq '^ctorch [0-9]+\.[0-9]+\.[0-9]+$' || fail "first line is not 'ctorch X.Y.Z'"
  has '^backends: cpu'
  [ "$("$CT" --version)" = "$out" ] || fail "--version differs from version"
  ;;
devices)
  out=$("$CT" devices); rc=$?
  [ $rc -eq 0 ] || fail "exit $rc"
  has 'cpu'
  ;;
devices_json)
  out=$("$CT" devices --json); rc=$?
  [ $rc -eq 0 ] || fail "exit $rc"
  command -v python3 >/dev/null || { echo "skipped: python3 absent, JSON not checked"; exit 77; }
  printf '%s\n' "$out" | python3 -m json.tool >/dev/null || fail "not valid JSON"
  has '"cpu"'
  ;;
unknown)
  err=$("$CT" no-such-command 2>&1 >/dev/null); rc=$?
  out=$err
  [ $rc -eq 2 ] || fail "exit $rc, want 2"
  has "unknown command 'no-such-command'"
  ;;
*) echo "unknown case $CASE"; exit 1 ;;
esac
echo "ok $CASE"
