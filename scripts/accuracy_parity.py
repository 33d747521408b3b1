"""Accuracy parity: the main example's model and loop on pyg_accel (our sampler, stores and
layers) and on stock PyG (its loader and layers; ``--baseline pyg``), same data, seeds
and hyper-parameters; mean test accuracy over seeds per model, and the gap.

    python scripts/accuracy_parity.py --models sage gcn gat --seeds 0 1 2 3 4 --epochs 20 --out OUT
    python scripts/accuracy_parity.py --dataset synthetic-products --scale 0.1 ...
    python scripts/accuracy_parity.py --models hetero-sage --epochs 8   # ogbn-mag's task, the
        # heterogeneous example on synthetic-mag at --hetero-scale (or --hetero-dataset ogbn-mag)

Stock PyG's loader needs pyg-lib or torch-sparse (``pip install ".[sparse]"``). Writes ``parity.json`` and ``parity.md`` to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'examples'))
import hetero_node_classification  # noqa: E402
import node_classification  # noqa: E402


def run(model: str, seed: int, baseline: str, args, extra) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        # (stock PyG without DataLoader workers: they change its speed, not its accuracy; --pyg-workers N overrides)
        common = ['--seed', str(seed), '--epochs', str(args.epochs), '--baseline', baseline, '--pyg-workers', '0',
                  '--out', tmp, *extra]
        if model == 'hetero-sage':  # the heterogeneous example (its own dataset options)
            argv = ['--dataset', args.hetero_dataset, '--scale', str(args.hetero_scale), '--root', args.root, *common]
            return float(hetero_node_classification.main(argv)['test_acc'])
        argv = ['--model', model, '--dataset', args.dataset, '--scale', str(args.scale), '--root', args.root, *common]
        return float(node_classification.main(argv)['test_acc'])


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--models', nargs='*', default=['sage', 'gcn', 'gat'],
                   help="'sage', 'gcn', 'gat' (the main example) and 'hetero-sage' (the heterogeneous one)")
    p.add_argument('--seeds', type=int, nargs='*', default=[0, 1, 2, 3, 4])
    p.add_argument('--epochs', type=int, default=20)
    p.add_argument('--dataset', default='default')
    p.add_argument('--scale', type=float, default=1.0)
    p.add_argument('--root', default='data/ogb', help='folder holding OGB datasets')
    p.add_argument('--hetero-dataset', default='synthetic-mag', help="for hetero-sage: 'synthetic-mag' or 'ogbn-mag'")
    p.add_argument('--hetero-scale', type=float, default=0.01, help="for hetero-sage: synthetic-mag's size")
    p.add_argument('--tolerance', type=float, default=0.005, help='allowed gap of the means (0.005 = 0.5 points)')
    p.add_argument('--out', default='parity-out')
    args, extra = p.parse_known_args(argv)  # anything else goes to the example (e.g. --hidden 256)
    rows = []
    for model in args.models:
        accs = {b: [run(model, s, b, args, extra) for s in args.seeds] for b in ('none', 'pyg')}
        ours, pyg = statistics.mean(accs['none']), statistics.mean(accs['pyg'])
        rows.append({'model': model, 'seeds': len(args.seeds), 'pyg_accel': ours, 'stock PyG': pyg,
                     'pyg_accel std': statistics.pstdev(accs['none']), 'stock PyG std': statistics.pstdev(accs['pyg']),
                     'gap (points)': 100 * (ours - pyg), 'within tolerance': abs(ours - pyg) <= args.tolerance,
                     'runs': accs})
    lines = ['| model | seeds | pyg_accel test acc | stock PyG test acc | gap (points) | within ±%.1f |' %
             (100 * args.tolerance), '|---|---:|---:|---:|---:|---|']
    for r in rows:
        lines.append(f"| {r['model']} | {r['seeds']} | {100 * r['pyg_accel']:.2f} ± {100 * r['pyg_accel std']:.2f} | "
                     f"{100 * r['stock PyG']:.2f} ± {100 * r['stock PyG std']:.2f} | {r['gap (points)']:+.2f} | "
                     f"{'yes' if r['within tolerance'] else 'no'} |")
    table = '\n'.join(lines)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'parity.json').write_text(json.dumps({'args': vars(args), 'extra': extra, 'rows': rows}, indent=1))
    (out / 'parity.md').write_text(table + '\n')
    return {'rows': rows, 'table': table}


if __name__ == '__main__':
    main()
