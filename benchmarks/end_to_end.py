"""End-to-end mini-batch training on one GPU: epoch time of GraphSAGE on a
products-size synthetic graph, four ways, in one process on the same data.

* ``pyg``: stock PyG: its CPU sampler (pyg-lib or torch-sparse; see ../shared/gpu-wheels),
  features on the CPU copied per batch, PyG's layers on the GPU. It is slow, so it is
  timed on ``--pyg-batches`` batches and scaled to the epoch.
* ``accel-sampler``: pyg_accel's CUDA sampler over GPU stores, PyG's layers, no pipelining.
* ``accel-sync``: pyg_accel's sampler, stores and layers, no pipelining.
* ``accel``: the same, pipelined (the next batch sampled and gathered on a side stream).

Every configuration trains with PyTorch's fused Adam on the GPU (one kernel for all
parameters: the multi-tensor version costs ~1 ms of host time per step). Matmuls run in
full fp32 unless ``--tf32`` (TF32 tensor cores, for every configuration); ``--amp`` runs
every configuration's forward and loss under bf16 autocast.

For each: seconds per epoch (``--max-batches`` caps the batches timed, the rest scaled),
the split of the unpipelined step into loading (sampling + feature gather) and compute
(timed with a synchronisation between them, on ``--split-batches`` batches), and the
GPU busy fraction: the union of every kernel and copy interval on any stream
(torch.profiler / CUPTI) over the wall time of ``--profile-batches`` batches.

    python benchmarks/end_to_end.py --out OUT                          # [15, 10, 5], batch 1024
    python benchmarks/end_to_end.py --fanout 30 30 30 --batch-size 512 --out OUT
    python benchmarks/end_to_end.py --features pinned --out OUT        # features in host memory
    python benchmarks/end_to_end.py --amp --out OUT                    # mixed precision (bf16)
    python benchmarks/end_to_end.py --preset tiny --device cpu --max-batches 5   # smoke test
"""
from __future__ import annotations

import argparse
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch
import torch.nn.functional as F
import torch_geometric.nn.models as pyg_models
import torch_geometric.typing as pyg_typing

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_graph_arguments, environment, print_table, pyplot, save_figure, save_json  # noqa: E402

import pyg_accel.nn.models as accel_models  # noqa: E402
from pyg_accel.data import from_data  # noqa: E402
from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.loader import NeighborLoader  # noqa: E402


def sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


TRIM = False  # --trim: PyG's trim_to_layer (each layer only computes the hops still needed)
AMP = False  # --amp: forward and loss under bfloat16 autocast


def trim_arguments(batch) -> dict:
    """With ``--trim``, the per-hop counts PyG's models trim by (none from PyG's torch-sparse sampler)."""
    if not TRIM or getattr(batch, 'num_sampled_nodes', None) is None:
        return {}
    return dict(num_sampled_nodes_per_hop=batch.num_sampled_nodes, num_sampled_edges_per_hop=batch.num_sampled_edges)


def train_step(model, opt, batch, device) -> torch.Tensor:
    batch = batch.to(device, non_blocking=True)
    opt.zero_grad()
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=AMP):
        out = model(batch.x, batch.edge_index, **trim_arguments(batch))[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size])
    loss.backward()
    opt.step()
    return loss.detach()


def run_batches(model, opt, loader, device, limit: int) -> int:
    """Trains on up to ``limit`` batches with no host sync; returns how many ran."""
    total, count = torch.zeros((), device=device), 0
    for batch in loader:
        total += train_step(model, opt, batch, device)
        count += 1
        if count >= limit:
            break
    sync(device)
    return count


def timed_epoch(model, opt, loader, device, max_batches: int) -> float:
    """Seconds for one epoch: ``max_batches`` timed, scaled to ``len(loader)``."""
    run_batches(model, opt, loader, device, 3)  # warm-up: plans, kernels, allocator
    start = time.perf_counter()
    count = run_batches(model, opt, loader, device, max_batches)
    return (time.perf_counter() - start) / count * len(loader)


def split_step(model, opt, loader, device, batches: int) -> Dict[str, float]:
    """Mean ms per batch of loading (sample + gather) and of compute, synchronised apart."""
    load = compute = 0.0
    iterator = iter(loader)
    batches = min(batches, len(loader))
    for _ in range(batches):
        t0 = time.perf_counter()
        batch = next(iterator).to(device)
        sync(device)
        t1 = time.perf_counter()
        train_step(model, opt, batch, device)
        sync(device)
        load, compute = load + t1 - t0, compute + time.perf_counter() - t1
    return {'load ms/batch': load / batches * 1e3, 'compute ms/batch': compute / batches * 1e3}


def gpu_busy(model, opt, loader, device, batches: int) -> float:
    """Union of the GPU's kernel and copy intervals (all streams) over the window's wall."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    run_batches(model, opt, loader, device, 2)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        run_batches(model, opt, loader, device, batches)
        wall_us = (time.perf_counter() - start) * 1e6
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start)
    busy, cur_start, cur_end = 0.0, None, None
    for s, e in spans:
        if cur_end is None or s > cur_end:
            busy += 0.0 if cur_end is None else cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    busy += 0.0 if cur_end is None else cur_end - cur_start
    return busy / wall_us


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(p)
    p.add_argument('--fanout', type=int, nargs='*', default=[15, 10, 5])
    p.add_argument('--batch-size', type=int, default=1024)
    p.add_argument('--hidden', type=int, default=256)
    p.add_argument('--layers', type=int, default=3)
    p.add_argument('--max-batches', type=int, default=1000, help='batches timed per epoch (the rest scaled)')
    p.add_argument('--pyg-batches', type=int, default=16, help="batches timed for stock PyG's CPU sampler")
    p.add_argument('--split-batches', type=int, default=10)
    p.add_argument('--profile-batches', type=int, default=50)
    p.add_argument('--configs', nargs='*', default=['pyg', 'accel-sampler', 'accel-sync', 'accel'])
    p.add_argument('--trim', action='store_true',
                   help="every configuration uses PyG's trim_to_layer (same seed outputs, less work per layer)")
    p.add_argument('--tf32', action='store_true',
                   help='every configuration runs its fp32 matmuls on TF32 tensor cores '
                        "(torch.set_float32_matmul_precision('high'))")
    p.add_argument('--amp', action='store_true',
                   help='every configuration runs its forward and loss under torch.autocast in bfloat16 '
                        '(mixed precision; parameters and optimizer in fp32)')
    p.add_argument('--features', choices=['device', 'pinned'], default='device',
                   help="where our stores keep the node features: on the device, or in pinned host memory "
                        "read by the GPU (graphs whose features do not fit; the gather then crosses PCIe)")
    p.add_argument('--graph', choices=['device', 'pinned'], default='device',
                   help="where our GraphStore keeps the graph: on the device, or in pinned host memory read "
                        "in place by the GPU sampler (graphs that do not fit)")
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    global TRIM, AMP
    TRIM, AMP = args.trim, args.amp
    torch.set_float32_matmul_precision('high' if args.tf32 else 'highest')
    device = torch.device(args.device)
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device).to('cpu')  # generated on the GPU
    data = dataset.data
    train = dataset.split['train']
    print(f'{dataset}; train {train.numel()} seeds, batch {args.batch_size}, fanout {args.fanout}, '
          f'SAGE {args.layers} x {args.hidden} on {device}', flush=True)
    location = 'cuda' if device.type == 'cuda' else 'cpu'
    if 'pinned' in (args.features, args.graph) and device.type != 'cuda':
        p.error('--features / --graph pinned need --device cuda (host memory read by the GPU)')
    # features and graph on the device, or in pinned host memory read by the GPU
    stores = from_data(data, location if args.features == 'device' else 'pinned',
                       graph_location=location if args.graph == 'device' else 'pinned')
    kwargs = dict(num_neighbors=args.fanout, input_nodes=train, batch_size=args.batch_size, shuffle=True)

    def model_from(module):
        torch.manual_seed(0)
        return module.GraphSAGE(dataset.num_features, args.hidden, args.layers, dataset.num_classes).to(device)

    configs: Dict[str, Callable[[], tuple]] = {
        'pyg': lambda: (model_from(pyg_models), _pyg_loader(data, kwargs), args.pyg_batches),
        'accel-sampler': lambda: (model_from(pyg_models), NeighborLoader(stores, pipeline=False, **kwargs),
                                  args.max_batches),
        'accel-sync': lambda: (model_from(accel_models), NeighborLoader(stores, pipeline=False, **kwargs),
                               args.max_batches),
        'accel': lambda: (model_from(accel_models), NeighborLoader(stores, pipeline=True, **kwargs), args.max_batches),
    }
    rows: List[dict] = []
    for name in args.configs:
        if name == 'pyg' and not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
            print("skipping 'pyg': stock PyG's CPU sampler needs pyg-lib or torch-sparse", flush=True)
            continue
        model, loader, limit = configs[name]()
        opt = torch.optim.Adam(model.parameters(), lr=0.003, fused=device.type == 'cuda')
        row = {'config': name, 'batches/epoch': len(loader)}
        row['epoch s'] = timed_epoch(model, opt, loader, device, limit)
        if name != 'accel':  # the pipelined loader overlaps the two: nothing to split
            row.update(split_step(model, opt, loader, device, min(args.split_batches, limit)))
        if device.type == 'cuda' and name != 'pyg':
            row['GPU busy'] = gpu_busy(model, opt, loader, device, min(args.profile_batches, limit))
        rows.append(row)
        print(row, flush=True)
        del model, opt, loader
    by = {r['config']: r['epoch s'] for r in rows}
    for r in rows:
        if 'pyg' in by:
            r['vs pyg'] = by['pyg'] / r['epoch s']
    if 'accel' in by and 'accel-sync' in by:
        print(f"pipelining: {by['accel-sync'] / by['accel']:.2f}x", flush=True)
    columns = ['config', 'batches/epoch', 'epoch s', 'load ms/batch', 'compute ms/batch', 'GPU busy', 'vs pyg']
    payload = {'env': environment(), 'args': vars(args), 'graph': repr(dataset), 'rows': rows}
    payload['table'] = print_table(rows, [c for c in columns if any(c in r for r in rows)],
                                   f'GraphSAGE {args.layers}x{args.hidden}, fanout {args.fanout}, batch '
                                   f'{args.batch_size}{", trimmed" if args.trim else ""}'
                                   f'{", TF32" if args.tf32 else ""}{", bf16 autocast" if args.amp else ""}'
                                   f'{", pinned features" if args.features == "pinned" else ""}'
                                   f'{", pinned graph" if args.graph == "pinned" else ""} on {dataset.name} '
                                   f'({device}): one epoch')
    tag = '_'.join(map(str, args.fanout)) + f'_b{args.batch_size}' + ('_trim' if args.trim else '')
    tag += ('_tf32' if args.tf32 else '') + ('_amp' if args.amp else '')
    tag += '_pinned' if args.features == 'pinned' else ''
    tag += '_pinned_graph' if args.graph == 'pinned' else ''
    save_json(Path(args.out) / f'end_to_end_{tag}.json', payload)
    plot(rows, Path(args.out) / f'end_to_end_{tag}.png', payload['table'].splitlines()[0])
    return payload


def _pyg_loader(data, kwargs):
    """Stock PyG: ``torch_geometric.loader.NeighborLoader`` on the CPU ``Data``."""
    from torch_geometric.loader import NeighborLoader as PyGNeighborLoader
    return PyGNeighborLoader(data, **kwargs)


def plot(rows, path: Path, title: str) -> None:
    """Epoch time per configuration, GPU busy fraction on the bars. The axis is
    logarithmic only when the times span 10× or more (stock PyG beside ours)."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    names = [r['config'] for r in rows]
    seconds = [r['epoch s'] for r in rows]
    bars = ax.bar(names, seconds, color=['#999999'] + ['#1f77b4'] * (len(rows) - 1))
    for bar, r in zip(bars, rows):
        label = f"{r['epoch s']:.2f} s" + (f"\nbusy {r['GPU busy']:.0%}" if 'GPU busy' in r else '')
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha='center', va='bottom',
                    fontsize=8)
    if min(seconds) > 0 and max(seconds) >= 10 * min(seconds):
        ax.set(yscale='log', ylim=(min(seconds) / 2, max(seconds) * 3))
    else:
        ax.set(ylim=(0, max(seconds) * 1.2))
    ax.set(ylabel='seconds per epoch', title=textwrap.fill(title, 90))
    ax.title.set_fontsize(9)
    save_figure(fig, path)


if __name__ == '__main__':
    main()
