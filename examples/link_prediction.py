"""Link prediction with pyg_accel: LinkNeighborLoader (PyG's loader, our sampler, binary
negative sampling) over our stores, a GraphSAGE encoder from pyg_accel's layers and a
dot-product decoder; ROC-AUC on held-out edges. Each training step is a
`pyg_accel.training.TrainStep` (on a GPU a CUDA graph over padded batches; --eager, or
--layers-from pyg: the plain loop).

    python examples/link_prediction.py                                  # embedded default graph
    python examples/link_prediction.py --dataset synthetic-products --scale 0.1 --epochs 5
    python examples/link_prediction.py --layers-from pyg                # PyG's own layers

The graph's edges are split 85/5/10 into training / validation / test edges (each
undirected pair kept together); message passing only sees the training edges. Each
epoch prints the loss, the validation and test AUC and its time split into loading
(sampling + feature gather, measured in a synchronised pass over a few batches) and the
rest; the curves are saved as PNG.
"""
from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning (set before torch loads OpenMP): on a busy
# CPU, spinning made these examples 5x slower (see docs/guide.md, 'On the CPU').
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

import argparse
import time
from pathlib import Path
from typing import Dict, List

import torch
import torch.nn.functional as F
import torch_geometric.nn.models as pyg_models
from torch_geometric.data import Data
from tqdm import tqdm

import pyg_accel.nn.models as accel_models
from pyg_accel.data import from_data
from pyg_accel.datasets import load_dataset
from pyg_accel.loader import LinkNeighborLoader, StageTimer
from pyg_accel.training import TrainStep
from results import add_dataset_arguments, final_line, format_stages, prepare, progress, save_results, stage_columns

LAYERS = {'pyg_accel': accel_models, 'pyg': pyg_models}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_arguments(p)
    p.add_argument('--layers-from', choices=sorted(LAYERS), default='pyg_accel')
    p.add_argument('--hidden', type=int, default=128)
    p.add_argument('--layers', type=int, default=2)
    p.add_argument('--num-neighbors', default='10,5')
    p.add_argument('--batch-size', type=int, default=512, help='positive edges per batch (as many negatives)')
    p.add_argument('--lr', type=float, default=0.005)
    p.add_argument('--epochs', type=int, default=10)
    p.add_argument('--device', default='auto')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--eager', action='store_true',
                   help='the plain training loop (default: pyg_accel.training.TrainStep, a CUDA graph on a GPU)')
    p.add_argument('--out', default='runs/link_prediction')
    return p.parse_args(argv)


def training_step(model, opt, args):
    """``step(batch) -> loss``: forward, the label edges' dot products, binary
    cross-entropy, backward and optimizer step. A :class:`pyg_accel.training.TrainStep`
    (whose default decoder and loss these are) unless ``--eager`` or PyG's layers."""
    if args.layers_from == 'pyg_accel' and not args.eager:
        return TrainStep(model, opt)

    def step(batch):
        opt.zero_grad()
        z = model(batch.x, batch.edge_index)
        src, dst = batch.edge_label_index
        loss = F.binary_cross_entropy_with_logits((z[src] * z[dst]).sum(-1), batch.edge_label.float())
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def split_edges(edge_index: torch.Tensor, num_nodes: int, seed: int) -> Dict[str, torch.Tensor]:
    """Undirected pairs (u < v) split 85/5/10; the training graph keeps both directions."""
    g = torch.Generator().manual_seed(seed)
    u, v = edge_index.cpu()
    keep = u < v
    pairs = torch.stack([u[keep], v[keep]])
    pairs = pairs[:, torch.randperm(pairs.size(1), generator=g)]
    n_val, n_test = int(0.05 * pairs.size(1)), int(0.10 * pairs.size(1))
    val, test, train = pairs[:, :n_val], pairs[:, n_val:n_val + n_test], pairs[:, n_val + n_test:]
    return {'train_graph': torch.cat([train, train.flip(0)], 1), 'train': train, 'valid': val, 'test': test}


def roc_auc(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """Probability that a positive scores above a negative (ties count half)."""
    scores = torch.cat([pos, neg]).float().cpu()
    ranks = torch.empty_like(scores)
    order = scores.argsort()
    ranks[order] = torch.arange(1, scores.numel() + 1, dtype=scores.dtype)
    for value in scores[order].unique_consecutive():  # average ranks of ties
        tie = scores == value
        if int(tie.sum()) > 1:
            ranks[tie] = ranks[tie].mean()
    n_pos, n_neg = pos.numel(), neg.numel()
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@torch.no_grad()
def evaluate(model, x, edge_index, pairs, num_nodes, seed) -> float:
    model.eval()
    z = model(x, edge_index)
    g = torch.Generator().manual_seed(seed)
    neg = torch.randint(0, num_nodes, pairs.shape, generator=g).to(z.device)
    pairs = pairs.to(z.device)
    return roc_auc((z[pairs[0]] * z[pairs[1]]).sum(-1), (z[neg[0]] * z[neg[1]]).sum(-1))


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = prepare(args.device)  # (the C++/CUDA ops built first: never inside an epoch)
    torch.manual_seed(args.seed)
    dataset = load_dataset(args.dataset, root=args.root, scale=args.scale, seed=args.seed)
    n = dataset.data.num_nodes
    edges = split_edges(dataset.data.edge_index, n, args.seed)
    train_data = Data(x=dataset.data.x, edge_index=edges['train_graph'], num_nodes=n)
    location = 'cuda' if device.type == 'cuda' else 'cpu'
    fs, gs = from_data(train_data, location)
    print(f'{dataset}\n{edges["train"].size(1)} training / {edges["valid"].size(1)} validation / '
          f'{edges["test"].size(1)} test pairs; device {device}, stores on {location}')
    loader = LinkNeighborLoader((fs, gs), [int(k) for k in args.num_neighbors.split(',')],
                                edge_label_index=(None, edges['train']), neg_sampling='binary',
                                batch_size=args.batch_size, shuffle=True)
    timer = StageTimer(device)
    timer.instrument(loader)  # sampling and gathering; compute below
    model = LAYERS[args.layers_from].GraphSAGE(dataset.num_features, args.hidden, args.layers).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, fused=device.type == 'cuda')  # one kernel per step
    step = training_step(model, opt, args)
    x_all, ei_all = train_data.x.to(device), train_data.edge_index.to(device)
    history: List[dict] = []
    bar = progress(range(1, args.epochs + 1), desc='link prediction', unit='epoch')
    for epoch in bar:
        model.train()
        start = time.perf_counter()
        total = torch.zeros((), device=device)
        for batch in loader:
            with timer.stage('compute'):
                total += step(batch)
        stages = timer.summary()  # (synchronises)
        seconds = time.perf_counter() - start
        row = {'epoch': epoch, 'loss': float(total) / len(loader), 'seconds': seconds, **stage_columns(stages),
               'valid_auc': evaluate(model, x_all, ei_all, edges['valid'], n, args.seed),
               'test_auc': evaluate(model, x_all, ei_all, edges['test'], n, args.seed + 1)}
        history.append(row)
        bar.set_postfix(loss=f"{row['loss']:.3f}", valid=f"{row['valid_auc']:.3f}")
        tqdm.write(f"epoch {epoch:3d}  loss {row['loss']:.4f}  valid AUC {row['valid_auc']:.4f}  test AUC "
                   f"{row['test_auc']:.4f}  ({seconds * 1e3:.0f} ms{format_stages(stages)})")
    best = max(history, key=lambda h: h['valid_auc'])
    median_s = sorted(h['seconds'] for h in history)[len(history) // 2]
    summary = {'best_epoch': best['epoch'], 'valid_auc': best['valid_auc'], 'test_auc': best['test_auc'],
               'median_epoch_s': median_s}
    save_results(history, args, Path(args.out), summary, {'valid_auc': 'valid', 'test_auc': 'test'}, 'ROC-AUC',
                 f'link prediction on {args.dataset}')
    print(final_line('test AUC', best['test_auc'], best['epoch'], best['valid_auc'], median_s), flush=True)
    return summary


if __name__ == '__main__':
    main()
