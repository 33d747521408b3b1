"""Sparse kernel benchmark: pyg_accel's SpMM and SDDMM against cuSPARSE (through
``torch.sparse``) and PyG's gather/scatter path, on one synthetic graph.

* SpMM ``out[d] = sum_e w_e x[src_e]``: ours (``pyg_accel.ops.spmm``), ``torch.sparse.mm``
  on CSR (cuSPARSE on the GPU), and PyG's message-passing path (gather ``x[src] * w``
  into an E x F tensor, then ``index_add_``).
* SDDMM ``out_e = <a[dst_e], b[src_e]>``: ours, ``torch.sparse.sampled_addmm`` on CSR,
  and the gather path (``(a[dst] * b[src]).sum(-1)``).
* SpMM with max aggregation: ours against PyG's scatter max (an ``E x F`` message tensor
  reduced by ``scatter_reduce``), and against our sum.

Each kernel's achieved bandwidth is reported against its gather-model byte floor (every
edge reads its ids, its weight and one feature row from memory) at
the measured copy bandwidth. On the GPU the generic CUDA kernels are timed beside the
default two-stage ones, and so is the two-stage SpMM with each of its two zero fills
forced (``PYG_ACCEL_SPMM_ZERO_FILL=all``: the whole output; ``=rows``: only the rows
that groups share and the empty ones; the default picks by row width). A path that
runs out of memory is reported as OOM.

    python benchmarks/sparse.py --preset products --features 16 32 64 128 256 --out OUT
    python benchmarks/sparse.py --preset tiny --device cpu       # quick, CPU
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (add_graph_arguments, copy_bandwidth, environment, gather_floor_bytes, median_time,  # noqa: E402
                    print_table, pyplot, save_figure, save_json)

from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.ops import CooGraph, sddmm, spmm  # noqa: E402


@contextlib.contextmanager
def env_setting(name: str, value: str):
    """Runs the block with environment variable ``name`` set to ``value`` (the CUDA ops
    read their kernel settings per call)."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def pyg_scatter_max(x, src, dst, num_dst):
    """PyG's max aggregation of ``x[src]`` into ``dst`` (``torch_geometric.utils.scatter``
    without torch-scatter): an ``E x F`` message tensor, then ``scatter_reduce_``."""
    index = dst.view(-1, 1).expand(-1, x.size(1))
    return x.new_zeros(num_dst, x.size(1)).scatter_reduce_(0, index, x[src], 'amax', include_self=False)


def max_reference(x, graph, src, dst, num_dst):
    """Max aggregation to check ours against: PyG's scatter max, or where its ``E x F``
    messages do not fit, our CUDA row reductions (a kernel apart from the default's)."""
    try:
        return pyg_scatter_max(x, src, dst, num_dst)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
    with env_setting('PYG_ACCEL_SPARSE_KERNEL', 'generic'):
        return spmm(graph, x, reduce='max')


def timed_or_oom(fn, device, reps):
    try:
        return median_time(fn, device, reps=reps) * 1e3
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return float('nan')


def _title(graph: str, env: dict) -> str:
    """'synthetic-products: 2449029 nodes, 123718280 edges, NVIDIA H100 …' from a dataset repr."""
    inner = graph[graph.find('(') + 1:graph.rfind(')')]
    return f"{', '.join(inner.split(', ')[:2])} edges; {env.get('gpu')}".replace(' edges edges', ' edges')


def plot(rows, path: Path, title: str) -> None:
    """SpMM and SDDMM times against F: ours, the baselines and the gather-model floor."""
    plt = pyplot()
    if plt is None:
        return
    from matplotlib.ticker import NullFormatter
    x = [r['F'] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, name, series in (
            (left, 'SpMM', [('spmm ours ms', 'pyg_accel'), ('spmm torch.sparse ms', 'torch.sparse.mm (cuSPARSE)'),
                            ('spmm PyG gather ms', "PyG's gather + index_add_"), ('spmm floor ms', 'byte floor')]),
            (right, 'SDDMM', [('sddmm ours ms', 'pyg_accel'), ('sddmm sampled_addmm ms', 'torch.sparse.sampled_addmm'),
                              ('sddmm gather ms', "gather: (a[dst] * b[src]).sum(-1)"),
                              ('spmm floor ms', 'byte floor')])):
        for key, label in series:
            if key in rows[0]:
                ax.plot(x, [r[key] for r in rows], marker='o', ls='--' if 'floor' in key else '-', label=label)
        ax.set(xscale='log', yscale='log', xlabel='feature width F (fp32)', title=name)
        ax.set_xticks(x, [str(v) for v in x])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=8)
    left.set_ylabel('ms (median)')
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(p)
    p.add_argument('--features', type=int, nargs='*', default=[16, 32, 64, 128, 256])
    p.add_argument('--reps', type=int, default=10)
    p.add_argument('--out', default='bench-out')
    p.add_argument('--plot-from', default=None, help='only redraw the plot of a saved sparse.json into --out')
    args = p.parse_args(argv)
    if args.plot_from:
        import json
        payload = json.loads(Path(args.plot_from).read_text())
        plot(payload['rows'], Path(args.out) / 'sparse.png', _title(payload['graph'], payload['env']))
        return payload
    device = torch.device(args.device)
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device)
    n, ei = dataset.data.num_nodes, dataset.data.edge_index.to(device)
    graph = CooGraph.from_edge_index(ei, (n, n))
    E = graph.num_edges
    src64, dst64 = graph.src.long(), graph.dst.long()
    weight = torch.rand(E, device=device)
    csr = torch.sparse_csr_tensor(graph.ptr, src64, weight, (n, n))
    pattern = torch.sparse_csr_tensor(graph.ptr, src64, torch.ones(E, device=device), (n, n))
    copy_bps = copy_bandwidth(device, 1 << 30) if device.type == 'cuda' else float('nan')
    print(f'{dataset} on {device}: {E} edges; copy bandwidth {copy_bps / 1e9:.0f} GB/s', flush=True)

    rows = []
    for F in args.features:
        x = torch.randn(n, F, device=device)
        a = torch.randn(n, F, device=device)
        # Checked against torch.sparse (no E x F tensor): the CSR shares our edge order.
        torch.testing.assert_close(spmm(graph, x, weight), torch.sparse.mm(csr, x), atol=1e-3, rtol=1e-3)
        torch.testing.assert_close(sddmm(graph, a, x), torch.sparse.sampled_addmm(pattern, a, x.t(), beta=0.0).values(),
                                   atol=1e-3, rtol=1e-3)
        r = {'F': F}
        r['spmm ours ms'] = timed_or_oom(lambda: spmm(graph, x, weight), device, args.reps)
        r['spmm torch.sparse ms'] = timed_or_oom(lambda: torch.sparse.mm(csr, x), device, args.reps)
        r['spmm PyG gather ms'] = timed_or_oom(
            lambda: torch.zeros_like(x).index_add_(0, dst64, x[src64] * weight.unsqueeze(1)), device, args.reps)
        r['sddmm ours ms'] = timed_or_oom(lambda: sddmm(graph, a, x), device, args.reps)
        # max aggregation: ours against PyG's scatter max (E x F messages, scatter_reduce)
        torch.testing.assert_close(spmm(graph, x, reduce='max'), max_reference(x, graph, src64, dst64, n),
                                   rtol=0, atol=0)
        r['spmm max ours ms'] = timed_or_oom(lambda: spmm(graph, x, reduce='max'), device, args.reps)
        r['spmm max PyG ms'] = timed_or_oom(lambda: pyg_scatter_max(x, src64, dst64, n), device, args.reps)
        if device.type == 'cuda':  # other CUDA kernel settings, for reference
            for fill in ('all', 'rows'):  # each zero fill forced (the default picks by row width)
                with env_setting('PYG_ACCEL_SPMM_ZERO_FILL', fill):
                    r[f'spmm fill {fill} ms'] = timed_or_oom(lambda: spmm(graph, x, weight), device, args.reps)
            with env_setting('PYG_ACCEL_SPARSE_KERNEL', 'generic'):
                r['spmm generic ms'] = timed_or_oom(lambda: spmm(graph, x, weight), device, args.reps)
                r['sddmm generic ms'] = timed_or_oom(lambda: sddmm(graph, a, x), device, args.reps)
        r['sddmm sampled_addmm ms'] = timed_or_oom(
            lambda: torch.sparse.sampled_addmm(pattern, a, x.t(), beta=0.0), device, args.reps)
        r['sddmm gather ms'] = timed_or_oom(lambda: (a[dst64] * x[src64]).sum(-1), device, args.reps)
        spmm_bytes = sddmm_bytes = gather_floor_bytes(E, n, F)  # (the same for both)
        r['spmm ours GB/s'] = spmm_bytes / (r['spmm ours ms'] / 1e3) / 1e9
        r['spmm floor ms'] = spmm_bytes / copy_bps * 1e3 if copy_bps == copy_bps else float('nan')
        r['spmm ours / floor'] = r['spmm ours ms'] / r['spmm floor ms']
        r['sddmm ours / floor'] = r['sddmm ours ms'] / r['spmm floor ms']
        r['spmm vs torch.sparse'] = r['spmm torch.sparse ms'] / r['spmm ours ms']
        r['spmm vs PyG'] = r['spmm PyG gather ms'] / r['spmm ours ms']
        r['sddmm ours GB/s'] = sddmm_bytes / (r['sddmm ours ms'] / 1e3) / 1e9
        r['sddmm vs sampled_addmm'] = r['sddmm sampled_addmm ms'] / r['sddmm ours ms']
        r['spmm max vs PyG'] = r['spmm max PyG ms'] / r['spmm max ours ms']
        r['spmm max / sum'] = r['spmm max ours ms'] / r['spmm ours ms']
        rows.append(r)
        print(r, flush=True)
        del x, a
    columns = list(rows[0])
    payload = {'env': environment(), 'args': vars(args), 'graph': repr(dataset), 'copy_GBps': copy_bps / 1e9,
               'rows': rows}
    payload['table'] = print_table(rows, columns, f'SpMM / SDDMM on {dataset.name} ({device}), median ms')
    save_json(Path(args.out) / 'sparse.json', payload)
    plot(rows, Path(args.out) / 'sparse.png', _title(payload['graph'], payload['env']))
    return payload


if __name__ == '__main__':
    main()
