#!/usr/bin/env python3
"""Reads the sample GGUF written by tests/formats/test_gguf.c (make_sample,
version 3, default alignment) with the `gguf` Python package and checks
every key, value, tensor name, type, shape and byte against what the C test
wrote. Exits non-zero with a message on the first mismatch."""
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType as VT, GGMLQuantizationType as QT

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def f16(x):
    return np.float16(x).view(np.uint16)


def bf16(x):
    return np.float32(x).view(np.uint32) >> 16  # values chosen to be exact in bf16


def main(path):
    r = GGUFReader(path)
    fields = {k: v for k, v in r.fields.items() if not k.startswith("GGUF.")}
    want_scalars = {
        "t.u8": (VT.UINT8, 200), "t.i8": (VT.INT8, -100), "t.u16": (VT.UINT16, 60000),
        "t.i16": (VT.INT16, -30000), "t.u32": (VT.UINT32, 4000000000), "t.i32": (VT.INT32, -2000000000),
        "t.u64": (VT.UINT64, 2**63 + 5), "t.i64": (VT.INT64, -(2**62)), "t.f32": (VT.FLOAT32, 1.5),
        "t.f64": (VT.FLOAT64, -2.25e100), "t.bool": (VT.BOOL, True), "t.replaced": (VT.UINT32, 2),
    }
    for key, (vt, val) in want_scalars.items():
        f = fields.get(key)
        check(f is not None and f.types == [vt] and f.contents() == val, f"{key}: {f and (f.types, f.contents())}")
    want_str = {"general.architecture": "llama", "general.name": "t\u00ebst", "t.str_empty": ""}
    for key, val in want_str.items():
        f = fields.get(key)
        check(f is not None and f.types == [VT.STRING] and f.contents() == val, f"{key}: {f and f.contents()}")
    want_arr = {
        "t.arr_u8": (VT.UINT8, [1, 2, 3]), "t.arr_i16": (VT.INT16, [-5, 5]), "t.arr_i32": (VT.INT32, [-1, 0, 7]),
        "t.arr_u64": (VT.UINT64, [0, 2**64 - 1]), "t.arr_f32": (VT.FLOAT32, [0.5, -1.25]),
        "t.arr_f64": (VT.FLOAT64, [1e10, -3.0]), "t.arr_bool": (VT.BOOL, [True, False, True]),
        "t.arr_empty": (VT.UINT32, []), "t.arr_str": (VT.STRING, ["a", "", "h\u00e9llo", "x y z"]),
    }
    for key, (et, val) in want_arr.items():
        f = fields.get(key)
        check(f is not None and f.types[0] == VT.ARRAY, f"{key}: not an array")
        if f is None:
            continue
        if val:
            check(f.types == [VT.ARRAY, et], f"{key}: types {f.types}")
        check(list(f.contents()) == val, f"{key}: {f.contents()} != {val}")
    # nested arrays: gguf-py keeps every component as a part (parts 2, 3 are the
    # value type and the outer element type; then the count and each inner type, count, items)
    f = fields.get("t.nested")
    check(f is not None and f.types == [VT.ARRAY, VT.ARRAY, VT.INT32], f"t.nested types {f and f.types}")
    if f is not None:
        check([int(f.parts[i][0]) for i in f.data] == [1, 2, 3], "t.nested leaves")
        layout = [p.tolist() for p in f.parts[4:]]
        check(layout == [[3], [5], [2], [1], [2], [5], [1], [3], [5], [0]], f"t.nested layout {layout}")
    f = fields.get("t.nested_str")
    check(f is not None and f.types == [VT.ARRAY, VT.ARRAY, VT.STRING], "t.nested_str types")
    if f is not None:
        check([f.parts[i].tobytes() for i in f.data] == [b"p", b"qq", b"r"], "t.nested_str leaves")
        layout = [p.tolist() for p in f.parts[4:]]
        check(layout == [[2], [8], [2], [1], [112], [2], [113, 113], [8], [1], [1], [114]],
              f"t.nested_str layout {layout}")
    want_keys = set(want_scalars) | set(want_str) | set(want_arr) | {"t.nested", "t.nested_str"}
    check(set(fields) == want_keys, f"key set differs: {set(fields) ^ want_keys}")

    f32 = np.arange(6, dtype=np.float32) * np.float32(0.5) - np.float32(1.0)
    f16v = np.array([f16(i * 0.25 - 0.5) for i in range(4)], dtype=np.uint16)
    bf16v = np.array([bf16(i * 2.0 + 0.5) for i in range(4)], dtype=np.uint16)
    q8 = np.array([(i * 7 + 3) & 0xFF for i in range(68)], dtype=np.uint8)
    iq4 = np.array([255 - i for i in range(18)], dtype=np.uint8)
    i32 = np.array([(i - 2) * 1000003 for i in range(6)], dtype=np.int32)
    f64 = np.array([1e-300, -0.0, 3.5], dtype=np.float64)
    i8 = np.array([-128, -1, 0, 1, 127], dtype=np.int8)
    # name -> (type, ne (ggml order), raw bytes)
    want_t = {
        "f32.w": (QT.F32, [3, 2], f32.tobytes()), "f16.w": (QT.F16, [4], f16v.tobytes()),
        "q8.w": (QT.Q8_0, [32, 2], q8.tobytes()), "i32.w": (QT.I32, [2, 1, 3], i32.tobytes()),
        "bf16.w": (QT.BF16, [2, 2], bf16v.tobytes()), "iq4.w": (QT.IQ4_NL, [32], iq4.tobytes()),
        "f64.w": (QT.F64, [3], f64.tobytes()), "i8.w": (QT.I8, [5, 1, 1, 1], i8.tobytes()),
    }
    got = {t.name: t for t in r.tensors}
    check(list(got) == list(want_t), f"tensor names/order {list(got)}")
    for name, (tt, ne, raw) in want_t.items():
        t = got.get(name)
        if t is None:
            continue
        check(t.tensor_type == tt, f"{name}: type {t.tensor_type!r}")
        check([int(x) for x in t.shape] == ne, f"{name}: ne {list(t.shape)} != {ne}")
        check(t.n_bytes == len(raw) and t.data.tobytes() == raw, f"{name}: data differs")
    if failures:
        for m in failures:
            print("check_gguf_py:", m, file=sys.stderr)
        return 1
    print(f"check_gguf_py: {len(fields)} keys and {len(got)} tensors match")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
