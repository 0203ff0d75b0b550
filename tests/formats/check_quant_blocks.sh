#!/bin/sh
# src/quant/quant_blocks.h is shared with device kernels: it must compile, size
# checks included, as freestanding C99, as OpenCL C (clang's OpenCL front end), as
# C++ without any standard header (what NVRTC offers) and through nvcc, with each
# compiler found here; and a block of the wrong size must fail each of them.
# Usage: check_quant_blocks.sh HEADER CC. Exit 77 when no compiler could run.
hdr=$1
cc=${2:-cc}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp "$hdr" "$tmp/quant_blocks.h"
# the same header with Q4_0 one byte too long: its size check must fire
sed 's|uint8_t qs\[QK / 2\]; } blk_q4_0;|uint8_t qs[QK / 2 + 1]; } blk_q4_0;|' "$hdr" > "$tmp/bad.h"
if cmp -s "$hdr" "$tmp/bad.h"; then echo "FAIL: could not plant a wrong block size"; exit 1; fi
ran=0 failed=0

# check NAME COMPILER-COMMAND... (the header path is appended)
check() {
    name=$1
    shift
    if ! "$@" "$tmp/quant_blocks.h" > "$tmp/log" 2>&1; then
        echo "FAIL $name:"; cat "$tmp/log"; failed=1; return
    fi
    if "$@" "$tmp/bad.h" > /dev/null 2>&1; then
        echo "FAIL $name: a wrong block size compiled"; failed=1; return
    fi
    echo "ok   $name"
    ran=$((ran + 1))
}

have() { command -v "$1" > /dev/null 2>&1; }

if have "$cc"; then
    check "C99 freestanding ($cc)" "$cc" -std=c99 -ffreestanding -pedantic -Wall -Wextra -Werror -fsyntax-only -x c
    check "C17 ($cc)" "$cc" -std=c17 -pedantic -Wall -Wextra -Werror -fsyntax-only -x c
fi
if have clang; then
    for v in CL1.2 CL2.0 CL3.0; do
        check "OpenCL C $v (clang)" clang -x cl -cl-std=$v -Wall -Werror -fsyntax-only
    done
fi
cxx=
for c in clang++ g++ c++; do if have $c; then cxx=$c; break; fi; done
if [ -n "$cxx" ]; then
    check "C++11 ($cxx)" "$cxx" -std=c++11 -pedantic -Wall -Wextra -Werror -fsyntax-only -x c++
    check "C++ without standard headers, as NVRTC ($cxx)" \
        "$cxx" -std=c++11 -nostdinc -nostdinc++ -D__CUDACC_RTC__ -Wall -Werror -fsyntax-only -x c++
fi
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$nvcc" ]; then
    # a kernel reading the blocks; nvcc wants a .cu file, not a header
    mk_cu() { printf '#include "%s"\n__global__ void k(const blk_q4_k *b, const blk_q8_k *a, float *o)\n{ o[threadIdx.x] = (float)b[threadIdx.x].qs[0] * a[0].d + a[0].bsums[1]; }\n' "$1" > "$tmp/k.cu"; }
    printf '__global__ void k(float *o) { o[0] = 1; }\n' > "$tmp/plain.cu"
    if "$nvcc" -c "$tmp/plain.cu" -o "$tmp/plain.o" > /dev/null 2>&1; then
        nv() { mk_cu "$1"; "$nvcc" -std=c++14 -c "$tmp/k.cu" -o "$tmp/k.o"; }
        check "CUDA (nvcc)" nv
    else
        echo "skip CUDA: nvcc cannot compile a trivial kernel here"
    fi
fi
[ $failed -eq 0 ] || exit 1
[ $ran -gt 0 ] || { echo "skip: no compiler ran"; exit 77; }
exit 0
