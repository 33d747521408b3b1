"""Full-graph GCN training on one GPU and across the GPUs of one host (1-D
partitioning by node blocks), with and without renumbering the nodes for locality, against stock PyG.

One process per GPU (``torchrun``); every process generates the same synthetic graph.
Per configuration: a 3-layer GCN (hidden 256) trained full-batch with Adam; the median
epoch (forward, backward, step) over ``--epochs`` epochs after warm-up, the part of it
spent in halo exchanges (CUDA events), the halo (rows a block reads from other blocks,
summed over blocks, as a share of the nodes) and the edges cut by the partition.

* ``pyg``: stock PyG's ``GCNConv`` (``cached=True``) on a ``torch.sparse`` CSR adjacency
  (cuSPARSE SpMM), on one GPU: the full-graph path PyG offers (its edge-list path builds
  an ``E x 256`` message tensor, 63 GB at products size);
* ``ours``: :class:`pyg_accel.distributed.PartitionedGNN` on 1 GPU and on all of them,
  node order as generated (``none``: ids carry no locality), by label-propagation
  clusters (``cluster``) or by reverse Cuthill-McKee (``rcm``); on several GPUs with the
  halo exchange before each layer (``ours``) and hidden behind the local edges'
  aggregation (``ours, overlapped``; :class:`pyg_accel.distributed.HaloGraph`). There
  "exchange ms" is what the compute stream waits for the exchanges, not their duration.
  The input's halo rows are exchanged once before training (``--input-halo each-epoch``:
  by the first layer every epoch, as before). ``--exchange-dtypes fp32 bf16`` adds each
  multi-GPU configuration with the halo rows
  and their gradients travelling in bfloat16 (half the bytes; config "..., bf16 halo").

    torchrun --nproc_per_node 2 benchmarks/full_graph.py --out bench-out
    python benchmarks/full_graph.py --preset small --device cpu --epochs 2      # smoke test
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_graph_arguments, environment, print_table, pyplot, save_figure, save_json, sync  # noqa: E402

from pyg_accel.data import node_order, reorder_data  # noqa: E402
from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.distributed import (EXCHANGE_DTYPES, ExchangeTimer, PartitionedGNN, new_exchange_group,  # noqa: E402
                                   partition_graph, setup)


def median_epoch(step, device, epochs: int, warmup: int = 3, timer: ExchangeTimer = None) -> Dict[str, float]:
    """Median ms of ``step()`` (one epoch) and of its exchanges."""
    for _ in range(warmup):
        step()
    sync(device)
    if timer is not None:
        timer.seconds()
    times, exchanges = [], []
    for _ in range(epochs):
        start = time.perf_counter()
        step()
        sync(device)
        times.append((time.perf_counter() - start) * 1e3)
        exchanges.append(timer.seconds() * 1e3 if timer is not None else 0.0)
    return {'epoch ms': statistics.median(times), 'exchange ms': statistics.median(exchanges)}


def pyg_epoch(data, train, args, device):
    """Stock PyG: GCNConv layers on a torch.sparse CSR adjacency (rows = destinations)."""
    from torch_geometric.utils import to_torch_csr_tensor
    n = data.num_nodes
    adj_t = to_torch_csr_tensor(data.edge_index.flip(0), size=(n, n))
    torch.manual_seed(0)
    dims = [data.num_features] + [args.hidden] * (args.layers - 1) + [int(data.y.max()) + 1]
    convs = torch.nn.ModuleList(pyg_nn.GCNConv(a, b, cached=True) for a, b in zip(dims, dims[1:])).to(device)
    opt = torch.optim.Adam(convs.parameters(), lr=0.01, fused=device.type == 'cuda')

    def step():
        opt.zero_grad()
        x = data.x
        for i, conv in enumerate(convs):
            x = conv(x, adj_t)
            x = x.relu() if i < len(convs) - 1 else x
        F.cross_entropy(x[train], data.y[train]).backward()
        opt.step()
    return step, None


def ours_epoch(data, train_mask, part, args, device, world, overlap):
    """PartitionedGNN on this process's block (DDP over several processes)."""
    torch.manual_seed(0)
    part.timer = ExchangeTimer()
    model = PartitionedGNN('gcn', part, data.num_features, args.hidden, int(data.y.max()) + 1, args.layers,
                           overlap=overlap).to(device)
    if world > 1:
        model = DistributedDataParallel(model, device_ids=[device] if device.type == 'cuda' else None)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, fused=device.type == 'cuda')
    x, y, mask = part.local(data.x), part.local(data.y), part.local(train_mask)
    if args.input_halo == 'once' and world > 1:  # the input's halo rows before training, exactly
        wire, part.exchange_dtype = part.exchange_dtype, None
        x = part.exchange(x)
        part.exchange_dtype = wire
    total = float(train_mask.sum())

    def step():
        opt.zero_grad()
        out = model(x)
        (F.cross_entropy(out[mask], y[mask], reduction='sum') * (world / total)).backward()
        opt.step()
    return step, part.timer


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(p)
    p.add_argument('--hidden', type=int, default=256)
    p.add_argument('--layers', type=int, default=3)
    p.add_argument('--epochs', type=int, default=10)
    p.add_argument('--orders', nargs='*', default=['none', 'cluster', 'rcm'])
    p.add_argument('--overlap', nargs='*', choices=['on', 'off'], default=['on', 'off'],
                   help='halo exchange hidden behind the local edges (HaloGraph) or before each layer')
    p.add_argument('--exchange-dtypes', nargs='*', choices=sorted(EXCHANGE_DTYPES), default=['fp32'],
                   help='the dtypes halo rows travel in, each a configuration (several GPUs)')
    p.add_argument('--input-halo', choices=['once', 'each-epoch'], default='once',
                   help="the input's halo rows exchanged once before training (the first layer then exchanges "
                        'nothing), or by the first layer every epoch')
    p.add_argument('--no-pyg', action='store_true', help="skip stock PyG's run")
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    rank, world, device = setup()
    if device.type != torch.device(args.device).type:
        device = torch.device(args.device)
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device)  # the same graph on every rank
    data = dataset.data
    train_mask = torch.zeros(data.num_nodes, dtype=torch.bool, device=device)
    train_mask[dataset.split['train'].to(device)] = True
    data.train_mask = train_mask
    n = data.num_nodes
    if rank == 0:
        print(f'{dataset}; GCN {args.layers} x {args.hidden}, full graph, {world} process(es)', flush=True)
    rows: List[dict] = []
    widths = sorted({1, world})
    group = new_exchange_group()  # (not shared with DDP)
    if rank == 0 and not args.no_pyg:
        try:
            step, _ = pyg_epoch(data, dataset.split['train'].to(device), args, device)
            rows.append({'config': 'pyg (torch.sparse CSR)', 'GPUs': 1, 'order': 'none',
                         **median_epoch(step, device, args.epochs)})
        except torch.OutOfMemoryError:
            rows.append({'config': 'pyg (torch.sparse CSR)', 'GPUs': 1, 'order': 'none', 'epoch ms': float('nan')})
        del step
        torch.cuda.empty_cache() if device.type == 'cuda' else None
        print(rows[-1], flush=True)
    for order_name in args.orders:
        start = time.perf_counter()
        ordered = data if order_name == 'none' else reorder_data(data, node_order(data.edge_index, n, order_name))
        sync(device)
        reorder_s = time.perf_counter() - start
        for w in widths:
            if dist.is_initialized():
                dist.barrier()
            if w == 1 and rank != 0:
                continue
            part = partition_graph(ordered.edge_index, n, rank if w > 1 else 0, w, device=device,
                                   group=group if w > 1 else None)
            cut = float((torch.bucketize(ordered.edge_index[0], torch.tensor(part.bounds, device=device), right=True)
                         != torch.bucketize(ordered.edge_index[1], torch.tensor(part.bounds, device=device),
                                            right=True)).float().mean())
            halo = torch.tensor(float(part.num_halo), device=device)
            if w > 1:
                dist.all_reduce(halo)
            settings = [(o, d) for o in args.overlap for d in args.exchange_dtypes] if w > 1 else [('off', 'fp32')]
            for overlap, wire in settings:  # (one GPU has no halo)
                part.exchange_dtype = EXCHANGE_DTYPES[wire]
                step, timer = ours_epoch(ordered, ordered.train_mask, part, args, device, w, overlap == 'on')
                config = ('ours, overlapped' if overlap == 'on' else 'ours') + ('' if wire == 'fp32' else
                                                                                f', {wire} halo')
                row = {'config': config, 'GPUs': w, 'order': order_name,
                       'reorder s': reorder_s, 'halo / nodes': float(halo) / n, 'cut edges': cut,
                       **median_epoch(step, device, args.epochs, timer=timer)}
                if w > 1:  # the slowest process sets the pace
                    t = torch.tensor([row['epoch ms'], row['exchange ms']], device=device)
                    dist.all_reduce(t, op=dist.ReduceOp.MAX)
                    row['epoch ms'], row['exchange ms'] = t.tolist()
                rows.append(row)
                if rank == 0:
                    print(row, flush=True)
                del step, timer
            del part
        del ordered
    if dist.is_initialized():
        dist.barrier()
    if rank != 0:
        dist.destroy_process_group()
        return {}
    base = {r['order']: r['epoch ms'] for r in rows if r['config'] == 'ours' and r['GPUs'] == 1}
    pyg = next((r['epoch ms'] for r in rows if r['config'].startswith('pyg')), None)
    for r in rows:
        if r['config'].startswith('ours') and r['order'] in base:
            r['vs 1 GPU'] = base[r['order']] / r['epoch ms']
        if pyg:
            r['vs pyg'] = pyg / r['epoch ms']
    columns = ['config', 'GPUs', 'order', 'reorder s', 'halo / nodes', 'cut edges', 'epoch ms', 'exchange ms',
               'vs 1 GPU', 'vs pyg']
    title = (f'full-graph GCN {args.layers}x{args.hidden} on {dataset.name} ({n:,} nodes, '
             f'{data.edge_index.size(1):,} edges), {torch.cuda.get_device_name() if device.type == "cuda" else "cpu"}')
    payload = {'env': environment(), 'args': vars(args), 'graph': repr(dataset), 'rows': rows,
               'table': print_table(rows, columns, title)}
    save_json(Path(args.out) / f'full_graph_{args.preset}_{world}gpu.json', payload)
    plot(rows, Path(args.out) / f'full_graph_{args.preset}_{world}gpu.png', title)
    if dist.is_initialized():
        dist.destroy_process_group()
    return payload


def plot(rows, path: Path, title: str) -> None:
    """Epoch time per configuration, the exchange part darker."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{r['config'].split(' ')[0].rstrip(',')}{' ovl' if 'overlapped' in r['config'] else ''}"
              f"{' bf16' if 'bf16 halo' in r['config'] else ' fp16' if 'fp16 halo' in r['config'] else ''}\n"
              f"{r['GPUs']} GPU, {r['order']}" for r in rows]
    epoch = [r['epoch ms'] for r in rows]
    exchange = [r.get('exchange ms', 0.0) for r in rows]
    ax.bar(labels, epoch, color=['#999999' if r['config'].startswith('pyg') else '#1f77b4' for r in rows],
           label='epoch')
    ax.bar(labels, exchange, color='#ff7f0e', label='of which waiting for the halo exchange')
    for i, r in enumerate(rows):
        ax.annotate(f"{r['epoch ms']:.0f} ms", (i, r['epoch ms']), ha='center', va='bottom', fontsize=8)
    ax.set(ylabel='ms per epoch', title=title)
    ax.title.set_fontsize(9)
    ax.tick_params(axis='x', labelsize=7)
    ax.legend(fontsize=8)
    save_figure(fig, path)


if __name__ == '__main__':
    main()
