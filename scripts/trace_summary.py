"""What a Chrome trace of a training loop says about where its time went: written for
the traces ``scripts/profile_step.py --loop --trace DIR`` saves (one per rank), usable on
any torch.profiler trace with CPU and CUDA activity.

Per trace: the window, the host's time between CUDA graph launches (a captured step's
pace as the host sees it), the GPU's busy time (the union of kernel, copy and memset
intervals), each stream's busy time and top kernels, the host's synchronising calls, what
the GPU ran while the host waited in syncs longer than ``--long-sync-us``, and each stream
capture (a new batch shape warming up and being captured mid-run shows here).

    python scripts/trace_summary.py DIR/rank0.json.gz DIR/rank2.json.gz [--top 4]

On 4 x H200 this showed ranks capturing new batch shapes in a steady-state epoch, one
rank's capture holding the others in the next all-reduce (docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
from collections import Counter, defaultdict
from typing import Dict, Iterable, List, Tuple

GPU_CATEGORIES = ('kernel', 'gpu_memcpy', 'gpu_memset')
RUNTIME_CATEGORIES = ('cuda_runtime', 'cuda_driver')
GRAPH_LAUNCHES = ('cudaGraphLaunch', 'cuGraphLaunch')


def load_events(path: str) -> List[dict]:
    """The complete ('X') events of a Chrome trace (``.json`` or ``.json.gz``)."""
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt') as f:
        return [e for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']


def union_us(intervals: Iterable[Tuple[float, float]]) -> float:
    """Total length of the union of ``[start, end)`` intervals."""
    total, current = 0.0, None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    return total + (current[1] - current[0] if current is not None else 0.0)


def summarise(events: List[dict], top: int = 4, long_sync_us: float = 300.0) -> Dict:
    """The numbers the module docstring lists, as a dict (times in microseconds)."""
    gpu = [e for e in events if e.get('cat') in GPU_CATEGORIES]
    runtime = [e for e in events if e.get('cat') in RUNTIME_CATEGORIES]
    begin = min((e['ts'] for e in events), default=0.0)
    end = max((e['ts'] + e['dur'] for e in events), default=0.0)
    launches = sorted(e['ts'] for e in runtime if e['name'] in GRAPH_LAUNCHES)
    gaps = [b - a for a, b in zip(launches, launches[1:])]
    streams: Dict[object, List[dict]] = defaultdict(list)
    for e in gpu:
        streams[e.get('args', {}).get('stream', e.get('tid'))].append(e)
    per_stream = []
    for stream, kernels in streams.items():
        names = Counter()
        for e in kernels:
            names[e['name'][:60]] += e['dur']
        per_stream.append({'stream': stream, 'ops': len(kernels),
                           'busy_us': union_us((e['ts'], e['ts'] + e['dur']) for e in kernels),
                           'top': names.most_common(top)})
    per_stream.sort(key=lambda s: -s['busy_us'])
    syncs: Dict[str, List[float]] = defaultdict(list)
    for e in runtime:
        if 'Synchronize' in e['name']:
            syncs[e['name']].append(e['dur'])
    waits = [e for e in runtime if 'Synchronize' in e['name'] and e['dur'] > long_sync_us]
    during = Counter()
    for w in waits:
        for g in gpu:
            overlap = min(w['ts'] + w['dur'], g['ts'] + g['dur']) - max(w['ts'], g['ts'])
            if overlap > 0:
                during[(g.get('args', {}).get('stream'), g['name'][:50])] += overlap
    captures = [round(e['ts'] - begin) for e in runtime if e['name'] == 'cudaStreamBeginCapture']
    return {
        'window_us': end - begin,
        'graph_launches': len(launches),
        'between_launches_us': ({'median': statistics.median(gaps), 'p90': sorted(gaps)[int(0.9 * len(gaps))],
                                 'max': max(gaps)} if gaps else None),
        'gpu_busy_us': union_us((e['ts'], e['ts'] + e['dur']) for e in gpu),
        'streams': per_stream,
        'syncs': {name: {'calls': len(d), 'total_us': sum(d), 'max_us': max(d)} for name, d in syncs.items()},
        'long_syncs': {'count': len(waits), 'total_us': sum(w['dur'] for w in waits),
                       'gpu_during': during.most_common(2 * top)},
        'captures_at_us': captures,
    }


def report(path: str, s: Dict) -> str:
    ms = lambda us: f'{us / 1e3:.1f} ms'  # noqa: E731
    lines = [f"{path}: window {ms(s['window_us'])}, GPU busy {ms(s['gpu_busy_us'])}, "
             f"{s['graph_launches']} CUDA graph launches"]
    if s['between_launches_us']:
        b = s['between_launches_us']
        lines.append(f"  host between graph launches: median {b['median'] / 1e3:.3f} ms, p90 {b['p90'] / 1e3:.3f}, "
                     f"max {b['max'] / 1e3:.3f}")
    for st in s['streams']:
        top = '; '.join(f'{name} {ms(us)}' for name, us in st['top'])
        lines.append(f"  stream {st['stream']}: {st['ops']} ops, busy {ms(st['busy_us'])}: {top}")
    for name, d in s['syncs'].items():
        lines.append(f"  host {name}: {d['calls']} calls, {ms(d['total_us'])}, longest {d['max_us']:.0f} us")
    if s['long_syncs']['count']:
        lines.append(f"  while the host waited in {s['long_syncs']['count']} long syncs "
                     f"({ms(s['long_syncs']['total_us'])}), the GPU ran:")
        lines += [f'    stream {stream} {name}: {ms(us)}' for (stream, name), us in s['long_syncs']['gpu_during']]
    if s['captures_at_us']:
        lines.append(f"  stream captures (a step's new batch shape, or a sampler plan) at "
                     f"{', '.join(ms(t) for t in s['captures_at_us'])}")
    return '\n'.join(lines)


def main(argv=None) -> List[Dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('traces', nargs='+', help='Chrome trace files (.json or .json.gz)')
    p.add_argument('--top', type=int, default=4, help='kernels listed per stream')
    p.add_argument('--long-sync-us', type=float, default=300.0, help='syncs at least this long are looked into')
    args = p.parse_args(argv)
    summaries = []
    for path in args.traces:
        summaries.append(summarise(load_events(path), args.top, args.long_sync_us))
        print(report(path, summaries[-1]), flush=True)
    return summaries


if __name__ == '__main__':
    main()
