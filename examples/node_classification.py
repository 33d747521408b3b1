"""Node classification through pyg_accel's stores (the README's main example).

Trains a GNN on the embedded default graph (or a synthetic OGB-like graph, or real OGB
data under --root) with its features and topology held in pyg_accel's FeatureStore /
GraphStore: on the GPU when one is present, else on the CPU. The model is PyG's
GraphSAGE / GCN / GAT built from pyg_accel's drop-in convolutions (--layers-from pyg
builds it from PyG's own).

    python examples/node_classification.py                           # embedded default
    python examples/node_classification.py --dataset synthetic-products --epochs 20
    python examples/node_classification.py --dataset ogbn-products --root /data/ogb
    python examples/node_classification.py --mode full                # whole-graph training
    python examples/node_classification.py --dataset synthetic-papers100M --large --cache-fraction 0.2
        # papers100M's size (111 M nodes, 3.2 G edges): graph on the GPU, 57 GB of features in
        # pinned host memory behind a GPU cache of a fifth of the rows

--mode neighbor (default) trains on mini-batches from pyg_accel.loader.NeighborLoader
(PyG's NeighborLoader driving pyg_accel's sampler over the stores, the next batch
prepared while the current one trains; each layer computes only the nodes later layers
need, and on a GPU each step is replayed as a CUDA graph: --no-trim and --eager turn those
off); --mode full trains on the whole graph read from
the stores. --baseline pyg runs the same model and loop on stock PyG (its own loader and
layers) for comparison; scripts/accuracy_parity.py compares the two over seeds.
"""
from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning (set before torch loads OpenMP): on a busy
# CPU, spinning made these examples 5x slower (see docs/guide.md, 'On the CPU').
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

import argparse
import time
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F
import torch_geometric.nn.models as pyg_models
from tqdm import tqdm

import pyg_accel.nn.models as accel_models
from pyg_accel.data import from_data, presample_node_ids, rows_by_access, rows_by_degree
from pyg_accel.loader import NeighborLoader, StageTimer
from pyg_accel.datasets import load_dataset, synthetic_stores
from pyg_accel.training import TrainStep
from results import (accuracy_summary, add_dataset_arguments, default_workers, format_stages, prepare, progress,
                     report_accuracy, stage_columns, tuned_loader_options)

MODELS = {'sage': 'GraphSAGE', 'gcn': 'GCN', 'gat': 'GAT'}
LAYERS = {'pyg_accel': accel_models, 'pyg': pyg_models}  # where the model's convolutions come from


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_arguments(p)
    p.add_argument('--model', choices=sorted(MODELS), default='sage')
    p.add_argument('--layers-from', choices=sorted(LAYERS), default='pyg_accel',
                   help="pyg_accel's drop-in convolutions (default) or PyG's own, for comparison")
    p.add_argument('--baseline', choices=['none', 'pyg'], default='none',
                   help="'pyg': the same model and loop on stock PyG (its CPU sampler on the CPU Data, its layers; "
                        "needs pyg-lib or torch-sparse), tuned: --pyg-workers DataLoader workers, persistent, pinned")
    p.add_argument('--pyg-workers', type=int, default=default_workers(),
                   help=f"--baseline pyg: DataLoader workers of stock PyG's loader (default: the cores less two, "
                        f"here {default_workers()})")
    p.add_argument('--hidden', type=int, default=128)
    p.add_argument('--layers', type=int, default=2)
    p.add_argument('--dropout', type=float, default=0.3)
    p.add_argument('--lr', type=float, default=0.01)
    p.add_argument('--epochs', type=int, default=40)
    p.add_argument('--mode', choices=['full', 'neighbor'], default='neighbor')
    p.add_argument('--num-neighbors', default='15,10', help='fanout per hop for --mode neighbor')
    p.add_argument('--batch-size', type=int, default=1024)
    p.add_argument('--no-trim', action='store_true',
                   help="--mode neighbor: every layer computes every node of the batch. By default each layer "
                        "computes only the nodes later layers need (pyg_accel's models by themselves, the same seed "
                        "outputs; --layers-from pyg models through PyG's trim_to_layer, whose GCN normalises by "
                        "the trimmed degrees)")
    p.add_argument('--eager', action='store_true',
                   help='--mode neighbor: the plain PyG training loop (by default each step is replayed as a CUDA '
                        'graph on a GPU: pyg_accel.training.TrainStep)')
    p.add_argument('--no-pipeline', action='store_true',
                   help='sample the next batch only after the current one trained (default: overlap them)')
    p.add_argument('--amp', action='store_true',
                   help='mixed precision: forward and loss under torch.autocast in bfloat16 (the layers read bf16 '
                        'features with fp32 accumulation; parameters and optimizer stay fp32)')
    p.add_argument('--device', default='auto', help="'auto', 'cpu' or 'cuda[:N]'")
    p.add_argument('--location', default=None, help="store location: 'cuda', 'pinned' or 'cpu' (default: the device)")
    p.add_argument('--cache-fraction', type=float, default=None,
                   help='features in pinned host memory behind a GPU cache of this share of the rows '
                        '(graphs larger than the GPU); the hit rate is reported per epoch')
    p.add_argument('--cache-policy', choices=['degree', 'access'], default='degree',
                   help="rows to cache: highest degree first, or most often read by 16 pre-sampled batches")
    p.add_argument('--large', action='store_true',
                   help="generate the synthetic dataset straight into the stores (the graph as CSC, the features "
                        "written in blocks into their tier): for sizes whose edge list does not fit, such as "
                        "synthetic-papers100M at --scale 1; evaluation then samples mini-batches")
    p.add_argument('--eval', choices=['auto', 'full', 'sampled'], default='auto',
                   help="--mode neighbor: accuracy from whole-graph inference ('full'; the default) or from "
                        "sampled mini-batches of the evaluated nodes ('sampled'; the default with --large)")
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--out', default='runs/node_classification', help='folder for the metrics JSON and plot')
    args = p.parse_args(argv)
    if args.large and not args.dataset.startswith('synthetic-'):
        p.error('--large generates a synthetic preset: use --dataset synthetic-<preset>')
    if args.large and (args.mode == 'full' or args.baseline == 'pyg' or args.eval == 'full'):
        p.error('--large holds no edge_index: it trains with --mode neighbor on pyg_accel, evaluated on samples')
    if args.eval == 'auto':
        args.eval = 'sampled' if args.large else 'full'
    return args


def default_locations(device: torch.device):
    """(feature location, graph location): the GPU when training there (mini-batches are
    then sampled by pyg_accel's CUDA sampler and gathered on the GPU), else the CPU."""
    if device.type != 'cuda':
        return 'cpu', 'cpu'
    return 'cuda', 'cuda'


def build_model(args, num_features: int, num_classes: int) -> torch.nn.Module:
    kwargs = {'heads': 4} if args.model == 'gat' else {}
    if args.layers_from == 'pyg_accel':
        kwargs['auto_trim'] = not args.no_trim
    model_cls = getattr(LAYERS[args.layers_from], MODELS[args.model])
    return model_cls(num_features, args.hidden, args.layers, num_classes, dropout=args.dropout, **kwargs)


@torch.no_grad()
def accuracy(logits: torch.Tensor, y: torch.Tensor, split: Dict[str, torch.Tensor]) -> Dict[str, float]:
    pred = logits.argmax(-1)
    return {k: float((pred[idx] == y[idx]).float().mean()) if idx.numel() else float('nan')
            for k, idx in split.items()}


def full_graph_evaluator(fs, gs, split, device) -> Callable[[torch.nn.Module], Dict[str, float]]:
    """Accuracy on every split from one whole-graph forward pass (x and the graph read
    from the stores onto ``device``)."""
    x_all, y_all, edge_index = whole_graph(fs, gs, device, x_to_device=False)
    split = {k: v.to(device) for k, v in split.items()}

    @torch.no_grad()
    def evaluate(model):  # (x copied to the device only while evaluating: it may live in host memory)
        return accuracy(model(x_all.to(device), edge_index), y_all, split)
    return evaluate


def whole_graph(fs, gs, device, x_to_device: bool = True):
    """``(x, y, edge_index)`` of the whole graph read from the stores, on ``device`` (``x``
    where its store holds it unless ``x_to_device``)."""
    x = fs.get_tensor(group_name=None, attr_name='x', index=None)
    y = fs.get_tensor(group_name=None, attr_name='y', index=None).to(device)
    row, col = gs.get_edge_index(edge_type=None, layout='coo', is_sorted=True)
    return x.to(device) if x_to_device else x, y, torch.stack([row, col]).to(device)


def sampled_evaluator(fs, gs, split, device, fanout: List[int], batch_size: int = 4096,
                      max_train: int = 1 << 16) -> Callable[[torch.nn.Module], Dict[str, float]]:
    """Accuracy from sampled mini-batches of each split's nodes (as the model trains:
    same fanouts), for graphs too large for a whole-graph pass; the training accuracy
    on a fixed random subset of at most ``max_train`` training nodes."""
    train = split['train']
    if train.numel() > max_train:
        pick = torch.randperm(train.numel(), generator=torch.Generator().manual_seed(0))[:max_train]
        train = train[pick.to(train.device)].sort().values
    parts = {'train': train, 'valid': split['valid'], 'test': split['test']}
    loaders = {k: NeighborLoader((fs, gs), num_neighbors=fanout, input_nodes=idx, batch_size=batch_size)
               for k, idx in parts.items() if idx.numel()}

    @torch.no_grad()
    def evaluate(model):
        acc = {k: float('nan') for k in parts}
        for k, loader in loaders.items():
            correct, total = torch.zeros((), device=device), 0
            for batch in loader:
                batch = batch.to(device)
                out = model(batch.x, batch.edge_index)[:batch.batch_size]
                correct += (out.argmax(-1) == batch.y[:batch.batch_size]).sum()
                total += batch.batch_size
            acc[k] = float(correct) / total
        return acc
    return evaluate


def mixed_precision(device: torch.device, enabled: bool) -> torch.autocast:
    """``--amp``: bfloat16 autocast on ``device`` (bf16 needs no loss scaling), else a no-op."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


def train_full(model, opt, fs, gs, split, device, epochs, bar, amp: bool = False) -> List[dict]:
    """Whole-graph training with x, y and edge_index read from the stores
    (``amp``: the forward and loss in bfloat16 autocast)."""
    x, y, edge_index = whole_graph(fs, gs, device)
    split = {k: v.to(device) for k, v in split.items()}
    history, timer = [], StageTimer(device)
    for epoch in bar:
        start = time.perf_counter()
        model.train()
        with timer.stage('compute'):  # (no sampling or gathering: the whole graph is on the device)
            opt.zero_grad()
            with mixed_precision(device, amp):
                loss = F.cross_entropy(model(x, edge_index)[split['train']], y[split['train']])
            loss.backward()
            opt.step()
        stages = timer.summary()
        model.eval()
        acc = accuracy(model(x, edge_index), y, split)
        history.append(_record(epoch, float(loss.detach()), acc, start, device, bar, stages))
    return history


def train_neighbor(model, opt, fs, gs, split, device, epochs, bar, args, data=None) -> List[dict]:
    """Mini-batches from pyg_accel.loader.NeighborLoader (PyG's loader, our sampler), or
    with ``--baseline pyg`` from stock PyG's NeighborLoader on the CPU ``data``;
    evaluated as ``--eval`` says."""
    fanout = [int(v) for v in args.num_neighbors.split(',')]
    if args.baseline == 'pyg':
        import torch_geometric.loader
        import torch_geometric.typing
        if not (torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE):
            raise SystemExit("--baseline pyg: stock PyG's NeighborLoader needs pyg-lib or torch-sparse installed")
        loader = torch_geometric.loader.NeighborLoader(data, num_neighbors=fanout, input_nodes=split['train'].cpu(),
                                                       batch_size=args.batch_size, shuffle=True,
                                                       **tuned_loader_options(args.pyg_workers))
    else:
        loader = NeighborLoader((fs, gs), num_neighbors=fanout, input_nodes=split['train'],
                                batch_size=args.batch_size, shuffle=True, pipeline=not args.no_pipeline)
    timer = StageTimer(device)
    if loader.num_workers == 0:  # (a tuned stock PyG loader samples and gathers in its worker processes)
        timer.instrument(loader)  # sampling and gathering; compute below
    evaluate = sampled_evaluator(fs, gs, split, device, fanout) if args.eval == 'sampled' else \
        full_graph_evaluator(fs, gs, split, device)
    step = training_step(model, opt, device, args)
    history = []
    for epoch in bar:
        start = time.perf_counter()
        model.train()
        total = torch.zeros((), device=device)  # summed on the device: no host sync per batch
        for batch in loader:
            with timer.stage('gathering'):
                batch = batch.to(device)  # (stock PyG's CPU batches: the copy to the GPU)
            with timer.stage('compute'):
                total += step(batch) * batch.batch_size
        stages = timer.summary()
        model.eval()
        acc = evaluate(model)
        row = _record(epoch, float(total) / split['train'].numel(), acc, start, device, bar, stages)
        cache = fs.row_cache('x')
        if cache is not None:  # share of the epoch's feature reads served from the GPU cache
            row['cache_hit_rate'] = cache.hit_rate()
            tqdm.write(f'           feature cache hit rate {row["cache_hit_rate"]:.1%}')
            cache.reset_stats()
        history.append(row)
    return history


def training_step(model, opt, device, args) -> Callable:
    """``step(batch) -> loss``: forward, loss, backward and optimizer step. On our loader's
    batches, a :class:`pyg_accel.training.TrainStep` (replayed as a CUDA graph on a GPU)
    unless ``--eager``; otherwise the plain PyG loop."""
    if args.baseline == 'none' and not args.eager:
        return TrainStep(model, opt, amp_dtype=torch.bfloat16 if args.amp else None)

    def step(batch):
        opt.zero_grad()
        with mixed_precision(device, args.amp):
            out = model(batch.x, batch.edge_index, **trim_arguments(model, batch, args.no_trim))[:batch.batch_size]
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def trim_arguments(model, batch, no_trim: bool) -> Dict[str, List[int]]:
    """The per-hop counts PyG's models trim by (none from stock PyG's torch-sparse sampler;
    pyg_accel's models find them on the batch themselves)."""
    if no_trim or getattr(model, 'auto_trim', None) is not None or getattr(batch, 'num_sampled_nodes', None) is None:
        return {}
    return dict(num_sampled_nodes_per_hop=batch.num_sampled_nodes, num_sampled_edges_per_hop=batch.num_sampled_edges)


def _record(epoch, loss, acc, start, device, bar, stages: Optional[Dict[str, float]] = None) -> dict:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
    row = {'epoch': epoch, 'loss': loss, **{f'{k}_acc': v for k, v in acc.items()},
           'seconds': time.perf_counter() - start, **stage_columns(stages or {})}
    bar.set_postfix(loss=f'{loss:.3f}', valid=f"{acc['valid']:.3f}", test=f"{acc['test']:.3f}")
    tqdm.write(f"epoch {epoch:3d}  loss {loss:.4f}  train {acc['train']:.4f}  valid {acc['valid']:.4f}  "
               f"test {acc['test']:.4f}  ({row['seconds'] * 1e3:.0f} ms{format_stages(stages or {})})")
    return row


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.baseline == 'pyg':
        args.layers_from = 'pyg'
    device = prepare(args.device)  # (the C++/CUDA ops built first: never inside an epoch)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    feature_location, graph_location = default_locations(device)
    if args.cache_fraction is not None and device.type == 'cuda':
        feature_location = 'pinned'  # the cache's home: host memory read by the GPU
    feature_location, graph_location = args.location or feature_location, args.location or graph_location
    if args.large:  # generated into the stores: no Data, no edge_index
        dataset = synthetic_stores(args.dataset[len('synthetic-'):], scale=args.scale, seed=args.seed, device=device,
                                   feature_location=feature_location, graph_location=graph_location, progress=True)
        fs, gs, data, num_nodes = dataset.feature_store, dataset.graph_store, None, dataset.num_nodes
    else:
        dataset = load_dataset(args.dataset, root=args.root, scale=args.scale, seed=args.seed, device=device)
        fs, gs = from_data(dataset.data, location=feature_location, graph_location=graph_location)
        data, num_nodes = dataset.data, dataset.data.num_nodes
    load_s = time.perf_counter() - start
    cache = None
    if args.cache_fraction is not None:
        num_rows = int(args.cache_fraction * num_nodes)
        if args.cache_policy == 'access':  # measured: what the sampler reads, from training seeds
            presampler = NeighborLoader((fs, gs), num_neighbors=[int(k) for k in args.num_neighbors.split(',')],
                                        input_nodes=dataset.split['train'], batch_size=args.batch_size)
            ranked = rows_by_access(presample_node_ids(presampler, num_batches=16), num_nodes)
        else:
            ranked = rows_by_degree(gs)
        cache = fs.cache_rows('x', rows=ranked, num_rows=num_rows)
    print(f'{dataset}\ndevice {device}; features: {fs.location}, graph: {gs.location}; loaded in {load_s:.1f} s'
          + (f'; {cache}' if cache is not None else ''))

    model = build_model(args, dataset.num_features, dataset.num_classes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, fused=device.type == 'cuda')  # one kernel per step
    bar = progress(range(1, args.epochs + 1), desc=f'{args.model}/{args.mode}', unit='epoch')
    train = (lambda *a: train_full(*a, amp=args.amp)) if args.mode == 'full' else \
        lambda *a: train_neighbor(*a, args, data=data.cpu() if args.baseline == 'pyg' else None)  # noqa: E731
    history = train(model, opt, fs, gs, dataset.split, device, args.epochs, bar)

    summary = accuracy_summary(history, dataset=dataset.name, device=str(device))
    report_accuracy(history, args, summary, f'{args.model} on {args.dataset}')
    return summary


if __name__ == '__main__':
    main()
