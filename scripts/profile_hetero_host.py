"""Where the host time of a heterogeneous CUDA sample goes: the CPU side of
``pyg_accel.ops.hetero_neighbor_sample`` on the ogbn-mag-like graph of
``benchmarks/hetero_sampling.py`` (1024 paper seeds), by torch.profiler's CPU events
(ATen ops and CUDA runtime calls, self time per call), the wall time of the Python
wrapper against the raw op, and the timeline of one call (host events and kernels, in
microseconds from the call's start).

    python scripts/profile_hetero_host.py --fanout 10 10
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'benchmarks'))
from hetero_sampling import mag_like_graph, to_csc  # noqa: E402

from pyg_accel.ops import hetero_neighbor_sample  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--fanout', type=int, nargs='*', default=[10, 10])
    p.add_argument('--calls', type=int, default=40)
    args = p.parse_args(argv)
    device = torch.device('cuda')
    num_nodes, edges = mag_like_graph(1.0, device)
    colptrs, rows = {}, {}
    for et, ei in edges.items():
        colptrs[et], rows[et] = to_csc(ei, num_nodes[et[-1]])
    fanouts = {et: args.fanout for et in edges}
    gen = torch.Generator(device=device).manual_seed(0)
    seeds = [{'paper': torch.randint(0, num_nodes['paper'], (1024,), generator=gen, device=device)}
             for _ in range(args.calls)]

    def call(s):
        return hetero_neighbor_sample(colptrs, rows, s, fanouts, num_nodes)
    for s in seeds[:3]:
        call(s)
    torch.cuda.synchronize()
    print(f'wall per call: median {median_wall(call, seeds) * 1e3:.3f} ms', flush=True)
    raw = raw_op_call(colptrs, rows, fanouts, num_nodes)
    print(f'raw op (arguments prepared): median {median_wall(raw, seeds) * 1e3:.3f} ms', flush=True)
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, s in enumerate(seeds):
            with record_function(f'call{i}'):
                call(s)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by='self_cpu_time_total', row_limit=30, max_name_column_width=60))
    print_timeline(prof.events(), f'call{len(seeds) - 1}')


def median_wall(fn, seeds) -> float:
    """Median seconds per call of ``fn(seeds[i])`` (calls back to back, as a loader makes
    them; each returns once its counts are read)."""
    wall = []
    for s in seeds:
        t0 = time.perf_counter()
        fn(s)
        wall.append(time.perf_counter() - t0)
    return statistics.median(wall)


def raw_op_call(colptrs, rows, fanouts, num_nodes):
    """The op itself with every argument but the seeds built once (what the wrapper's
    checks and conversions cost is the difference)."""
    from pyg_accel.ops._library import ops
    node_types, edge_types = list(num_nodes), list(colptrs)
    index = {t: i for i, t in enumerate(node_types)}
    op = ops().hetero_neighbor_sample.default
    empty = torch.empty(0, dtype=torch.long, device=next(iter(colptrs.values())).device)
    fixed = ([num_nodes[t] for t in node_types], [index[et[0]] for et in edge_types],
             [index[et[-1]] for et in edge_types], [colptrs[et] for et in edge_types], [rows[et] for et in edge_types])
    flat = [k for et in edge_types for k in fanouts[et]]
    hops = len(fanouts[edge_types[0]])
    none_r, none_t = [None] * len(edge_types), [None] * len(node_types)

    def raw(seed_dict):
        return op(*fixed, [seed_dict.get(t, empty) for t in node_types], flat, hops, False, False, None,
                  none_r, none_t, none_r, none_t, 'uniform')
    return raw


def print_timeline(events, marker: str) -> None:
    """Host events (top level inside the op: ATen ops and CUDA runtime calls) and the
    GPU kernels and copies of one call, in order, microseconds from its start."""
    span = next(e for e in events if e.name == marker)
    t0, t1 = span.time_range.start, span.time_range.end
    inside = [e for e in events if t0 <= e.time_range.start <= t1 and e is not span]
    host = [e for e in inside if e.device_type.name == 'CPU']
    gpu = sorted((e for e in events if e.device_type.name == 'CUDA' and t0 <= e.time_range.start <= t1 + 500),
                 key=lambda e: e.time_range.start)  # (the emit kernels may run after the call returns)
    print(f'\ntimeline of {marker}: {t1 - t0:.1f} us on the host')
    depth = {}
    for e in sorted(host, key=lambda e: (e.time_range.start, -e.time_range.elapsed_us())):
        parent = e.cpu_parent
        d = depth.get(id(parent), -1) + 1 if parent is not None and parent is not span else 0
        depth[id(e)] = d
        if d <= 2:
            print(f'  host {e.time_range.start - t0:8.1f} +{e.time_range.elapsed_us():7.1f}  {"  " * d}{e.name[:70]}')
    for e in gpu:
        print(f'  gpu  {e.time_range.start - t0:8.1f} +{e.time_range.elapsed_us():7.1f}  {e.name[:70]}')


if __name__ == '__main__':
    main()
