#!/usr/bin/env python3
"""Writes tests/formats/data/quant_vectors.bin: reference vectors for the GGUF block
formats, computed with the `gguf` Python package (gguf-py, numpy), an implementation
independent of ctorch. tests/formats/test_quant.c checks ctorch against them.

Regenerate (deterministic, fixed seed; needs `pip install gguf numpy`):
    python3 tests/formats/gen_quant_vectors.py            # writes the default path
    python3 tests/formats/gen_quant_vectors.py OUT.bin    # elsewhere

File layout (little endian):
    magic  b"CTQV", u32 version (1), u32 record count
    record: u32 kind, u32 ggml type id, u32 n (elements), u32 nbytes, then
      kind 1 (quantize):   n f32 inputs, nbytes of gguf-py's quantized blocks
      kind 2 (dequantize): nbytes of random valid blocks, n f32 of gguf-py's dequantization
gguf-py quantizes only the 32-element formats (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0); it dequantizes
those and Q2_K..Q6_K. The file stays under 300 KB.
"""
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

QUANTIZABLE = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
DEQUANTIZABLE = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
# byte offsets of the f16 fields in each block (made finite and moderate, see random_blocks)
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def test_rows(rng, n):
    """Rows that exercise the quantizers' corner cases."""
    rows = [
        rng.standard_normal(n),                                   # plain gaussian
        rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-3, 3, n),    # large dynamic range
        np.zeros(n),                                              # all zeros
        np.full(n, 0.37),                                         # constant positive
        np.full(n, -2.5),                                         # constant negative
        rng.uniform(0, 5, n),                                     # all positive (affine formats)
    ]
    z = rng.standard_normal(n)
    z[: n // 2] = 0.0                                             # half zeros
    z[n // 2 + 3] = 1e4                                           # one outlier
    rows.append(z)
    return [r.astype(np.float32) for r in rows]


def random_blocks(rng, qtype, nblocks):
    bs, ts = quants.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(nblocks, ts), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        # random sign and magnitude 2^-14 .. 2^2: finite scales, no NaN/inf in the output
        vals = (rng.choice([-1.0, 1.0], nblocks) * 2.0 ** rng.uniform(-14, 2, nblocks)).astype(np.float16)
        raw[:, off:off + 2] = vals.view(np.uint8).reshape(nblocks, 2)
    return raw


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "data", "quant_vectors.bin")
    rng = np.random.default_rng(20240611)
    recs = []
    for qt in QUANTIZABLE:
        for row in test_rows(rng, 256):
            q = quants.quantize(row.reshape(1, -1), qt).reshape(-1)
            recs.append((1, qt, row, q.tobytes()))
    for qt in DEQUANTIZABLE:
        bs, ts = quants.GGML_QUANT_SIZES[qt]
        nblocks = 8 if bs == 256 else 48
        raw = random_blocks(rng, qt, nblocks)
        deq = quants.dequantize(raw.reshape(1, -1), qt).reshape(-1).astype(np.float32)
        recs.append((2, qt, deq, raw.tobytes()))
    with open(out, "wb") as f:
        f.write(b"CTQV" + struct.pack("<II", 1, len(recs)))
        for kind, qt, floats, blob in recs:
            f.write(struct.pack("<IIII", kind, int(qt), floats.size, len(blob)))
            if kind == 1:
                f.write(floats.astype("<f4").tobytes() + blob)
            else:
                f.write(blob + floats.astype("<f4").tobytes())
    print(f"wrote {out}: {len(recs)} records, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
