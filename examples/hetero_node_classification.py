"""Heterogeneous node classification (ogbn-mag's task) with pyg_accel's sampler and layers.

Predicts each paper's class on a graph of ogbn-mag's schema: papers, authors,
institutions and fields of study. By default the graph is synthetic, at 1% of ogbn-mag's
size, so the run takes seconds on a CPU. Real ogbn-mag files under --root work too. As in
PyG's ogbn-mag examples, reverse edges are added with `T.ToUndirected()`. Papers carry
features; the other node types learn an embedding each.

The model is a heterogeneous GraphSAGE: PyG's `HeteroConv` with one pyg_accel `SAGEConv`
per edge type, summed per destination type. Mini-batches come from
`pyg_accel.loader.NeighborLoader` over the `HeteroData`: on the GPU when one is present,
sampled there by pyg_accel's heterogeneous CUDA kernel, with the next batch prepared
while the current one trains. Each training step is a `pyg_accel.training.TrainStep`:
on a GPU, replayed as a CUDA graph over batches padded per node and edge type (--eager:
the plain PyG loop).

    python examples/hetero_node_classification.py                       # synthetic, 1% of ogbn-mag
    python examples/hetero_node_classification.py --scale 0.1 --epochs 10
    python examples/hetero_node_classification.py --dataset ogbn-mag --root /data/ogb

--baseline pyg runs the same model and loop with PyG's own `SAGEConv` and stock PyG's
`NeighborLoader` on the CPU graph. That needs pyg-lib or torch-sparse.
"""
from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning (set before torch loads OpenMP): on a busy
# CPU, spinning made these examples 5x slower (see docs/guide.md, 'On the CPU').
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

import argparse
import time
from typing import Dict, List

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
import torch_geometric.transforms as T
from tqdm import tqdm

import pyg_accel.nn
from pyg_accel.datasets import HeteroNodeDataset, load_hetero_dataset
from pyg_accel.loader import NeighborLoader, StageTimer
from pyg_accel.training import TrainStep
from results import (accuracy_summary, default_workers, format_stages, prepare, progress, report_accuracy,
                     stage_columns, tuned_loader_options)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--dataset', default='synthetic-mag', help="'synthetic-mag' or 'ogbn-mag'")
    p.add_argument('--root', default='data/ogb', help='folder holding OGB datasets (never downloaded)')
    p.add_argument('--scale', type=float, default=0.01, help="synthetic-mag's size as a fraction of ogbn-mag's")
    p.add_argument('--baseline', choices=['none', 'pyg'], default='none',
                   help="'pyg': PyG's SAGEConv and stock PyG's NeighborLoader (CPU sampler), same model and loop; "
                        'tuned: --pyg-workers DataLoader workers, persistent, pinned')
    p.add_argument('--pyg-workers', type=int, default=default_workers(),
                   help=f"--baseline pyg: DataLoader workers of stock PyG's loader (default: the cores less two, "
                        f"here {default_workers()})")
    p.add_argument('--hidden', type=int, default=64)
    p.add_argument('--layers', type=int, default=2)
    p.add_argument('--dropout', type=float, default=0.3)
    p.add_argument('--lr', type=float, default=0.005)
    p.add_argument('--epochs', type=int, default=8)
    p.add_argument('--num-neighbors', default='10,10', help='fanout per hop (every edge type)')
    p.add_argument('--batch-size', type=int, default=512)
    p.add_argument('--no-pipeline', action='store_true', help='do not prepare the next batch while one trains')
    p.add_argument('--eager', action='store_true',
                   help='the plain training loop (default: pyg_accel.training.TrainStep, a CUDA graph on a GPU)')
    p.add_argument('--device', default='auto', help="'auto', 'cpu' or 'cuda[:N]'")
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--out', default='runs/hetero_node_classification', help='folder for the metrics JSON and plot')
    return p.parse_args(argv)


class HeteroSAGE(torch.nn.Module):
    """``layers`` rounds of ``HeteroConv`` (a ``conv_cls((-1, -1), hidden)`` per edge type,
    summed per destination type), then a linear classifier of the ``target`` type. Node
    types without features in ``in_types`` learn an embedding of width ``hidden``."""

    def __init__(self, metadata, num_nodes: Dict[str, int], in_types: List[str], target: str, hidden: int,
                 num_classes: int, layers: int, dropout: float, conv_cls=pyg_accel.nn.SAGEConv):
        super().__init__()
        node_types, edge_types = metadata
        self.target, self.dropout = target, dropout
        self.embeddings = torch.nn.ModuleDict({t: torch.nn.Embedding(num_nodes[t], hidden)
                                               for t in node_types if t not in in_types})
        self.convs = torch.nn.ModuleList([
            pyg_nn.HeteroConv({et: conv_cls((-1, -1), hidden) for et in edge_types}, aggr='sum')
            for _ in range(layers)])
        self.head = torch.nn.Linear(hidden, num_classes)

    def forward(self, x_dict: Dict[str, torch.Tensor], edge_index_dict, n_id_dict: Dict[str, torch.Tensor]):
        return self.head(self.encode(x_dict, edge_index_dict, n_id_dict)[self.target])

    def encode(self, x_dict: Dict[str, torch.Tensor], edge_index_dict,
               n_id_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Each node type's rows after the last round (``[nodes of the type, hidden]``)."""
        # emb(n_id) as a row selection: a batch's ids are unique, so its backward is one
        # index_add_, where nn.Embedding's sorts the ids first (~0.2 ms of host time per
        # type and step on an H100, and 0.07 ms of GPU time)
        x_dict = {**x_dict, **{t: emb.weight.index_select(0, n_id_dict[t]) for t, emb in self.embeddings.items()}}
        for conv in self.convs:
            x_dict = conv(x_dict, edge_index_dict)
            x_dict = {t: F.dropout(x.relu(), p=self.dropout, training=self.training) for t, x in x_dict.items()}
        return x_dict


def torch_geometric_sage(in_channels, out_channels):
    """PyG's own ``SAGEConv`` (``--baseline pyg``)."""
    return pyg_nn.SAGEConv(in_channels, out_channels)


def make_loader(args, data, input_nodes, shuffle: bool):
    """Mini-batches of ``input_nodes`` (target ids): pyg_accel's loader, or stock PyG's
    with ``--baseline pyg``."""
    fanout = [int(v) for v in args.num_neighbors.split(',')]
    if args.baseline == 'pyg':
        import torch_geometric.loader
        import torch_geometric.typing
        if not (torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE):
            raise SystemExit("--baseline pyg: stock PyG's NeighborLoader needs pyg-lib or torch-sparse installed")
        return torch_geometric.loader.NeighborLoader(data, num_neighbors=fanout, input_nodes=input_nodes,
                                                     batch_size=args.batch_size, shuffle=shuffle,
                                                     **tuned_loader_options(args.pyg_workers))
    return NeighborLoader(data, num_neighbors=fanout, input_nodes=input_nodes, batch_size=args.batch_size,
                          shuffle=shuffle, pipeline=not args.no_pipeline)


def forward(model, batch, target: str, device):
    """The model's logits for the batch's seed nodes (the first ``batch_size`` of ``target``)."""
    batch = batch.to(device)  # (stock PyG's CPU batches: the copy to the GPU)
    n_id = {t: batch[t].n_id for t in batch.node_types}
    logits = model(batch.x_dict, batch.edge_index_dict, n_id)
    size = batch[target].batch_size
    return logits[:size], batch[target].y[:size]


def training_step(model, opt, target: str, device, args):
    """``step(batch) -> loss``: forward, loss, backward and optimizer step. On our loader's
    batches a :class:`pyg_accel.training.TrainStep` (a CUDA graph on a GPU) unless
    ``--eager``; otherwise (and for stock PyG's batches) the plain PyG loop."""
    if args.baseline == 'none' and not args.eager:
        return TrainStep(model, opt, inputs=('x_dict', 'edge_index_dict', 'n_id_dict'))

    def step(batch):
        opt.zero_grad()
        logits, y = forward(model, batch, target, device)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


@torch.no_grad()
def evaluate(model, loaders: Dict[str, object], target: str, device) -> Dict[str, float]:
    """Accuracy over each split's sampled neighbourhoods."""
    model.eval()
    acc = {}
    for name, loader in loaders.items():
        correct, total = torch.zeros((), device=device, dtype=torch.long), 0
        for batch in loader:
            logits, y = forward(model, batch, target, device)
            correct += (logits.argmax(-1) == y).sum()  # (summed on the device: one read per split)
            total += y.numel()
        acc[name] = int(correct) / max(total, 1)
    return acc


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = prepare(args.device)  # (the C++/CUDA ops built first: never inside an epoch)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    dataset: HeteroNodeDataset = load_hetero_dataset(args.dataset, root=args.root, scale=args.scale, seed=args.seed)
    data = T.ToUndirected()(dataset.data)  # reverse edge types; 'cites' made undirected
    target, split = dataset.target, dataset.split
    if args.baseline == 'none':
        data = data.to(device)  # our loader samples where the graph is
    print(f'{dataset}\ndevice {device}; {len(data.edge_types)} edge types after T.ToUndirected(); '
          f'loaded in {time.perf_counter() - start:.1f} s')

    conv_cls = torch_geometric_sage if args.baseline == 'pyg' else pyg_accel.nn.SAGEConv
    in_types = [t for t in data.node_types if 'x' in data[t]]
    model = HeteroSAGE(data.metadata(), {t: data[t].num_nodes for t in data.node_types}, in_types, target,
                       args.hidden, dataset.num_classes, args.layers, args.dropout, conv_cls).to(device)
    train_loader = make_loader(args, data, (target, split['train'].to(data[target].x.device)), shuffle=True)
    eval_loaders = {name: make_loader(args, data, (target, split[name].to(data[target].x.device)), shuffle=False)
                    for name in ('valid', 'test')}
    with torch.no_grad():  # materialise the lazy (-1) layers before the optimiser sees them
        forward(model, next(iter(eval_loaders['valid'])), target, device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, fused=device.type == 'cuda')  # one kernel per step
    step = training_step(model, opt, target, device, args)
    timer = StageTimer(device)
    if train_loader.num_workers == 0:  # (a tuned stock PyG loader samples in its worker processes)
        timer.instrument(train_loader)

    history = []
    bar = progress(range(1, args.epochs + 1), desc=f'hetero-sage/{args.dataset}', unit='epoch')
    for epoch in bar:
        begin = time.perf_counter()
        model.train()
        total_loss = torch.zeros((), device=device)  # summed on the device: no host sync per batch
        for batch in train_loader:
            with timer.stage('compute'):
                total_loss += step(batch) * batch[target].batch_size
        stages = timer.summary()
        acc = evaluate(model, eval_loaders, target, device)
        loss = float(total_loss) / split['train'].numel()
        row = {'epoch': epoch, 'loss': loss, **{f'{k}_acc': v for k, v in acc.items()},
               'seconds': time.perf_counter() - begin, **stage_columns(stages)}
        bar.set_postfix(loss=f'{loss:.3f}', valid=f"{acc['valid']:.3f}", test=f"{acc['test']:.3f}")
        tqdm.write(f"epoch {epoch:3d}  loss {loss:.4f}  valid {acc['valid']:.4f}  "
                   f"test {acc['test']:.4f}  ({row['seconds'] * 1e3:.0f} ms{format_stages(stages)})")
        history.append(row)

    summary = accuracy_summary(history, dataset=dataset.name, device=str(device), baseline=args.baseline)
    report_accuracy(history, args, summary, f'heterogeneous GraphSAGE on {args.dataset}')
    return summary


if __name__ == '__main__':
    main()
