"""Where a CUDA sampling call spends its time: wall and thread-CPU time of the Python
API, of the raw op, with and without CUDA-graph replay, and a profiler table. With
``--loop N`` it only makes N plain sampling calls, for external tools:

    python scripts/profile_sampler.py [--preset products] [--batch 1024] [--out DIR]
    python scripts/profile_sampler.py --mode weighted   # only the kernel table, eager
    python scripts/profile_sampler.py --hetero [--fanouts 10 10]   # the mag-like graph's sampler
    ncu --clock-control none --kernel-name regex:expand --launch-skip 5 --launch-count 1 \
        python3 scripts/profile_sampler.py --loop 3 [--mode weighted]
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'benchmarks'))
from sampling import MODES, mode_options  # noqa: E402

from pyg_accel.data import GraphStore  # noqa: E402
from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.ops import hetero_neighbor_sample, last_sample_wait_us, neighbor_sample  # noqa: E402
from pyg_accel.ops._library import ops  # noqa: E402


def graph_and_batches(preset: str, batch: int, count: int, device: str = 'cuda', seed=None):
    """A synthetic preset's CSC from a GraphStore on `device`, and `count` batches of
    random training seeds (seeded by `seed` when given)."""
    ds = synthetic_dataset(preset, device=device)
    gs = GraphStore(device)
    gs.put_edge_index(ds.data.edge_index, edge_type=None, layout='coo', size=(ds.data.num_nodes,) * 2)
    row, colptr, _ = gs.csc()
    train = ds.split['train'].to(device)
    gen = None if seed is None else torch.Generator(device=device).manual_seed(seed)
    batches = [train[torch.randperm(train.numel(), device=device, generator=gen)[:batch]] for _ in range(count)]
    return colptr, row, batches


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, batches, with_wait: bool = False):
    """Medians in us of a call's wall and thread-CPU time (and, ``with_wait``, of its wait
    for the GPU, ``last_sample_wait_us``)."""
    walls, cpus, waits = [], [], []
    for s in batches:
        sync()
        t0, c0 = time.perf_counter(), time.thread_time()
        fn(s)
        sync()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.thread_time() - c0)
        waits.append(last_sample_wait_us())
    medians = statistics.median(walls) * 1e6, statistics.median(cpus) * 1e6
    return medians + (statistics.median(waits),) if with_wait else medians


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--preset', default='products')
    p.add_argument('--batch', type=int, default=1024)
    p.add_argument('--fanouts', type=int, nargs='*', default=[15, 10, 5])
    p.add_argument('--out', default='profile-out')
    p.add_argument('--loop', type=int, default=0, help='only make this many sampling calls')
    p.add_argument('--mode', choices=MODES, default='uniform',
                   help="weighted or temporal: only the eager kernel table (the graph's columns in CSC order)")
    p.add_argument('--hetero', action='store_true',
                   help="the heterogeneous sampler on benchmarks/hetero_sampling.py's mag-like graph (paper seeds)")
    args = p.parse_args()
    if args.hetero:
        profile_hetero(args.batch, args.fanouts, args.out)
        return
    colptr, row, batches = graph_and_batches(args.preset, args.batch, 40)
    f = args.fanouts
    options = mode_options(args.mode, colptr.numel() - 1, row.numel(), row.device)
    if args.loop:
        for i in range(args.loop):
            out = neighbor_sample(colptr, row, batches[i % len(batches)], f, **options)
            print(i, out.num_sampled_nodes, out.num_sampled_edges, flush=True)
        return
    if args.mode != 'uniform':
        kernel_table(colptr, row, batches, f, options)
        return
    api = lambda s: neighbor_sample(colptr, row, s, f)  # noqa: E731
    raw = lambda s: ops().neighbor_sample(colptr, row, s, f, False, False, 7, [], [], None, 'uniform')  # noqa: E731
    for wait in ('spin', 'block', 'sleep'):
        os.environ['PYG_ACCEL_SAMPLER_WAIT'] = wait
        for name, fn in (('python api', api), ('raw op', raw)):
            for _ in range(3):
                fn(batches[0])
            w, c = timed(fn, batches)
            print(f'{name:12s} graphs on,  {wait:5s} wait: wall {w:8.1f} us  cpu {c:8.1f} us')
    del os.environ['PYG_ACCEL_SAMPLER_WAIT']
    os.environ['PYG_ACCEL_SAMPLER_CUDA_GRAPHS'] = '0'
    colptr2, row2 = colptr.clone(), row.clone()
    eager = lambda s: ops().neighbor_sample(colptr2, row2, s, f, False, False, 7, [], [], None, 'uniform')  # noqa
    for _ in range(3):
        eager(batches[0])
    w, c = timed(eager, batches)
    print(f'{"raw op":12s} graphs off, spin  wait: wall {w:8.1f} us  cpu {c:8.1f} us')
    del os.environ['PYG_ACCEL_SAMPLER_CUDA_GRAPHS']
    from torch.profiler import ProfilerActivity, profile
    for label, fn in (('graph', raw), ('eager', eager)):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for s in batches[:10]:
                fn(s)
            torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by='self_cuda_time_total', row_limit=25)
        print(f'--- {label}\n{table}')
        Path(args.out).mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(Path(args.out) / f'sampler_{label}.json'))


def profile_hetero(batch: int, fanouts, out: str) -> None:
    """The heterogeneous sampler's call split into the Python API's own time, the raw
    op's host time outside its wait for the GPU, and the wait (wall and thread-CPU
    medians); then the kernel table of graph-replayed calls."""
    from hetero_sampling import mag_like_graph, to_csc
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')  # (CPU: a check of the script)
    num_nodes, edges = mag_like_graph(1.0 if device.type == 'cuda' else 0.01, device)
    csc = {et: to_csc(ei, num_nodes[et[-1]]) for et, ei in edges.items()}
    colptr = {et: c for et, (c, _) in csc.items()}
    row = {et: r for et, (_, r) in csc.items()}
    fanout = {et: list(fanouts) for et in edges}
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randperm(num_nodes['paper'], generator=gen)[:batch].to(device) for _ in range(40)]
    node_types, edge_types = list(num_nodes), list(edges)
    index = {t: i for i, t in enumerate(node_types)}
    no_seeds = torch.empty(0, dtype=torch.long, device=device)
    flat = [f for et in edge_types for f in fanout[et]]
    api = lambda s: hetero_neighbor_sample(colptr, row, {'paper': s}, fanout, num_nodes)  # noqa: E731
    raw = lambda s: ops().hetero_neighbor_sample(  # noqa: E731
        [num_nodes[t] for t in node_types], [index[et[0]] for et in edge_types], [index[et[-1]] for et in edge_types],
        [colptr[et] for et in edge_types], [row[et] for et in edge_types],
        [s if t == 'paper' else no_seeds for t in node_types], flat, len(fanouts), False, False, 7,
        [], [], [None] * len(node_types), 'uniform')
    for name, fn in (('python api', api), ('raw op', raw)):
        for _ in range(3):
            fn(batches[0])
        w, c, wait = timed(fn, batches, with_wait=True)
        print(f'{name:12s} {fanouts}: wall {w:7.1f} us  cpu {c:7.1f} us  wait {wait:7.1f} us  '
              f'outside the wait {w - wait:7.1f} us', flush=True)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for s in batches[:10]:
            raw(s)
        sync()
    print(prof.key_averages().table(sort_by='self_cuda_time_total' if device.type == 'cuda' else 'self_cpu_time_total',
                                    row_limit=30))
    Path(out).mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(Path(out) / 'hetero_sampler.json'))


def kernel_table(colptr, row, batches, fanouts, options) -> None:
    """GPU time per kernel of eager (not graph-replayed) sampling calls with `options`."""
    from torch.profiler import ProfilerActivity, profile
    os.environ['PYG_ACCEL_SAMPLER_CUDA_GRAPHS'] = '0'
    for s in batches[:3]:
        neighbor_sample(colptr, row, s, fanouts, **options)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for s in batches[:10]:
            neighbor_sample(colptr, row, s, fanouts, **options)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by='self_cuda_time_total', row_limit=25))


if __name__ == '__main__':
    main()
