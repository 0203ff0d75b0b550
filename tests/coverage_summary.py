#!/usr/bin/env python3
"""Prints line and branch coverage per layer of ctorch and a total, from the gcov
data of a `--coverage` build (make coverage). Usage: coverage_summary.py BUILD_DIR"""
import json
import os
import subprocess
import sys

LAYERS = ["src/core", "src/exec", "src/backends/cpu", "src/quant", "src/formats", "src/llm", "src/ops", "tools"]
GOAL_LINES, GOAL_BRANCHES = 90.0, 80.0
# Kernels for an instruction set, by function-name prefix ("fn:") or file-name part ("file:"),
# and the /proc/cpuinfo flag without which they cannot run (so no test on this machine can
# reach them): on an AVX2-only CI machine that is every AVX-512 file (AVX-512 functions inside
# files shared with other levels stay counted).
ISA_KERNELS = [("fn:avxvnni_", "avx_vnni", "AVX-VNNI"),
               ("fn:avx512_", "avx512f", "AVX-512"),
               ("file:_avx512", "avx512f", "AVX-512")]


def isa_match(pattern, fname, fn):
    kind, part = pattern.split(":", 1)
    return fn.startswith(part) if kind == "fn" else part in os.path.basename(fname)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def unreachable_here(detail_json):
    """Per layer, the lines and branches of kernels this CPU cannot execute: [lines, covered,
    branches, covered, {instruction sets}]."""
    flags = cpu_flags()
    if flags is None:
        return {}
    missing = [(pat, name) for pat, flag, name in ISA_KERNELS if flag not in flags]
    out = {}
    if not missing:
        return out
    with open(detail_json) as f:
        files = json.load(f)["files"]
    for fe in files:
        layer = next((l for l in LAYERS if fe["file"].startswith(l + "/")), None)
        for ln in fe["lines"]:
            fn = ln.get("function_name") or ""
            isa = next((name for pat, name in missing if isa_match(pat, fe["file"], fn)), None)
            if not isa:
                continue
            s = out.setdefault(layer, [0, 0, 0, 0, set()])
            s[4].add(isa)
            br = ln.get("branches", [])
            s[0] += 1
            s[1] += ln["count"] > 0
            s[2] += len(br)
            s[3] += sum(1 for b in br if b["count"] > 0)
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build-cov"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(build, "coverage.json")
    subprocess.run([sys.executable, "-m", "gcovr", "-r", root, "--object-directory", build,
                    "--filter", os.path.join(root, "src/"), "--filter", os.path.join(root, "tools/"),
                    "--exclude-directories", ".*/CMakeFiles/[0-9.]+/.*",
                    "--gcov-ignore-errors=source_not_found",
                    "--gcov-ignore-parse-errors=negative_hits.warn_once_per_file",
                    "--json-summary", "-o", out], check=True, stdout=subprocess.DEVNULL)
    detail = os.path.join(build, "coverage_detail.json")
    subprocess.run([sys.executable, "-m", "gcovr", "-r", root, "--object-directory", build,
                    "--filter", os.path.join(root, "src/"),
                    "--exclude-directories", ".*/CMakeFiles/[0-9.]+/.*",
                    "--gcov-ignore-errors=source_not_found",
                    "--gcov-ignore-parse-errors=negative_hits.warn_once_per_file",
                    "--json", "-o", detail], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        files = json.load(f)["files"]
    sums = {layer: [0, 0, 0, 0] for layer in LAYERS + ["total"]}
    for fe in files:
        name = fe["filename"]
        layer = next((l for l in LAYERS if name.startswith(l + "/")), None)
        for key in ([layer] if layer else []) + ["total"]:
            s = sums[key]
            s[0] += fe["line_covered"]; s[1] += fe["line_total"]
            s[2] += fe["branch_covered"]; s[3] += fe["branch_total"]
    pct = lambda a, b: 100.0 * a / b if b else 100.0
    print(f"{'layer':<18} {'lines':>16} {'branches':>16}")
    for key in LAYERS + ["total"]:
        lc, lt, bc, bt = sums[key]
        lp, bp = pct(lc, lt), pct(bc, bt)
        flag = "" if key == "total" or (lp >= GOAL_LINES and bp >= GOAL_BRANCHES) else \
            f"  below goal ({GOAL_LINES:.0f}% / {GOAL_BRANCHES:.0f}%)"
        print(f"{key:<18} {lp:6.1f}% {lc:>5}/{lt:<5} {bp:6.1f}% {bc:>5}/{bt:<5}{flag}")
    # Code for instructions this CPU lacks is counted above (it is measured on CPUs that have
    # them); say how much of a layer's shortfall it is.
    skipped = unreachable_here(detail)
    for layer, (ul, ulc, ub, ubc, names) in sorted((k, v) for k, v in skipped.items() if k):
        lc, lt, bc, bt = sums[layer]
        print(f"note: {layer}: {ul} lines, {ub} branches are {'/'.join(sorted(names))} kernels this CPU cannot run; "
              f"the rest: {pct(lc - ulc, lt - ul):.1f}% of lines, {pct(bc - ubc, bt - ub):.1f}% of branches")


if __name__ == "__main__":
    main()
