#!/usr/bin/env python3
"""The `ctorch` commands that cli_refdata.sh leaves out, on ../shared/refdata's mini-a:
perplexity against llama.cpp's logits (greedy.json's top-8 per step), bench's JSON and
markdown reports against the model file, and a chat session whose /reset must give the
same greedy reply again. Usage: cli_commands.py CTORCH_BINARY (CTORCH_REFDATA names the
refdata folder). Exit 77 when refdata or the gguf package is absent."""
import json
import math
import os
import subprocess
import sys
import tempfile

failed = 0


def check(name, ok, detail=""):
    global failed
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    failed += not ok


def skip_or_fail(why):
    if os.environ.get("CTORCH_REQUIRE_SHARED") == "1" and "refdata" in why:
        print("FAIL: CTORCH_REQUIRE_SHARED=1 but " + why, file=sys.stderr)
        sys.exit(1)
    print("skipped: " + why)
    sys.exit(77)


def run(args, stdin=None):
    return subprocess.run(args, input=stdin, capture_output=True, timeout=300)


def spm_text(pieces):
    return "".join(pieces).replace("\u2581", " ")


def test_perplexity(ct, ref, vocab, tmp):
    """Chunk 0 of a 15-token context on prompt 4 and its greedy continuation: positions
    7..13 are scored, each against llama.cpp's logits for the same context. The last
    scored token is the runner-up, not the greedy token, so the mean is not ~0."""
    # F16: its logits agree with llama.cpp's to a normalized MSE of ~1e-6 (Q4_K_M: ~5e-4,
    # enough to move a runner-up logit by 0.2)
    model = os.path.join(ref, "mini-a/mini-a-f16.gguf")
    greedy = json.load(open(os.path.join(ref, "mini-a/greedy.json")))["mini-a-f16.gguf"][4]
    prompt = json.load(open(os.path.join(ref, "mini-a/tokens.json")))[4]["ids"]
    gen, P, n_ctx = greedy["gen_ids"], len(prompt), 15
    last = n_ctx - 1 - P  # generated step whose token is replaced
    ids = prompt + gen[:last] + [greedy["runner_up_ids"][last]] + gen[last + 1:]
    text = spm_text(vocab[i] for i in ids[1:])[1:]  # no BOS; the tokenizer adds the leading space
    path = os.path.join(tmp, "ppl.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    tok = run([ct, "tokenize", "-m", model, "-p", text])
    got_ids = [int(x) for x in tok.stdout.split()]
    check("perplexity text tokenizes as planned", got_ids[:n_ctx] == ids[:n_ctx] and len(got_ids) >= 2 * n_ctx,
          f"{got_ids[:n_ctx]} vs {ids[:n_ctx]}")
    # Reference NLL from the top 8 logits: the other 31992 can add at most
    # log(1 + 31992 exp(l8 - lse8)) to each, which bounds the answer from above.
    lo = hi = 0.0
    first = n_ctx // 2
    for at in range(first, n_ctx - 1):
        top = greedy["top8_per_step"][at - (P - 1)]
        m = top[0][1]
        lse = m + math.log(sum(math.exp(l - m) for _, l in top))
        logit = dict((i, l) for i, l in top).get(ids[at + 1])
        if logit is None:
            check("perplexity reference", False, f"token {ids[at + 1]} not in llama.cpp's top 8 at {at}")
            return
        lo += lse - logit
        hi += lse - logit + math.log1p((32000 - 8) * math.exp(top[-1][1] - lse))
    n = n_ctx - 1 - first
    want_lo, want_hi = math.exp(lo / n), math.exp(hi / n)
    r = run([ct, "perplexity", "-m", model, "-f", path, "-c", str(n_ctx), "--chunks", "1"])
    out = r.stdout.decode()
    check("perplexity exit", r.returncode == 0, r.stderr.decode()[-300:])
    try:
        ppl = float(out.split("PPL = ")[1].split()[0])
    except (IndexError, ValueError):
        check("perplexity output", False, out)
        return
    print(f"  perplexity {ppl}; from llama.cpp's logits [{want_lo:.5f}, {want_hi:.5f}]")
    # 0.3% on the PPL: 0.02 nats over the 7 tokens, plus the 4 decimals printed.
    check("perplexity vs llama.cpp", want_lo * 0.997 <= ppl <= want_hi * 1.003,
          f"PPL {ppl}, llama.cpp's logits give [{want_lo:.4f}, {want_hi:.4f}]")


def test_bench(ct, model, reader):
    n_params = sum(int(math.prod(int(d) for d in t.shape)) for t in reader.tensors)
    r = run([ct, "bench", "-m", model, "-p", "16", "-n", "4", "-r", "2", "-o", "json"])
    check("bench json exit", r.returncode == 0, r.stderr.decode()[-300:])
    try:
        rows = json.loads(r.stdout)
    except ValueError:
        check("bench json parses", False, r.stdout.decode()[:300])
        return
    check("bench json rows", [(x["n_prompt"], x["n_gen"]) for x in rows] == [(16, 0), (0, 4)], str(rows)[:300])
    for x in rows:
        n = x["n_prompt"] + x["n_gen"]
        check("bench n_params", x["model_n_params"] == n_params, f"{x['model_n_params']} vs {n_params} in the file")
        check("bench samples", len(x["samples_ns"]) == 2 and len(x["samples_ts"]) == 2, str(x)[:200])
        mean_ns = sum(x["samples_ns"]) / 2
        check("bench mean", abs(x["avg_ns"] - mean_ns) <= 1 + 1e-6 * mean_ns, f"{x['avg_ns']} vs {mean_ns}")
        ts = [n * 1e9 / s for s in x["samples_ns"]]
        check("bench tokens/s", all(abs(a - b) <= 1e-3 * b for a, b in zip(x["samples_ts"], ts)), f"{x['samples_ts']} vs {ts}")
    r = run([ct, "bench", "-m", model, "-p", "8", "-n", "0", "-r", "1"])
    md = r.stdout.decode()
    check("bench markdown", r.returncode == 0 and "pp8" in md and "tg" not in md.split("pp8")[1], md[-300:])


def test_chat(ct, model):
    r = run([ct, "chat", "-m", model, "--template", "zephyr", "--temp", "0", "-n", "8"],
            stdin=b"Hello\n/reset\nHello\n/exit\n")
    check("chat exit", r.returncode == 0, r.stderr.decode()[-300:])
    # Piped input is echoed after the prompt: each "> " block is the line read, then its reply.
    blocks = [b.split("\n", 1) for b in r.stdout.decode().split("> ") if b.strip()]
    replies = [b[1] for b in blocks if b[0] == "Hello" and len(b) == 2]
    check("chat replies", len(replies) == 2 and replies[0] == replies[1] and len(replies[0].strip()) > 0,
          repr(r.stdout[:300]))
    check("chat reset", "new conversation" in r.stderr.decode(), r.stderr.decode()[-300:])


def main():
    ct = sys.argv[1]
    ref = os.environ.get("CTORCH_REFDATA", "")
    model = os.path.join(ref, "mini-a/mini-a-q4_k_m.gguf")
    if not ref or not os.path.isfile(model):
        skip_or_fail(f"refdata absent (CTORCH_REFDATA={ref or 'unset'})")
    try:
        from gguf import GGUFReader
    except ImportError:
        skip_or_fail("the gguf Python package is absent (pip install gguf)")
    reader = GGUFReader(model)
    f = reader.fields["tokenizer.ggml.tokens"]
    vocab = [bytes(f.parts[i]).decode("utf-8", errors="replace") for i in f.data]
    with tempfile.TemporaryDirectory(dir=os.environ.get("CTORCH_TEST_TMP")) as tmp:
        test_perplexity(ct, ref, vocab, tmp)
    test_bench(ct, model, reader)
    test_chat(ct, model)
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
