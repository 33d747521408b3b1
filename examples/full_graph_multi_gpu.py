"""Full-graph GCN / GraphSAGE / GAT across the GPUs of one host (1-D partitioning by node blocks).

One process per GPU (``torchrun``). Every process loads the same dataset and, with
``--reorder cluster`` (the default), renumbers its nodes the same way (label-propagation
clusters numbered contiguously, so that neighbours fall in the same block; or ``rcm``,
reverse Cuthill-McKee). Each process then owns a contiguous block
of nodes balanced by edges: their features, labels and in-edges. Before every layer the
rows of other blocks that its edges read (its halo) arrive by one all-to-all, and their
gradients go back the same way (the input's halo rows arrive once, before training; its
layer then exchanges only the dropout mask, a bit per entry). For GCN and GraphSAGE the exchange runs while the edges
between a block's own rows are aggregated (``--no-overlap``: before each layer, as for
GAT). DistributedDataParallel averages the weight gradients,
and the loss is scaled so that every step is exactly the whole graph's full-batch step.
Without ``torchrun`` it trains on one device; without GPUs, on the CPU (gloo).

    python examples/full_graph_multi_gpu.py                                   # one device
    torchrun --nproc_per_node 2 examples/full_graph_multi_gpu.py --model gcn
    torchrun --nproc_per_node 2 examples/full_graph_multi_gpu.py --dataset synthetic-products --epochs 20
    torchrun --nproc_per_node 4 examples/full_graph_multi_gpu.py --exchange-dtype bf16   # half the bytes
"""
from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning (set before torch loads OpenMP): on a busy
# CPU, spinning made these examples 5x slower (see docs/guide.md, 'On the CPU').
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

import argparse
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from pyg_accel.build import ensure_built
from pyg_accel.datasets import load_dataset
from pyg_accel.distributed import EXCHANGE_DTYPES, ExchangeTimer, PartitionedGNN, partition_data, setup, teardown
from results import accuracy_summary, add_dataset_arguments, format_stages, progress, report_accuracy, stage_columns


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_arguments(p)
    p.add_argument('--model', choices=['gcn', 'sage', 'gat'], default='gcn')
    p.add_argument('--hidden', type=int, default=128)
    p.add_argument('--layers', type=int, default=2)
    p.add_argument('--heads', type=int, default=4, help='attention heads of the hidden GAT layers')
    p.add_argument('--dropout', type=float, default=0.5)
    p.add_argument('--lr', type=float, default=0.01)
    p.add_argument('--epochs', type=int, default=100)
    p.add_argument('--reorder', choices=['cluster', 'rcm', 'degree', 'none'], default='cluster',
                   help='renumber the nodes before partitioning (cluster, rcm: neighbours in the same block)')
    p.add_argument('--no-overlap', action='store_true',
                   help='exchange the halo before each layer instead of behind the local edges (GCN, SAGE)')
    p.add_argument('--exchange-dtype', choices=sorted(EXCHANGE_DTYPES), default='fp32',
                   help='the dtype halo rows and their gradients travel in between processes (bf16, fp16: half '
                        "the bytes of fp32's, each row rounded once on the way)")
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--out', default='runs/full_graph_multi_gpu', help='folder for the metrics JSON and plot (rank 0)')
    return p.parse_args(argv)


@torch.no_grad()
def evaluate(model, x, local, world: int, device) -> dict:
    """Accuracy per split over the whole graph: each process counts its own nodes (``x``:
    the model's input, the block's rows and its halo's)."""
    model.eval()
    pred = model(x).argmax(-1)
    counts = torch.stack([torch.stack([((pred == local.y) & local[f'{k}_mask']).sum(), local[f'{k}_mask'].sum()])
                          for k in ('train', 'valid', 'test')]).double()
    if world > 1:
        dist.all_reduce(counts)
    return {k: float(counts[i, 0] / counts[i, 1].clamp(min=1)) for i, k in enumerate(('train', 'valid', 'test'))}


def main(argv=None) -> dict:
    args = parse_args(argv)
    rank, world, device = setup()
    ensure_built(verbose=rank == 0)  # (the C++/CUDA ops built first: never inside an epoch)
    summary = train(args, rank, world, device)
    teardown()  # (after train's frame, with the DDP model, is gone)
    return summary


def train(args, rank: int, world: int, device: torch.device) -> dict:
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    dataset = load_dataset(args.dataset, root=args.root, scale=args.scale, seed=args.seed, device=device)
    data = dataset.data
    for name, index in dataset.split.items():
        mask = torch.zeros(data.num_nodes, dtype=torch.bool, device=index.device)
        mask[index] = True
        data[f'{name}_mask'] = mask
    part, local = partition_data(data, reorder=None if args.reorder == 'none' else args.reorder, device=device)
    x = part.exchange(local.x)  # the input's halo rows, once: its layer then exchanges nothing (but a dropout mask)
    part.exchange_dtype = EXCHANGE_DTYPES[args.exchange_dtype]  # (after the input's exchange: exact)
    part.timer = ExchangeTimer()
    del data
    halo = torch.tensor([part.num_halo, part.num_local, part.edge_index.size(1)], device=device)
    totals = halo.clone()
    if world > 1:
        dist.all_reduce(totals)
    if rank == 0:
        print(f'{dataset}\n{world} process(es) on {device.type}; nodes renumbered by {args.reorder}; '
              f'halo rows {int(totals[0])} ({float(totals[0]) / float(totals[1]):.1%} of the nodes), '
              f'prepared in {time.perf_counter() - start:.1f} s', flush=True)
    model = PartitionedGNN(args.model, part, dataset.num_features, args.hidden, dataset.num_classes, args.layers,
                           args.dropout, args.heads, overlap=not args.no_overlap).to(device)
    if world > 1:
        model = DistributedDataParallel(model, device_ids=[device] if device.type == 'cuda' else None)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, fused=device.type == 'cuda')  # one kernel per step
    count = torch.tensor(float(local.train_mask.sum()), device=device)
    if world > 1:
        dist.all_reduce(count)
    train_total = float(count)  # training nodes of the whole graph
    history = []
    bar = progress(range(1, args.epochs + 1), desc=f'{args.model} full graph', unit='epoch', disable=rank != 0)
    for epoch in bar:
        epoch_start = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = model(x)
        # the whole graph's mean loss: DDP averages over the processes, hence the * world
        loss = F.cross_entropy(out[local.train_mask], local.y[local.train_mask], reduction='sum') * (
            world / train_total)
        loss.backward()
        opt.step()
        total = loss.detach() / world
        if world > 1:
            dist.all_reduce(total)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - epoch_start
        exchange = part.timer.seconds()
        stages = {'exchange': exchange, 'compute': max(seconds - exchange, 0.0)}
        acc = evaluate(model, x, local, world, device)
        part.timer.seconds()  # (the evaluation's exchanges are not the epoch's)
        row = {'epoch': epoch, 'loss': float(total), 'seconds': seconds, **stage_columns(stages),
               **{f'{k}_acc': v for k, v in acc.items()}}
        history.append(row)
        if rank == 0 and (epoch % 10 == 0 or epoch == 1 or epoch == args.epochs):
            tqdm.write(f"epoch {epoch:3d}  loss {row['loss']:.4f}  train {acc['train']:.4f}  "
                       f"valid {acc['valid']:.4f}  test {acc['test']:.4f}  ({seconds * 1e3:.1f} ms"
                       f"{format_stages(stages)})")
    summary = accuracy_summary(history, dataset=dataset.name, model=args.model, processes=world,
                               device=device.type, reorder=args.reorder, halo_rows=int(totals[0]))
    if rank == 0:
        report_accuracy(history, args, summary, f'full-graph {args.model.upper()} on {args.dataset}, '
                        f'{world} process(es)', f' on {world} process(es)')
    return summary


if __name__ == '__main__':
    main()
