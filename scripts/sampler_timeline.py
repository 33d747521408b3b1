"""The CUDA sampler's GPU timeline: each kernel's median duration (in graph order) and
the wall time per call, for one or more settings of its environment knobs, in one
process on one graph:

    python scripts/sampler_timeline.py [--preset products] [--batch 1024] \\
        [--config default] [--config small:PYG_ACCEL_SAMPLER_TABLE_FACTOR=1.1] [--out DIR]

Knobs read when a plan is built (table size) or captured (L2 policy) take effect
because the plan cache is cleared between settings. Prints one table, writes JSON.
"""
import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from profile_sampler import graph_and_batches  # (scripts/, beside this one)
from pyg_accel.ops import clear_sampler_cache, neighbor_sample


def kernel_timeline(prof) -> list:
    """[(kernel, duration, start, end)] (us) per sample, from the profiler's kernel events."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / 'trace.json'
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())['traceEvents']
    kernels = sorted((e for e in events if e.get('cat') == 'kernel'), key=lambda e: e['ts'])
    samples = []
    for e in kernels:
        name = re.sub(r'.*::', '', e['name'].replace('(anonymous namespace)::', '').split('(')[0])
        if name.startswith('seed'):
            samples.append([])
        if samples:
            samples[-1].append((name, e['dur'], e['ts'], e['ts'] + e['dur']))
    return samples


def measure(colptr, row, batches, fanouts, calls: int) -> dict:
    clear_sampler_cache()
    for s in batches[:3]:
        neighbor_sample(colptr, row, s, fanouts)
    walls = []
    for i in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = neighbor_sample(colptr, row, batches[i % len(batches)], fanouts)
        walls.append((time.perf_counter() - t0) * 1e6)
    edges = sum(out.num_sampled_edges)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for s in batches[:10]:
            neighbor_sample(colptr, row, s, fanouts)
        torch.cuda.synchronize()
    samples = kernel_timeline(prof)
    samples = [s for s in samples if len(s) == len(samples[0])]
    names = [k[0] for k in samples[0]]
    durations = [statistics.median(s[i][1] for s in samples) for i in range(len(names))]
    spans = [s[-1][3] - s[0][2] for s in samples]
    return {'wall_us': statistics.median(walls), 'gpu_span_us': statistics.median(spans),
            'edges': edges, 'kernels': names, 'kernel_us': durations}


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--preset', default='products')
    p.add_argument('--batch', type=int, default=1024)
    p.add_argument('--fanouts', type=int, nargs='*', default=[15, 10, 5])
    p.add_argument('--config', action='append', default=None,
                   help="NAME or NAME:VAR=VALUE,VAR=VALUE (environment for that run)")
    p.add_argument('--calls', type=int, default=60)
    p.add_argument('--out', default='timeline-out')
    args = p.parse_args()
    colptr, row, batches = graph_and_batches(args.preset, args.batch, 20, seed=0)
    results = {}
    for config in args.config or ['default']:
        name, _, assignments = config.partition(':')
        env = dict(a.split('=', 1) for a in assignments.split(',') if a)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            results[name] = dict(measure(colptr, row, batches, args.fanouts, args.calls), env=env)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    names = next(iter(results.values()))['kernels']
    header = ['kernel'] + list(results)
    lines = [header, ['wall us'] + [f"{r['wall_us']:.1f}" for r in results.values()],
             ['GPU span us'] + [f"{r['gpu_span_us']:.1f}" for r in results.values()],
             ['M edges/s (wall)'] + [f"{r['edges'] / r['wall_us']:,.0f}" for r in results.values()]]
    for i, kernel in enumerate(names):
        lines.append([kernel] + [f"{r['kernel_us'][i]:.2f}" if i < len(r['kernel_us']) and r['kernels'][i] == kernel
                                 else '?' for r in results.values()])
    widths = [max(len(line[c]) for line in lines) for c in range(len(header))]
    for j, line in enumerate(lines):
        print('| ' + ' | '.join(cell.ljust(w) if c == 0 else cell.rjust(w)
                                for c, (cell, w) in enumerate(zip(line, widths))) + ' |')
        if j == 0:
            print('|' + '|'.join('-' * (w + 2) for w in widths) + '|')
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'sampler_timeline.json').write_text(json.dumps(
        {'gpu': torch.cuda.get_device_name(), 'preset': args.preset, 'batch': args.batch, 'fanouts': args.fanouts,
         'results': results}, indent=1))


if __name__ == '__main__':
    main()
