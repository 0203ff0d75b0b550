#!/usr/bin/env python3
"""Cross-checks a file written by `ctorch quantize` against the gguf Python package:
every tensor of a type gguf-py can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) must hold
exactly the bytes gguf.quants.quantize makes from the same tensor of the source file.
Usage: check_quantize_py.py SOURCE.gguf QUANTIZED.gguf MIN_CHECKED
Exits non-zero on the first mismatch or when fewer than MIN_CHECKED tensors were compared."""
import sys

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType as QT, quants

CHECKABLE = {QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0}


def main(src_path, q_path, min_checked):
    src = {t.name: t for t in GGUFReader(src_path).tensors}
    checked = 0
    for t in GGUFReader(q_path).tensors:
        if t.tensor_type not in CHECKABLE:
            continue
        s = src.get(t.name)
        if s is None or s.tensor_type not in (QT.F16, QT.F32):
            print(f"check_quantize_py: {t.name}: no F16/F32 source", file=sys.stderr)
            return 1
        want = quants.quantize(np.asarray(s.data, dtype=np.float32), t.tensor_type)
        got = np.asarray(t.data).reshape(want.shape)
        if not np.array_equal(want, got):
            rows = np.nonzero((want != got).any(axis=1))[0]
            print(f"check_quantize_py: {t.name} ({t.tensor_type.name}): {len(rows)} rows differ, first {rows[0]}",
                  file=sys.stderr)
            return 1
        checked += 1
    if checked < min_checked:
        print(f"check_quantize_py: only {checked} tensors compared, want {min_checked}", file=sys.stderr)
        return 1
    print(f"check_quantize_py: {checked} tensors byte-identical to gguf-py in {q_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
