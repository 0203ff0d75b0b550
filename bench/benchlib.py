"""Helpers shared by the bench/ scripts (standard library only).

gguf_tensor_bytes(path): per-tensor byte spans of a GGUF file, from its tensor
    data offsets (alignment padding included: < 32 B per tensor).
decode_bytes_per_token(path): the weight bytes one decode token reads: every
    tensor but the token embedding (a row lookup), plus the embedding when the
    file has no output.weight (tied: the output projection reads all of it).
median(xs)
"""
import os
import statistics
import struct

# GGUF metadata value types with a fixed size (gguf spec: uint8 .. float64, bool)
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_tensor_bytes(path):
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(path + ": not a GGUF file")
        struct.unpack("<I", f.read(4))  # version
        n_t, n_kv = struct.unpack("<QQ", f.read(16))
        align = 32

        def rstr():
            n, = struct.unpack("<Q", f.read(8))
            return f.read(n)

        def skip(t):
            if t in _FIXED:
                return f.read(_FIXED[t])
            if t == 8:
                return rstr()
            if t == 9:
                et, n = struct.unpack("<IQ", f.read(12))
                if et in _FIXED:
                    f.seek(_FIXED[et] * n, 1)
                    return None
                for _ in range(n):
                    skip(et)
                return None
            raise ValueError("%s: bad metadata value type %d" % (path, t))

        for _ in range(n_kv):
            k = rstr()
            t, = struct.unpack("<I", f.read(4))
            v = skip(t)
            if k == b"general.alignment":
                align = struct.unpack("<I", v)[0]
        infos = []
        for _ in range(n_t):
            name = rstr().decode()
            nd, = struct.unpack("<I", f.read(4))
            f.seek(8 * nd + 4, 1)
            off, = struct.unpack("<Q", f.read(8))
            infos.append((off, name))
        data_start = (f.tell() + align - 1) // align * align
    size = os.path.getsize(path)
    infos.sort()
    out = {}
    for i, (off, name) in enumerate(infos):
        end = infos[i + 1][0] if i + 1 < len(infos) else size - data_start
        out[name] = end - off
    return out


def decode_bytes_per_token(path):
    tb = gguf_tensor_bytes(path)
    n = sum(v for k, v in tb.items() if k != "token_embd.weight")
    if "output.weight" not in tb:
        n += tb.get("token_embd.weight", 0)
    return n


def median(xs):
    return statistics.median(xs) if xs else None
