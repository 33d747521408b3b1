"""Time to accuracy: epochs and training seconds until the validation accuracy reaches
the one the PyG model reaches after ``--target-epochs`` epochs, over several seeds.

The target is set by PyG's model (PyG's layers, untrimmed, fp32, the eager loop) trained
``--target-epochs`` epochs per seed: its mean validation accuracy. Its batches come from
stock PyG's tuned loader with ``--baseline pyg`` (slow: ~20 s per products-size epoch), or
by default from our loader, whose samples follow the same distribution (tested
statistically); stock PyG's seconds to the target are then its epochs times the tuned
epoch time given by ``--pyg-epoch-s`` (from ``benchmarks/end_to_end.py``). Every
configuration is then trained for up to ``--max-epochs`` epochs per seed, evaluated after
each epoch (evaluation time excluded), and reports:

* epochs and training seconds until its validation accuracy first reaches the target
  (median over seeds; ``inf`` if it never does);
* its test accuracy after ``--target-epochs`` epochs beside PyG's (the accuracy parity:
  the difference in points).

Configurations: ``pyg`` (the target's own run), ``accel`` (ours, trimmed, eager),
``accel-graph`` (ours with :class:`pyg_accel.training.TrainStep`), each optionally
``:tf32`` or ``:bf16`` (autocast).

    python benchmarks/time_to_accuracy.py --out OUT                      # SAGE 3x256, products-size
    python benchmarks/time_to_accuracy.py --model gat --out OUT
    python benchmarks/time_to_accuracy.py --preset tiny --device cpu --max-epochs 2 --target-epochs 1
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import torch
import torch_geometric.nn.models as pyg_models

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_graph_arguments, default_workers, environment, print_table, pyplot, save_figure, save_json  # noqa: E402,E501
from common import stock_pyg_loader  # noqa: E402
import end_to_end  # noqa: E402

import pyg_accel.nn.models as accel_models  # noqa: E402
from pyg_accel.data import from_data  # noqa: E402
from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.loader import NeighborLoader  # noqa: E402
from pyg_accel.training import TrainStep  # noqa: E402

CONFIGS = ('pyg', 'accel', 'accel-graph')


def accuracy(model, stores, nodes: torch.Tensor, args, device) -> float:
    """Accuracy on ``nodes`` from sampled batches (the training fanout, batches of 4096)."""
    correct, total = torch.zeros((), device=device), 0
    with torch.no_grad():
        for batch in NeighborLoader(stores, num_neighbors=args.fanout, input_nodes=nodes, batch_size=4096):
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            correct += (out.argmax(-1) == batch.y[:batch.batch_size]).sum()
            total += batch.batch_size
    return float(correct) / max(total, 1)


def train_run(spec: str, seed: int, args, dataset, stores, device, epochs: int) -> List[dict]:
    """Trains configuration ``spec`` from seed ``seed`` for ``epochs`` epochs; one row per
    epoch: cumulative training seconds and the accuracies after it."""
    name, _, precision = spec.partition(':')
    torch.set_float32_matmul_precision('high' if precision == 'tf32' else 'highest')
    end_to_end.AMP = precision == 'bf16'
    module = pyg_models if name == 'pyg' else accel_models
    options = {'heads': args.heads} if args.model == 'gat' else {}
    torch.manual_seed(seed)
    model = getattr(module, end_to_end.MODELS[args.model])(dataset.num_features, args.hidden, args.layers,
                                                            dataset.num_classes, dropout=args.dropout,
                                                            **options).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, fused=device.type == 'cuda')
    kwargs = dict(num_neighbors=args.fanout, input_nodes=dataset.split['train'], batch_size=args.batch_size,
                  shuffle=True)
    if name == 'pyg' and args.baseline == 'pyg':
        loader = stock_pyg_loader(dataset.data, args.pyg_workers, **kwargs)
    else:
        loader = NeighborLoader(stores, **kwargs)
    end_to_end.TRIM = name != 'pyg'  # (PyG's model as PyG runs it: untrimmed)
    step = TrainStep(model, opt, amp_dtype=torch.bfloat16 if precision == 'bf16' else None) \
        if name == 'accel-graph' else end_to_end.eager_step(model, opt, device)
    rows, seconds = [], 0.0
    for epoch in range(1, epochs + 1):
        model.train()
        end_to_end.sync(device)
        start = time.perf_counter()
        end_to_end.run_batches(step, loader, device, len(loader))
        seconds += time.perf_counter() - start
        model.eval()
        row = {'epoch': epoch, 'seconds': seconds, 'valid': accuracy(model, stores, dataset.split['valid'], args, device)}
        if epoch == args.target_epochs:
            row['test'] = accuracy(model, stores, dataset.split['test'], args, device)
        rows.append(row)
    return rows


def reached(history: List[dict], target: float):
    """(epochs, seconds) when the validation accuracy first reaches ``target``."""
    for row in history:
        if row['valid'] >= target:
            return row['epoch'], row['seconds']
    return float('inf'), float('inf')


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(p)
    p.add_argument('--model', choices=sorted(end_to_end.MODELS), default='sage')
    p.add_argument('--heads', type=int, default=4)
    p.add_argument('--hidden', type=int, default=256)
    p.add_argument('--layers', type=int, default=3)
    p.add_argument('--fanout', type=int, nargs='*', default=[15, 10, 5])
    p.add_argument('--batch-size', type=int, default=1024)
    p.add_argument('--dropout', type=float, default=0.0)
    p.add_argument('--lr', type=float, default=0.003)
    p.add_argument('--seeds', type=int, default=3)
    p.add_argument('--target-epochs', type=int, default=10, help="epochs of PyG's model that set the target")
    p.add_argument('--max-epochs', type=int, default=10, help='epochs each configuration may take to reach it')
    p.add_argument('--configs', nargs='*', default=['accel', 'accel:tf32', 'accel-graph:tf32'],
                   help="configurations after 'pyg' (which always runs first): accel, accel-graph, each optionally "
                        ":tf32 or :bf16")
    p.add_argument('--baseline', choices=['ours', 'pyg'], default='ours',
                   help="the target run's loader: ours (same sample distribution, fast) or stock PyG's tuned one")
    p.add_argument('--pyg-workers', type=int, default=default_workers())
    p.add_argument('--pyg-epoch-s', type=float, default=None,
                   help="tuned stock PyG's epoch seconds (benchmarks/end_to_end.py), for its seconds to the target")
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    for spec in args.configs:
        name, _, precision = spec.partition(':')
        if name not in CONFIGS or precision not in ('', 'tf32', 'bf16'):
            p.error(f"unknown configuration '{spec}'")
    device = torch.device(args.device)
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device).to('cpu')
    stores = from_data(dataset.data, 'cuda' if device.type == 'cuda' else 'cpu')
    print(f'{dataset}; {args.model} {args.layers} x {args.hidden}, fanout {args.fanout}, batch {args.batch_size}, '
          f'{args.seeds} seeds on {device}', flush=True)
    runs: Dict[str, List[List[dict]]] = {}
    for spec in ['pyg'] + list(args.configs):
        epochs = args.target_epochs if spec == 'pyg' else max(args.max_epochs, args.target_epochs)
        runs[spec] = [train_run(spec, seed, args, dataset, stores, device, epochs)
                      for seed in range(args.seeds)]
        print(spec, [round(h[-1]['valid'], 4) for h in runs[spec]], flush=True)
    target = statistics.mean(h[args.target_epochs - 1]['valid'] for h in runs['pyg'])
    pyg_test = statistics.mean(h[args.target_epochs - 1]['test'] for h in runs['pyg'])
    rows = []
    for spec, histories in runs.items():
        hits = [reached(h, target) for h in histories]
        test = statistics.mean(h[args.target_epochs - 1]['test'] for h in histories)
        row = {'config': spec, 'epochs to target': statistics.median(e for e, _ in hits),
               'seconds to target': statistics.median(s for _, s in hits),
               'epoch s': statistics.median(h[-1]['seconds'] / len(h) for h in histories),
               f'test acc @{args.target_epochs}': test, 'vs PyG, points': 100 * (test - pyg_test)}
        if spec == 'pyg' and args.baseline == 'ours' and args.pyg_epoch_s:
            row['stock PyG s to target (tuned epochs)'] = row['epochs to target'] * args.pyg_epoch_s
        rows.append(row)
    columns = ['config', 'epochs to target', 'seconds to target', 'epoch s', f'test acc @{args.target_epochs}',
               'vs PyG, points', 'stock PyG s to target (tuned epochs)']
    title = (f'time to the validation accuracy of PyG\'s {args.model} after {args.target_epochs} epochs '
             f'({target:.4f}), median of {args.seeds} seeds, on {dataset.name} ({device})')
    payload = {'env': environment(), 'args': vars(args), 'graph': repr(dataset), 'target': target, 'rows': rows,
               'histories': runs}
    payload['table'] = print_table(rows, [c for c in columns if any(c in r for r in rows)], title)
    tag = f'{args.model}_' + '_'.join(map(str, args.fanout)) + f'_b{args.batch_size}'
    save_json(Path(args.out) / f'time_to_accuracy_{tag}.json', payload)
    plot(runs, target, Path(args.out) / f'time_to_accuracy_{tag}.png', title)
    return payload


def plot(runs: Dict[str, List[List[dict]]], target: float, path: Path, title: str) -> None:
    """Validation accuracy against training seconds, one line per configuration and seed."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (spec, histories) in enumerate(runs.items()):
        for j, history in enumerate(histories):
            ax.plot([r['seconds'] for r in history], [r['valid'] for r in history], color=f'C{i}', alpha=0.8,
                    marker='.', label=spec if j == 0 else None)
    ax.axhline(target, color='grey', linestyle='--', linewidth=1, label='target')
    ax.set(xscale='log', xlabel='training seconds (log)', ylabel='validation accuracy')
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=8)
    save_figure(fig, path)


if __name__ == '__main__':
    main()
