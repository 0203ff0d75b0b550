#!/usr/bin/env python3
"""Where a prompt pass's device time goes, kernel by kernel, on the device's own clock.

Loads the ctorch-step-trace module (bench/step_trace.c) into this process and evaluates a
model's prompt of P tokens R times under PyTorch's profiler (CUPTI records every kernel), after
one unprofiled warm-up pass. Passes are told apart by a 50 ms pause of the host after each
(the device idles; a gap of more than 20 ms with no kernel ends a pass). Prints each pass's span and busy time (the union of its
kernels), then per kernel kind the time per pass, its share and its launches per pass.
Session 42 found Gemma 3's prefill attention this way (7.3 of 10.1 ms a pp512 pass).
Usage: prompt_profile.py MODULE.so MODEL [--prompt 512] [--reps 3] [--devices cuda] [--top 40]
"""
import argparse, collections, ctypes, json, os, tempfile, time


def passes(events, gap_us=20000.0):
    out, cur = [], [events[0]]
    for a, b in zip(events, events[1:]):
        if b['ts'] - (a['ts'] + a['dur']) > gap_us:
            out.append(cur)
            cur = []
        cur.append(b)
    out.append(cur)
    return out


def busy(evs):
    t, end = 0.0, float('-inf')
    for e in evs:
        s, f = e['ts'], e['ts'] + e['dur']
        if f > end:
            t += f - max(s, end)
            end = f
    return t


def short(name):
    return name.replace('void ', '').replace('(anonymous namespace)::', '')[:100]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('module'); ap.add_argument('model')
    ap.add_argument('--prompt', type=int, default=512); ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--devices', default='cuda'); ap.add_argument('--top', type=int, default=40)
    a = ap.parse_args()
    import torch
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.init(); torch.zeros(1, device='cuda')
    fn = ctypes.CDLL(os.path.abspath(a.module)).ct_bench_step_trace
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    model, dev = a.model.encode(), a.devices.encode()
    if fn(model, dev, a.prompt, 0):
        raise SystemExit('prompt_profile: the warm-up pass failed')
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.reps):
            fn(model, dev, a.prompt, 0)
            torch.cuda.synchronize()
            time.sleep(0.05)
    path = tempfile.mktemp(suffix='.json')
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    ev = sorted((e for e in trace.get('traceEvents', []) if e.get('cat') in ('kernel', 'gpu_memset') and 'dur' in e),
                key=lambda e: e['ts'])
    if not ev:
        raise SystemExit('prompt_profile: no kernels recorded')
    ps = passes(ev)
    for i, p in enumerate(ps):
        print('pass %d: %d kernels, span %.0f us, busy %.0f us' % (i, len(p), p[-1]['ts'] + p[-1]['dur'] - p[0]['ts'], busy(p)))
    agg = collections.defaultdict(lambda: [0, 0.0])
    for p in ps:
        for e in p:
            agg[short(e['name'])][0] += 1
            agg[short(e['name'])][1] += e['dur']
    n = len(ps)
    total = sum(v[1] for v in agg.values()) / n
    print('per pass (%d passes): %.0f us of kernel time' % (n, total))
    for name, (cnt, d) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print('%9.1f us %5.1f%% %5d x  %s' % (d / n, 100 * d / n / total, cnt // n, name))


if __name__ == '__main__':
    main()
