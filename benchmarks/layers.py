"""Layer benchmark: pyg_accel.nn's GCNConv, SAGEConv (mean and max aggregation) and
GATConv against PyG's, forward plus backward, time and peak memory, on one synthetic
graph.

Both layers of a pair share weights (PyG's ``state_dict`` loaded into ours) and get the
same ``x`` and ``edge_index``; outputs are compared before timing. On the GPU peak memory
is ``torch.cuda.max_memory_allocated`` above the inputs during one forward + backward; a
layer that runs out of memory is reported as OOM (and its peak as the limit).

Every step rebuilds what our layers derive from ``edge_index`` (sorted graph, transpose,
GCN normalisation), as a mini-batch step does: the per-``edge_index`` memo is switched
off (``PYG_ACCEL_GRAPH_MEMO=0``). ``--memo`` keeps it on, as full-graph training with one
``edge_index`` sees it: the graph is then built once, in the warm-up step.

    python benchmarks/layers.py --preset products --widths 64 256 --out OUT
    python benchmarks/layers.py --preset tiny --device cpu            # quick, CPU
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import torch_geometric.nn as pyg_nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_graph_arguments, environment, median_time, print_table, save_json  # noqa: E402

import pyg_accel.nn as acc_nn  # noqa: E402
from pyg_accel.datasets import synthetic_dataset  # noqa: E402

LAYERS = {  # name -> (ours, PyG's, constructor kwargs)
    'GCNConv': (acc_nn.GCNConv, pyg_nn.GCNConv, {}),
    'SAGEConv': (acc_nn.SAGEConv, pyg_nn.SAGEConv, {}),
    'SAGEConv-max': (acc_nn.SAGEConv, pyg_nn.SAGEConv, {'aggr': 'max'}),
    'GATConv-8h': (acc_nn.GATConv, pyg_nn.GATConv, {'heads': 8}),
}


def step(layer, x, edge_index):
    out = layer(x, edge_index)
    out.sum().backward()
    return out


def measure(layer, x, edge_index, device, reps):
    """(median ms of forward + backward, peak bytes above the inputs), NaN on OOM."""
    try:
        if device.type == 'cuda':
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step(layer, x, edge_index)
            peak = torch.cuda.max_memory_allocated() - base
        else:
            step(layer, x, edge_index)
            peak = float('nan')
        return median_time(lambda: step(layer, x, edge_index), device, reps=reps, warmup=1) * 1e3, peak
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return float('nan'), float('nan')


def profile(layer, x, edge_index, top: int = 12) -> str:
    """The ``top`` CUDA kernels of one forward + backward by their own device time."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    step(layer, x, edge_index)
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(layer, x, edge_index)
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by='self_device_time_total', row_limit=top, max_name_column_width=60)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(p)
    p.add_argument('--widths', type=int, nargs='*', default=[64, 256],
                   help='in = out channels (GAT: out per head = width / 8)')
    p.add_argument('--layers', nargs='*', default=list(LAYERS), choices=list(LAYERS))
    p.add_argument('--reps', type=int, default=5)
    p.add_argument('--profile', action='store_true', help="print our layers' top CUDA kernels (GPU)")
    p.add_argument('--memo', action='store_true', help='keep the per-edge_index graph memo on (full-graph training)')
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    previous = os.environ.get('PYG_ACCEL_GRAPH_MEMO')
    os.environ['PYG_ACCEL_GRAPH_MEMO'] = '1' if args.memo else '0'
    try:
        return run(args)
    finally:
        if previous is None:
            del os.environ['PYG_ACCEL_GRAPH_MEMO']
        else:
            os.environ['PYG_ACCEL_GRAPH_MEMO'] = previous


def run(args) -> dict:
    """Times every (layer, width) pair of ``args`` and writes the table and JSON."""
    device = torch.device(args.device)
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device)
    n, edge_index = dataset.data.num_nodes, dataset.data.edge_index.to(device)
    print(f'{dataset} on {device}', flush=True)
    rows = []
    for name in args.layers:
        ours_cls, pyg_cls, kwargs = LAYERS[name]
        for width in args.widths:
            out_channels = width // kwargs.get('heads', 1)
            torch.manual_seed(0)
            ref = pyg_cls(width, out_channels, **kwargs).to(device)
            ours = ours_cls(width, out_channels, **kwargs).to(device)
            ours.load_state_dict(ref.state_dict())
            x = torch.randn(n, width, device=device, requires_grad=True)
            r = {'layer': name, 'width': width}
            r['ours ms'], r['ours peak MB'] = measure(ours, x, edge_index, device, args.reps)
            r['PyG ms'], r['PyG peak MB'] = measure(ref, x, edge_index, device, args.reps)
            for key in ('ours peak MB', 'PyG peak MB'):
                r[key] = r[key] / 2**20
            if r['ours ms'] == r['ours ms'] and r['PyG ms'] == r['PyG ms']:
                with torch.no_grad():
                    torch.testing.assert_close(ours(x, edge_index), ref(x, edge_index), atol=1e-3, rtol=1e-3)
            if args.profile and device.type == 'cuda':
                print(f'{name} width {width}, ours: top kernels\n' + profile(ours, x, edge_index), flush=True)
            r['speed-up'] = r['PyG ms'] / r['ours ms']
            r['memory ratio'] = r['ours peak MB'] / r['PyG peak MB']
            rows.append(r)
            print(r, flush=True)
            del ref, ours, x
            for slot in [k for k in vars(edge_index) if k.startswith('_pyg_accel_')]:
                delattr(edge_index, slot)  # the memo of this layer (--memo) must not crowd the next
            if device.type == 'cuda':
                torch.cuda.empty_cache()
    payload = {'env': environment(), 'args': vars(args), 'graph': repr(dataset), 'rows': rows}
    payload['table'] = print_table(rows, list(rows[0]), f'layers on {dataset.name} ({device}), forward + backward')
    save_json(Path(args.out) / ('layers_memo.json' if args.memo else 'layers.json'), payload)
    return payload


if __name__ == '__main__':
    main()
