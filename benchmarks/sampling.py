"""Sampling benchmark: pyg_accel's neighbour sampler against stock PyG's sampler and a
per-hop PyTorch implementation, on the same synthetic graph, seeds and fanouts.

For each fanout list and batch size: median time per batch over random seed batches,
sampled edges per second, and host time per batch. Features are excluded: this is
sampling (with dedup and relabel) only.

Host time of ours on the GPU is given two ways: "outside the wait", the call's wall
time minus the time it waited for the GPU (what the CPU spends per batch to enqueue
the sample and hand back its outputs), and the calling thread's CPU time over the whole
call while waiting asleep (block / sleep), which adds what the wait itself costs.

* ours:         pyg_accel.ops.neighbor_sample on the graph's device (--device);
* per-hop:      pyg_accel.sampler.reference.per_hop_neighbor_sample (PyTorch ops, one
                round per hop, O(degree) sampling), on the same device;
* stock PyG:    torch_geometric.sampler.NeighborSampler on CPU data (needs pyg-lib or
                torch-sparse), through sample_from_nodes: one call on one CPU thread. A
                tuned PyG loader runs it in DataLoader workers, so "vs stock PyG, N
                workers (bound)" also divides by N (``--pyg-workers``, default: the
                cores less two), the most those workers could gain.

With ``--graph-location pinned`` the graph lives in pinned host memory (a graph larger
than the GPU's memory, as a ``GraphStore('pinned')`` holds it): "ours" is the CUDA
sampler reading its rows over the bus (``uva_view``, zero-copy) with the column pointers
copied to the GPU, as ``NeighborSampler`` reads such a store, against our CPU kernel on
the same host graph ("ours, CPU kernel") and stock PyG; the per-hop baseline is left out.

``--mode`` picks the kind of sample: ``uniform`` (the default), ``weighted`` (a random
positive weight per edge, ``edge_weight``), or temporal sampling with node times
(``temporal``: ``temporal_strategy='uniform'``, ``temporal-last``: ``'last'``; both need
``disjoint=True``, so they are timed beside ``ours, uniform`` in disjoint mode). A
temporal graph's columns are sorted by time, as ``NeighborSampler`` sorts them, so the
kernels binary-search each node's eligible neighbours; "ours, columns scanned" is the
same sample on the graph in its CSC order, where they scan them. Weights are float32,
read in place; "ours, float64 weights" is the same sample from a float64 copy. Stock
PyG (torch-sparse) and the per-hop sampler do neither, so those modes are timed against
our uniform sample on the same device and our CPU kernel on a host copy of the graph.

    python benchmarks/sampling.py --preset products --device cuda --out bench-out
    python benchmarks/sampling.py --preset small --device cpu          # quick, CPU only
    python benchmarks/sampling.py --preset products --device cuda --graph-location pinned
    python benchmarks/sampling.py --preset products --device cuda --mode weighted
    python benchmarks/sampling.py --preset papers100M --device cuda     # 111 M nodes, 3.2 G edges (27 GB)

The papers100M preset is generated as a topology only (``synthetic_topology``: straight
into CSC, ~1.2x the graph's memory at its peak); its full dataset would not fit a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (STOCK_WORKERS_NOTE, add_graph_arguments, add_speedups, add_worker_bound,  # noqa: E402
                    add_workers_argument, environment, plot_times, print_table, save_json, sync)

from pyg_accel.data import GraphStore  # noqa: E402
from pyg_accel.datasets import synthetic_dataset, synthetic_topology  # noqa: E402
from pyg_accel.ops import (cuda_sampling_available, last_sample_wait_us, neighbor_sample,  # noqa: E402
                           sort_columns_by_time, uva_view)
from pyg_accel.sampler.reference import per_hop_neighbor_sample  # noqa: E402

FANOUTS = {'15-10-5': [15, 10, 5], '10-10-10': [10, 10, 10]}
MODES = ('uniform', 'weighted', 'temporal', 'temporal-last')


def mode_options(mode: str, num_nodes: int, num_edges: int, device: torch.device) -> dict:
    """Keyword arguments of :func:`neighbor_sample` for ``mode`` (attributes drawn with
    a fixed seed on ``device``): weights uniform in (0, 1], node times in [0, 1000)."""
    gen = torch.Generator().manual_seed(1)
    if mode == 'uniform':
        return {}
    if mode == 'weighted':
        return {'edge_weight': (1.0 - torch.rand(num_edges, generator=gen)).to(device)}
    node_time = torch.randint(0, 1000, (num_nodes,), generator=gen).to(device)
    return {'node_time': node_time, 'disjoint': True,
            'temporal_strategy': 'last' if mode == 'temporal-last' else 'uniform'}


def time_batches(fn, batches, device, warmup=2, ready_on_return=False, wait_us=None):
    """Median wall and host seconds per call, the median number of sampled edges, and
    (given ``wait_us``, which reports how long the last call waited for the GPU) the
    median host seconds outside that wait, else None.

    Wall time runs until the outputs are ready: a device synchronisation after the call,
    except for a sampler whose outputs are ready when it returns (``ready_on_return``:
    ours reads the per-hop counts, after the last kernel, before it returns; an idle
    device's synchronisation would add ~5-10 us of timing overhead to it).
    Host time is the CPU time of the calling thread during the call
    (``time.thread_time`` before and right after it, not counting the synchronisation
    the timing adds; ours returns only once its outputs are ready). A spinning wait for
    the GPU counts as host time, so ours is measured again with each way of waiting
    asleep, ``PYG_ACCEL_SAMPLER_WAIT=block`` (the driver wakes the thread) and ``=sleep``
    (timed naps, then polls): launches and bookkeeping, plus the cost of waking."""
    for seeds in batches[:warmup]:
        fn(seeds)
    totals, hosts, edges, outside_wait = [], [], [], []
    for seeds in batches[warmup:]:
        sync(device)
        t0, c0 = time.perf_counter(), time.thread_time()
        out = fn(seeds)
        c1 = time.thread_time()
        if not ready_on_return:
            sync(device)
        t1 = time.perf_counter()
        hosts.append(c1 - c0)
        totals.append(t1 - t0)
        edges.append(out)
        if wait_us is not None:
            outside_wait.append(t1 - t0 - wait_us() * 1e-6)
    if os.environ.get('PYG_ACCEL_BENCH_SPREAD'):  # (diagnosis: the distribution, not just the median)
        q = statistics.quantiles(totals, n=10)
        print(f'  per-call ms p10 {q[0] * 1e3:.3f} p50 {statistics.median(totals) * 1e3:.3f} p90 {q[-1] * 1e3:.3f} '
              f'max {max(totals) * 1e3:.3f}', flush=True)
    return (statistics.median(totals), statistics.median(hosts), statistics.median(edges),
            statistics.median(outside_wait) if outside_wait else None)


def time_loop(fn, batches, device, warmup=2):
    """Seconds per call when the calls run back to back, as in a training loop (one
    synchronisation at the end): the sampler's throughput."""
    for seeds in batches[:warmup]:
        fn(seeds)
    sync(device)
    t0 = time.perf_counter()
    for seeds in batches[warmup:]:
        fn(seeds)
    sync(device)
    return (time.perf_counter() - t0) / max(1, len(batches) - warmup)


def stock_pyg_graph(colptr, row):
    """Host copies of the CSC as the ``Data(adj_t=SparseTensor)`` stock PyG's sampler
    reads without sorting; ``None`` without torch-sparse (the only sampling backend PyG
    has here)."""
    import torch_geometric.typing as pyg_typing
    if not pyg_typing.WITH_TORCH_SPARSE:
        return None
    from torch_geometric.data import Data
    from torch_sparse import SparseTensor
    n = colptr.numel() - 1
    adj_t = SparseTensor(rowptr=colptr.cpu(), col=row.cpu(), sparse_sizes=(n, n), is_sorted=True, trust_data=True)
    return Data(adj_t=adj_t, num_nodes=n)


def stock_pyg_sampler(data, fanouts):
    """Stock PyG's ``NeighborSampler`` on ``data``, timed through ``sample_from_nodes``."""
    import warnings
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        sampler = NeighborSampler(data, num_neighbors=fanouts)
    return lambda seeds: sampler.sample_from_nodes(NodeSamplerInput(None, seeds.cpu())).row.numel()


def load_graph(args, device):
    """``(description, name, put_edge_index arguments, training nodes)`` of the
    benchmark's graph on ``device``: the topology of ``synthetic_topology``
    (``--generator topology``, the default for papers100M, whose full dataset does not
    fit a GPU) or the graph of ``synthetic_dataset``."""
    generator = args.generator
    if generator == 'auto':
        generator = 'topology' if args.preset == 'papers100M' else 'dataset'
    if generator == 'topology':
        topo = synthetic_topology(args.preset, scale=args.scale, device=device, progress=True)
        put = dict(edge_index=(topo.row, topo.colptr), layout='csc', size=(topo.num_nodes,) * 2)
        return repr(topo), topo.name, put, topo.train
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device)
    put = dict(edge_index=dataset.data.edge_index, layout='coo', size=(dataset.data.num_nodes,) * 2)
    return repr(dataset), dataset.name, put, dataset.split['train']


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(p)
    p.add_argument('--batch-sizes', type=int, nargs='*', default=[1024, 4096, 8192])
    p.add_argument('--fanouts', nargs='*', default=list(FANOUTS), choices=list(FANOUTS))
    p.add_argument('--batches', type=int, default=20, help='timed batches per setting (CPU baselines: fewer)')
    p.add_argument('--baseline-batches', type=int, default=5, help='timed batches of the CPU baselines (0: skip them)')
    p.add_argument('--generator', choices=['auto', 'dataset', 'topology'], default='auto',
                   help="'topology': graph only, generated straight into CSC (synthetic_topology); 'auto' uses it "
                        'for papers100M')
    p.add_argument('--graph-location', choices=['device', 'pinned'], default='device',
                   help="'pinned': the graph in pinned host memory, read by the GPU over the bus")
    p.add_argument('--mode', choices=MODES, default='uniform',
                   help='uniform, weighted (edge weights) or temporal (node times, disjoint) sampling')
    add_workers_argument(p)
    p.add_argument('--out', default='bench-out')
    p.add_argument('--replot', default=None, help='only redraw the plot of a saved JSON (into --out)')
    args = p.parse_args(argv)
    if args.replot:
        saved = json.loads(Path(args.replot).read_text())
        plot(saved, Path(args.out) / Path(args.replot).with_suffix('.png').name)
        return saved
    device = torch.device(args.device)
    pinned = args.graph_location == 'pinned'
    if pinned and device.type != 'cuda':
        p.error('--graph-location pinned needs --device cuda')

    t0 = time.perf_counter()
    graph_repr, graph_name, put, train = load_graph(args, device)
    store = GraphStore('pinned' if pinned else device.type)
    store.put_edge_index(**put, edge_type=None)
    del put
    host_row, host_colptr, _ = store.csc()
    # (as pyg_accel's NeighborSampler reads a pinned graph: the rows in place, the column pointers copied to the GPU)
    row, colptr = (uva_view(host_row), host_colptr.to(device)) if pinned else (host_row, host_colptr)
    print(f'{graph_repr} on {device} ({args.graph_location}): generated and converted in '
          f'{time.perf_counter() - t0:.1f} s', flush=True)
    cuda_sampler = cuda_sampling_available()
    gen = torch.Generator().manual_seed(0)
    uniform = args.mode == 'uniform'
    stock_graph = stock_pyg_graph(host_colptr, host_row) if args.baseline_batches > 0 and uniform else None
    options = mode_options(args.mode, colptr.numel() - 1, row.numel(), device)
    scan_row = None
    if 'node_time' in options:  # each column in ascending time, as NeighborSampler sorts a temporal graph
        scan_row = row  # (the CSC order: the ablation, where every column is scanned, not searched)
        host_row = sort_columns_by_time(host_colptr, host_row, options['node_time'].to(host_row.device))[0]
        row = uva_view(host_row.pin_memory()) if pinned else host_row
    # our CPU kernel on a host copy: the baseline of a pinned graph and of the modes stock PyG lacks
    cpu_kernel = args.baseline_batches > 0 and device.type == 'cuda' and (pinned or not uniform)
    if cpu_kernel:
        cpu_graph = (host_colptr, host_row) if pinned else (host_colptr.cpu(), host_row.cpu())
        cpu_options = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in options.items()}

    rows = []
    for name in args.fanouts:
        fanouts = FANOUTS[name]
        stock = stock_pyg_sampler(stock_graph, fanouts) if stock_graph is not None else None
        for batch_size in args.batch_sizes:
            def seed_batches(count):
                return [train[torch.randperm(train.numel(), generator=gen)[:batch_size].to(train.device)]
                        for _ in range(count + 2)]
            methods = {}
            if not pinned and uniform:
                methods['per-hop torch'] = (lambda s: per_hop_neighbor_sample(colptr, row, s, fanouts).row.numel(),
                                            args.batches)
            if device.type == 'cpu' or cuda_sampler:
                methods['ours'] = (lambda s: neighbor_sample(colptr, row, s, fanouts, **options).row.numel(),
                                   args.batches)
                if scan_row is not None:
                    methods['ours, columns scanned'] = (
                        lambda s: neighbor_sample(colptr, scan_row, s, fanouts, **options).row.numel(), args.batches)
                if 'edge_weight' in options:  # the same weights widened: what reading them in place saves
                    wide = dict(options, edge_weight=options['edge_weight'].double())
                    methods['ours, float64 weights'] = (
                        lambda s: neighbor_sample(colptr, row, s, fanouts, **wide).row.numel(), args.batches)
                if not uniform:  # what the mode costs over a uniform sample (disjoint too for the temporal modes)
                    disjoint = options.get('disjoint', False)
                    methods['ours, uniform'] = (
                        lambda s: neighbor_sample(colptr, row, s, fanouts, disjoint=disjoint).row.numel(),
                        args.batches)
            if cpu_kernel:
                methods['ours, CPU kernel'] = (
                    lambda s: neighbor_sample(*cpu_graph, s.cpu(), fanouts, **cpu_options).row.numel(),
                    args.baseline_batches)
            if stock is not None:
                methods['stock PyG (CPU)'] = (stock, args.baseline_batches)
            result = {'fanout': name, 'batch': batch_size}
            for method, (fn, count) in methods.items():
                ours_on_gpu = method == 'ours' and device.type == 'cuda'
                total, host, edges, outside_wait = time_batches(fn, seed_batches(count), device,
                                                                ready_on_return=method == 'ours',
                                                                wait_us=last_sample_wait_us if ours_on_gpu else None)
                result[f'{method} ms'] = total * 1e3
                if outside_wait is not None:  # the call's wall time not spent waiting for the GPU
                    result['ours host ms (outside the wait)'] = outside_wait * 1e3
                if method == 'ours':
                    loop = time_loop(fn, seed_batches(count), device)
                    result['ours loop ms'] = loop * 1e3
                    result['ours loop Medges/s'] = edges / loop / 1e6
                if ours_on_gpu:  # host time: wait for the GPU asleep
                    for wait in ('block', 'sleep'):
                        os.environ['PYG_ACCEL_SAMPLER_WAIT'] = wait
                        wait_total, wait_host, _, _ = time_batches(fn, seed_batches(count), device)
                        result[f'ours host ms ({wait})'] = wait_host * 1e3
                        result[f'ours ms ({wait})'] = wait_total * 1e3
                    del os.environ['PYG_ACCEL_SAMPLER_WAIT']
                else:
                    result[f'{method} host ms'] = host * 1e3
                result[f'{method} Medges/s'] = edges / total / 1e6
            add_speedups(result, methods)
            add_worker_bound(result, args.pyg_workers)
            rows.append(result)
            print(result, flush=True)

    columns = ['fanout', 'batch'] + [c for c in rows[0] if c not in ('fanout', 'batch')]
    payload = {'env': environment(), 'args': vars(args), 'device': f'{device} ({args.graph_location} graph)',
               'graph': graph_repr,
               'cuda_sampler_built': bool(cuda_sampler), 'rows': rows}
    payload['table'] = print_table(rows, columns, f"neighbour sampling on {graph_name} ({payload['device']}), "
                                                  'median ms per batch')
    payload['note'] = STOCK_WORKERS_NOTE
    print(STOCK_WORKERS_NOTE)
    stem = 'sampling_topology' if 'topology' in graph_name else 'sampling'
    stem = f'{stem}_pinned' if pinned else stem
    stem = stem if uniform else f"{stem}_{args.mode.replace('-', '_')}"
    save_json(Path(args.out) / f'{stem}.json', payload)
    plot(payload, Path(args.out) / f'{stem}.png')
    return payload


def plot(payload: dict, path: Path) -> None:
    """Time per batch of each sampler (log scale) per fanout and batch size."""
    rows = payload['rows']
    methods = ('ours', 'ours, columns scanned', 'ours, float64 weights', 'ours, uniform',
               'ours, CPU kernel', 'per-hop torch', 'stock PyG (CPU)')
    plot_times(rows, methods, path, payload['table'].splitlines()[0], [f"{r['fanout']}\n{r['batch']}" for r in rows],
               'fanout, batch size', {'ours': f"ours ({payload['args']['device']})"})


if __name__ == '__main__':
    main()
