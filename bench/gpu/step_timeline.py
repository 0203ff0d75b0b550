#!/usr/bin/env python3
"""Where a replayed decode step's time goes, kernel by kernel, on the device's own clock.

Loads the ctorch-step-trace module (bench/step_trace.c) into this process, runs a model's
decode steps under PyTorch's profiler (CUPTI records every kernel of a replayed CUDA graph
with its start and end), and prints, for the median step:
  - each kernel kind: launches, summed duration, and its *advance*: how far it moved the end
    of the step's timeline past every kernel before it (PDL lets kernels overlap, so the
    advances, not the durations, add up to the step);
  - the step's span on the device, and the host gap between steps (logits read, sampling,
    the next graph launch).
With --host it runs without the profiler and prints the host's side instead (wall time per
token and its host phases).
Usage: step_timeline.py MODULE.so MODEL [--devices cuda] [--prompt 0] [--steps 24] [--json OUT] [--host]
"""
import argparse, collections, ctypes, json, os, statistics, sys, tempfile


def kernels_of(trace):
    ev = [e for e in trace.get('traceEvents', []) if e.get('cat') == 'kernel' and 'dur' in e]
    ev.sort(key=lambda e: e['ts'])
    return [(e['name'], float(e['ts']), float(e['ts']) + float(e['dur'])) for e in ev]


def split_steps(ks, first):
    """Steps start at each launch of the step's first kernel (the embedding lookup)."""
    idx = [i for i, k in enumerate(ks) if first in k[0]]
    return [ks[a:b] for a, b in zip(idx, idx[1:])]


def short(name):
    n = name.replace('void ', '').replace('(anonymous namespace)::', '').replace('<unnamed>::', '')
    return n[:90]


def advances(step):
    out, end = [], step[0][1]
    for name, s, e in step:
        out.append((name, e - s, max(0.0, e - max(end, s)), max(0.0, s - end)))
        end = max(end, e)
    return out, end - step[0][1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('module'); ap.add_argument('model')
    ap.add_argument('--devices', default='cuda'); ap.add_argument('--prompt', type=int, default=0)
    ap.add_argument('--steps', type=int, default=24); ap.add_argument('--first', default='emb')
    ap.add_argument('--json')
    ap.add_argument('--host', action='store_true', help='no profiler: the host side per token')
    a = ap.parse_args()
    if not a.host:
        import torch
        from torch.profiler import profile, ProfilerActivity
        torch.cuda.init(); torch.zeros(1, device='cuda')
    lib = ctypes.CDLL(os.path.abspath(a.module))
    fn = lib.ct_bench_step_trace
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    if a.host:
        sys.stderr.flush()
        sys.exit(fn(a.model.encode(), a.devices.encode(), a.prompt, a.steps))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        rc = fn(a.model.encode(), a.devices.encode(), a.prompt, a.steps)
    if rc:
        sys.exit('the step module failed')
    path = a.json or tempfile.mktemp(suffix='.json')
    prof.export_chrome_trace(path)
    ks = kernels_of(json.load(open(path)))
    steps = split_steps(ks, a.first)
    if len(steps) < 3:
        sys.exit(f'{len(ks)} kernels, {len(steps)} steps found (first kernel "{a.first}"): nothing to report')
    steps = steps[len(steps) // 4:]  # the first steps record and warm up
    spans = []
    for st in steps:
        spans.append(advances(st)[1])
    med = sorted(range(len(steps)), key=lambda i: spans[i])[len(steps) // 2]
    step = steps[med]
    rows, span = advances(step)
    gaps = [steps[i + 1][0][1] - max(k[2] for k in steps[i]) for i in range(len(steps) - 1)]
    agg = collections.OrderedDict()
    for name, dur, adv, idle in rows:
        g = agg.setdefault(short(name), [0, 0.0, 0.0, 0.0])
        g[0] += 1; g[1] += dur; g[2] += adv; g[3] += idle
    print(f'steps measured {len(steps)}; kernels per step {len(step)}; device span median {statistics.median(spans):.1f} us '
          f'(min {min(spans):.1f}, max {max(spans):.1f}); host gap between steps median {statistics.median(gaps):.1f} us')
    print(f'| kernel | launches | summed duration (us) | advance (us) | of which idle before it (us) | advance per launch |')
    print('|---|---:|---:|---:|---:|---:|')
    for n, g in sorted(agg.items(), key=lambda x: -x[1][2]):
        print(f'| {n} | {g[0]} | {g[1]:.1f} | {g[2]:.1f} | {g[3]:.1f} | {g[2] / g[0]:.2f} |')
    print(f'| all | {len(step)} | {sum(r[1] for r in rows):.1f} | {sum(r[2] for r in rows):.1f} | {sum(r[3] for r in rows):.1f} | |')
    print('\nfirst layer, in order (start offset, duration, advance, us):')
    t0 = step[0][1]
    for (name, s, e), (_, dur, adv, idle) in list(zip(step, rows))[:16]:
        print(f'  {s - t0:8.2f} {dur:7.2f} {adv:7.2f}  {short(name)}')


if __name__ == '__main__':
    main()
