"""Heterogeneous sampling benchmark: pyg_accel's CUDA heterogeneous sampler against its
CPU kernel and stock PyG's sampler, on the same synthetic ogbn-mag-like graph, seeds and
fanouts.

The graph has ogbn-mag's node and edge counts (paper, author, institution,
field_of_study; cites, writes, affiliated_with, has_topic, and the reverse of the last
three: 7 edge types, ~34 M edges at --scale 1), with skewed (power-law-like) endpoints.
Seeds are papers. For each fanout list: median time per batch until the batch is on
the GPU, and sampled edges per second.

* ours (CUDA):          pyg_accel.ops.hetero_neighbor_sample on the graph held on the GPU;
* ours (CPU) + copy:    the same op's CPU kernel on a host copy of the graph, the batch then
                        moved to the GPU (what a GPU store did before the CUDA kernel);
* stock PyG (CPU):      torch_geometric.sampler.NeighborSampler on the CPU HeteroData
                        (needs pyg-lib or torch-sparse), through sample_from_nodes, then
                        moved to the GPU: one call on one CPU thread. A tuned PyG loader
                        runs it in DataLoader workers, so "vs stock PyG, N workers (bound)"
                        also divides by N (``--pyg-workers``: the most they could gain).

``--mode weighted`` draws every edge type by a random positive weight per edge
(float32, read in place; "ours, float64 weights": the same sample from float64 copies);
``--mode temporal`` / ``temporal-last`` gives papers a time in [0, 1000) (seeds at their
own time, disjoint trees): the edge types from papers are filtered by it, the others are
always eligible. Their columns are sorted by time, as ``NeighborSampler`` sorts them, so
the CUDA kernel binary-searches them; "ours, columns scanned" is the same sample on the
CSC order, scanned. Those modes are timed beside our uniform sample ("ours, uniform",
disjoint for the temporal ones) and our CPU kernel; stock PyG's torch-sparse sampler
does neither.

    python benchmarks/hetero_sampling.py --out bench-out
    python benchmarks/hetero_sampling.py --scale 0.01 --device cpu   # quick, CPU only
    python benchmarks/hetero_sampling.py --mode temporal --out bench-out
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Dict, Tuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (STOCK_WORKERS_NOTE, add_speedups, add_worker_bound, add_workers_argument,  # noqa: E402
                    environment, plot_times, print_table, save_json)
from sampling import time_batches  # noqa: E402

from pyg_accel.ops import (cuda_sampling_available, hetero_neighbor_sample, last_sample_wait_us,  # noqa: E402
                           sort_columns_by_time)
from pyg_accel.datasets.hetero import MAG_EDGES, MAG_NUM_NODES  # noqa: E402

FANOUTS = {'10-10': [10, 10], '15-10-5': [15, 10, 5]}
MODES = ('uniform', 'weighted', 'temporal', 'temporal-last')
NUM_NODES = MAG_NUM_NODES
EDGES = {et: MAG_EDGES[et] for et in [('paper', 'cites', 'paper'), ('author', 'writes', 'paper'),  # (this order:
                                      ('author', 'affiliated_with', 'institution'),  # the graphs of earlier runs)
                                      ('paper', 'has_topic', 'field_of_study')]}
EdgeType = Tuple[str, str, str]


def mag_like_graph(scale: float, device: torch.device, seed: int = 0):
    """(num_nodes, edge_index per edge type): ogbn-mag's counts times ``scale``, each
    edge's endpoints skewed towards low ids (u^2 of a uniform u), plus the reverse of
    every edge type between two different node types."""
    gen = torch.Generator(device=device).manual_seed(seed)
    num_nodes = {t: max(10, int(n * scale)) for t, n in NUM_NODES.items()}
    skewed = lambda n, count: (torch.rand(count, generator=gen, device=device).square() * n).long()  # noqa: E731
    edges: Dict[EdgeType, torch.Tensor] = {}
    for (src, rel, dst), count in EDGES.items():
        count = max(10, int(count * scale))
        ei = torch.stack([skewed(num_nodes[src], count), skewed(num_nodes[dst], count)])
        edges[(src, rel, dst)] = ei
        if src != dst:
            edges[(dst, f'rev_{rel}', src)] = ei.flip(0)
    return num_nodes, edges


def to_csc(edge_index: torch.Tensor, num_dst: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(colptr, row) of edges sorted by destination."""
    order = torch.argsort(edge_index[1], stable=True)
    colptr = torch.zeros(num_dst + 1, dtype=torch.long, device=edge_index.device)
    colptr[1:] = torch.bincount(edge_index[1], minlength=num_dst).cumsum(0)
    return colptr, edge_index[0, order].contiguous()


def mode_options(mode: str, num_nodes: Dict[str, int], row: Dict[EdgeType, torch.Tensor],
                 device: torch.device) -> dict:
    """Keyword arguments of :func:`hetero_neighbor_sample` for ``mode`` (drawn with a
    fixed seed on ``device``): weights uniform in (0, 1] per edge, paper times in
    [0, 1000)."""
    gen = torch.Generator().manual_seed(1)
    if mode == 'uniform':
        return {}
    if mode == 'weighted':
        return {'edge_weight': {et: (1.0 - torch.rand(r.numel(), generator=gen)).to(device) for et, r in row.items()}}
    return {'node_time': {'paper': torch.randint(0, 1000, (num_nodes['paper'],), generator=gen).to(device)},
            'disjoint': True, 'temporal_strategy': 'last' if mode == 'temporal-last' else 'uniform'}


def sorted_by_time(colptr, row, node_time: Dict[str, torch.Tensor]) -> Dict[EdgeType, torch.Tensor]:
    """``row`` with the columns of the edge types from timed node types in ascending
    time (:func:`sort_columns_by_time`), as ``NeighborSampler`` sorts a temporal graph."""
    return {et: sort_columns_by_time(colptr[et], r, node_time[et[0]])[0] if et[0] in node_time else r
            for et, r in row.items()}


def stock_pyg_sampler(num_nodes, edges, fanouts, device):
    import torch_geometric.typing as pyg_typing
    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        return None
    from torch_geometric.data import HeteroData
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput
    data = HeteroData()
    for t, n in num_nodes.items():
        data[t].num_nodes = n
    for et, ei in edges.items():
        data[et].edge_index = ei.cpu()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        sampler = NeighborSampler(data, num_neighbors={et: fanouts for et in edges})

    def sample(seeds):
        out = sampler.sample_from_nodes(NodeSamplerInput(None, seeds.cpu(), input_type='paper'))
        rows = [r.to(device, non_blocking=True) for r in out.row.values()]
        return sum(r.numel() for r in rows)
    return sample


def profile_calls(fn, batches, device) -> Dict[str, float]:
    """GPU time per call of each kernel (and copy / memset) over ``batches``, printed as
    a table; returns the GPU busy time and the span from the first to the last GPU
    activity, per call, in ms."""
    from torch.profiler import ProfilerActivity, profile
    fn(batches[0])
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for seeds in batches:
            fn(seeds)
        torch.cuda.synchronize(device)
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    per_kernel: Dict[str, float] = {}
    for e in events:
        per_kernel[e.name[:60]] = per_kernel.get(e.name[:60], 0.0) + e.device_time_total
    calls = len(batches)
    for name, us in sorted(per_kernel.items(), key=lambda kv: -kv[1]):
        print(f'  {us / calls:9.1f} us/call  {name}')
    busy = sum(per_kernel.values()) / calls / 1e3
    span = (max(e.time_range.end for e in events) - min(e.time_range.start for e in events)) / calls / 1e3
    print(f'  GPU busy {busy:.3f} ms/call over a span of {span:.3f} ms/call', flush=True)
    return {'ours GPU busy ms': busy, 'ours GPU span ms': span}


def plot(rows, path: Path, title: str) -> None:
    """Time per batch of each sampler (log scale), per fanout list."""
    methods = ('ours', 'ours, columns scanned', 'ours, float64 weights', 'ours, uniform',
               'ours (CPU kernel) + copy', 'stock PyG (CPU)')
    plot_times(rows, methods, path, title, [f"[{r['fanout']}]" for r in rows], 'fanout per edge type and hop',
               {'ours': 'ours (CUDA)'})


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--scale', type=float, default=1.0, help="fraction of ogbn-mag's size")
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--batch-size', type=int, default=1024)
    p.add_argument('--fanouts', nargs='*', default=list(FANOUTS), choices=list(FANOUTS))
    p.add_argument('--mode', choices=MODES, default='uniform',
                   help='uniform, weighted (edge weights) or temporal (paper times, disjoint) sampling')
    p.add_argument('--batches', type=int, default=30, help='timed batches per setting (CPU baselines: fewer)')
    p.add_argument('--baseline-batches', type=int, default=5, help='timed batches of the CPU baselines (0: skip them)')
    p.add_argument('--profile', type=int, default=0,
                   help='also profile this many calls of ours per fanout list: GPU time per kernel')
    add_workers_argument(p)
    p.add_argument('--out', default='bench-out')
    p.add_argument('--replot', default=None, help='only redraw the plot from a saved JSON')
    args = p.parse_args(argv)
    if args.replot:
        saved = json.loads(Path(args.replot).read_text())
        title = f"{saved['graph']}, batch {saved['args']['batch_size']}"
        plot(saved['rows'], Path(args.out) / f"{Path(args.replot).stem}.png", title)
        return saved
    device = torch.device(args.device)

    t0 = time.perf_counter()
    num_nodes, edges = mag_like_graph(args.scale, device)
    csc = {et: to_csc(ei, num_nodes[et[-1]]) for et, ei in edges.items()}
    colptr = {et: c for et, (c, _) in csc.items()}
    row = {et: r for et, (_, r) in csc.items()}
    options = mode_options(args.mode, num_nodes, row, device)
    scan_row = None
    if 'node_time' in options:  # the ablation: the same sample on the CSC order, scanned
        scan_row, row = row, sorted_by_time(colptr, row, options['node_time'])
    host_colptr = {et: c.cpu() for et, c in colptr.items()}
    host_row = {et: r.cpu() for et, r in row.items()}
    host_options = {k: {t: v.cpu() for t, v in d.items()} if isinstance(d, dict) else d for k, d in options.items()}
    total_edges = sum(r.numel() for r in row.values())
    graph_name = f'mag-like x{args.scale:g} ({sum(num_nodes.values()):,} nodes, {total_edges:,} edges, ' \
                 f'{len(edges)} edge types)'
    print(f'{graph_name} on {device}: generated in {time.perf_counter() - t0:.1f} s', flush=True)
    gen = torch.Generator().manual_seed(0)

    def seed_batches(count):
        return [torch.randperm(num_nodes['paper'], generator=gen)[:args.batch_size].to(device)
                for _ in range(count + 2)]

    def ours(graph_row, s, **kwargs):
        return edges_of(hetero_neighbor_sample(colptr, graph_row, {'paper': s}, fanouts, num_nodes, **kwargs))

    def edges_of(out):
        return sum(r.numel() for r in out.row.values())

    rows = []
    for name in args.fanouts:
        fanouts = {et: FANOUTS[name] for et in edges}
        methods = {}
        if device.type == 'cpu' or cuda_sampling_available():
            methods['ours'] = (lambda s: ours(row, s, **options), args.batches)
            if scan_row is not None:
                methods['ours, columns scanned'] = (lambda s: ours(scan_row, s, **options), args.batches)
            if 'edge_weight' in options:  # the same weights widened: what reading them in place saves
                wide = dict(options, edge_weight={et: w.double() for et, w in options['edge_weight'].items()})
                methods['ours, float64 weights'] = (lambda s: ours(row, s, **wide), args.batches)
            if options:  # what the mode costs over a uniform sample (disjoint too for the temporal modes)
                disjoint = options.get('disjoint', False)
                methods['ours, uniform'] = (lambda s: ours(row, s, disjoint=disjoint), args.batches)
        if device.type == 'cuda' and args.baseline_batches > 0:
            def cpu_then_copy(s):
                out = hetero_neighbor_sample(host_colptr, host_row, {'paper': s.cpu()}, fanouts, num_nodes,
                                             **host_options)
                return sum(r.to(device, non_blocking=True).numel() for r in out.row.values())
            methods['ours (CPU kernel) + copy'] = (cpu_then_copy, args.baseline_batches)
        stock = (stock_pyg_sampler(num_nodes, edges, FANOUTS[name], device)
                 if args.baseline_batches > 0 and not options else None)
        if stock is not None:
            methods['stock PyG (CPU)'] = (stock, args.baseline_batches)
        result = {'fanout': name, 'batch': args.batch_size}
        for method, (fn, count) in methods.items():
            wait_us = last_sample_wait_us if method == 'ours' and device.type == 'cuda' else None
            total, host, sampled, outside_wait = time_batches(fn, seed_batches(count), device, wait_us=wait_us)
            result[f'{method} ms'] = total * 1e3
            result[f'{method} Medges/s'] = sampled / total / 1e6
            if method == 'ours':
                result['ours host ms'] = host * 1e3
                if outside_wait is not None:  # (the call's wall time less its wait for the GPU)
                    result['ours host ms (outside the wait)'] = outside_wait * 1e3
        if args.profile and 'ours' in methods:
            result.update(profile_calls(methods['ours'][0], seed_batches(args.profile), device))
        add_speedups(result, methods)
        add_worker_bound(result, args.pyg_workers)
        rows.append(result)
        print(result, flush=True)

    columns = ['fanout', 'batch'] + [c for c in rows[0] if c not in ('fanout', 'batch')]
    payload = {'env': environment(), 'args': vars(args), 'device': str(device), 'graph': graph_name,
               'rows': rows}
    mode = '' if args.mode == 'uniform' else f', {args.mode}'
    payload['table'] = print_table(rows, columns, f'heterogeneous sampling{mode} on {graph_name} ({device}), '
                                                  'median ms per batch (paper seeds)')
    payload['note'] = STOCK_WORKERS_NOTE
    print(STOCK_WORKERS_NOTE)
    stem = 'hetero_sampling' + ('' if args.mode == 'uniform' else '_' + args.mode.replace('-', '_'))
    save_json(Path(args.out) / f'{stem}.json', payload)
    plot(rows, Path(args.out) / f'{stem}.png', f'{graph_name}{mode}, batch {args.batch_size}')
    return payload


if __name__ == '__main__':
    main()
