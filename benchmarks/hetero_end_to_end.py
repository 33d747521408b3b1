"""End-to-end heterogeneous training on one GPU: ogbn-mag's task on a synthetic graph of
its schema (``--scale`` of its size), the model and loop of
``examples/hetero_node_classification.py`` (two ``HeteroConv`` rounds of ``SAGEConv``
over 7 edge types, embeddings for the featureless node types), several ways, in one
process on the same data:

* ``pyg``: stock PyG **tuned as its users run it**: ``torch_geometric.loader.NeighborLoader``
  on the CPU ``HeteroData`` with ``--pyg-workers`` DataLoader workers (default: the
  machine's cores less two), ``persistent_workers=True`` and ``pin_memory=True``; PyG's
  ``SAGEConv`` on the GPU.
* ``accel``: pyg_accel's ``NeighborLoader`` over the graph on the device (sampled there,
  the next batch prepared while one trains) and pyg_accel's ``SAGEConv``; the plain loop.
* ``accel-graph``: the same, each step a :class:`pyg_accel.training.TrainStep` (on a GPU,
  a CUDA graph over batches padded per node and edge type).

For each: the median training epoch over ``--epochs`` epochs after a warm-up epoch (in
which ``accel-graph`` captures each batch shape: its ``first epoch s``), without the
evaluation passes; the median host time inside one step call; the ratio of the tuned
stock PyG epoch to the row's.

    python benchmarks/hetero_end_to_end.py --scale 0.1 --out OUT
    python benchmarks/hetero_end_to_end.py --scale 0.003 --device cpu --epochs 1 --configs accel accel-graph
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import torch
import torch_geometric.transforms as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'examples'))
from common import default_workers, environment, print_table, pyplot, save_figure, save_json, sync  # noqa: E402
import hetero_node_classification as example  # noqa: E402

import pyg_accel.nn  # noqa: E402
from pyg_accel.datasets import load_hetero_dataset  # noqa: E402

CONFIGS = ('pyg', 'accel', 'accel-graph')


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--scale', type=float, default=0.1, help="size factor of ogbn-mag's schema (1.0: its size)")
    p.add_argument('--configs', nargs='*', default=list(CONFIGS), choices=CONFIGS)
    p.add_argument('--epochs', type=int, default=3, help='epochs timed, after one warm-up epoch')
    p.add_argument('--batch-size', type=int, default=512)
    p.add_argument('--num-neighbors', default='10,10')
    p.add_argument('--pyg-workers', type=int, default=default_workers())
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--out', default='bench-out')
    return p.parse_args(argv)


def time_config(name: str, args, dataset, data_cpu, device: torch.device) -> Dict[str, object]:
    """One configuration's row: trains ``1 + args.epochs`` epochs of the example's model."""
    stock = name == 'pyg'
    options = ['--batch-size', str(args.batch_size), '--num-neighbors', args.num_neighbors,
               '--pyg-workers', str(args.pyg_workers)]
    options += ['--baseline', 'pyg'] if stock else (['--eager'] if name == 'accel' else [])
    ex_args = example.parse_args(options)
    data = data_cpu if stock else data_cpu.to(device)
    target, split = dataset.target, dataset.split
    torch.manual_seed(0)
    in_types = [t for t in data.node_types if 'x' in data[t]]
    conv_cls = example.torch_geometric_sage if stock else pyg_accel.nn.SAGEConv
    model = example.HeteroSAGE(data.metadata(), {t: data[t].num_nodes for t in data.node_types}, in_types, target,
                               ex_args.hidden, dataset.num_classes, ex_args.layers, ex_args.dropout,
                               conv_cls).to(device)
    seeds = split['train'].to(data[target].x.device)
    loader = example.make_loader(ex_args, data, (target, seeds), shuffle=True)
    with torch.no_grad():  # (the lazy layers made before the optimiser sees them)
        example.forward(model, next(iter(loader)), target, device)
    opt = torch.optim.Adam(model.parameters(), lr=ex_args.lr, fused=device.type == 'cuda')
    step = example.training_step(model, opt, target, device, ex_args)
    model.train()
    epochs: List[float] = []
    host: List[float] = []
    for epoch in range(args.epochs + 1):
        sync(device)
        start = time.perf_counter()
        for batch in loader:
            called = time.perf_counter()
            step(batch)
            if epoch > 0:
                host.append(time.perf_counter() - called)
        sync(device)
        epochs.append(time.perf_counter() - start)
    row = {'config': name, 'epoch s': statistics.median(epochs[1:]), 'first epoch s': epochs[0],
           'host ms/step': statistics.median(host) * 1e3, 'steps/epoch': len(loader)}
    if stock:
        row['workers'] = args.pyg_workers
    if hasattr(step, 'stats'):
        row['replayed'], row['graphs'] = step.stats['replayed'], step.num_graphs
    return row


def plot(rows: List[dict], path: Path, title: str) -> None:
    """Bars of each configuration's epoch; nothing without matplotlib."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([r['config'] for r in rows], [r['epoch s'] for r in rows], color='tab:blue')
    for i, r in enumerate(rows):
        ax.annotate(f"{r['epoch s']:.2f} s", (i, r['epoch s']), ha='center', va='bottom', fontsize=8)
    ax.set(ylabel='training epoch, s (median)')
    ax.set_title(title, fontsize=9)
    save_figure(fig, path)


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = example.prepare(args.device)  # (the C++/CUDA ops built first: never inside an epoch)
    dataset = load_hetero_dataset('synthetic-mag', scale=args.scale, seed=0)
    data_cpu = T.ToUndirected()(dataset.data)
    rows = [time_config(name, args, dataset, data_cpu, device) for name in args.configs]
    stock = next((r for r in rows if r['config'] == 'pyg'), None)
    for r in rows:
        if stock is not None:
            r['vs pyg'] = stock['epoch s'] / r['epoch s']
    title = (f"heterogeneous GraphSAGE on {dataset.name} ({data_cpu.num_nodes:,} nodes, {data_cpu.num_edges:,} "
             f"edges, 7 edge types), batch {args.batch_size}, fanout [{args.num_neighbors}], {device}")
    columns = ['config', 'workers', 'steps/epoch', 'epoch s', 'first epoch s', 'host ms/step', 'graphs', 'vs pyg']
    table = print_table(rows, [c for c in columns if any(c in r for r in rows)], title)
    out = Path(args.out)
    stem = f'hetero_end_to_end_{args.scale:g}'
    save_json(out / f'{stem}.json', {'environment': environment(), 'args': vars(args), 'title': title, 'rows': rows})
    plot(rows, out / f'{stem}.png', title)
    return {'rows': rows, 'table': table}


if __name__ == '__main__':
    main()
