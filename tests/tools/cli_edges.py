#!/usr/bin/env python3
"""Edges of the `ctorch` command that cli_args.sh and cli_io.sh leave out.

info on a GGUF file written here byte by byte (every metadata value type, nested
arrays, long and quoted strings, UTF-8 / C1 / invalid bytes in names, a tensor type
ctorch lacks, a file without architecture or file type): each value printed as
written. The top-level command line (no command, `help CMD`, `help BOGUS`, `-V`,
`--` before a positional), option forms and numbers that do not parse. On a tiny
model from ctorch-make-model: escapes of -e against the same text typed raw (also
in run -i); text files longer than the reader's first buffer against -p or the token
count of a short text; bench's JSON file name; the log after the text on a new line
when stdout and stderr share a file; the errors of tokenize (no vocabulary, no text),
perplexity (text too short for the context), bench (more tokens than the context),
run (--dump-logits into an impossible path, an empty prompt, -d bogus) and run's cap
of -c at the model's context; on a pseudo-terminal, the progress bar and run -i's
prompt and colours.
Usage: cli_edges.py CTORCH_BINARY [MAKE_MODEL_BINARY]   (CTORCH_TEST_TMP: scratch folder)"""
import re
import json
import os
import pty
import select
import struct
import subprocess
import sys
import tempfile

failed = 0


def check(name, ok, detail=""):
    global failed
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    failed += not ok


def run(ct, args, env=None, stdin=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([ct] + args, input=stdin, capture_output=True, timeout=120, env=e)


# ---- a GGUF v3 file, written from the format's definition ----
T_U8, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_F64 = 0, 5, 6, 7, 8, 9, 10, 12


def g_str(b):
    b = b if isinstance(b, bytes) else b.encode()
    return struct.pack("<Q", len(b)) + b


def g_val(t, v):
    if t == T_STR:
        return g_str(v)
    if t == T_ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(g_val(et, x) for x in items)
    return struct.pack({T_U8: "<B", T_I32: "<i", T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_F64: "<d"}[t], v)


def write_gguf(path, kvs, tensors):
    """kvs: [(key, type, value)]; tensors: [(name, ggml_type, ne, data_bytes)]."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        head += g_str(k) + struct.pack("<I", t) + g_val(t, v)
    off, data = 0, b""
    for name, gt, ne, raw in tensors:
        head += g_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        head += struct.pack("<IQ", gt, off)
        pad = (-len(raw)) % 32
        data += raw + b"\0" * pad
        off += len(raw) + pad
    head += b"\0" * ((-len(head)) % 32)
    with open(path, "wb") as f:
        f.write(head + data)


def test_info_values(ct, tmp):
    path = os.path.join(tmp, "values.gguf")
    long_quoted = 'say "hi" ' + "x" * 91  # 100 bytes: shown cut at 60, with the length
    kvs = [
        ("general.architecture", T_STR, "llama"),
        ("general.name", T_STR, b"caf\xc3\xa9 \xc2\x85 \xff end"),
        # a back-slash, a tab, an emoji (kept), then an overlong NUL, a surrogate, a code point
        # above U+10FFFF and a cut sequence: each invalid byte shown as \xNN
        ("general.description", T_STR, b"a\\b\tc \xf0\x9f\x98\x80 \xc0\x80 \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x28 z"),
        ("general.file_type", T_I32, 99),
        ("llama.vocab_size", T_U64, 1234),
        ("llama.block_count", T_I32, 3),
        ("test.u64max", T_U64, 2**64 - 1),
        ("test.f64", T_F64, 0.1),
        ("test.f32", T_F32, 1e-5),
        ("test.flag", T_BOOL, False),
        ("test.quoted", T_STR, long_quoted),
        ("test.ints", T_ARR, (T_I32, [1, 2, 3, 4, 5, 6, 7])),
        ("test.nested", T_ARR, (T_ARR, [(T_U8, [1, 2, 3, 4]), (T_U8, [9])])),
        ("test.key\nwith newline", T_BOOL, True),
    ]
    tensors = [("weights.f32", 0, [4], struct.pack("<4f", 1, 2, 3, 4)),
               ("weights.iq2", 16, [256], b"\0" * 66)]  # IQ2_XXS: 66 bytes per 256
    write_gguf(path, kvs, tensors)
    r = run(ct, ["info", path])
    out = r.stdout.decode("utf-8", "replace")
    check("info: exit 0", r.returncode == 0, r.stderr.decode()[-300:])
    want = [
        ("u64 max", "18446744073709551615"),
        ("f64 shortest", " 0.1\n"),
        ("f32 shortest", " 1e-05\n"),
        ("bool", " false\n"),
        ("quoted string, cut", '"say \\"hi\\" ' + "x" * 51 + '"...(100 bytes)'),
        ("array head", "i32[7] [1, 2, 3, 4, 5, ...]"),
        ("nested array", "arr[2] [u8[4] [1, 2, 3, ...], u8[1] [9]]"),
        ("key newline escaped", "test.key\\nwith newline"),
        ("UTF-8 kept, C1 and invalid bytes escaped", "caf\u00e9 \\u0085 \\xff end"),
        ("invalid UTF-8 forms escaped byte by byte",
         "a\\\\b\\tc \U0001F600 \\xc0\\x80 \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 \\xe2( z"),
        ("unknown file type", "99 (unknown)"),
        ("vocab from vocab_size", "vocab                  1234"),
        ("unsupported tensor type", "(unsupported by ctorch)"),
    ]
    for name, text in want:
        check("info: " + name, text in out, "stdout lacks %r" % text)
    # no architecture and no file type: dashes
    bare = os.path.join(tmp, "bare.gguf")
    write_gguf(bare, [("x.y", T_I32, 1)], [])
    r = run(ct, ["info", "--", bare])  # `--` ends the options; the file is positional
    out = r.stdout.decode()
    check("info: no architecture", r.returncode == 0 and "architecture           -" in out, out[-300:])
    check("info: no file type", "file type              -" in out, out[-300:])
    r = run(ct, ["info", "-m", bare, bare])
    check("info: two models", r.returncode == 2 and b"two models given" in r.stderr, r.stderr.decode())
    r = run(ct, ["info"])
    check("info: no model", r.returncode == 2 and b"no model given" in r.stderr, r.stderr.decode())
    junk = os.path.join(tmp, "junk.gguf")
    with open(junk, "wb") as f:
        f.write(b"GGUF" + b"\xff" * 60)
    r = run(ct, ["info", junk])
    check("info: malformed file", r.returncode == 1 and b"ctorch info:" in r.stderr and b"junk.gguf" in r.stderr,
          r.stderr.decode())


def test_top_level(ct):
    r = run(ct, [])
    check("no command: usage on stderr, exit 2", r.returncode == 2 and b"usage: ctorch <command>" in r.stderr
          and not r.stdout, str(r.returncode))
    r = run(ct, ["help", "run"])
    check("help run = run --help", r.returncode == 0 and r.stdout.startswith(b"usage: ctorch run"), r.stderr.decode())
    r = run(ct, ["help", "bogus"])
    check("help of an unknown command", r.returncode == 2 and b"unknown command 'bogus'" in r.stderr, r.stderr.decode())
    v1, v2 = run(ct, ["-V"]), run(ct, ["version"])
    check("-V is version", v1.returncode == 0 and v1.stdout == v2.stdout and v1.stdout, v1.stderr.decode())
    for env, level in (({"CTORCH_LOG": "debug"}, "debug"), ({"CTORCH_LOG": "error"}, "error")):
        r = run(ct, ["devices"], env=env)
        check("devices with CTORCH_LOG=" + level, r.returncode == 0 and b"cpu" in r.stdout, r.stderr.decode())
    for var in ("CTORCH_SIMD", "CTORCH_DEVICES"):
        r = run(ct, ["devices"], env={var: "bogus"})
        check(var + "=bogus: exit 1 naming it", r.returncode == 1 and (var + "='bogus'").encode() in r.stderr,
              r.stderr.decode())


def test_numbers(ct):
    for args, text in ((["-n", "99999999999999999999"], b"-n wants an integer, got '99999999999999999999'"),
                       (["-n", " 5"], b"-n wants an integer, got ' 5'"),
                       (["-n", "5x"], b"-n wants an integer, got '5x'"),
                       (["--temp", "1e999"], b"--temp wants a finite number, got '1e999'"),
                       (["--temp", "0.5.1"], b"--temp wants a finite number"),
                       (["--top-p", "1.5"], b"--top-p"),
                       (["--seed"], b"--seed needs a value")):
        r = run(ct, ["run", "-m", "/nonexistent/m.gguf", "-p", "x"] + args)
        check("run %s" % " ".join(args), r.returncode == 2 and text in r.stderr, r.stderr.decode())


def test_option_forms(ct):
    """--name=value, flags given a value, unknown names (the value not quoted back), choices."""
    for args, text in ((["tokenize", "--no-bos=1", "-p", "x"], b"--no-bos takes no value"),
                       (["run", "--bogus=3"], b"unknown option '--bogus'"),
                       (["run", "--temp=abc", "-p", "x"], b"--temp wants a finite number, got 'abc'"),
                       (["bench", "-m", "/nonexistent/m.gguf", "-o", "csv"], b"-o must be one of md|json, got 'csv'"),
                       (["tokenize", "-p", "x", "stray"], b"unexpected argument 'stray' (options start with -)")):
        r = run(ct, args)
        check(" ".join(args), r.returncode == 2 and text in r.stderr and b"\n" == r.stderr[-1:]
              and r.stderr.count(b"\n") == 1, r.stderr.decode())
    r = run(ct, ["run", "-h"])
    check("run -h = run --help", r.returncode == 0 and r.stdout == run(ct, ["run", "--help"]).stdout, r.stderr.decode())


def test_model_edges(ct, mm, tmp):
    model = os.path.join(tmp, "tiny.gguf")
    r = subprocess.run([mm, "--layers", "1", "--embd", "64", "--ff", "128", "--heads", "2", "--kv-heads", "1",
                        "--vocab", "260", "--ctx", "256", "--seed", "7", "--vocab-file", "/nonexistent", model],
                       capture_output=True, timeout=120)
    if r.returncode != 0:
        check("make the tiny model", False, r.stderr.decode()[-300:])
        return

    def tok(args):
        r = run(ct, ["tokenize", "-m", model] + args)
        return r.returncode, r.stdout.strip(), r.stderr.decode()

    # -e: each escape against the raw character given directly
    for esc, raw in (("a\\rb", "a\rb"), ("it\\'s", "it's"), ("q\\\"q", 'q"q'), ("\\x41\\x4a", "AJ"),
                     ("\\x4G", "\\x4G"), ("\\q", "\\q"), ("end\\", "end\\"), ("\\x7e\\x7E", "~~")):
        a, b = tok(["-e", "-p", esc]), tok(["-p", raw])
        check("tokenize -e %r" % esc, a[0] == 0 and a[1] == b[1] and b[1], "%r vs %r (%s)" % (a[1], b[1], a[2]))
    # a text file longer than the reader's first buffer, against the same text with -p
    text = "".join("word%d " % (i % 97) for i in range(3000))
    path = os.path.join(tmp, "long.txt")
    with open(path, "w") as f:
        f.write(text)
    a, b = tok(["-f", path]), tok(["-p", text])
    c = tok(["--model=" + model, "--prompt=" + text[:40]])
    d = tok(["-p", text[:40]])
    check("tokenize --name=value = -name value", c[0] == 0 and c[1] == d[1] and c[1], c[2])
    check("tokenize -f long file = -p", a[0] == 0 and a[1] == b[1] and len(a[1].split()) > 3000, a[2][-200:])
    # a file larger than the reader's first 64 KiB buffer: one byte token per 'x', as for a short text
    big = os.path.join(tmp, "big.txt")
    with open(big, "w") as f:
        f.write("x" * 100000)
    a, b = tok(["-f", big]), tok(["-p", "x" * 10])
    ia, ib = a[1].split(), b[1].split()
    check("tokenize -f 100 KB file", a[0] == 0 and b[0] == 0 and len(ia) == len(ib) + 99990 and ia[:len(ib)] == ib
          and set(ia[len(ib):]) == {ib[-1]}, "%d vs %d tokens (%s)" % (len(ia), len(ib), a[2][-200:]))
    # stdout and stderr into one file (2>&1): the log after the text starts on a line of its own
    both = os.path.join(tmp, "both.txt")
    with open(both, "wb") as f:
        r = subprocess.run([ct, "run", "-m", model, "-p", "hi", "-n", "4", "--temp", "0"], stdout=f, stderr=f,
                           stdin=subprocess.DEVNULL, timeout=120)
    with open(both, "rb") as f:
        mixed = f.read()
    check("run 2>&1: timings on their own line", r.returncode == 0 and b"\ntimings: prompt" in mixed, repr(mixed[-300:]))
    # a file without a vocabulary
    r = run(ct, ["tokenize", "-m", os.path.join(tmp, "values.gguf"), "-p", "hi"])
    check("tokenize: no vocabulary", r.returncode == 1 and b"ctorch tokenize: " in r.stderr
          and b"tokenizer.ggml" in r.stderr, r.stderr.decode())
    r = run(ct, ["tokenize", "-m", model])
    check("tokenize: no text", r.returncode == 2 and b"no text: give -p TEXT or -f FILE" in r.stderr, r.stderr.decode())

    short = os.path.join(tmp, "short.txt")
    with open(short, "w") as f:
        f.write("hello world")
    r = run(ct, ["perplexity", "-m", model, "-f", short, "-c", "64"])
    check("perplexity: text shorter than two contexts", r.returncode == 1 and b"a context of 64 needs at least 128" in
          r.stderr, r.stderr.decode()[-300:])
    r = run(ct, ["bench", "-m", model, "-p", "1000", "-n", "1"])
    check("bench: more tokens than the model's context", r.returncode == 1 and
          b"context too long: 1000 tokens, the model's context is 256" in r.stderr, r.stderr.decode()[-300:])
    r = run(ct, ["run", "-m", model, "-p", "hi", "-n", "1", "--temp", "0", "--dump-logits", "/etc/passwd/x"])
    check("run: --dump-logits into a file's path", r.returncode == 1 and b"--dump-logits: cannot write" in r.stderr,
          r.stderr.decode()[-300:])
    r = run(ct, ["run", "-m", model, "-p", "", "--no-bos", "-n", "1"])
    check("run: empty prompt without BOS", r.returncode == 1 and b"the prompt is empty (no tokens)" in r.stderr,
          r.stderr.decode()[-300:])
    r = run(ct, ["run", "-m", model, "-c", "512", "-p", "hi", "-n", "2", "--temp", "0"])
    check("run: -c above the model's context is capped", r.returncode == 0 and
          b"-c 512 is more than the model's context length 256; using 256" in r.stderr, r.stderr.decode()[-300:])
    # bench's JSON names the model file: quotes, back-slashes, tabs and control bytes escaped
    odd = os.path.join(tmp, 'ti"n\\y\tm\x01.gguf')
    with open(model, "rb") as src, open(odd, "wb") as dst:
        dst.write(src.read())
    r = run(ct, ["bench", "-m", odd, "-p", "4", "-n", "2", "-r", "1", "-o", "json"])
    try:
        rows = json.loads(r.stdout)
    except ValueError as e:
        rows = [{"error": str(e)}]
    check("bench -o json: the file name round-trips", r.returncode == 0 and rows and
          all(x.get("model_filename") == odd for x in rows), r.stdout.decode()[:300] + r.stderr.decode()[-200:])
    # -d: a named device, "auto" (the platform chain) and a device that does not exist
    # (the platform chain of this machine, whatever chain CTORCH_DEVICES names for the rest)
    for dev in ("cpu", "auto"):
        r = run(ct, ["run", "-m", model, "-d", dev, "-p", "hi", "-n", "1", "--temp", "0"], env={"CTORCH_DEVICES": ""})
        # auto: the machine's platform chain, which ends at the CPU (cuda:0 -> cpu on a GPU machine)
        want = rb"devices: cpu \(" if dev == "cpu" else rb"devices: (\S+ \(.*\) -> )*cpu \("
        check("run -d " + dev, r.returncode == 0 and re.search(want, r.stderr) is not None, r.stderr.decode()[-300:])
    r = run(ct, ["run", "-m", model, "-d", "bogus", "-p", "hi", "-n", "1"])
    check("run -d bogus", r.returncode == 1 and b"device 'bogus' not found" in r.stderr,
          r.stderr.decode()[-300:])
    # interactive lines from a pipe: -e turns typed escapes into the same text as raw input
    a = run(ct, ["run", "-m", model, "-i", "-e", "-n", "3", "--temp", "0"], stdin=b"one\\ttwo\nthree\n")
    b = run(ct, ["run", "-m", model, "-i", "-n", "3", "--temp", "0"], stdin=b"one\ttwo\nthree\n")
    check("run -i -e = raw lines", a.returncode == 0 and b.returncode == 0 and a.stdout == b.stdout and a.stdout,
          "%r vs %r (%s)" % (a.stdout[:80], b.stdout[:80], a.stderr.decode()[-200:]))


def run_pty(ct, args, which, stdin=b""):
    """Runs with `which` ("stdout" or "stderr") on a pseudo-terminal; returns (rc, tty bytes)."""
    m, s = pty.openpty()
    kw = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "stdin": subprocess.PIPE, which: s}
    p = subprocess.Popen([ct] + args, **kw)
    os.close(s)
    p.stdin.write(stdin)
    p.stdin.close()
    got = b""
    while select.select([m], [], [], 60)[0]:
        try:
            d = os.read(m, 4096)
        except OSError:  # the other side closed (Linux reports EIO)
            break
        if not d:
            break
        got += d
    rc = p.wait(timeout=60)
    os.close(m)
    return rc, got


def test_terminal(ct, model):
    """On a terminal, progress is a bar redrawn in place, and run -i prompts with '> '
    and colours what the user typed when --color asks for it."""
    rc, tty = run_pty(ct, ["run", "-m", model, "-p", "hi", "-n", "2", "--temp", "0"], "stderr")
    check("tty: progress bar", rc == 0 and b"\rloading [" in tty and b"#" * 30 + b"] 100%" in tty, repr(tty[-300:]))
    rc, tty = run_pty(ct, ["run", "-m", model, "-i", "--color", "-n", "2", "--temp", "0"], "stdout", b"hi\n")
    check("tty: run -i prompt and colour", rc == 0 and b"> \x1b[32m" in tty and b"\x1b[0m" in tty, repr(tty[-300:]))


def main():
    ct = sys.argv[1]
    mm = sys.argv[2] if len(sys.argv) > 2 else ""
    base = os.environ.get("CTORCH_TEST_TMP") or None
    with tempfile.TemporaryDirectory(prefix="cli_edges.", dir=base) as tmp:
        test_info_values(ct, tmp)
        test_top_level(ct)
        test_numbers(ct)
        test_option_forms(ct)
        if mm and os.access(mm, os.X_OK):
            test_model_edges(ct, mm, tmp)
            try:
                test_terminal(ct, os.path.join(tmp, "tiny.gguf"))
            except OSError as e:  # no pseudo-terminals in this sandbox
                print("note: terminal cases left out: %s" % e)
        else:
            print("note: ctorch-make-model not built; the tiny-model cases are left out")
    print("%s" % ("FAILED: %d" % failed if failed else "all passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
