#!/usr/bin/env python3
"""Quantizes a GGUF with llama.cpp's own llama_model_quantize (through llama-cpp-python),
without an importance matrix, for tests/formats/test_quantize.c to compare byte for byte
with `ctorch quantize`. Usage: llama_quantize.py IN.gguf OUT.gguf FTYPE (llama_ftype id).
Exit 0 on success; 1 when llama.cpp refuses or fails."""
import ctypes
import sys

import llama_cpp


def main(src, dst, ftype):
    llama_cpp.llama_backend_init()
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 2
    return 0 if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
