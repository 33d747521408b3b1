"""Data-parallel GraphSAGE on several GPUs of one host, features sharded across them
(or, with ``--features replicated``, a whole copy on every GPU).

One process per GPU (``torchrun``). Every process loads the same dataset; the node
features go into a ``'sharded'`` FeatureStore (each GPU holds 1/P of the rows and reads
the others' rows in place over NVLink, WholeGraph-style), the graph is on every GPU for
pyg_accel's sampler, each process trains on its share of the training nodes, and the
gradients are averaged over the processes as DistributedDataParallel averages them: by
pyg_accel.training.TrainStep, each step replayed as a CUDA graph on GPUs (--eager: the
plain loop on a DistributedDataParallel model).
Without GPUs the processes run on the CPU (gloo; shards in shared memory). Across
several hosts (``torchrun --nnodes N``) each host's GPUs read their rows in place and
fetch the other hosts' rows through torch.distributed (``PYG_ACCEL_RANKS_PER_HOST=2``
declares virtual hosts of 2 processes on one machine, to try that path).

    torchrun --nproc_per_node 2 examples/multi_gpu.py                       # embedded default
    torchrun --nproc_per_node 2 examples/multi_gpu.py --dataset synthetic-products --epochs 5
    torchrun --nproc_per_node 2 examples/multi_gpu.py --graph shared      # one host copy of the graph
    torchrun --nproc_per_node 4 examples/multi_gpu.py --dataset synthetic-products --features replicated
                                                                          # features that fit every GPU
    torchrun --nproc_per_node 4 examples/multi_gpu.py --dataset synthetic-papers100M --large --bf16 \
        --graph shared                                                    # 111 M nodes, no process holds all of x
"""
from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning (set before torch loads OpenMP): on a busy
# CPU, spinning made these examples 5x slower (see docs/guide.md, 'On the CPU').
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

import argparse
import time
from typing import Dict

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

import pyg_accel.nn.models as accel_models
from pyg_accel.build import ensure_built
from pyg_accel.data import HostLayout, from_data
from pyg_accel.datasets import load_dataset, synthetic_stores
from pyg_accel.distributed import setup, share_graph_store, teardown
from pyg_accel.loader import NeighborLoader
from pyg_accel.training import TrainStep
from results import accuracy_summary, add_dataset_arguments, progress, report_accuracy


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_arguments(p)
    p.add_argument('--hidden', type=int, default=128)
    p.add_argument('--layers', type=int, default=2)
    p.add_argument('--dropout', type=float, default=0.3)
    p.add_argument('--lr', type=float, default=0.01)
    p.add_argument('--epochs', type=int, default=20)
    p.add_argument('--num-neighbors', default='15,10', help='fanout per hop')
    p.add_argument('--batch-size', type=int, default=1024, help='seeds per batch and process')
    p.add_argument('--graph', choices=['device', 'shared'], default='device',
                   help="the graph on every GPU, or one copy in pinned host memory that every GPU's sampler "
                        "reads in place (graphs larger than a GPU)")
    p.add_argument('--features', choices=['sharded', 'replicated'], default='sharded',
                   help="the feature rows split across the GPUs and read in place over NVLink (and across hosts "
                        "through torch.distributed), or a whole copy on every GPU: no peer reads, for features "
                        "that fit each GPU (products-size: 1 GB)")
    p.add_argument('--no-trim', action='store_true',
                   help='every layer computes every node of the batch (by default each computes only the nodes '
                        'later layers need: the same seed outputs, less work)')
    p.add_argument('--eager', action='store_true',
                   help='the plain PyG training loop (by default each step, the all-reduce included, is replayed '
                        'as a CUDA graph on a GPU: pyg_accel.training.TrainStep)')
    p.add_argument('--tf32', action='store_true', help='TF32 tensor cores for the fp32 matrix products')
    p.add_argument('--bf16', action='store_true',
                   help='features stored in bfloat16 (half the bytes gathered and held) and the forward and loss '
                        'under bfloat16 autocast (fp32 accumulation; parameters and optimizer stay fp32)')
    p.add_argument('--large', action='store_true',
                   help="generate the synthetic preset straight into the stores, each process keeping only its "
                        "block of the features (for sizes such as synthetic-papers100M, whose x and edge list no "
                        "process should hold whole)")
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--out', default='runs/multi_gpu', help='folder for the metrics JSON and plot (rank 0)')
    args = p.parse_args(argv)
    if args.large and args.features == 'replicated':
        p.error('--large keeps each process to its block of the features: use --features sharded')
    if args.large and not args.dataset.startswith('synthetic-'):
        p.error('--large generates a synthetic preset: use --dataset synthetic-<preset>')
    return args


def share(nodes: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """This rank's equal share of ``nodes`` (the remainder dropped, so that every rank
    runs the same number of batches, as DistributedDataParallel needs)."""
    per_rank = nodes.numel() // world
    return nodes[rank * per_rank:(rank + 1) * per_rank]


@torch.no_grad()
def evaluate(model, fs, gs, split: Dict[str, torch.Tensor], fanout, batch_size, rank, world, device, amp=False):
    """Accuracy per split: each rank classifies its share of the nodes (sampled
    neighbourhoods, as in training) and the counts are summed over the ranks. Every rank
    runs as many batches (its share padded with repeats, which are not counted): a
    store sharded across hosts reads collectively."""
    model.eval()
    counts = torch.zeros(len(split), 2, device=device)  # correct, total
    for i, nodes in enumerate(split.values()):
        nodes = nodes.cpu()
        if not nodes.numel():
            continue
        mine, per_rank = nodes[rank::world], -(-nodes.numel() // world)
        padded = torch.cat([mine, nodes[:per_rank - mine.numel()]])
        seen = 0
        for batch in NeighborLoader((fs, gs), fanout, input_nodes=padded, batch_size=4 * batch_size):
            real = max(0, min(batch.batch_size, mine.numel() - seen))  # (the padding comes last)
            seen += batch.batch_size
            with autocast(device, amp):
                pred = model(batch.x, batch.edge_index)[:real].argmax(-1)
            counts[i, 0] += (pred == batch.y[:real]).sum()
            counts[i, 1] += real
    dist.all_reduce(counts)
    return {name: float(counts[i, 0] / counts[i, 1].clamp(min=1)) for i, name in enumerate(split)}


def main(argv=None) -> dict:
    args = parse_args(argv)
    rank, world, device = setup()
    ensure_built(verbose=rank == 0)  # (the C++/CUDA ops built first: never inside an epoch)
    if not dist.is_initialized():
        raise SystemExit('run under torchrun (e.g. torchrun --nproc_per_node 2 examples/multi_gpu.py)')
    summary = train(args, rank, world, device)
    # (The model, its DDP reducer and the stores are gone with train's frame: destroying
    # the process group while DDP still held it deadlocked at exit, gloo's destructor
    # joining a worker thread that waited for the GIL to free a tensor.)
    teardown()  # (every process lets go of its peers' shards before any exits)
    return summary


def train(args, rank: int, world: int, device: torch.device) -> dict:
    """Loads the data, trains and evaluates on this rank; rank 0 prints and saves."""
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    host = 'pinned' if device.type == 'cuda' else 'cpu'
    feature_dtype = torch.bfloat16 if args.bf16 else None
    if args.large:  # collective: each rank generates the same graph and keeps its block of x (no edge_index)
        dataset = synthetic_stores(args.dataset[len('synthetic-'):], scale=args.scale, seed=args.seed, device=device,
                                   feature_location='sharded', graph_location=host if args.graph == 'shared' else device,
                                   float_dtype=feature_dtype, progress=rank == 0)
        fs, gs = dataset.feature_store, dataset.graph_store
    else:  # the same dataset on every rank (synthetic graphs are generated on this GPU: fast, and seeded)
        dataset = load_dataset(args.dataset, root=args.root, scale=args.scale, seed=args.seed, device=device)
        # collective when sharded: each rank keeps its block of the feature rows
        location = 'sharded' if args.features == 'sharded' else device
        fs, gs = from_data(dataset.data, location=location, graph_location=host if args.graph == 'shared' else None,
                           float_dtype=feature_dtype)
    if args.graph == 'shared':  # collective: each host's first process's graph in one host copy, the rest dropped
        share_graph_store(gs, group=(fs.hosts or HostLayout.of()).host_group)
    if rank == 0:
        print(f'{dataset}\n{world} processes on {device.type}; features: {fs.location} '
              f"({fs.tier('x')}), graph: {gs.location}; "
              f'loaded in {time.perf_counter() - start:.1f} s', flush=True)
    fanout = [int(v) for v in args.num_neighbors.split(',')]
    train = dataset.split['train'].cpu()
    train_nodes = share(train[torch.randperm(train.numel())], rank, world)  # (the same permutation on every rank)
    loader = NeighborLoader((fs, gs), fanout, input_nodes=train_nodes, batch_size=args.batch_size, shuffle=True)
    model = accel_models.GraphSAGE(dataset.num_features, args.hidden, args.layers, dataset.num_classes,
                                   dropout=args.dropout, auto_trim=not args.no_trim).to(device)
    if args.eager:  # DDP averages the gradients (its hooks cannot be captured)
        model = DistributedDataParallel(model, device_ids=[device] if device.type == 'cuda' else None)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, fused=device.type == 'cuda')  # one kernel per step
    if args.tf32:
        torch.set_float32_matmul_precision('high')
    step = training_step(model, opt, args.eager, torch.bfloat16 if args.bf16 else None)
    history = []
    bar = progress(range(1, args.epochs + 1), desc=f'rank {rank}', unit='epoch', disable=rank != 0)
    for epoch in bar:
        epoch_start = time.perf_counter()
        model.train()
        total = torch.zeros((), device=device)
        for batch in loader:
            total += step(batch) * batch.batch_size
        dist.all_reduce(total)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)  # (the epoch's last kernels inside its time)
        seconds = time.perf_counter() - epoch_start
        acc = evaluate(model, fs, gs, dataset.split, fanout, args.batch_size, rank, world, device, args.bf16)
        row = {'epoch': epoch, 'loss': float(total) / (train_nodes.numel() * world), 'seconds': seconds,
               **{f'{k}_acc': v for k, v in acc.items()}}
        history.append(row)
        if rank == 0:
            tqdm.write(f"epoch {epoch:3d}  loss {row['loss']:.4f}  train {acc['train']:.4f}  "
                       f"valid {acc['valid']:.4f}  test {acc['test']:.4f}  ({seconds * 1e3:.0f} ms)")
    summary = accuracy_summary(history, dataset=dataset.name, processes=world, device=device.type)
    if rank == 0:
        report_accuracy(history, args, summary, f'GraphSAGE on {args.dataset}, {world} processes',
                        f' on {world} processes')
    return summary


def autocast(device: torch.device, enabled: bool):
    """bfloat16 autocast on ``device`` when ``enabled``."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


def training_step(model, opt, eager: bool, amp_dtype=None):
    """``step(batch) -> loss`` (no host sync): a :class:`pyg_accel.training.TrainStep`
    over the process group (captured on GPUs, the gradients averaged as DDP averages
    them), or with ``eager`` the plain PyG loop on the DDP model; the forward and loss
    under autocast in ``amp_dtype`` if given."""
    if not eager:
        return TrainStep(model, opt, process_group=dist.group.WORLD, amp_dtype=amp_dtype)

    def step(batch):
        opt.zero_grad()
        with torch.autocast(batch.x.device.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
            loss = F.cross_entropy(model(batch.x, batch.edge_index)[:batch.batch_size], batch.y[:batch.batch_size])
        loss.backward()
        opt.step()
        return loss.detach()
    return step


if __name__ == '__main__':
    main()
