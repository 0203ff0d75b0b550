#!/usr/bin/env python3
"""llama.cpp yardstick for `ctorch bench`, through the llama-cpp-python package
(`pip install llama-cpp-python`; a measuring tool only, never a dependency).

Runs the same two tests as `ctorch bench` / llama-bench on a GGUF file:
  pp: evaluate an N-token prompt in one batch (BOS + random ids), empty KV cache
  tg: M single-token decode steps from an empty KV cache
one warm-up run, then R timed repetitions of each; tokens/s mean and sample
standard deviation. Prints a JSON array with llama-bench's field names.

Usage: llama_cpp_bench.py -m MODEL.gguf [-p 128] [-n 64] [-r 3] [-t 2] [-b 512] [--no-fa]
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import sys
import time

try:
    import llama_cpp as L
except ImportError:
    sys.exit("llama_cpp_bench.py: the llama_cpp package is missing (pip install llama-cpp-python)")


def _first(*names):
    for n in names:
        f = getattr(L, n, None)
        if f is not None:
            return f
    raise RuntimeError("llama_cpp has none of: " + ", ".join(names))


# Keep the callback object alive for the whole run, or ctypes frees it under llama.cpp.
_LOG_CB = None


def quiet_logs():
    global _LOG_CB
    cb_type = getattr(L, "llama_log_callback", None)
    if cb_type is None or not hasattr(L, "llama_log_set"):
        return
    _LOG_CB = cb_type(lambda level, text, user: None)
    L.llama_log_set(_LOG_CB, ctypes.c_void_p(0))


def clear_kv(ctx):
    if hasattr(L, "llama_get_memory") and hasattr(L, "llama_memory_clear"):
        L.llama_memory_clear(L.llama_get_memory(ctx), True)
    else:
        _first("llama_kv_self_clear", "llama_kv_cache_clear")(ctx)


def sync(ctx):
    if hasattr(L, "llama_synchronize"):
        L.llama_synchronize(ctx)


class Runner:
    def __init__(self, path, n_ctx, n_batch, threads, flash_attn):
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        load = _first("llama_model_load_from_file", "llama_load_model_from_file")
        self.model = load(path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_batch
        cp.n_ubatch = n_batch
        cp.n_threads = threads
        cp.n_threads_batch = threads
        self.flash = "n/a"
        if hasattr(cp, "flash_attn_type"):  # newer llama.h: an enum (0 off, 1 on, -1 auto)
            cp.flash_attn_type = 1 if flash_attn else 0
            self.flash = "on" if flash_attn else "off"
        elif hasattr(cp, "flash_attn"):
            cp.flash_attn = bool(flash_attn)
            self.flash = "on" if flash_attn else "off"
        new_ctx = _first("llama_init_from_model", "llama_new_context_with_model")
        self.ctx = new_ctx(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        if hasattr(L, "llama_model_get_vocab"):
            vocab = L.llama_model_get_vocab(self.model)
            self.n_vocab = _first("llama_vocab_n_tokens", "llama_n_vocab")(vocab)
            self.bos = L.llama_vocab_bos(vocab) if hasattr(L, "llama_vocab_bos") else 1
        else:
            self.n_vocab = L.llama_n_vocab(self.model)
            self.bos = L.llama_token_bos(self.model)
        self.batch = L.llama_batch_init(max(n_batch, 1), 0, 1)
        self.n_batch = n_batch
        self.rng = random.Random(42)

    def decode(self, tokens, pos0):
        b = self.batch
        for i, t in enumerate(tokens):
            b.token[i] = t
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i == len(tokens) - 1 else 0
        b.n_tokens = len(tokens)
        rc = L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def rand_tok(self):
        return self.rng.randrange(self.n_vocab)

    def run_pp(self, n):
        toks = [self.bos] + [self.rand_tok() for _ in range(n - 1)]
        clear_kv(self.ctx)
        t0 = time.perf_counter()
        for s in range(0, n, self.n_batch):
            self.decode(toks[s:s + self.n_batch], s)
        sync(self.ctx)
        return time.perf_counter() - t0

    def run_tg(self, n):
        clear_kv(self.ctx)
        tok = self.bos
        t0 = time.perf_counter()
        for i in range(n):
            self.decode([tok], i)
            sync(self.ctx)
            tok = self.rand_tok()
        return time.perf_counter() - t0

    def close(self):
        L.llama_batch_free(self.batch)
        L.llama_free(self.ctx)
        _first("llama_model_free", "llama_free_model")(self.model)
        L.llama_backend_free()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--n-prompt", type=int, default=128)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-b", "--batch", type=int, default=512)
    ap.add_argument("--no-fa", action="store_true", help="flash attention off")
    ap.add_argument("-v", "--verbose", action="store_true", help="keep llama.cpp's log")
    a = ap.parse_args()
    if not a.verbose:
        quiet_logs()
    n_ctx = max(a.n_prompt, a.n_gen, 1)
    n_ctx = (n_ctx + 255) // 256 * 256
    r = Runner(a.model, n_ctx, a.batch, a.threads, not a.no_fa)
    out = []
    for test, n in (("pp", a.n_prompt), ("tg", a.n_gen)):
        if n <= 0:
            continue
        fn = r.run_pp if test == "pp" else r.run_tg
        print(f"llama.cpp {test}{n}: warm-up", end="", file=sys.stderr, flush=True)
        fn(n)
        secs = []
        for _ in range(a.repetitions):
            secs.append(fn(n))
            print(f", {n / secs[-1]:.2f} t/s", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        ts = [n / s for s in secs]
        ns = [s * 1e9 for s in secs]
        sd = lambda x: statistics.stdev(x) if len(x) > 1 else 0.0
        out.append({
            "build_commit": "llama-cpp-python " + getattr(L, "__version__", "?"),
            "model_filename": a.model,
            "model_size": os.path.getsize(a.model),
            "n_batch": a.batch,
            "n_ubatch": a.batch,
            "n_threads": a.threads,
            "type_k": "f16",
            "type_v": "f16",
            "flash_attn": r.flash,
            "n_prompt": n if test == "pp" else 0,
            "n_gen": n if test == "tg" else 0,
            "device": "CPU",
            "avg_ns": statistics.mean(ns),
            "stddev_ns": sd(ns),
            "avg_ts": statistics.mean(ts),
            "stddev_ts": sd(ts),
            "samples_ns": ns,
            "samples_ts": ts,
        })
    r.close()
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
