#!/usr/bin/env python3
"""PyTorch's conv2d and 2x2 pooling on ctorch-bench-cuda-nn conv's shapes (../shared/ANCHORS.md's
layer: N 32, 256 -> 256 channels, 56x56, 3x3, pad 1), timed the same way: best of 5 rounds of
back-to-back ops ended by a sync, after one warm-up round. Prints the rows of that table."""
import sys, time
import torch


def best(fn, iters):
    ts = []
    for r in range(6):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        if r:  # round 0 warms up (cuDNN's algorithm choice, the allocator)
            ts.append((time.perf_counter() - t0) / iters)
    return min(ts)


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    flop = 2.0 * 32 * 256 * 56 * 56 * 256 * 9
    for dt, tf32 in ((torch.float32, False), (torch.float32, True), (torch.float16, False), (torch.bfloat16, False)):
        torch.backends.cudnn.allow_tf32 = tf32
        x = torch.randn(32, 256, 56, 56, device='cuda', dtype=dt)
        w = torch.randn(256, 256, 3, 3, device='cuda', dtype=dt)
        s = best(lambda: torch.nn.functional.conv2d(x, w, padding=1), iters)
        name = f"{str(dt).split('.')[-1]}{' TF32' if tf32 else ''}"
        print(f"| PyTorch conv2d {name} | 32x256x56x56, 3x3 pad 1 | {flop / s / 1e12:.1f} TFLOP/s ({s * 1e3:.2f} ms) | |")
    x = torch.randn(32, 256, 56, 56, device='cuda')
    moved = x.numel() * 4 * 1.25
    for name, fn in (('max_pool2d', torch.nn.functional.max_pool2d), ('avg_pool2d', torch.nn.functional.avg_pool2d)):
        s = best(lambda: fn(x, 2), 4 * iters)
        print(f"| PyTorch {name} f32 | 32x256x56x56, 2x2 | {moved / s / 1e9:.0f} GB/s | |")


if __name__ == '__main__':
    main()
