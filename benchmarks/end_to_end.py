"""End-to-end mini-batch training on one GPU: epoch time of GraphSAGE (or ``--model gat``:
GAT, ``--heads`` heads sharing ``--hidden``) on a
products-size synthetic graph, several ways, in one process on the same data.

* ``pyg``: stock PyG **tuned as its users run it**: ``torch_geometric.loader.NeighborLoader``
  on the CPU ``Data`` (its CPU sampler, from pyg-lib or torch-sparse) with
  ``--pyg-workers`` DataLoader workers (default: the machine's cores less two),
  ``persistent_workers=True`` and ``pin_memory=True``; PyG's layers on the GPU. Timed
  over one whole epoch after a warm-up epoch (the workers' batches in flight would
  make a part-epoch misleading).
* ``pyg-0w``: the same with ``num_workers=0`` (PyG's default: sampling and gathering in
  the training loop's thread). Slow, so timed on ``--pyg-batches`` batches and scaled to
  the epoch; reported beside the tuned row, never instead of it.
* ``accel-sampler``: pyg_accel's CUDA sampler over GPU stores, PyG's layers, no pipelining.
* ``accel-sync``: pyg_accel's sampler, stores and layers, no pipelining.
* ``accel``: the same, pipelined (the next batch sampled and gathered on a side stream).
* ``accel-untrimmed``: ``accel`` with the model untrimmed (``auto_trim=False``): every
  layer computes every node of the batch, as PyG's models do unless handed the per-hop
  counts.
* ``accel-graph``: ``accel`` with the whole step replayed as a CUDA graph
  (:class:`pyg_accel.training.TrainStep`: batches padded to a few shapes).
* ``accel-compile``: ``accel`` with the model under ``torch.compile(mode=--compile-mode,
  dynamic=True)`` (default ``'reduce-overhead'``: CUDA graphs through Inductor, one
  recorded per distinct input size; compiled models run untrimmed). Like the captured
  step it is timed after a whole warm-up epoch, which compiles and records every shape.

pyg_accel's models trim each layer to the nodes later layers need by themselves;
PyG's models (``pyg``, ``pyg-0w``, ``accel-sampler``) are handed the per-hop counts for
PyG's ``trim_to_layer`` when their batches carry them (stock PyG's torch-sparse sampler
gives none). ``--no-trim`` runs every configuration untrimmed.

A configuration may carry ``:tf32`` (e.g. ``accel:tf32``): its fp32 matmuls then run on
TF32 tensor cores whatever ``--tf32`` says for the others. Every configuration trains
with PyTorch's fused Adam on the GPU (one kernel for all parameters). Matmuls run in
full fp32 unless ``--tf32``; ``--amp`` runs every configuration's forward and loss under
bf16 autocast.

For each: seconds per epoch (``--max-batches`` caps the batches timed, the rest scaled),
the floor of the step (``benchmarks/step_floor.py``: its FLOPs and bytes at this GPU's
measured matmul and copy rates) and each row's GPU time per step over it, the split of
the unpipelined step into loading (sampling + feature gather) and compute
(timed with a synchronisation between them, on ``--split-batches`` batches; not for the
tuned ``pyg``, whose loading runs in its workers), and the GPU busy fraction: the GPU's
time per step (the union of every kernel and copy interval on any stream, from
torch.profiler / CUPTI over ``--profile-batches`` batches) over the epoch's wall time per
step (timed without the profiler, whose per-op host cost would make a host-bound loop
look idler than it is). ``accel-graph`` is timed on its second epoch: the first warms up
and captures each batch shape once, which a training run pays once (its time is the
``first epoch s`` column). Ratios: ``vs pyg`` divides the tuned stock PyG
epoch by the row's, ``vs pyg-0w`` the untuned one's.

    python benchmarks/end_to_end.py --out OUT                          # [15, 10, 5], batch 1024
    python benchmarks/end_to_end.py --configs pyg pyg-0w accel-sampler accel accel:tf32 --out OUT
    python benchmarks/end_to_end.py --fanout 30 30 30 --batch-size 512 --out OUT
    python benchmarks/end_to_end.py --features pinned --out OUT        # features in host memory
    python benchmarks/end_to_end.py --amp --out OUT                    # mixed precision (bf16)
    python benchmarks/end_to_end.py --no-trim --out OUT                # every layer on every node
    python benchmarks/end_to_end.py --preset tiny --device cpu --max-batches 5   # smoke test
"""
from __future__ import annotations

import argparse
import sys
import textwrap
import time
from pathlib import Path
import statistics
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F
import torch_geometric.nn.models as pyg_models
import torch_geometric.typing as pyg_typing

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (add_graph_arguments, copy_bandwidth, default_workers, environment, gpu_time,  # noqa: E402
                    print_table, pyplot, run_batches, save_figure, save_json, stock_pyg_loader, sync)
from step_floor import floor_ms, matmul_rate, step_cost  # noqa: E402

import pyg_accel.nn.models as accel_models  # noqa: E402
from pyg_accel.data import from_data  # noqa: E402
from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.loader import NeighborLoader  # noqa: E402
from pyg_accel.training import TrainStep  # noqa: E402


MODELS = {'sage': 'GraphSAGE', 'gat': 'GAT'}  # --model: the BasicGNN class
CONFIGS = ('pyg', 'pyg-0w', 'accel-sampler', 'accel-sync', 'accel', 'accel-untrimmed', 'accel-graph',
           'accel-compile')
TRIM = True  # PyG's models handed the per-hop counts (ours trim by themselves); --no-trim: neither
AMP = False  # --amp: forward and loss under bfloat16 autocast


def trim_arguments(model, batch) -> dict:
    """The per-hop counts PyG's models trim by (none from PyG's torch-sparse sampler, and
    none for ours, which find them on the batch), unless ``--no-trim``."""
    if not TRIM or hasattr(model, 'auto_trim') or getattr(batch, 'num_sampled_nodes', None) is None:
        return {}
    return dict(num_sampled_nodes_per_hop=batch.num_sampled_nodes, num_sampled_edges_per_hop=batch.num_sampled_edges)


def eager_step(model, opt, device) -> Callable:
    """The plain PyG training step: ``step(batch) -> loss`` (a device tensor, no sync)."""
    def step(batch) -> torch.Tensor:
        batch = batch.to(device, non_blocking=True)
        opt.zero_grad()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=AMP):
            out = model(batch.x, batch.edge_index, **trim_arguments(model, batch))[:batch.batch_size]
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def steady_epoch(step, loader, device, batches: int, row: dict) -> Tuple[float, float]:
    """A worker loader's epoch from its steady state: in one pass over the loader, the
    first ``2 x workers x prefetch_factor`` batches (every worker's first batches, which
    all start at once) warm up, the next ``batches`` are timed, and their rate is scaled
    to ``len(loader)``. It leaves out the pipeline's fill at an epoch's start, so it is at
    most the whole epoch's time: the baseline's best case."""
    warmup = min(2 * loader.num_workers * (loader.prefetch_factor or 2), max(len(loader) - batches, 0))
    batch_iter = iter(loader)  # (one pass: both windows draw from it)
    if warmup:
        run_batches(step, batch_iter, device, warmup)
    host: List[float] = []
    start = time.perf_counter()
    timed = run_batches(step, batch_iter, device, batches, host)
    seconds = time.perf_counter() - start
    row['timed batches'], row['warm-up batches'] = timed, warmup
    return seconds / timed * len(loader), statistics.median(host) * 1e3


def timed_epoch(step, loader, device, max_batches: int, row: dict, whole_warmup: bool = False,
                steady_batches: int = 0) -> Tuple[float, float]:
    """Seconds for one epoch (``max_batches`` timed, scaled to ``len(loader)``) and the
    median ms the host spends inside a step call. A loader with worker processes is timed
    over a whole epoch after a whole warm-up epoch: it starts each epoch with its
    workers' pipeline empty and ends it drained, and a cut epoch would time the workers'
    start or leave batches in flight (``steady_batches``: timed instead on that many
    batches of one epoch's steady state, :func:`steady_epoch`). A captured or compiled
    step (``whole_warmup``) is timed after a whole epoch too, which captures or compiles
    each batch shape (``row['first epoch s']``)."""
    if getattr(loader, 'num_workers', 0) > 0 and steady_batches > 0:
        return steady_epoch(step, loader, device, steady_batches, row)
    if getattr(loader, 'num_workers', 0) > 0:
        run_batches(step, loader, device, len(loader))  # warm-up: workers started, kernels, allocator
        max_batches = len(loader)
    elif whole_warmup:
        start = time.perf_counter()
        count = run_batches(step, loader, device, len(loader))  # every batch shape warmed up and captured
        row['first epoch s'] = (time.perf_counter() - start) / count * len(loader)
    else:
        run_batches(step, loader, device, 8)  # warm-up: plans, kernels, allocator
    host: List[float] = []
    start = time.perf_counter()
    count = run_batches(step, loader, device, max_batches, host)
    return (time.perf_counter() - start) / count * len(loader), statistics.median(host) * 1e3


def split_step(step, loader, device, batches: int) -> Dict[str, float]:
    """Mean ms per batch of loading (sample + gather) and of compute, synchronised apart."""
    load = compute = 0.0
    iterator = iter(loader)
    batches = min(batches, len(loader))
    for _ in range(batches):
        t0 = time.perf_counter()
        batch = next(iterator).to(device)
        sync(device)
        t1 = time.perf_counter()
        step(batch)
        sync(device)
        load, compute = load + t1 - t0, compute + time.perf_counter() - t1
    return {'load ms/batch': load / batches * 1e3, 'compute ms/batch': compute / batches * 1e3}


def add_floors(rows: List[dict], args, dataset, loader, device, float_dtype) -> None:
    """The step's floor (benchmarks/step_floor.py) on the mean per-hop counts of a few
    batches, at this GPU's measured copy and matmul rates in each row's precision; and
    each row's GPU time per step over it."""
    counts = [(b.num_sampled_nodes, b.num_sampled_edges) for _, b in zip(range(5), loader)]
    nodes = [sum(c[0][h] for c in counts) / len(counts) for h in range(len(counts[0][0]))]
    edges = [sum(c[1][h] for c in counts) / len(counts) for h in range(len(counts[0][1]))]
    widths = [dataset.num_features] + [args.hidden] * (args.layers - 1) + [dataset.num_classes]
    bandwidth, rates = copy_bandwidth(device), {}
    for row in rows:
        if row['config'].startswith('pyg') or 'GPU ms/step' not in row:
            continue
        tf32 = args.tf32 or row['config'].endswith(':tf32')
        key = 'bf16' if AMP else ('tf32' if tf32 else 'fp32')
        if key not in rates:
            torch.set_float32_matmul_precision('high' if key == 'tf32' else 'highest')
            rates[key] = matmul_rate(device, torch.bfloat16 if key == 'bf16' else torch.float32)
        cost = step_cost(args.model, nodes, edges, widths, heads=args.heads, value_bytes=2 if AMP else 4,
                         feature_bytes=2 if float_dtype is not None else 4)
        row['floor ms'] = floor_ms(cost, rates[key], bandwidth)
        row['GPU / floor'] = row['GPU ms/step'] / row['floor ms']
        row['step GFLOP'], row['step GB'] = cost['flops'] / 1e9, cost['bytes'] / 1e9


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(p)
    p.add_argument('--fanout', type=int, nargs='*', default=[15, 10, 5])
    p.add_argument('--batch-size', type=int, default=1024)
    p.add_argument('--model', choices=sorted(MODELS), default='sage')
    p.add_argument('--heads', type=int, default=4, help='--model gat: attention heads (each hidden / heads wide)')
    p.add_argument('--hidden', type=int, default=256)
    p.add_argument('--layers', type=int, default=3)
    p.add_argument('--max-batches', type=int, default=1000, help='batches timed per epoch (the rest scaled)')
    p.add_argument('--compile-mode', default='reduce-overhead',
                   choices=['reduce-overhead', 'default', 'max-autotune-no-cudagraphs'],
                   help="torch.compile's mode for 'accel-compile'")
    p.add_argument('--pyg-workers', type=int, default=default_workers(),
                   help="DataLoader workers of the tuned stock PyG loader, 'pyg' (default: the cores this process "
                        f"may use less two, here {default_workers()}), with persistent_workers=True and "
                        "pin_memory=True; 'pyg-0w' is the same loader with none")
    p.add_argument('--pyg-batches', type=int, default=16,
                   help="batches timed for 'pyg-0w', stock PyG without workers (scaled to the epoch)")
    p.add_argument('--pyg-steady-batches', type=int, default=0,
                   help="time the tuned 'pyg' loader on this many batches of its steady state (after every "
                        "worker's first batches) instead of a whole epoch after a whole warm-up epoch: for "
                        "settings whose epochs take minutes (it leaves out the pipeline's fill: PyG's best case)")
    p.add_argument('--split-batches', type=int, default=10)
    p.add_argument('--profile-batches', type=int, default=50)
    p.add_argument('--configs', nargs='*', default=['pyg', 'pyg-0w', 'accel-sampler', 'accel-sync', 'accel'],
                   help="which configurations to run, in order (see above); NAME:tf32 runs NAME with TF32 matmuls")
    p.add_argument('--no-trim', action='store_true',
                   help="every configuration untrimmed: every layer computes every node of the batch (by default "
                        "our models trim by themselves and PyG's are handed the per-hop counts where they exist)")
    p.add_argument('--tf32', action='store_true',
                   help='every configuration runs its fp32 matmuls on TF32 tensor cores '
                        "(torch.set_float32_matmul_precision('high'))")
    p.add_argument('--amp', action='store_true',
                   help='every configuration runs its forward and loss under torch.autocast in bfloat16 '
                        '(mixed precision; parameters and optimizer in fp32)')
    p.add_argument('--feature-dtype', choices=['fp32', 'bf16', 'fp16'], default='fp32',
                   help='the dtype our stores keep the features in (16-bit: half the gather bytes; needs --amp)')
    p.add_argument('--features', choices=['device', 'pinned'], default='device',
                   help="where our stores keep the node features: on the device, or in pinned host memory "
                        "read by the GPU (graphs whose features do not fit; the gather then crosses PCIe)")
    p.add_argument('--graph', choices=['device', 'pinned'], default='device',
                   help="where our GraphStore keeps the graph: on the device, or in pinned host memory read "
                        "in place by the GPU sampler (graphs that do not fit)")
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    model_name = MODELS[args.model]
    global TRIM, AMP
    TRIM, AMP = not args.no_trim, args.amp
    for spec in args.configs:
        if spec.partition(':')[0] not in CONFIGS or spec.partition(':')[2] not in ('', 'tf32'):
            p.error(f"unknown configuration '{spec}': expected one of {', '.join(CONFIGS)}, optionally with ':tf32'")
    device = torch.device(args.device)
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device).to('cpu')  # generated on the GPU
    data = dataset.data
    train = dataset.split['train']
    print(f'{dataset}; train {train.numel()} seeds, batch {args.batch_size}, fanout {args.fanout}, '
          f'{model_name} {args.layers} x {args.hidden} on {device}', flush=True)
    location = 'cuda' if device.type == 'cuda' else 'cpu'
    if 'pinned' in (args.features, args.graph) and device.type != 'cuda':
        p.error('--features / --graph pinned need --device cuda (host memory read by the GPU)')
    if args.feature_dtype != 'fp32' and not args.amp:
        p.error('--feature-dtype bf16 / fp16 needs --amp (fp32 parameters read 16-bit features under autocast)')
    float_dtype = {'fp32': None, 'bf16': torch.bfloat16, 'fp16': torch.float16}[args.feature_dtype]
    # features and graph on the device, or in pinned host memory read by the GPU
    stores = from_data(data, location if args.features == 'device' else 'pinned',
                       graph_location=location if args.graph == 'device' else 'pinned', float_dtype=float_dtype)
    kwargs = dict(num_neighbors=args.fanout, input_nodes=train, batch_size=args.batch_size, shuffle=True)

    def model_from(module, **options):
        if module is accel_models:
            options.setdefault('auto_trim', not args.no_trim)
        torch.manual_seed(0)
        if args.model == 'gat':
            options.setdefault('heads', args.heads)
        return getattr(module, model_name)(dataset.num_features, args.hidden, args.layers, dataset.num_classes,
                                **options).to(device)

    configs: Dict[str, Callable[[], tuple]] = {
        'pyg': lambda: (model_from(pyg_models), stock_pyg_loader(data, args.pyg_workers, **kwargs), args.max_batches),
        'pyg-0w': lambda: (model_from(pyg_models), stock_pyg_loader(data, 0, **kwargs), args.pyg_batches),
        'accel-sampler': lambda: (model_from(pyg_models), NeighborLoader(stores, pipeline=False, **kwargs),
                                  args.max_batches),
        'accel-sync': lambda: (model_from(accel_models), NeighborLoader(stores, pipeline=False, **kwargs),
                               args.max_batches),
        'accel': lambda: (model_from(accel_models), NeighborLoader(stores, pipeline=True, **kwargs), args.max_batches),
        'accel-untrimmed': lambda: (model_from(accel_models, auto_trim=False),
                                    NeighborLoader(stores, pipeline=True, **kwargs), args.max_batches),
    }
    configs['accel-graph'] = configs['accel-compile'] = configs['accel']
    rows: List[dict] = []
    for spec in args.configs:
        name, _, precision = spec.partition(':')
        if name.startswith('pyg') and not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
            print(f"skipping '{spec}': stock PyG's CPU sampler needs pyg-lib or torch-sparse", flush=True)
            continue
        torch.set_float32_matmul_precision('high' if args.tf32 or precision == 'tf32' else 'highest')
        model, loader, limit = configs[name]()
        opt = torch.optim.Adam(model.parameters(), lr=0.003, fused=device.type == 'cuda')
        if name == 'accel-graph':
            step = TrainStep(model, opt, amp_dtype=torch.bfloat16 if AMP else None)
        elif name == 'accel-compile':  # (each layer's forward is compiled per weight shape: room for them all)
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
            step = eager_step(torch.compile(model, mode=args.compile_mode, dynamic=True), opt, device)
        else:
            step = eager_step(model, opt, device)
        row = {'config': spec, 'batches/epoch': len(loader)}
        if name == 'pyg':
            row['workers'] = args.pyg_workers
        row['epoch s'], row['host ms/step'] = timed_epoch(step, loader, device, limit, row,
                                                          whole_warmup=name in ('accel-graph', 'accel-compile'),
                                                          steady_batches=args.pyg_steady_batches)
        if name in ('pyg-0w', 'accel-sampler', 'accel-sync'):  # (the others overlap loading with compute)
            row.update(split_step(step, loader, device, min(args.split_batches, limit)))
        if device.type == 'cuda' and not name.startswith('pyg'):
            row['GPU ms/step'] = gpu_time(step, loader, device, min(args.profile_batches, limit))
            row['GPU busy'] = row['GPU ms/step'] / (row['epoch s'] / len(loader) * 1e3)
        if isinstance(step, TrainStep):
            row['graphs'] = step.num_graphs
        rows.append(row)
        print(row, flush=True)
        del model, opt, loader, step
    if device.type == 'cuda' and rows:
        add_floors(rows, args, dataset, NeighborLoader(stores, pipeline=False, **kwargs), device, float_dtype)
    by = {r['config']: r['epoch s'] for r in rows}
    for r in rows:
        for baseline in ('pyg', 'pyg-0w'):
            if baseline in by:
                r[f'vs {baseline}'] = by[baseline] / r['epoch s']
    if 'accel' in by and 'accel-sync' in by:
        print(f"pipelining: {by['accel-sync'] / by['accel']:.2f}x", flush=True)
    columns = ['config', 'workers', 'batches/epoch', 'epoch s', 'first epoch s', 'host ms/step', 'load ms/batch',
               'compute ms/batch', 'GPU ms/step', 'floor ms', 'GPU / floor', 'GPU busy', 'graphs', 'vs pyg',
               'vs pyg-0w']
    payload = {'env': environment(), 'args': vars(args), 'graph': repr(dataset), 'rows': rows}
    payload['table'] = print_table(rows, [c for c in columns if any(c in r for r in rows)],
                                   f'{model_name} {args.layers}x{args.hidden}, fanout {args.fanout}, batch '
                                   f'{args.batch_size}{", untrimmed" if args.no_trim else ""}'
                                   f'{", TF32" if args.tf32 else ""}{", bf16 autocast" if args.amp else ""}'
                                   f'{", pinned features" if args.features == "pinned" else ""}'
                                   f'{", " + args.feature_dtype + " features" if float_dtype else ""}'
                                   f'{", pinned graph" if args.graph == "pinned" else ""} on {dataset.name} '
                                   f'({device}): one epoch')
    tag = ('gat_' if args.model == 'gat' else '') + '_'.join(map(str, args.fanout)) + f'_b{args.batch_size}'
    tag += '_untrimmed' if args.no_trim else ''
    tag += ('_tf32' if args.tf32 else '') + ('_amp' if args.amp else '')
    tag += '_pinned' if args.features == 'pinned' else ''
    tag += f'_{args.feature_dtype}_features' if float_dtype else ''
    tag += '_pinned_graph' if args.graph == 'pinned' else ''
    save_json(Path(args.out) / f'end_to_end_{tag}.json', payload)
    plot(rows, Path(args.out) / f'end_to_end_{tag}.png', payload['table'].splitlines()[0])
    return payload


def plot(rows, path: Path, title: str) -> None:
    """Epoch time per configuration, GPU busy fraction on the bars. The axis is
    logarithmic only when the times span 10× or more (stock PyG beside ours)."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = {'pyg': 'stock PyG\n{workers} workers', 'pyg-0w': 'stock PyG\nno workers',
              'accel-sampler': 'our sampler\nPyG layers', 'accel-sync': 'ours\nnot pipelined', 'accel': 'ours',
              'accel-untrimmed': 'ours\nuntrimmed', 'accel-graph': 'ours\nCUDA graph', 'accel-compile': 'ours\ncompiled'}
    names = [r['config'] for r in rows]
    ticks = [labels.get(n.partition(':')[0], n).format(workers=r.get('workers'))
             + (', TF32' if n.endswith(':tf32') else '') for n, r in zip(names, rows)]
    seconds = [r['epoch s'] for r in rows]
    bars = ax.bar(ticks, seconds, color=['#999999' if n.startswith('pyg') else '#1f77b4' for n in names])
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
