"""SpMM's backward with respect to its input, ``grad_x[s] = sum over s's edges of w_e *
grad[dst_e]``, two ways (on a GPU; ``--device cpu`` runs the CPU kernels):

* ``scatter``: ``spmm_transposed`` over the graph's own (destination-sorted) edges,
  summing by atomics: one launch, nothing built;
* ``transpose``: the reversed graph built (a stable sort by source, a gather, a binary
  search), then an SpMM over it: what a freshly sampled batch's backward did before;
* ``cached transpose``: the SpMM over a reversed graph built earlier (a full graph's,
  memoised across steps).

Graphs are shaped like sampled batches: ``E`` edges into ``E / 10`` destinations (ten
each), from sources drawn uniformly among ``E / 2``. ``latency`` is one call from an
idle GPU (the host's launch work included: a sampled batch's backward is host-bound);
``device`` is the time per call of ten queued back to back. pyg_accel takes ``scatter``
on a graph without a built transpose up to ``SCATTER_ADJOINT_MAX`` edge-features on a
GPU, ``SCATTER_ADJOINT_MAX_CPU`` on the CPU (where it sums in edge order per feature
slice, the transpose's bits, without atomics).

    python benchmarks/spmm_adjoint.py --out OUT
    python benchmarks/spmm_adjoint.py --device cpu --edges 4096 --features 16   # quick, CPU
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, median_time, print_table, save_json  # noqa: E402
from sparse import env_setting  # noqa: E402

from pyg_accel.ops import CooGraph  # noqa: E402
from pyg_accel.ops.sparse import SCATTER_ADJOINT_MAX, SCATTER_ADJOINT_MAX_CPU, _spmm_transposed  # noqa: E402


def batch_like_graph(num_edges: int, device) -> CooGraph:
    """Ten edges into each of ``num_edges // 10`` destinations from ``num_edges // 2`` sources."""
    num_dst, num_src = max(num_edges // 10, 1), max(num_edges // 2, 1)
    dst = torch.arange(num_edges, device=device) // 10
    src = torch.randint(0, num_src, (num_edges,), device=device)
    return CooGraph.from_edge_index(torch.stack([src, dst.clamp(max=num_dst - 1)]), (num_src, num_dst))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--edges', type=int, nargs='*', default=[1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24])
    p.add_argument('--features', type=int, nargs='*', default=[16, 64, 256])
    p.add_argument('--reps', type=int, default=20)
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu',
                   help="'cpu' runs the same comparison on the CPU kernels (a smoke test)")
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    device = torch.device(args.device)
    rows = []
    for E in args.edges:
        graph = batch_like_graph(E, device)
        cached = CooGraph(graph.ptr, graph.src, graph.dst, None, graph.num_src, graph.num_dst)
        cached.transpose()
        for F in args.features:
            if E * F > 1 << 30:
                continue
            grad = torch.randn(graph.num_dst, 1, F, device=device)

            def fresh_transpose():  # a new graph object each call: its transpose is built in the call
                fresh = CooGraph(graph.ptr, graph.src, graph.dst, None, graph.num_src, graph.num_dst)
                return _spmm_transposed(fresh, None, grad)

            with env_setting('PYG_ACCEL_SPMM_ADJOINT', 'scatter'):
                scattered = _spmm_transposed(graph, None, grad)
                times = {'scatter': lambda: _spmm_transposed(graph, None, grad)}
                r = {'E': E, 'F': F}
                r.update({f'{k} latency ms': median_time(fn, device, args.reps) * 1e3 for k, fn in times.items()})
                r.update({f'{k} device ms': median_time(fn, device, args.reps, back_to_back=10) * 1e3
                          for k, fn in times.items()})
            with env_setting('PYG_ACCEL_SPMM_ADJOINT', 'transpose'):
                torch.testing.assert_close(scattered, fresh_transpose(), atol=1e-4, rtol=1e-4)
                times = {'transpose': fresh_transpose, 'cached transpose': lambda: _spmm_transposed(cached, None, grad)}
                r.update({f'{k} latency ms': median_time(fn, device, args.reps) * 1e3 for k, fn in times.items()})
                r.update({f'{k} device ms': median_time(fn, device, args.reps, back_to_back=10) * 1e3
                          for k, fn in times.items()})
            r['transpose / scatter (latency)'] = r['transpose latency ms'] / r['scatter latency ms']
            r['transpose / scatter (device)'] = r['transpose device ms'] / r['scatter device ms']
            r['cached / scatter (device)'] = r['cached transpose device ms'] / r['scatter device ms']
            limit = SCATTER_ADJOINT_MAX if device.type == 'cuda' else SCATTER_ADJOINT_MAX_CPU
            r['auto takes'] = 'scatter' if E * F <= limit else 'transpose'
            rows.append(r)
            print(r, flush=True)
            del grad
        del graph, cached
        if device.type == 'cuda':
            torch.cuda.empty_cache()
    payload = {'env': environment(), 'args': vars(args), 'rows': rows,
               'scatter_adjoint_max': SCATTER_ADJOINT_MAX if device.type == 'cuda' else SCATTER_ADJOINT_MAX_CPU}
    payload['table'] = print_table(rows, list(rows[0]), 'SpMM backward: atomics over the edges vs the transpose, '
                                   f'median ms (fp32, {device})')
    save_json(Path(args.out) / 'spmm_adjoint.json', payload)
    return payload


if __name__ == '__main__':
    main()
