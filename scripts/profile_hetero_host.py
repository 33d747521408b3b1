"""Where the host time of a heterogeneous CUDA sample goes: the CPU side of
``pyg_accel.ops.hetero_neighbor_sample`` on the ogbn-mag-like graph of
``benchmarks/hetero_sampling.py`` (1024 paper seeds), by torch.profiler's CPU events
(ATen ops and CUDA runtime calls, self time per call), and the wall time of the Python
wrapper against the raw op.

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
    wall = []
    for s in seeds:
        t0 = time.perf_counter()
        call(s)
        wall.append(time.perf_counter() - t0)
    print(f'wall per call: median {statistics.median(wall) * 1e3:.3f} ms', flush=True)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for s in seeds:
            call(s)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by='self_cpu_time_total', row_limit=30, max_name_column_width=60))


if __name__ == '__main__':
    main()
