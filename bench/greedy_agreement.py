#!/usr/bin/env python3
"""Greedy text of ctorch next to llama.cpp's (llama-cpp-python) on the same GGUF file.

For each prompt both engines generate N tokens greedily. Where the texts part, the script
finds the token position and prints llama.cpp's logit gap between its own choice and
ctorch's: a gap of a few hundredths is a near-tie that rounding order can flip, a large gap
is a bug. Usage: greedy_agreement.py CTORCH_BIN MODEL.gguf [-n 40] [PROMPT ...]
"""
import argparse
import subprocess
import sys

import numpy as np

DEFAULT_PROMPTS = [
    "The sky looks blue during the day because",
    "Once upon a time, in a small village,",
    "The capital of France is",
    "def fibonacci(n):",
    "Water boils at",
]


def ctorch_text(binary, model, prompt, n):
    out = subprocess.run([binary, "run", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "-t", "2"],
                         capture_output=True, text=True, check=True)
    return out.stdout  # piped, the text is exactly what was generated


def llama_greedy(llm, prompt, n):
    """Tokens, their pieces and the logits before each choice."""
    llm.reset()
    toks = llm.tokenize(prompt.encode(), add_bos=True, special=False)
    llm.eval(toks)
    chosen, pieces, logits = [], [], []
    for _ in range(n):
        lg = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        t = int(np.argmax(lg))
        if llm.token_eos() == t:
            break
        logits.append(lg)
        chosen.append(t)
        pieces.append(llm.detokenize([t]).decode("utf-8", errors="replace"))
        llm.eval([t])
    return chosen, pieces, logits


def first_split(llm, pieces, logits, ours):
    """(position, gap) where ctorch's text leaves llama.cpp's, or None when it never does."""
    off = 0
    for k, piece in enumerate(pieces):
        if ours[off:off + len(piece)] != piece:
            rest = ours[off:]
            lg = logits[k]
            order = np.argsort(-lg)
            for t in order[1:2000]:  # the best-scored token ctorch's text continues with
                p = llm.detokenize([int(t)]).decode("utf-8", errors="replace")
                if p and rest.startswith(p):
                    return k, float(lg[order[0]] - lg[t])
            return k, float("nan")
        off += len(piece)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ctorch")
    ap.add_argument("model")
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("prompts", nargs="*")
    a = ap.parse_args()
    from llama_cpp import Llama
    llm = Llama(model_path=a.model, n_ctx=512, n_threads=2, verbose=False, logits_all=True)
    worst = 0.0
    for prompt in a.prompts or DEFAULT_PROMPTS:
        ours = ctorch_text(a.ctorch, a.model, prompt, a.n)
        _, pieces, logits = llama_greedy(llm, prompt, a.n)
        theirs = "".join(pieces)
        split = first_split(llm, pieces, logits, ours)
        if split is None:
            print(f"identical ({len(pieces)} tokens): {prompt!r}")
        else:
            k, gap = split
            worst = max(worst, gap)
            print(f"parts at token {k} of {len(pieces)}, llama.cpp's logit gap {gap:.3f}: {prompt!r}")
            print(f"   llama.cpp: {theirs!r}\n   ctorch:    {ours!r}")
    print(f"largest gap at a parting: {worst:.3f}")


if __name__ == "__main__":
    sys.exit(main())
