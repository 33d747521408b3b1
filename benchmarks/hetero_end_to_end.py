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

``--task link`` trains link prediction instead, as PyG's heterogeneous link tutorial
does: whether an author wrote a paper, over ``--label-edges`` of the ``writes`` edges and
as many random negatives per batch (``LinkNeighborLoader``, ``neg_sampling='binary'``,
each batch ``--batch-size`` positives), the same encoder without its classifier, and
binary cross-entropy of the dot products of the author's and the paper's rows. (The
label edges stay in the graph that messages pass over: a timing, not an evaluation.)

``--stores`` gives ours the graph in pyg_accel's stores (``from_data``) instead of the
``HeteroData``: batches are then cut from the stores rather than by PyG's ``filter_hetero_data``.

For each: the median training epoch over ``--epochs`` epochs after a warm-up epoch (in
which ``accel-graph`` captures each batch shape: its ``first epoch s``), without the
evaluation passes; the median host time inside one step call and inside one call for the
next batch (``loader ms/batch``: for stock PyG, its wait for the workers); the ratio of the
tuned stock PyG epoch to the row's. On a GPU, ours also get the GPU's time per step (the
union of its kernels' intervals over ``--profile-batches`` profiled batches) and its busy
fraction of the epoch: the captured loop is host-bound when the two host times add up to
more than that.

    python benchmarks/hetero_end_to_end.py --scale 0.1 --out OUT
    python benchmarks/hetero_end_to_end.py --scale 0.1 --task link --out OUT
    python benchmarks/hetero_end_to_end.py --scale 0.1 --tf32 --out OUT     # every configuration on TF32
    python benchmarks/hetero_end_to_end.py --scale 0.1 --stores --configs accel-graph --out OUT
    python benchmarks/hetero_end_to_end.py --scale 0.003 --device cpu --epochs 1 --configs accel accel-graph
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Dict, List

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'examples'))
from common import (default_workers, environment, gpu_time, print_table, pyplot, save_figure, save_json,  # noqa: E402
                    timed_pass)
import hetero_node_classification as example  # noqa: E402

import pyg_accel.nn  # noqa: E402
from pyg_accel.data import from_data  # noqa: E402
from pyg_accel.datasets import load_hetero_dataset  # noqa: E402
from pyg_accel.loader import LinkNeighborLoader  # noqa: E402
from pyg_accel.training import TrainStep  # noqa: E402
from results import tuned_loader_options  # noqa: E402

CONFIGS = ('pyg', 'accel', 'accel-graph')
WRITES = ('author', 'writes', 'paper')  # --task link: the label edges' type
INPUTS = ('x_dict', 'edge_index_dict', 'n_id_dict')


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--scale', type=float, default=0.1, help="size factor of ogbn-mag's schema (1.0: its size)")
    p.add_argument('--task', choices=['node', 'link'], default='node',
                   help="'node': the papers' venues (the example's task); 'link': author-writes-paper edges")
    p.add_argument('--label-edges', type=int, default=65536, help="--task link: 'writes' edges to predict per epoch")
    p.add_argument('--configs', nargs='*', default=list(CONFIGS), choices=CONFIGS)
    p.add_argument('--epochs', type=int, default=3, help='epochs timed, after one warm-up epoch')
    p.add_argument('--profile-batches', type=int, default=40,
                   help="on a GPU, ours' batches profiled for the GPU's time per step (its busy fraction)")
    p.add_argument('--batch-size', type=int, default=512)
    p.add_argument('--num-neighbors', default='10,10')
    p.add_argument('--pyg-workers', type=int, default=default_workers())
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--tf32', action='store_true',
                   help="every configuration's fp32 matrix products on TF32 tensor cores (stock PyG's too)")
    p.add_argument('--stores', action='store_true',
                   help="ours read the graph from pyg_accel's FeatureStore / GraphStore (from_data), "
                        'not from the HeteroData')
    p.add_argument('--out', default='bench-out')
    return p.parse_args(argv)


class LinkSAGE(example.HeteroSAGE):
    """The example's encoder without its classifier: each node type's rows (a dict)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        del self.head

    def forward(self, x_dict, edge_index_dict, n_id_dict):
        return self.encode(x_dict, edge_index_dict, n_id_dict)


def link_loader(name: str, args, data, pairs):
    """Batches of ``--batch-size`` of the label edges ``pairs`` (shuffled), as many random
    negatives: stock PyG's loader (tuned) or ours, over ``data``."""
    fanout = [int(v) for v in args.num_neighbors.split(',')]
    options = dict(edge_label_index=(WRITES, pairs), neg_sampling='binary', batch_size=args.batch_size, shuffle=True)
    if name == 'pyg':
        import torch_geometric.loader
        return torch_geometric.loader.LinkNeighborLoader(data, fanout, **options,
                                                         **tuned_loader_options(args.pyg_workers))
    return LinkNeighborLoader(data, fanout, **options)


def link_step(name: str, model, opt, device):
    """``step(batch) -> loss``: the plain loop of PyG's heterogeneous link tutorial, or
    (``accel-graph``) a TrainStep, whose default decoder and loss these are."""
    if name == 'accel-graph':
        return TrainStep(model, opt, inputs=INPUTS)

    def step(batch):
        batch = batch.to(device)  # (stock PyG's CPU batches: the copy to the GPU)
        opt.zero_grad()
        out = model(batch.x_dict, batch.edge_index_dict, batch.n_id_dict)
        src, dst = batch[WRITES].edge_label_index
        score = (out[WRITES[0]][src] * out[WRITES[-1]][dst]).sum(-1)
        loss = F.binary_cross_entropy_with_logits(score, batch[WRITES].edge_label)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def time_config(name: str, args, dataset, data_cpu, device: torch.device) -> Dict[str, object]:
    """One configuration's row: trains ``1 + args.epochs`` epochs of the example's model
    (``--task link``: its encoder, on link prediction)."""
    stock = name == 'pyg'
    options = ['--batch-size', str(args.batch_size), '--num-neighbors', args.num_neighbors,
               '--pyg-workers', str(args.pyg_workers)]
    options += ['--baseline', 'pyg'] if stock else (['--eager'] if name == 'accel' else [])
    ex_args = example.parse_args(options)
    if stock:
        data = data_cpu
    else:
        data = from_data(data_cpu, device=device) if args.stores else data_cpu.to(device)
    target, split = dataset.target, dataset.split
    torch.manual_seed(0)
    in_types = [t for t in data_cpu.node_types if 'x' in data_cpu[t]]
    conv_cls = example.torch_geometric_sage if stock else pyg_accel.nn.SAGEConv
    model_cls = LinkSAGE if args.task == 'link' else example.HeteroSAGE
    model = model_cls(data_cpu.metadata(), {t: data_cpu[t].num_nodes for t in data_cpu.node_types}, in_types, target,
                      ex_args.hidden, dataset.num_classes, ex_args.layers, ex_args.dropout, conv_cls).to(device)
    if args.task == 'link':
        loader = link_loader(name, args, data, data_cpu[WRITES].edge_index[:, :args.label_edges])
        make_step = lambda opt: link_step(name, model, opt, device)  # noqa: E731
    else:
        seeds = split['train'] if stock else split['train'].to(device)
        loader = example.make_loader(ex_args, data, (target, seeds), shuffle=True)
        make_step = lambda opt: example.training_step(model, opt, target, device, ex_args)  # noqa: E731
    with torch.no_grad():  # (the lazy layers made before the optimiser sees them)
        batch = next(iter(loader)).to(device)
        model(batch.x_dict, batch.edge_index_dict, batch.n_id_dict)
    opt = torch.optim.Adam(model.parameters(), lr=ex_args.lr, fused=device.type == 'cuda')
    step = make_step(opt)
    model.train()
    epochs: List[float] = []
    host: List[float] = []  # (inside each step call)
    loading: List[float] = []  # (inside each call for the next batch)
    for epoch in range(args.epochs + 1):
        seconds, epoch_loading, epoch_host = timed_pass(step, loader, device)
        epochs.append(seconds)
        if epoch > 0:
            host += epoch_host
            loading += epoch_loading
    row = {'config': name, 'epoch s': statistics.median(epochs[1:]), 'first epoch s': epochs[0],
           'host ms/step': statistics.median(host) * 1e3, 'loader ms/batch': statistics.median(loading) * 1e3,
           'steps/epoch': len(loader)}
    if stock:
        row['workers'] = args.pyg_workers
    elif device.type == 'cuda':  # (the GPU's share of the loop: how far the host holds it back)
        row['GPU ms/step'] = gpu_time(step, loader, device, min(args.profile_batches, len(loader)))
        row['GPU busy'] = row['GPU ms/step'] / (row['epoch s'] / len(loader) * 1e3)
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
    torch.set_float32_matmul_precision('high' if args.tf32 else 'highest')
    dataset = load_hetero_dataset('synthetic-mag', scale=args.scale, seed=0)
    data_cpu = T.ToUndirected()(dataset.data)
    rows = [time_config(name, args, dataset, data_cpu, device) for name in args.configs]
    stock = next((r for r in rows if r['config'] == 'pyg'), None)
    for r in rows:
        if stock is not None:
            r['vs pyg'] = stock['epoch s'] / r['epoch s']
    task = (f"link prediction of {min(args.label_edges, data_cpu[WRITES].num_edges):,} {WRITES[1]} edges"
            if args.task == 'link' else 'paper venues')
    title = (f"heterogeneous GraphSAGE, {task}, on {dataset.name} ({data_cpu.num_nodes:,} nodes, "
             f"{data_cpu.num_edges:,} edges, 7 edge types), batch {args.batch_size}, fanout [{args.num_neighbors}], "
             f"{device}{', TF32' if args.tf32 else ''}{', ours over its stores' if args.stores else ''}")
    columns = ['config', 'workers', 'steps/epoch', 'epoch s', 'first epoch s', 'host ms/step', 'loader ms/batch',
               'GPU ms/step', 'GPU busy', 'graphs', 'vs pyg']
    table = print_table(rows, [c for c in columns if any(c in r for r in rows)], title)
    out = Path(args.out)
    stem = f'hetero_end_to_end_{args.scale:g}' + ('_link' if args.task == 'link' else '')
    stem += ('_tf32' if args.tf32 else '') + ('_stores' if args.stores else '')
    save_json(out / f'{stem}.json', {'environment': environment(), 'args': vars(args), 'title': title, 'rows': rows})
    plot(rows, out / f'{stem}.png', title)
    return {'rows': rows, 'table': table}


if __name__ == '__main__':
    main()
