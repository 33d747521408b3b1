"""SpMM max aggregation against sum on one graph, forward and backward, for tuning the
max kernels (``scripts/kernel_variants.sh OUT sparse_max`` runs it per build variant).

    python scripts/max_timing.py [--preset products] [--features 16 64 256] [--reps 10]

Prints, per feature width, the median ms of: sum forward, max forward, max backward,
and the max / sum ratio of the forward; with ``--paths`` also the max forward down each
path, in the same process: the vectorised kernel in runs of 64, 256 and 1,024 edges
(``PYG_ACCEL_MAX_RUN_EDGES``; the default picks by the graph's size) and the row
reductions (``PYG_ACCEL_SPARSE_KERNEL=generic``); with ``--forms`` the min and the mean
beside the compositions they replaced, in the same process: min as ``0 - max(-x)`` (two
elementwise passes more) and mean as a sum weighted by ``1 / deg`` per edge.
``--scale 0.01`` makes a graph of a sampled batch's size.
"""
import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'benchmarks'))  # common, sparse
from common import median_time  # noqa: E402
from sparse import env_setting  # noqa: E402

from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.ops import CooGraph, spmm  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--preset', default='products')
    p.add_argument('--scale', type=float, default=1.0)
    p.add_argument('--features', type=int, nargs='*', default=[16, 64, 256])
    p.add_argument('--reps', type=int, default=10)
    p.add_argument('--out', default=None, help='a folder for max_timing.json')
    p.add_argument('--paths', action='store_true',
                   help="also time the max forward down each path the default chooses between")
    p.add_argument('--forms', action='store_true',
                   help='also time min and mean against the compositions of other reductions they replaced')
    p.add_argument('--device', default='cuda')
    args = p.parse_args()
    device = torch.device(args.device)
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device)
    n = dataset.data.num_nodes
    graph = CooGraph.from_edge_index(dataset.data.edge_index.to(device), (n, n))
    print(f'{dataset}: {graph.num_edges} edges', flush=True)
    rows = []
    for F in args.features:
        x = torch.randn(n, F, device=device, requires_grad=True)
        out = spmm(graph, x, reduce='max')
        grad = torch.randn_like(out)
        with torch.no_grad():
            sum_ms = median_time(lambda: spmm(graph, x, reduce='sum'), device, reps=args.reps) * 1e3
            max_ms = median_time(lambda: spmm(graph, x, reduce='max'), device, reps=args.reps) * 1e3
        back_ms = median_time(lambda: torch.autograd.grad(out, x, grad, retain_graph=True), device,
                              reps=args.reps) * 1e3
        row = {'F': F, 'sum ms': sum_ms, 'max ms': max_ms, 'max backward ms': back_ms}
        if args.paths:
            paths = [('PYG_ACCEL_MAX_RUN_EDGES', run, f'max runs {run} ms') for run in ('64', '256', '1024')]
            for variable, value, name in paths + [('PYG_ACCEL_SPARSE_KERNEL', 'generic', 'max row reductions ms')]:
                with env_setting(variable, value), torch.no_grad():
                    torch.testing.assert_close(spmm(graph, x, reduce='max'), out, rtol=0, atol=0)
                    row[name] = median_time(lambda: spmm(graph, x, reduce='max'), device, reps=args.reps) * 1e3
        if args.forms:
            row.update(time_forms(graph, x.detach(), device, args.reps))
        print(f'F={F}: ' + ', '.join(f'{k} {v:.3f}' for k, v in row.items() if k != 'F')
              + f', max / sum {max_ms / sum_ms:.2f}', flush=True)
        rows.append(row)
        del x, out, grad
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / 'max_timing.json').write_text(json.dumps({'graph': repr(dataset), 'rows': rows}, indent=1))


@torch.no_grad()
def time_forms(graph: CooGraph, x: torch.Tensor, device, reps: int) -> dict:
    """Median ms of the min and mean reductions and of the compositions that computed
    them before the kernels took them (checked equal first)."""
    mean_w = graph.mean_weight(x.dtype)
    forms = {'min': (lambda: spmm(graph, x, reduce='min'),
                     lambda: torch.sub(0, spmm(graph, torch.neg(x), reduce='max'))),
             'mean': (lambda: spmm(graph, x, reduce='mean'), lambda: spmm(graph, x, mean_w, reduce='sum'))}
    row = {}
    for name, (native, composed) in forms.items():
        torch.testing.assert_close(native(), composed(), rtol=1e-5, atol=1e-6)
        row[f'{name} ms'] = median_time(native, device, reps=reps) * 1e3
        row[f'{name} composed ms'] = median_time(composed, device, reps=reps) * 1e3
    return row


if __name__ == '__main__':
    main()
