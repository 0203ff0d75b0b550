#!/usr/bin/env python3
"""Prints line and branch coverage per layer of ctorch and a total, from the gcov
data of a `--coverage` build (make coverage). Usage: coverage_summary.py BUILD_DIR"""
import json
import os
import subprocess
import sys

LAYERS = ["src/core", "src/exec", "src/backends/cpu", "src/quant", "src/formats", "src/llm", "src/ops", "tools"]
GOAL_LINES, GOAL_BRANCHES = 90.0, 80.0


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


if __name__ == "__main__":
    main()
